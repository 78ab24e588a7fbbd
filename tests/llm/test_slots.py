"""The model call slots shared fairly: a principal may use idle slots but never the reserve, a
freed slot goes to the principal with the fewest calls, a waiter that gives up takes none; and
through GuardedLLM, one principal holding every slot it may never makes another's call
`saturated`. No sleeps: waits end by a release, or at once (a wait of 0)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
import respx

from planner_arm.clock import Deadline
from planner_arm.llm.client import LLMClient
from planner_arm.llm.guarded import CallSkipped, FairSlots, GuardedLLM
from planner_arm.llm.usage import Usage
from planner_arm.metrics import PlannerMetrics
from support.app import FakeClock, answer, good_plan, make_settings

MODEL = "gpt-3.5-turbo"
MESSAGES = [{"role": "user", "content": "plan"}]


async def take(slots: FairSlots, owner: str, times: int) -> list[bool]:
    return [await slots.acquire(owner, 0) for _ in range(times)]


async def test_a_principal_alone_uses_idle_slots_but_never_the_reserve() -> None:
    slots = FairSlots(8, reserved=2)
    assert await take(slots, "a", 7) == [True] * 6 + [False]
    assert await take(slots, "b", 1) == [True]  # found free at once
    assert slots.held("a") == 6


async def test_without_a_reserve_one_principal_may_use_every_slot() -> None:
    slots = FairSlots(4)
    assert await take(slots, "anonymous", 5) == [True] * 4 + [False]


async def test_a_freed_slot_goes_to_the_principal_with_the_fewest_calls() -> None:
    slots = FairSlots(4)
    assert await take(slots, "a", 4) == [True] * 4
    a_waits = asyncio.create_task(slots.acquire("a", 10))
    await asyncio.sleep(0)
    b_waits = asyncio.create_task(slots.acquire("b", 10))
    await asyncio.sleep(0)
    slots.release("a")
    assert await b_waits is True  # though a asked first
    assert not a_waits.done()
    slots.release("a")  # nobody else waits: a takes the idle slot
    assert await a_waits is True
    assert (slots.held("a"), slots.held("b")) == (3, 1)


async def test_past_its_share_a_principal_does_not_take_a_slot_another_waits_for() -> None:
    slots = FairSlots(4, reserved=1)
    assert await take(slots, "a", 3) == [True] * 3
    assert await take(slots, "b", 1) == [True]  # the reserve: b had none
    b_waits = asyncio.create_task(slots.acquire("b", 10))
    await asyncio.sleep(0)
    assert await take(slots, "a", 1) == [False]  # none is free
    slots.release("a")  # the reserve, which b (below its share of 4 // 2) may take
    assert await b_waits is True
    assert await take(slots, "a", 1) == [False]
    assert (slots.held("a"), slots.held("b")) == (2, 2)


async def flood(slots: FairSlots, owners: list[str]) -> None:
    """Each of `owners` takes slots in turn until none of them gets another."""
    taking = list(owners)
    while taking:
        taking = [owner for owner in taking if await slots.acquire(owner, 0)]


@pytest.mark.parametrize("one_after_the_other", [False, True])
async def test_two_greedy_principals_cannot_leave_a_third_without_a_slot(
    one_after_the_other: bool,
) -> None:
    slots = FairSlots(64, reserved=8)
    if one_after_the_other:  # a filled the idle slots alone, then b came along
        await flood(slots, ["a"])
        await flood(slots, ["b"])
    else:
        await flood(slots, ["a", "b"])
    assert slots.held("a") + slots.held("b") < 64
    assert await slots.acquire("c", 0)  # at once, no slot had to come free
    assert await slots.acquire("c", 0)  # and below its share, a second one too


@pytest.mark.parametrize("greedy", [2, 3, 5, 8, 16, 40, 63])
async def test_any_number_of_greedy_principals_leave_a_newcomer_a_slot(greedy: int) -> None:
    slots = FairSlots(64, reserved=8)
    await flood(slots, [f"greedy-{n}" for n in range(greedy)])
    assert await slots.acquire("newcomer", 0)


async def test_slots_freed_near_the_end_go_to_the_principal_below_its_share() -> None:
    slots = FairSlots(64, reserved=8)
    await flood(slots, ["a", "b"])
    await flood(slots, ["c"])  # c took what it may of the reserve: 5, and left 3
    assert (slots.held("c"), slots.capacity - slots.in_use) == (5, 3)
    waiting = [asyncio.create_task(slots.acquire(owner, 10)) for owner in ("a", "b", "c")]
    await asyncio.sleep(0)
    for _ in range(2):
        slots.release("a")
    assert await asyncio.wait_for(waiting[2], 1) is True
    assert (slots.held("a"), slots.held("b"), slots.held("c")) == (26, 28, 6)
    assert [task.done() for task in waiting[:2]] == [False, False]
    assert await slots.acquire("d", 0)  # and a principal that comes along still finds one
    for task in waiting[:2]:
        task.cancel()
    await asyncio.gather(*waiting, return_exceptions=True)


async def test_a_waiter_that_is_cancelled_takes_no_slot() -> None:
    slots = FairSlots(1)
    assert await take(slots, "a", 1) == [True]
    waiting = asyncio.create_task(slots.acquire("b", 10))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    slots.release("a")
    assert slots.in_use == 0
    assert await take(slots, "c", 1) == [True]


def guarded(clock: FakeClock) -> GuardedLLM:
    settings = make_settings(
        auth={"api_keys": ["key-a", "key-b"]},
        connection={"max_in_flight": 4, "reserved_slots": 1, "queue_timeout_seconds": 0},
    )
    llm = LLMClient(settings, httpx.AsyncClient())
    return GuardedLLM(llm, settings, PlannerMetrics("t", "t"), clock.as_clock())


async def test_one_principal_at_its_limit_never_makes_another_saturated(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    release, all_hung = asyncio.Event(), asyncio.Event()
    hung = 0

    async def respond(request: httpx.Request) -> httpx.Response:
        nonlocal hung
        if hung < 3:  # tenant a's calls: a slow model
            hung += 1
            if hung == 3:
                all_hung.set()
            await release.wait()
        return answer(good_plan())

    chat_route.side_effect = respond
    guard = guarded(fake_clock)
    deadline = Deadline(10, fake_clock.as_clock())

    def call(owner: str) -> asyncio.Task[object]:
        return asyncio.create_task(
            guard.call(MODEL, MESSAGES, deadline, Usage(owner), seconds=9, min_call_seconds=0.05)
        )

    a_calls = [call("a") for _ in range(3)]
    await asyncio.wait_for(all_hung.wait(), 10)
    with pytest.raises(CallSkipped) as skipped:
        await call("a")  # a holds every slot it may: the last one is kept for others
    assert skipped.value.reason == "saturated"
    b_answer = await call("b")
    assert b_answer is not None
    release.set()
    await asyncio.gather(*a_calls)


async def test_two_principals_at_their_limits_never_make_a_third_saturated(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    release, all_hung = asyncio.Event(), asyncio.Event()
    hung = 0

    async def respond(request: httpx.Request) -> httpx.Response:
        nonlocal hung
        if b"greedy" in request.content:  # a slow model for the greedy principals' prompts
            hung += 1
            if hung == 6:
                all_hung.set()
            await release.wait()
        return answer(good_plan())

    chat_route.side_effect = respond
    settings = make_settings(
        auth={"api_keys": ["key-a", "key-b", "key-c"]},
        connection={"max_in_flight": 8, "reserved_slots": 2, "queue_timeout_seconds": 0},
    )
    guard = GuardedLLM(
        LLMClient(settings, httpx.AsyncClient()),
        settings,
        PlannerMetrics("t", "t"),
        fake_clock.as_clock(),
    )
    deadline = Deadline(10, fake_clock.as_clock())

    async def call(owner: str, text: str) -> object:
        messages = [{"role": "user", "content": text}]
        return await guard.call(
            MODEL, messages, deadline, Usage(owner), seconds=9, min_call_seconds=0.05
        )

    greedy = [asyncio.create_task(call(owner, "greedy")) for _ in range(4) for owner in "ab"]
    await asyncio.wait_for(all_hung.wait(), 10)  # a and b took the 6 idle slots, 3 each
    skipped = [task for task in greedy if task.done()]
    assert len(skipped) == 2  # neither takes the reserve past its share
    assert all(isinstance(task.exception(), CallSkipped) for task in skipped)
    assert await call("c", "plan") is not None
    release.set()
    await asyncio.gather(*greedy, return_exceptions=True)
