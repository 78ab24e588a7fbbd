"""The Redis backend against a real redis-server: keys and TTLs as Redis sees them, two
replicas sharing one Redis, and a Redis that stops or freezes mid-test."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from planner_arm.clock import Deadline
from planner_arm.config import load_settings
from planner_arm.errors import StoreFull, StoreUnavailable, TenantQuotaExceeded
from planner_arm.principal import Principal
from planner_arm.service.records import StoreGuard
from planner_arm.service.wiring import build_store
from planner_arm.store.base import Claimed, InProgress, OwnerCaps, PlanStore, Replay
from planner_arm.store.redis_backend import RedisStore, key_id, redis_client
from support.app import FakeClock
from support.redis_server import RedisServer

OWNER = Principal(id="a")
ANSWER = {"plan_id": "p-1", "version": 1}
DAY_MS = 86_400_000
ACCOUNT = ("held", "sizes", "total")  # an owner's account of a kind: three keys


def make_store(url: str, clock: FakeClock, **store: Any) -> PlanStore:
    return build_store(load_settings(store={"url": url, **store}), clock.as_clock())


@pytest.fixture
async def store(redis_url: str, fake_clock: FakeClock) -> AsyncIterator[PlanStore]:
    built = make_store(redis_url, fake_clock)
    yield built
    await built.close()


@pytest.fixture
def raw(redis_server: RedisServer, redis_url: str) -> Iterator[redis.Redis]:
    """A plain client, to look at what the store wrote."""
    with redis.Redis(port=redis_server.port, decode_responses=True, socket_timeout=5) as client:
        yield client


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of this test alone, so the test may stop or freeze it."""
    server = RedisServer(tmp_path).start()
    yield server
    server.stop()


async def test_records_are_namespaced_and_expire_by_redis_ttl(
    store: PlanStore, raw: redis.Redis
) -> None:
    await store.put_plan(OWNER, "p-1", {"response": ANSWER})
    await store.put_plan(OWNER, "p-2", {"response": ANSWER}, ttl=60)
    await store.cache_put(OWNER, "c-1", {"plan": 1}, ttl=300)
    claim = await store.claim(OWNER, "key-1", "body-a", lease_seconds=12)
    assert isinstance(claim, Claimed)
    key = f"planner-arm:idempotency:a:{key_id('key-1')}"  # a digest, not the caller's text
    assert set(raw.keys("*")) == {
        "planner-arm:plan:a:p-1",
        "planner-arm:plan:a:p-2",
        "planner-arm:cache:a:c-1",
        key,
        # The owner's accounts of plan and cache bytes: record ids by expiry, their sizes, and
        # the sum of those, each in a key of its own.
        *(f"planner-arm:{part}:{kind}:a" for part in ACCOUNT for kind in ("plan", "cache")),
    }
    assert len(key_id("key-1")) == 32
    # The store's TTL (24 h by default), the given ones, and the claim's lease.
    assert DAY_MS - 5_000 < raw.pttl("planner-arm:plan:a:p-1") <= DAY_MS
    assert 55_000 < raw.pttl("planner-arm:plan:a:p-2") <= 60_000
    assert 295_000 < raw.pttl("planner-arm:cache:a:c-1") <= 300_000
    assert 7_000 < raw.pttl(key) <= 12_000
    # Once answered, the key lives as long as a plan.
    await store.complete(claim, ANSWER)
    assert DAY_MS - 5_000 < raw.pttl(key) <= DAY_MS
    # An answer is accounted to its owner; a claim, small and short-lived, is not.
    assert raw.zrange("planner-arm:held:idempotency:a", 0, -1) == [key_id("key-1")]
    for part in ACCOUNT:
        assert DAY_MS - 5_000 < raw.pttl(f"planner-arm:{part}:idempotency:a") <= DAY_MS


async def test_a_record_redis_expired_is_gone(store: PlanStore, raw: redis.Redis) -> None:
    await store.put_plan(OWNER, "p-1", {"response": ANSWER})
    raw.pexpire("planner-arm:plan:a:p-1", 1)
    for _ in range(10_000):  # each look is a round trip; 1 ms passes long before the bound
        if await store.get_plan(OWNER, "p-1") is None:
            break
    assert await store.get_plan(OWNER, "p-1") is None


