"""The Redis backend against a real redis-server: keys and TTLs as Redis sees them, two
replicas sharing one Redis, and a Redis that stops or freezes mid-test."""

from __future__ import annotations

import asyncio
import time
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
from planner_arm.errors import StoreFull, StoreUnavailable
from planner_arm.principal import Principal
from planner_arm.service.records import StoreGuard
from planner_arm.service.wiring import build_store
from planner_arm.store.base import Claimed, InProgress, PlanStore, Replay
from planner_arm.store.redis_backend import RedisStore
from support.app import FakeClock
from support.redis_server import RedisServer

OWNER = Principal(id="a")
ANSWER = {"plan_id": "p-1", "version": 1}
DAY_MS = 86_400_000


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
    assert set(raw.keys("*")) == {
        "planner-arm:plan:a:p-1",
        "planner-arm:plan:a:p-2",
        "planner-arm:cache:a:c-1",
        "planner-arm:idem:a:key-1",
        # The owner's accounts of plan and cache bytes: record ids by expiry, and their sizes.
        "planner-arm:held:a",
        "planner-arm:sizes:a",
        "planner-arm:cache-held:a",
        "planner-arm:cache-sizes:a",
    }
    # The store's TTL (24 h by default), the given ones, and the claim's lease.
    assert DAY_MS - 5_000 < raw.pttl("planner-arm:plan:a:p-1") <= DAY_MS
    assert 55_000 < raw.pttl("planner-arm:plan:a:p-2") <= 60_000
    assert 295_000 < raw.pttl("planner-arm:cache:a:c-1") <= 300_000
    assert 7_000 < raw.pttl("planner-arm:idem:a:key-1") <= 12_000
    # Once answered, the key lives as long as a plan.
    await store.complete(claim, ANSWER)
    assert DAY_MS - 5_000 < raw.pttl("planner-arm:idem:a:key-1") <= DAY_MS
    # An answer is accounted to its owner; a claim, small and short-lived, is not.
    assert raw.zrange("planner-arm:idem-held:a", 0, -1) == ["key-1"]
    assert DAY_MS - 5_000 < raw.pttl("planner-arm:idem-sizes:a") <= DAY_MS


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
    assert set(raw.keys("*")) == {"staging:plan:a:p-1", "staging:held:a", "staging:sizes:a"}
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
