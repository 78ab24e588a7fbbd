"""The store guard: each store operation within the request's time left (never less than the
grace, never more than the operation timeout), and the store skipped for `down_seconds` after
a failure, then tried again. The memory store, a fake clock."""

from __future__ import annotations

import pytest

from planner_arm.clock import Deadline
from planner_arm.errors import StoreUnavailable, TenantQuotaExceeded
from planner_arm.service.records import GRACE_SECONDS, StoreGuard
from planner_arm.store.memory import MemoryStore
from support.app import FakeClock


def make_guard(clock: FakeClock) -> StoreGuard:
    store = MemoryStore(ttl_seconds=60, max_entries=10, clock=clock.as_clock())
    return StoreGuard(store, operation_timeout=0.5, down_seconds=5, clock=clock.as_clock())


def test_an_operation_gets_the_time_the_request_has_left(fake_clock: FakeClock) -> None:
    guard = make_guard(fake_clock)
    deadline = Deadline(2.0, fake_clock.as_clock())
    assert guard.time_for(deadline) == 0.5  # the operation timeout is the most
    fake_clock.time += 1.7
    assert guard.time_for(deadline) == pytest.approx(0.3)
    fake_clock.time += 5
    assert guard.time_for(deadline) == GRACE_SECONDS  # spent: still enough to store a plan


async def test_after_a_failure_the_store_is_skipped_then_tried_again(
    fake_clock: FakeClock,
) -> None:
    guard = make_guard(fake_clock)
    asked = 0

    async def failing() -> None:
        nonlocal asked
        asked += 1
        raise StoreUnavailable("the plan store (Redis) did not answer (TimeoutError)")

    async def working() -> str:
        nonlocal asked
        asked += 1
        return "ok"

    with pytest.raises(StoreUnavailable):
        await guard.run(failing, 0.5)
    assert guard.down
    with pytest.raises(StoreUnavailable) as skipped:
        await guard.run(working, 0.5)
    assert "not asked again" in skipped.value.detail
    assert asked == 1  # skipped: no wait on a store that just failed
    fake_clock.time += 5
    assert await guard.run(working, 0.5) == "ok"  # the one try after the pause
    assert not guard.down
    assert asked == 2


async def test_a_caller_over_its_cap_does_not_mark_the_store_down(fake_clock: FakeClock) -> None:
    guard = make_guard(fake_clock)

    async def over() -> None:
        raise TenantQuotaExceeded("over", retry_after=60)

    with pytest.raises(TenantQuotaExceeded):
        await guard.run(over, 0.5)
    assert not guard.down