async def test_the_key_prefix_comes_from_the_config(
    redis_url: str, fake_clock: FakeClock, raw: redis.Redis
) -> None:
    store = make_store(redis_url, fake_clock, key_prefix="staging")
    await store.put_plan(OWNER, "p-1", {"response": ANSWER})
    assert set(raw.keys("*")) == {
        "staging:plan:a:p-1",
        *(f"staging:{part}:plan:a" for part in ACCOUNT),
    }
    await store.close()


async def test_two_replicas_share_plans_cache_and_keys(
    redis_url: str, fake_clock: FakeClock
) -> None:
    first, second = make_store(redis_url, fake_clock), make_store(redis_url, fake_clock)
    await first.put_plan(OWNER, "p-1", {"response": ANSWER})
    assert await second.get_plan(OWNER, "p-1") == {"response": ANSWER}
    await second.cache_put(OWNER, "c-1", {"plan": 1}, ttl=300)
    assert await first.cache_get(OWNER, "c-1") == {"plan": 1}

    claim = await first.claim(OWNER, "key-1", "body-a", lease_seconds=30)
    assert isinstance(claim, Claimed)
    assert await second.claim(OWNER, "key-1", "body-a", lease_seconds=30) == InProgress()

    async def answer() -> None:
        await asyncio.sleep(0)
        await first.complete(claim, ANSWER)

    deadline = Deadline(10_000, fake_clock.as_clock())
    waiting = second.wait(OWNER, "key-1", "body-a", deadline, lease_seconds=30)
    outcome, _ = await asyncio.gather(waiting, answer())
    assert outcome == Replay(ANSWER)
    await first.close()
    await second.close()


async def test_concurrent_claims_on_two_replicas_make_one_answer(
    redis_url: str, fake_clock: FakeClock
) -> None:
    replicas = [make_store(redis_url, fake_clock) for _ in range(2)]
    deadline = Deadline(10_000, fake_clock.as_clock())

    async def request(store: PlanStore) -> object:
        outcome = await store.claim(OWNER, "key-1", "body-a", lease_seconds=30)
        if isinstance(outcome, InProgress):
            outcome = await store.wait(OWNER, "key-1", "body-a", deadline, lease_seconds=30)
        if isinstance(outcome, Claimed):
            await store.complete(outcome, ANSWER)
        return outcome

    outcomes = await asyncio.gather(*(request(replicas[i % 2]) for i in range(20)))
    assert sum(isinstance(o, Claimed) for o in outcomes) == 1
    assert outcomes.count(Replay(ANSWER)) == 19
    for store in replicas:
        await store.close()


async def test_a_waiter_polls_on_the_injected_clock_until_its_deadline(
    store: PlanStore, fake_clock: FakeClock
) -> None:
    assert isinstance(await store.claim(OWNER, "key-1", "body-a", lease_seconds=30), Claimed)
    deadline = Deadline(1.0, fake_clock.as_clock())
    assert await store.wait(OWNER, "key-1", "body-a", deadline, lease_seconds=30) == InProgress()
    assert fake_clock.sleeps
    assert max(fake_clock.sleeps) <= 0.05  # store.poll_interval_seconds
    assert sum(fake_clock.sleeps) == pytest.approx(1.0)


async def every_call_fails_fast(store: PlanStore, within: float) -> None:
    claim = Claimed(owner=OWNER.id, key="key-1", fingerprint="body-a", token="t")
    deadline = Deadline(1.0, FakeClock().as_clock())
    calls = [
        store.put_plan(OWNER, "p-1", {"response": ANSWER}),
        store.get_plan(OWNER, "p-1"),
        store.claim(OWNER, "key-1", "body-a", lease_seconds=30),
        store.wait(OWNER, "key-1", "body-a", deadline, lease_seconds=30),
        store.complete(claim, ANSWER),
        store.release(claim),
        store.cache_get(OWNER, "c-1"),
        store.cache_put(OWNER, "c-1", {"plan": 1}, ttl=300),
        store.ping(),
    ]
    for call in calls:
        started = time.monotonic()
        with pytest.raises(StoreUnavailable) as caught:
            await call
        assert caught.value.code == "store_unavailable"
        assert time.monotonic() - started < within
    assert await store.healthy() is False


async def test_a_stopped_redis_is_store_unavailable_not_a_hang(
    own_server: RedisServer, fake_clock: FakeClock
) -> None:
    store = make_store(own_server.url, fake_clock, socket_timeout_seconds=0.2)
    await store.put_plan(OWNER, "p-1", {"response": ANSWER})
    own_server.stop()
    await every_call_fails_fast(store, within=2.0)
    await store.close()


