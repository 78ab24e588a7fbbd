"""The tool-set build slots: a freed slot goes to the principal with the fewest in use, then to
the one served least recently; a wait ends at the request's deadline; the requests waiting for
a build are bounded per principal and in all. No sleeps: waits end by a release, or at once
(a deadline already passed)."""

from __future__ import annotations

import asyncio

import pytest

from planner_arm.clock import Deadline
from planner_arm.errors import ToolSetsBusy
from planner_arm.strategies.build_slots import BuildSlots
from support.app import FakeClock


def deadline(seconds: float = 10.0) -> Deadline:
    return Deadline(seconds, FakeClock().as_clock())


def passed() -> Deadline:
    clock = FakeClock()
    ends = Deadline(1.0, clock.as_clock())
    clock.time += 1.0
    return ends


def slots(width: int = 1, per_principal: int = 1) -> BuildSlots:
    return BuildSlots(width, per_principal, waiting_per_principal=8, waiting=64)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_freed_slot_goes_to_the_principal_served_least_recently() -> None:
    shared = slots()
    granted: list[str] = []

    async def turn(owner: str) -> None:
        await shared.take(owner, deadline())
        granted.append(owner)

    await turn("flood")
    # The flooding principal queues two more sets before the other principal comes.
    waiting = [asyncio.create_task(turn(owner)) for owner in ("flood", "flood", "other")]
    await settle()
    for _ in range(3):
        shared.give_back(granted[-1])
        await settle()
    await asyncio.gather(*waiting)
    assert granted == ["flood", "other", "flood", "flood"]


async def test_a_principal_at_its_share_waits_while_another_takes_a_free_slot() -> None:
    shared = slots(width=2, per_principal=1)
    await shared.take("a", deadline())
    second_of_a = asyncio.create_task(shared.take("a", deadline()))
    await settle()
    assert not second_of_a.done()
    await shared.take("b", deadline())  # the second slot, at once
    assert shared.in_use == 2
    shared.give_back("a")
    await second_of_a
    assert shared.in_use == 2


async def test_a_wait_past_its_deadline_is_a_429_and_takes_no_slot() -> None:
    shared = slots()
    await shared.take("a", deadline())
    with pytest.raises(ToolSetsBusy) as refused:
        await shared.take("b", passed())
    assert refused.value.code == "tool_sets_busy"
    assert refused.value.retry_after > 0
    shared.give_back("a")
    assert shared.in_use == 0
    await shared.take("c", passed())  # a free slot needs no wait, whatever the deadline
    assert shared.in_use == 1


async def test_a_cancelled_waiter_granted_a_slot_gives_it_back() -> None:
    shared = slots()
    await shared.take("a", deadline())
    waiter = asyncio.create_task(shared.take("b", deadline()))
    await settle()
    shared.give_back("a")  # granted to b, whose task has not run since
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert shared.in_use == 0


async def test_waiting_requests_are_bounded_per_principal_and_in_all() -> None:
    shared = BuildSlots(1, 1, waiting_per_principal=2, waiting=3)
    async with shared.waiting("a"), shared.waiting("a"):
        with pytest.raises(ToolSetsBusy, match="2 of this caller's requests already wait"):
            async with shared.waiting("a"):
                pass
        async with shared.waiting("b"):
            assert (shared.waiting_of("a"), shared.waiting_of("b")) == (2, 1)
            # The service's bound is reached: b has its share of it (3 over 2 principals).
            with pytest.raises(ToolSetsBusy, match=r"3 requests wait .* has its share"):
                async with shared.waiting("b"):
                    pass
            # A principal with none waiting is below its share (3 over 3): let in, once.
            async with shared.waiting("c"):
                with pytest.raises(ToolSetsBusy, match="3 requests wait"):
                    async with shared.waiting("c"):
                        pass
    assert shared.waiting_of("a") == shared.waiting_of("b") == shared.waiting_of("c") == 0
