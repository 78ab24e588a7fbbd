"""The tool sets requests bring: built off the event loop, once however many ask at once,
light until used, weighed, kept within bytes, and shared fairly between principals."""

from __future__ import annotations

import asyncio
import gc
import threading
import tracemalloc
from typing import Any

import pytest
from anyio import to_thread

from planner_arm.clock import Deadline
from planner_arm.config import ArmSpec
from planner_arm.errors import ToolSetsBusy
from planner_arm.plan.lexicon import stem
from planner_arm.plan.schemas import PlanRequest
from planner_arm.plan.tool_index import ExampleIndex
from planner_arm.plan.weighed import BuildLane, SharedWork, ToolMemo
from planner_arm.strategies.toolbox import Toolboxes, build_toolbox
from support.app import FakeClock, make_settings
from support.tool_sets import WatchedLane, made_up_tools, tool_request

# Past the shortlist (40): its index is built as it is first held.
LARGE = 60


def toolboxes(lane: BuildLane | None = None, **tool_sets: Any) -> Toolboxes:
    return Toolboxes(make_settings(llm=False, tool_sets=tool_sets), lane=lane)


def deadline(seconds: float = 10.0, clock: FakeClock | None = None) -> Deadline:
    return Deadline(seconds, (clock or FakeClock()).as_clock())


async def use(boxes: Toolboxes, name: str, owner: str = "a", count: int = 8) -> None:
    """One request over the tool set `name`, start to end."""
    async with boxes.held(tool_request(name, count), owner, deadline()):
        pass


async def weight_of(name: str, count: int = 8) -> int:
    boxes = toolboxes()
    request = tool_request(name, count)
    async with boxes.held(request, "a", deadline()) as box:
        pass
    return box.weight


async def test_the_sets_kept_stay_within_their_bytes_not_only_their_count() -> None:
    one = await weight_of("probe", LARGE)
    boxes = toolboxes(max_bytes=max(1024 * 1024, 3 * one), max_kept=64)
    budget = boxes.kept.max_bytes
    sets = 2 * budget // one
    for number in range(sets):
        await use(boxes, f"set{number}", count=LARGE)
        assert boxes.kept.bytes <= budget
    # A bound on the count alone (64) would have kept every one of them.
    assert 0 < len(boxes.kept) < sets


async def test_the_count_bounds_the_sets_kept_too() -> None:
    boxes = toolboxes(max_kept=2)
    for name in ("one", "two", "three"):
        await use(boxes, name)
    assert len(boxes.kept) == 2


def _built_and_dropped(count: int) -> tuple[int, int]:
    """A tool set built with every part: its weight, and the bytes dropping it gives back.
    The memo it shared and the stemmer's cache are emptied first: what the set holds of
    theirs is its weight too, and the caches' own tables are not the set's."""
    settings = make_settings(llm=False)
    shared = SharedWork(ToolMemo(64 * 1024 * 1024), BuildLane(1))
    tools = made_up_tools("weighed", count)
    specs = [ArmSpec(**tool) for tool in tools]
    box = build_toolbox(specs, {}, settings.planning, 0.35, ExampleIndex([]), shared)
    for part in box.parts:
        part.get()
    weight = box.weight
    shared.memo.clear()
    stem.cache_clear()
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    del box, specs, tools, part
    gc.collect()
    return weight, before - tracemalloc.get_traced_memory()[0]


@pytest.mark.parametrize("count", [60, 300])
def test_a_tool_sets_weight_is_what_dropping_it_gives_back(count: int) -> None:
    tracemalloc.start()
    try:
        _built_and_dropped(count)  # once first: what the interpreter makes on first use
        weight, freed = _built_and_dropped(count)
    finally:
        tracemalloc.stop()
    # Never much under; over by what it shares with the interpreter (the names of
    # attributes, which every set counts once for itself).
    assert 0.95 * freed <= weight <= 1.25 * freed, (weight, freed)


async def test_a_sets_weight_leaves_out_the_work_other_sets_share() -> None:
    alone = await weight_of("measured")
    boxes = toolboxes()
    for name in ("first", "second", "third"):
        await use(boxes, name)  # their words are in the shared memo now
    async with boxes.held(tool_request("measured"), "a", deadline()) as box:
        pass
    assert box.weight == alone


async def test_a_small_sets_index_lexicon_and_prompt_wait_until_they_are_used() -> None:
    boxes = toolboxes()
    async with boxes.held(tool_request("small", count=8), "a", deadline()) as box:
        assert not any(part.built for part in box.parts)
        light = box.weight
        box.resolver.select("Look up the weather for Paris")
    assert box.resolver.lexicon.built
    assert not box.resolver.index.retriever.built
    assert box.weight > light
    assert boxes.kept.bytes == box.weight  # counted again when the request let it go