async def test_a_frozen_redis_times_out_then_recovers(
    own_server: RedisServer, fake_clock: FakeClock
) -> None:
    store = make_store(own_server.url, fake_clock, socket_timeout_seconds=0.1)
    await store.put_plan(OWNER, "p-1", {"response": ANSWER})
    own_server.pause()
    try:
        # Each command is bounded by the socket timeout whatever the client does inside
        # (reconnect, handshake; a timeout is not retried); a claim may send two commands.
        # Plus scheduling slack.
        await every_call_fails_fast(store, within=2 * 0.1 + 0.3)
    finally:
        own_server.resume()
    assert await store.get_plan(OWNER, "p-1") == {"response": ANSWER}
    assert await store.healthy() is True
    await store.close()


async def test_each_command_is_bounded_whatever_the_client_retries(
    own_server: RedisServer, fake_clock: FakeClock
) -> None:
    # A client told to retry five times would wait six socket timeouts (0.6 s) on a frozen
    # Redis; the store's own bound on each command (0.2 s) holds regardless.
    client = Redis.from_url(
        own_server.url, socket_timeout=0.1, socket_connect_timeout=0.1, retry=Retry(NoBackoff(), 5)
    )
    store = RedisStore(
        client,
        clock=fake_clock.as_clock(),
        ttl_seconds=60,
        key_prefix="bounded",
        poll_interval_seconds=0.05,
        operation_timeout_seconds=0.2,
    )
    await store.put_plan(OWNER, "p-1", {"response": ANSWER})
    own_server.pause()
    try:
        started = time.monotonic()
        with pytest.raises(StoreUnavailable):
            await store.get_plan(OWNER, "p-1")
        took = time.monotonic() - started
    finally:
        own_server.resume()
    assert took < 0.2 + 0.25, f"took {took:.2f} s"
    await store.close()


async def test_a_refused_password_is_store_unavailable_and_not_echoed(
    tmp_path: Path, fake_clock: FakeClock
) -> None:
    server = RedisServer(tmp_path, "--requirepass", "the-right-one").start()
    try:
        wrong = make_store(f"redis://:hunter2-secret@127.0.0.1:{server.port}/0", fake_clock)
        with pytest.raises(StoreUnavailable) as caught:
            await wrong.get_plan(OWNER, "p-1")
        assert "hunter2" not in caught.value.detail
        assert await wrong.healthy() is False
        await wrong.close()
        right = make_store(f"redis://:the-right-one@127.0.0.1:{server.port}/0", fake_clock)
        assert await right.healthy() is True
        await right.close()
    finally:
        server.stop()


async def test_a_full_redis_refuses_writes_and_is_not_marked_down(
    tmp_path: Path, fake_clock: FakeClock
) -> None:
    server = RedisServer(tmp_path, "--maxmemory", "2mb", "--maxmemory-policy", "noeviction")
    server.start()
    store = make_store(server.url, fake_clock)
    guard = StoreGuard(store, operation_timeout=1.0, down_seconds=30, clock=fake_clock.as_clock())
    try:
        await store.put_plan(OWNER, "kept", {"response": ANSWER})
        record = {"response": ANSWER, "text": "x" * 20_000}

        async def fill() -> None:
            for n in range(200):  # 200 x 20 KB: past 2 MB
                await guard.run(lambda n=n: store.put_plan(OWNER, f"p-{n}", record), 1.0)

        with pytest.raises(StoreFull) as refused:
            await fill()
        assert refused.value.code == "store_unavailable"  # a write not kept: answered softly
        assert guard.down is False  # reads still work: the store is not skipped
        assert await guard.run(lambda: store.get_plan(OWNER, "kept"), 1.0) == {"response": ANSWER}
        assert await store.eviction_policy() == "noeviction"
    finally:
        await store.close()
        server.stop()


def capped_store(url: str, clock: FakeClock, **caps: int) -> RedisStore:
    return RedisStore(
        redis_client(url, 5),
        clock=clock.as_clock(),
        ttl_seconds=3600,
        key_prefix="planner-arm",
        poll_interval_seconds=0.05,
        operation_timeout_seconds=5,
        caps=OwnerCaps(**caps),
    )


def held_text(raw: redis.Redis, pattern: str) -> int:
    """The bytes of the texts of the records whose keys match `pattern`."""
    return sum(raw.strlen(key) for key in raw.keys(pattern))


