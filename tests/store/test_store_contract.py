"""What every plan store does, run against both backends: memory and a real redis-server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from planner_arm.clock import Deadline
from planner_arm.config import load_settings
from planner_arm.errors import TenantQuotaExceeded
from planner_arm.principal import Principal
from planner_arm.service.wiring import build_store
from planner_arm.store.base import (
    Claimed,
    ClaimOutcome,
    Conflict,
    InProgress,
    PlanStore,
    Replay,
)
from support.app import FakeClock

OWNER = Principal(id="a")
LEASE = 30.0
ANSWER = {"plan_id": "p-1", "steps": [{"step": 1, "action": "Write the fix"}], "version": 1}


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest, fake_clock: FakeClock) -> AsyncIterator[PlanStore]:
    store_section: dict[str, Any] = {}
    if request.param == "redis":
        store_section["url"] = request.getfixturevalue("redis_url")
    built = build_store(load_settings(store=store_section), fake_clock.as_clock())
    assert built.kind == request.param
    yield built
    await built.close()


async def test_the_store_says_whether_replicas_share_it_and_what_it_calls(
    store: PlanStore,
) -> None:
    # Redis is one store every replica reads, called out of the process; memory is neither.
    assert (store.shared, store.system) == (
        (True, "redis") if store.kind == "redis" else (False, None)
    )


async def test_a_stored_plan_comes_back_as_stored(store: PlanStore) -> None:
    record = {"response": ANSWER, "request": {"goal": "Fix the login bug"}, "replan_count": 0}
    record["parent_plan_id"] = None
    await store.put_plan(OWNER, "p-1", record)
    fetched = await store.get_plan(OWNER, "p-1")
    assert fetched == record
    assert fetched is not None
    fetched["response"]["steps"].clear()  # the caller's copy, not the store's
    assert await store.get_plan(OWNER, "p-1") == record
    assert await store.get_plan(OWNER, "p-unknown") is None


async def test_a_cache_entry_comes_back_until_replaced(store: PlanStore) -> None:
    assert await store.cache_get(OWNER, "k") is None
    await store.cache_put(OWNER, "k", {"plan": 1}, ttl=300)
    await store.cache_put(OWNER, "other", {"plan": 2}, ttl=300)
    assert await store.cache_get(OWNER, "k") == {"plan": 1}
    await store.cache_put(OWNER, "k", {"plan": 3}, ttl=300)
    assert await store.cache_get(OWNER, "k") == {"plan": 3}
    assert await store.get_plan(OWNER, "k") is None  # plans and cache entries do not mix


async def test_the_first_claim_wins_and_its_answer_is_replayed(store: PlanStore) -> None:
    first = await store.claim(OWNER, "key-1", "body-a", lease_seconds=LEASE)
    assert isinstance(first, Claimed)
    assert (first.owner, first.key, first.fingerprint) == ("a", "key-1", "body-a")
    assert isinstance(await store.claim(OWNER, "key-1", "body-a", lease_seconds=LEASE), InProgress)
    assert await store.complete(first, ANSWER) is True
    assert await store.claim(OWNER, "key-1", "body-a", lease_seconds=LEASE) == Replay(ANSWER)
    # Other keys are untouched.
    assert isinstance(await store.claim(OWNER, "key-2", "body-a", lease_seconds=LEASE), Claimed)


async def test_the_same_key_with_another_body_is_a_conflict(
    store: PlanStore, fake_clock: FakeClock
) -> None:
    first = await store.claim(OWNER, "key-1", "body-a", lease_seconds=LEASE)
    assert isinstance(first, Claimed)
    assert await store.claim(OWNER, "key-1", "body-b", lease_seconds=LEASE) == Conflict()
    await store.complete(first, ANSWER)
    assert await store.claim(OWNER, "key-1", "body-b", lease_seconds=LEASE) == Conflict()
    deadline = Deadline(10, fake_clock.as_clock())
    assert await store.wait(OWNER, "key-1", "body-b", deadline, lease_seconds=LEASE) == Conflict()


async def test_a_released_key_can_be_claimed_again(store: PlanStore) -> None:
    first = await store.claim(OWNER, "key-1", "body-a", lease_seconds=LEASE)
    assert isinstance(first, Claimed)
    await store.release(first)
    second = await store.claim(OWNER, "key-1", "body-b", lease_seconds=LEASE)
    assert isinstance(second, Claimed)
    assert second.token != first.token


async def test_a_lost_claim_cannot_overwrite_or_release_the_next_one(store: PlanStore) -> None:
    first = await store.claim(OWNER, "key-1", "body-a", lease_seconds=LEASE)
    assert isinstance(first, Claimed)
    await store.release(first)
    second = await store.claim(OWNER, "key-1", "body-a", lease_seconds=LEASE)
    assert isinstance(second, Claimed)
    assert await store.complete(first, {"plan_id": "late"}) is False
    await store.release(first)  # a no-op: the key is the second caller's
    assert isinstance(await store.claim(OWNER, "key-1", "body-a", lease_seconds=LEASE), InProgress)
    assert await store.complete(second, ANSWER) is True
    assert await store.claim(OWNER, "key-1", "body-a", lease_seconds=LEASE) == Replay(ANSWER)


async def test_concurrent_claims_make_one_answer_for_all(
    store: PlanStore, fake_clock: FakeClock
) -> None:
    answers = 0

    async def request(deadline: Deadline) -> ClaimOutcome:
        nonlocal answers
        outcome = await store.claim(OWNER, "key-1", "body-a", lease_seconds=LEASE)
        if isinstance(outcome, InProgress):
            outcome = await store.wait(OWNER, "key-1", "body-a", deadline, lease_seconds=LEASE)
        if isinstance(outcome, Claimed):
            answers += 1
            await asyncio.sleep(0)  # let the others pile up on the key meanwhile
            await store.complete(outcome, ANSWER)
        return outcome

    deadline = Deadline(10_000, fake_clock.as_clock())
    outcomes = await asyncio.gather(*(request(deadline) for _ in range(25)))
    assert answers == 1
    assert sum(isinstance(o, Claimed) for o in outcomes) == 1
    assert [o for o in outcomes if not isinstance(o, Claimed)] == [Replay(ANSWER)] * 24


async def test_a_waiter_takes_over_a_key_its_holder_let_go(
    store: PlanStore, fake_clock: FakeClock
) -> None:
    first = await store.claim(OWNER, "key-1", "body-a", lease_seconds=LEASE)
    assert isinstance(first, Claimed)

    async def fail_then_release() -> None:
        await asyncio.sleep(0)
        await store.release(first)

    deadline = Deadline(10_000, fake_clock.as_clock())
    waiting = store.wait(OWNER, "key-1", "body-a", deadline, lease_seconds=LEASE)
    outcome, _ = await asyncio.gather(waiting, fail_then_release())
    assert isinstance(outcome, Claimed)
    assert outcome.token != first.token


async def test_a_waiter_past_its_deadline_hears_in_progress(
    store: PlanStore, fake_clock: FakeClock
) -> None:
    assert isinstance(await store.claim(OWNER, "key-1", "body-a", lease_seconds=LEASE), Claimed)
    spent = Deadline(0, fake_clock.as_clock())
    assert await store.wait(OWNER, "key-1", "body-a", spent, lease_seconds=LEASE) == InProgress()


async def test_a_working_store_is_healthy(store: PlanStore) -> None:
    await store.ping()
    assert await store.healthy() is True


OTHER = Principal(id="b")


async def test_another_owners_records_read_as_unknown(store: PlanStore) -> None:
    record = {"response": ANSWER, "request": {"goal": "Fix the login bug"}}
    await store.put_plan(OWNER, "p-1", record)
    await store.cache_put(OWNER, "k", {"plan": 1}, ttl=300)
    assert await store.get_plan(OTHER, "p-1") is None
    assert await store.get_plan(OTHER, "p-1") == await store.get_plan(OTHER, "p-unknown")
    assert await store.cache_get(OTHER, "k") is None
    assert await store.get_plan(OWNER, "p-1") == record  # the owner still reads it


async def test_idempotency_keys_are_each_owners_own(store: PlanStore) -> None:
    first = await store.claim(OWNER, "key-1", "body-a", lease_seconds=LEASE)
    assert isinstance(first, Claimed)
    # The same key from another owner, even with another body: no conflict, its own claim.
    theirs = await store.claim(OTHER, "key-1", "body-b", lease_seconds=LEASE)
    assert isinstance(theirs, Claimed)
    assert await store.complete(theirs, {"plan_id": "theirs"}) is True
    assert await store.complete(first, ANSWER) is True
    assert await store.claim(OWNER, "key-1", "body-a", lease_seconds=LEASE) == Replay(ANSWER)
    replayed = await store.claim(OTHER, "key-1", "body-b", lease_seconds=LEASE)
    assert replayed == Replay({"plan_id": "theirs"})


async def test_a_renewed_claim_is_kept_and_a_lost_one_is_not_renewed(store: PlanStore) -> None:
    first = await store.claim(OWNER, "key-1", "body-a", lease_seconds=LEASE)
    assert isinstance(first, Claimed)
    assert await store.renew(first, LEASE) is True
    await store.release(first)
    second = await store.claim(OWNER, "key-1", "body-a", lease_seconds=LEASE)
    assert isinstance(second, Claimed)
    assert await store.renew(first, LEASE) is False  # the key is the second caller's now
    assert await store.complete(second, ANSWER) is True
    assert await store.renew(second, LEASE) is False  # answered: nothing left to renew


CAP = 2_800


@pytest.fixture(params=["memory", "redis"])
async def capped(request: pytest.FixtureRequest, fake_clock: FakeClock) -> AsyncIterator[PlanStore]:
    """A store whose owners may hold 2,800 bytes of plans, of answers kept for keys and of
    cache entries each (API keys configured): two records of about 800 bytes of JSON, not
    three, as a record also holds its name and its place in the store."""
    store_section: dict[str, Any] = {}
    if request.param == "redis":
        store_section["url"] = request.getfixturevalue("redis_url")
    settings = load_settings(
        store=store_section,
        # A Redis store with keys needs the secret that keys the owners' ids.
        auth={"api_keys": ["key-a"], "principal_secret": "contract-test-principal-secret"},
        tenants={
            "max_plan_bytes": CAP,
            "max_idempotency_bytes": CAP,
            "max_cache_bytes": CAP,
        },
    )
    built = build_store(settings, fake_clock.as_clock())
    yield built
    await built.close()


async def test_an_owner_past_its_cap_of_plan_bytes_is_refused_others_are_not(
    capped: PlanStore,
) -> None:
    record = {"response": {"text": "x" * 800}}  # about 820 bytes of JSON
    await capped.put_plan(OWNER, "p-1", record)
    await capped.put_plan(OWNER, "p-2", record)
    await capped.put_plan(OWNER, "p-2", record)  # replacing a plan takes no more room
    with pytest.raises(TenantQuotaExceeded) as refused:
        await capped.put_plan(OWNER, "p-3", record)
    assert refused.value.code == "tenant_quota_exceeded"
    assert refused.value.http_status == 429
    # Until the owner's first plan runs out (the store's TTL, a day).
    assert 80_000 < refused.value.retry_after <= 86_400
    await capped.put_plan(OTHER, "p-3", record)  # another owner has its own cap
    assert await capped.get_plan(OWNER, "p-3") is None
    assert await capped.get_plan(OTHER, "p-3") == record


async def test_an_emoji_weighs_its_four_bytes_against_the_cap(capped: PlanStore) -> None:
    # 474 characters, 1,824 bytes: one fits in the cap, not two (as 474 bytes, two would).
    record = {"response": {"text": "\N{GRINNING FACE}" * 450}}
    await capped.put_plan(OWNER, "p-1", record)
    with pytest.raises(TenantQuotaExceeded):
        await capped.put_plan(OWNER, "p-2", record)
    assert await capped.get_plan(OWNER, "p-1") == record


async def test_past_its_cap_of_answers_an_owner_loses_its_own_oldest_not_anothers(
    capped: PlanStore,
) -> None:
    theirs = await capped.claim(OTHER, "key-1", "body-a", lease_seconds=LEASE)
    assert isinstance(theirs, Claimed)
    assert await capped.complete(theirs, {"plan_id": "theirs"}) is True
    answer = {"plan_id": "mine", "text": "x" * 800}  # about 870 bytes of record each
    for n in range(6):
        claim = await capped.claim(OWNER, f"key-{n}", "body-a", lease_seconds=LEASE)
        assert isinstance(claim, Claimed)
        assert await capped.complete(claim, answer) is True
    # Two answers fit in the cap: the newest two replay, the oldest are gone (a retry
    # with them plans again), and the other owner's answer is untouched.
    assert await capped.claim(OWNER, "key-5", "body-a", lease_seconds=LEASE) == Replay(answer)
    assert await capped.claim(OWNER, "key-4", "body-a", lease_seconds=LEASE) == Replay(answer)
    assert isinstance(await capped.claim(OWNER, "key-0", "body-a", lease_seconds=LEASE), Claimed)
    replayed = await capped.claim(OTHER, "key-1", "body-a", lease_seconds=LEASE)
    assert replayed == Replay({"plan_id": "theirs"})


async def test_past_its_cap_of_cache_entries_an_owner_loses_its_own_oldest_not_anothers(
    capped: PlanStore,
) -> None:
    await capped.cache_put(OTHER, "k", {"plan": "theirs"}, ttl=300)
    entry = {"plan": "x" * 800}
    for n in range(6):
        await capped.cache_put(OWNER, f"k-{n}", entry, ttl=300)
    assert await capped.cache_get(OWNER, "k-5") == entry
    assert await capped.cache_get(OWNER, "k-4") == entry
    assert await capped.cache_get(OWNER, "k-0") is None
    assert await capped.cache_get(OTHER, "k") == {"plan": "theirs"}


# Names a caller may choose (an Idempotency-Key, a plan id asked for) that a store might take
# for its own: the name of an account's sum, separators and patterns of Redis key names,
# control characters, a lone surrogate (JSON can escape one), a very long one, and names of
# the store's own keys.
SPECIAL_NAMES = [
    "#total",
    "",
    ":",
    "a:b",
    "{a}",
    "*",
    "[a]?",
    "\n",
    "\0",
    "\N{GRINNING FACE}",
    "\ud800",
    "x" * 10_000,
    "total",
    "held",
    "sizes",
    "-inf",
    "planner-arm:total:plan:a",
]


async def test_every_name_is_a_name_like_any_other(store: PlanStore) -> None:
    for n, name in enumerate(SPECIAL_NAMES):
        value = {"n": n, "name": name}
        await store.put_plan(OWNER, name, {"response": value})
        await store.cache_put(OWNER, name, value, ttl=300)
        claim = await store.claim(OWNER, name, f"body-{n}", lease_seconds=LEASE)
        assert isinstance(claim, Claimed)
        assert await store.complete(claim, value) is True
    for n, name in enumerate(SPECIAL_NAMES):
        value = {"n": n, "name": name}
        assert await store.get_plan(OWNER, name) == {"response": value}
        assert await store.cache_get(OWNER, name) == value
        assert await store.claim(OWNER, name, f"body-{n}", lease_seconds=LEASE) == Replay(value)
        assert await store.get_plan(OTHER, name) is None


async def test_no_idempotency_key_takes_its_owner_past_its_cap(capped: PlanStore) -> None:
    answer = {"plan_id": "mine", "text": "x" * 800}  # two fit in the cap, not three
    names = [*SPECIAL_NAMES, *(f"key-{n}" for n in range(4)), "#total"]
    for n, name in enumerate(names):
        # "#total" a second time, with another body: a new key for the store to count.
        claim = await capped.claim(OWNER, name, f"body-{n}", lease_seconds=LEASE)
        if isinstance(claim, Claimed):
            assert await capped.complete(claim, answer) is True
    kept = [
        name
        for n, name in enumerate(names)
        if await capped.claim(OWNER, name, f"body-{n}", lease_seconds=LEASE) == Replay(answer)
    ]
    assert len(kept) <= 2, kept


async def test_no_plan_id_takes_its_owner_past_its_cap(capped: PlanStore) -> None:
    record = {"response": {"text": "x" * 800}}  # two fit in the cap, not three
    stored = []
    for name in [*SPECIAL_NAMES, *(f"p-{n}" for n in range(4))]:
        try:
            await capped.put_plan(OWNER, name, record)
        except TenantQuotaExceeded:
            continue
        stored.append(name)
    assert len(stored) == 2, stored
    assert [await capped.get_plan(OWNER, name) for name in stored] == [record] * 2


async def test_no_cache_key_takes_its_owner_past_its_cap(capped: PlanStore) -> None:
    entry = {"plan": "x" * 800}  # two fit in the cap, not three
    names = [*SPECIAL_NAMES, *(f"k-{n}" for n in range(4))]
    for name in names:
        await capped.cache_put(OWNER, name, entry, ttl=300)
    kept = [name for name in names if await capped.cache_get(OWNER, name) == entry]
    assert kept == ["k-2", "k-3"]
