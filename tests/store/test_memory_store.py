"""The embedded store: TTLs on the injected clock, and bounds that drop the least recently
used records first, each kind of record within its own bound."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import tracemalloc
from collections.abc import Awaitable, Callable

from planner_arm.errors import TenantQuotaExceeded
from planner_arm.principal import Principal
from planner_arm.store.base import Claimed, InProgress, OwnerCaps, Replay, encode, utf8
from planner_arm.store.memory import MemoryStore, held_size
from support.app import FakeClock

OWNER = Principal(id="a")
ANSWER = {"plan_id": "p-1"}


def make_store(clock: FakeClock, max_entries: int = 100) -> MemoryStore:
    return MemoryStore(ttl_seconds=3600, max_entries=max_entries, clock=clock.as_clock())


async def test_plans_and_cache_entries_expire_on_the_clock(fake_clock: FakeClock) -> None:
    store = make_store(fake_clock)
    await store.put_plan(OWNER, "default-ttl", {"n": 1})
    await store.put_plan(OWNER, "short-ttl", {"n": 2}, ttl=60)
    await store.cache_put(OWNER, "c-1", {"n": 3}, ttl=300)
    fake_clock.time += 59
    assert await store.get_plan(OWNER, "short-ttl") == {"n": 2}
    fake_clock.time += 1
    assert await store.get_plan(OWNER, "short-ttl") is None
    assert await store.cache_get(OWNER, "c-1") == {"n": 3}
    fake_clock.time += 240
    assert await store.cache_get(OWNER, "c-1") is None
    assert await store.get_plan(OWNER, "default-ttl") == {"n": 1}
    fake_clock.time += 3600 - 300
    assert await store.get_plan(OWNER, "default-ttl") is None


async def test_a_claim_lapses_after_its_lease_an_answer_after_the_ttl(
    fake_clock: FakeClock,
) -> None:
    store = make_store(fake_clock)
    crashed = await store.claim(OWNER, "key-1", "body-a", lease_seconds=10)
    assert isinstance(crashed, Claimed)
    fake_clock.time += 9
    assert await store.claim(OWNER, "key-1", "body-a", lease_seconds=10) == InProgress()
    fake_clock.time += 1
    retried = await store.claim(OWNER, "key-1", "body-a", lease_seconds=10)
    assert isinstance(retried, Claimed)
    await store.complete(retried, ANSWER)
    fake_clock.time += 3599
    assert await store.claim(OWNER, "key-1", "body-a", lease_seconds=10) == Replay(ANSWER)
    fake_clock.time += 1
    assert isinstance(await store.claim(OWNER, "key-1", "body-a", lease_seconds=10), Claimed)


async def test_the_bound_drops_the_least_recently_used_plan(fake_clock: FakeClock) -> None:
    store = make_store(fake_clock, max_entries=3)
    for plan_id in ("p-1", "p-2", "p-3"):
        await store.put_plan(OWNER, plan_id, {"id": plan_id})
    assert await store.get_plan(OWNER, "p-1") == {"id": "p-1"}  # now the most recently used
    await store.put_plan(OWNER, "p-4", {"id": "p-4"})
    assert await store.get_plan(OWNER, "p-2") is None
    for plan_id in ("p-1", "p-3", "p-4"):
        assert await store.get_plan(OWNER, plan_id) == {"id": plan_id}


async def test_a_busy_cache_does_not_push_plans_or_keys_out(fake_clock: FakeClock) -> None:
    store = make_store(fake_clock, max_entries=2)
    await store.put_plan(OWNER, "p-1", {"id": "p-1"})
    claim = await store.claim(OWNER, "key-1", "body-a", lease_seconds=30)
    assert isinstance(claim, Claimed)
    for n in range(10):
        await store.cache_put(OWNER, f"c-{n}", {"n": n}, ttl=300)
    assert await store.get_plan(OWNER, "p-1") == {"id": "p-1"}
    assert await store.claim(OWNER, "key-1", "body-a", lease_seconds=30) == InProgress()
    assert await store.cache_get(OWNER, "c-0") is None
    assert await store.cache_get(OWNER, "c-9") == {"n": 9}


async def test_the_byte_bound_drops_the_oldest_records_first(fake_clock: FakeClock) -> None:
    store = MemoryStore(
        ttl_seconds=3600, max_entries=1000, max_bytes=4_000, clock=fake_clock.as_clock()
    )
    big = {"text": "x" * 900}  # about 1,120 bytes held each: three fit, not four
    for plan_id in ("p-1", "p-2", "p-3"):
        await store.put_plan(OWNER, plan_id, big)
    assert await store.get_plan(OWNER, "p-1") == big  # now the most recently used
    await store.put_plan(OWNER, "p-4", big)
    assert await store.get_plan(OWNER, "p-2") is None
    for plan_id in ("p-1", "p-3", "p-4"):
        assert await store.get_plan(OWNER, plan_id) == big
    assert store.held_bytes(OWNER) == 3 * held_size("p-1", utf8(encode(big)))
    # The cache and the idempotency records have bounds of their own, also in bytes.
    for n in range(10):
        await store.cache_put(OWNER, f"c-{n}", big, ttl=300)
    assert await store.cache_get(OWNER, "c-6") is None
    assert await store.cache_get(OWNER, "c-9") == big
    assert await store.get_plan(OWNER, "p-4") == big


async def test_plans_that_ran_out_free_their_owners_bytes(fake_clock: FakeClock) -> None:
    store = MemoryStore(
        ttl_seconds=60,
        max_entries=100,
        caps=OwnerCaps(plan_bytes=3_000),
        clock=fake_clock.as_clock(),
    )
    record = {"text": "x" * 900}  # about 1,120 bytes held: two fit, not three
    await store.put_plan(OWNER, "p-1", record)
    await store.put_plan(OWNER, "p-2", record)
    fake_clock.time += 60
    await store.put_plan(OWNER, "p-3", record)  # the first two expired: room again
    assert store.held_bytes(OWNER) == held_size("p-3", utf8(encode(record)))


A, B, C = Principal(id="tenant-a"), Principal(id="tenant-b"), Principal(id="tenant-c")
PLAN = {"text": "x" * 900}  # about 912 bytes of JSON


def shared_store(clock: FakeClock, **caps: int) -> MemoryStore:
    """A store of 30,000 bytes of each kind; each owner may hold two thirds of it."""
    return MemoryStore(
        ttl_seconds=86_400,
        max_entries=10_000,
        max_bytes=30_000,
        caps=OwnerCaps(**caps),
        clock=clock.as_clock(),
    )


async def test_two_floods_within_their_caps_leave_a_third_owners_plans(
    fake_clock: FakeClock,
) -> None:
    store = shared_store(fake_clock, plan_bytes=20_000)
    for n in range(5):
        await store.put_plan(C, f"c-{n}", PLAN)
    for n in range(60):  # each flood stays under its cap: its own oldest go, or a 429
        for flood in (A, B):
            fake_clock.time += 1
            with contextlib.suppress(TenantQuotaExceeded):
                await store.put_plan(flood, f"{flood.id}-{n}", PLAN)
    assert [await store.get_plan(C, f"c-{n}") for n in range(5)] == [PLAN] * 5
    # The floods hold what is left of the bound between them, each about its share.
    assert store.held_bytes(A) + store.held_bytes(B) + store.held_bytes(C) <= 30_000
    assert min(store.held_bytes(A), store.held_bytes(B)) > 10_000


async def test_a_flood_of_keys_leaves_another_owners_answers_to_replay(
    fake_clock: FakeClock,
) -> None:
    store = shared_store(fake_clock)  # no caps at all: the fair share alone protects
    kept = []
    for n in range(20):
        claim = await store.claim(C, f"retry-{n}", "body", lease_seconds=15)
        assert isinstance(claim, Claimed)
        await store.complete(claim, {"plan_id": f"c-{n}"})
        kept.append(claim)
    for n in range(200):
        claim = await store.claim(A, f"flood-{n}", "body", lease_seconds=15)
        assert isinstance(claim, Claimed)
        await store.complete(claim, {"plan_id": f"a-{n}", "text": "x" * 900})
    replays = [await store.claim(C, f"retry-{n}", "body", lease_seconds=15) for n in range(20)]
    assert replays == [Replay({"plan_id": f"c-{n}"}) for n in range(20)]
    assert store.held_bytes(A, "idempotency") <= 30_000


async def test_an_owner_past_its_cap_of_answers_loses_its_own_oldest(
    fake_clock: FakeClock,
) -> None:
    store = shared_store(fake_clock, idempotency_bytes=5_000, cache_bytes=5_000)
    for n in range(10):
        claim = await store.claim(A, f"k-{n}", "body", lease_seconds=15)
        assert isinstance(claim, Claimed)
        await store.complete(claim, {"plan_id": f"a-{n}", "text": "x" * 900})
        await store.cache_put(A, f"c-{n}", PLAN, ttl=300)
    assert store.held_bytes(A, "idempotency") <= 5_000
    assert store.held_bytes(A, "cache") <= 5_000
    assert isinstance(await store.claim(A, "k-0", "body", lease_seconds=15), Claimed)
    assert await store.claim(A, "k-9", "body", lease_seconds=15) == Replay(
        {"plan_id": "a-9", "text": "x" * 900}
    )
    assert await store.cache_get(A, "c-0") is None
    assert await store.cache_get(A, "c-9") == PLAN


async def test_the_entry_bound_is_shared_fairly_too(fake_clock: FakeClock) -> None:
    store = MemoryStore(ttl_seconds=3600, max_entries=10, clock=fake_clock.as_clock())
    for n in range(3):
        await store.cache_put(C, f"c-{n}", {"n": n}, ttl=300)
    for n in range(50):
        await store.cache_put(A, f"a-{n}", {"n": n}, ttl=300)
    assert [await store.cache_get(C, f"c-{n}") for n in range(3)] == [{"n": n} for n in range(3)]
    assert await store.cache_get(A, "a-49") == {"n": 49}
    assert await store.cache_get(A, "a-0") is None


def traced_growth(fill: Callable[[], Awaitable[None]]) -> int:
    """The bytes Python allocated during `fill()` and still holds after it (tracemalloc)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        asyncio.run(fill())
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_a_record_weighs_what_it_holds_emoji_or_not(fake_clock: FakeClock) -> None:
    """A JSON text kept as a `str` with one emoji in it takes four bytes for each of its
    characters: a flood of such records held four times what it was counted."""
    records = 300
    measured = {}
    for kind, extra in (("ascii", "x"), ("emoji", "\N{GRINNING FACE}")):
        store = make_store(fake_clock, max_entries=10 * records)
        plans = [{"text": f"{n} " + "x" * 2_000 + extra} for n in range(records)]

        async def fill(store: MemoryStore = store, plans: list[dict[str, str]] = plans) -> None:
            for n, plan in enumerate(plans):
                await store.put_plan(OWNER, f"p-{n}", plan)

        held = traced_growth(fill)
        counted = store.held_bytes(OWNER)
        assert counted / 1.25 <= held <= counted * 1.25, (kind, held, counted)
        measured[kind] = held
    # An emoji is three bytes more than an "x", not four times the record.
    assert measured["emoji"] < measured["ascii"] * 1.05