async def test_an_idempotency_key_named_like_the_sum_cannot_take_its_owner_past_its_cap(
    redis_url: str, fake_clock: FakeClock, raw: redis.Redis
) -> None:
    """The sum was a field of the hash of record sizes: `Idempotency-Key: #total` set it to
    that one answer's size, and the owner held four times its cap, and growing."""
    store = capped_store(redis_url, fake_clock, idempotency_bytes=20_000)
    for n in range(60):
        for key in (f"k-{n}", "#total"):
            claim = await store.claim(OWNER, key, f"body-{n}", lease_seconds=30)
            if isinstance(claim, Claimed):
                await store.complete(claim, {"plan_id": f"p-{n}", "text": "x" * 900})
    assert held_text(raw, "planner-arm:idem*:a:*") <= 20_000
    await store.close()


async def test_an_account_of_the_layout_before_is_left_alone(
    redis_url: str, fake_clock: FakeClock, raw: redis.Redis
) -> None:
    """A Redis written by the version before: its plans are still read, its accounts (the sum
    a field of the hash of sizes, here one a `#total` key had wrecked) count for nothing."""
    raw.set("planner-arm:plan:a:old", '{"response":{"plan_id":"old"}}', px=DAY_MS)
    raw.hset("planner-arm:sizes:a", mapping={"#total": -1_000_000, "old": 30})
    raw.zadd("planner-arm:held:a", {"old": 1})
    raw.set("planner-arm:idem:a:key-1", '{"fingerprint":"body-a","response":{"n":1}}')
    store = capped_store(redis_url, fake_clock, plan_bytes=20_000)
    assert await store.get_plan(OWNER, "old") == {"response": {"plan_id": "old"}}
    record = {"response": {"text": "x" * 900}}
    stored = 0
    while stored < 100:
        try:
            await store.put_plan(OWNER, f"p-{stored}", record)
        except TenantQuotaExceeded:
            break
        stored += 1
    assert 10 <= stored <= 20  # about 1,300 bytes held each: the old account counts nothing
    # Idempotency records are filed under a digest now: one kept before is not found, and a
    # retry with its key plans again.
    assert isinstance(await store.claim(OWNER, "key-1", "body-a", lease_seconds=30), Claimed)
    await store.close()


async def test_an_account_counts_what_its_records_hold_in_redis(
    redis_url: str, fake_clock: FakeClock, raw: redis.Redis
) -> None:
    """What an owner's records take of Redis's memory (`used_memory`, what `maxmemory`
    bounds) is what its account says, within a quarter, for records of 1 KB of JSON and
    records with an emoji (a record's text, name and bookkeeping: it was counted as its text
    alone, 1.7 times less)."""
    store = capped_store(redis_url, fake_clock, plan_bytes=1 << 40)
    await store.put_plan(Principal(id="warm"), "p", {"n": 1})  # the scripts loaded
    for records, emoji in ((600, ""), (600, "\N{GRINNING FACE}")):
        owner = Principal(id=f"{'e' if emoji else 'a'}" * 64)
        used = raw.info("memory")["used_memory"]
        for n in range(records):
            await store.put_plan(owner, uuid.uuid4().hex, {"text": f"{n}{emoji}" + "x" * 1_000})
        held = raw.info("memory")["used_memory"] - used
        counted = int(raw.get(f"planner-arm:total:plan:{owner.id}") or 0)
        assert counted / 1.25 <= held <= counted * 1.25, (emoji, held, counted)
    await store.close()


async def test_an_account_whose_sum_was_lost_is_summed_afresh(
    redis_url: str, fake_clock: FakeClock, raw: redis.Redis
) -> None:
    """A Redis under an evicting policy may drop the sum's key alone: the sizes are summed
    again rather than counted from zero."""
    store = capped_store(redis_url, fake_clock, plan_bytes=4_000)
    record = {"response": {"text": "x" * 900}}  # about 1,300 bytes held: three fit, not four
    for n in range(3):
        await store.put_plan(OWNER, f"p-{n}", record)
    raw.delete("planner-arm:total:plan:a")
    with pytest.raises(TenantQuotaExceeded):
        await store.put_plan(OWNER, "p-3", record)
    raw.set("planner-arm:total:plan:a", -5_000)  # a sum gone wrong is summed again too
    with pytest.raises(TenantQuotaExceeded):
        await store.put_plan(OWNER, "p-3", record)
    await store.close()