async def test_a_large_set_has_its_index_built_for_the_shortlist_and_nothing_more() -> None:
    boxes = toolboxes()
    async with boxes.held(tool_request("large", count=60), "a", deadline()) as box:
        assert box.shortlists
        assert box.resolver.index.retriever.built
        assert not box.resolver.lexicon.built
        assert not box.prompt.built


async def test_a_streamed_request_has_every_part_built_before_it_plans() -> None:
    boxes = toolboxes()
    async with boxes.held(tool_request("streamed"), "a", deadline(), streamed=True) as box:
        assert all(part.built for part in box.parts)


def _is_build(work: Any) -> bool:
    return getattr(work, "func", None) is build_toolbox


def _builds(lane: WatchedLane) -> int:
    return sum(_is_build(work) for work in lane.works)


async def test_every_build_runs_in_a_worker_thread_while_the_loop_goes_on() -> None:
    lane = WatchedLane()
    boxes = toolboxes(lane)
    lane.close()
    building = asyncio.create_task(use(boxes, "slow", count=LARGE))
    await to_thread.run_sync(lane.entered.wait)
    # Its work waits at the lane's door, in its thread; the loop answers another meanwhile.
    async with boxes.held(PlanRequest(goal="Plan over the configured arms"), "b", deadline()):
        pass
    assert not building.done()
    lane.open()
    await building
    assert _builds(lane) == 1
    assert lane.threads
    assert threading.main_thread() not in lane.threads


async def test_identical_sets_asked_for_at_once_are_built_once() -> None:
    lane = WatchedLane(gated=_is_build)
    boxes = toolboxes(lane)
    lane.close()
    # The same principal twice and another: neither waits for a build slot of its own.
    waiting = asyncio.gather(*(use(boxes, "same", owner) for owner in ("a", "a", "b")))
    await to_thread.run_sync(lane.entered.wait)
    # Each request's tools are read as arms in its thread; then each reaches the build.
    await to_thread.run_sync(lane.wait_until, lambda lane: len(lane.finished) == 3)
    for _ in range(10):
        await asyncio.sleep(0)
    lane.open()
    await waiting
    assert _builds(lane) == 1
    assert len(boxes.kept) == 1


async def test_one_principal_churning_through_sets_evicts_its_own_not_anothers() -> None:
    one = await weight_of("probe", LARGE)
    boxes = toolboxes(max_bytes=max(1024 * 1024, 4 * one), max_kept=64)
    kept_for_b = tool_request("tenant_b").tool_set
    assert kept_for_b is not None
    await use(boxes, "tenant_b", owner="b", count=8)
    for number in range(3 * boxes.kept.max_bytes // one):
        await use(boxes, f"a{number}", owner="a", count=LARGE)
    assert kept_for_b[0] in boxes.kept
    assert boxes.kept.held_by("a")[1] <= boxes.kept.max_bytes
    assert boxes.kept.bytes <= boxes.kept.max_bytes


async def test_a_principals_next_build_waits_for_its_own_and_past_the_deadline_is_a_429() -> None:
    lane = WatchedLane(gated=_is_build)
    boxes = toolboxes(lane)
    lane.close()
    first = asyncio.create_task(use(boxes, "first", owner="a"))
    await to_thread.run_sync(lane.entered.wait)
    clock = FakeClock()
    passed = deadline(1.0, clock)
    clock.time += 1.0
    with pytest.raises(ToolSetsBusy) as refused:
        async with boxes.held(tool_request("second"), "a", passed):
            pass
    assert refused.value.http_status == 429
    assert refused.value.retry_after > 0
    assert refused.value.code == "tool_sets_busy"
    # Another principal's build does not wait for this one's.
    other = asyncio.create_task(use(boxes, "other", owner="b"))
    await to_thread.run_sync(lane.wait_until, lambda lane: _builds(lane) == 2)
    lane.open()
    await asyncio.gather(first, other)
    assert len(boxes.kept) == 2


async def test_a_request_plans_with_the_tool_set_it_holds() -> None:
    boxes = toolboxes()
    request = tool_request("held", count=LARGE)
    async with boxes.held(request, "a", deadline()) as box:
        toolbox = await boxes.for_request(request, box)
        assert toolbox.box is box
        assert (toolbox.rules, toolbox.resolver) == (box.rules, box.resolver)
        # Past the shortlist, its prompt lists the tools relevant to the request alone.
        assert toolbox.opening == box.prompt_for(box.listed(request))
        assert len(box.listed(request)) < LARGE
