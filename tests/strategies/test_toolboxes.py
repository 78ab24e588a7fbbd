"""The tool sets requests bring: built off the event loop, once however many ask at once,
light until used, weighed, kept within bytes, and shared fairly between principals: each
principal's requests waiting for a build are bounded, and every wait ends at the request's
deadline."""

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
from planner_arm.plan.schemas import PlanRequest
from planner_arm.plan.weighed import BuildLane, SharedWork, ToolMemo
from planner_arm.strategies.toolbox import Toolboxes, build_toolbox
from planner_arm.text import stem
from planner_arm.tools.index import ExampleIndex
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


async def test_a_small_sets_lexicon_and_prompt_wait_until_they_are_used() -> None:
    boxes = toolboxes()
    async with boxes.held(tool_request("small", count=8), "a", deadline()) as box:
        assert not box.resolver.lexicon.built
        assert not box.prompt.built
        light = box.weight
        box.resolver.select("Look up the weather for Paris")
    assert box.resolver.lexicon.built
    assert box.weight > light
    assert boxes.kept.bytes == box.weight  # counted again when the request let it go


@pytest.mark.parametrize("count", [8, LARGE])
async def test_a_sets_index_and_graph_are_built_with_it_off_the_loop_and_weighed(
    count: int,
) -> None:
    # Every request over a tool set drafts a rule-based plan (ranking its tools, linking
    # them with the graph) on the event loop: both are built before, in a worker thread.
    lane = WatchedLane()
    boxes = toolboxes(lane)
    async with boxes.held(tool_request("drafted", count), "a", deadline()) as box:
        graph = box.tool_set.graph if box.tool_set is not None else None
        assert graph is not None
        assert graph.built
        assert box.resolver.index.retriever.built
        assert not box.resolver.lexicon.built
        assert not box.prompt.built
        assert box.weight >= box.base_weight + graph.weight > box.base_weight
    assert threading.main_thread() not in lane.threads


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


async def settle() -> None:
    """Lets every task that can run on the event loop alone run."""
    for _ in range(20):
        await asyncio.sleep(0)


def read_tool_request(name: str, count: int = 8) -> PlanRequest:
    """`tool_request`, its tools already read as arms: it reaches its build without a
    worker thread."""
    request = tool_request(name, count)
    assert request.tool_set is not None
    return request


async def hold(boxes: Toolboxes, request: PlanRequest, owner: str, ends: Deadline) -> None:
    async with boxes.held(request, owner, ends):
        pass


async def test_identical_sets_asked_for_at_once_are_built_once() -> None:
    lane = WatchedLane(gated=_is_build)
    boxes = toolboxes(lane)
    lane.close()
    # The same principal twice and another: neither waits for a build slot of its own.
    requests = [(read_tool_request("same"), owner) for owner in ("a", "a", "b")]
    waiting = asyncio.gather(*(hold(boxes, r, owner, deadline()) for r, owner in requests))
    await to_thread.run_sync(lane.entered.wait)
    await settle()
    assert (boxes.slots.waiting_of("a"), boxes.slots.waiting_of("b")) == (2, 1)
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
    boxes = toolboxes(lane, max_builds=2)
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
        toolbox = await boxes.for_request(request, box, "a", deadline())
        assert toolbox.box is box
        assert (toolbox.rules, toolbox.resolver) == (box.rules, box.resolver)
        # Past the shortlist, its prompt lists the tools relevant to the request alone.
        assert toolbox.opening == box.prompt_for(box.listed(request))
        assert len(box.listed(request)) < LARGE


def passed_deadline() -> Deadline:
    clock = FakeClock()
    ends = deadline(1.0, clock)
    clock.time += 1.0
    return ends


async def test_a_wait_for_the_same_set_being_built_ends_at_the_requests_deadline() -> None:
    lane = WatchedLane(gated=_is_build)
    boxes = toolboxes(lane)
    lane.close()
    first = asyncio.create_task(hold(boxes, read_tool_request("shared"), "a", deadline()))
    await to_thread.run_sync(lane.entered.wait)
    late = asyncio.create_task(hold(boxes, read_tool_request("shared"), "b", passed_deadline()))
    await settle()
    # Answered while the build goes on, not when it ends.
    assert late.done()
    with pytest.raises(ToolSetsBusy) as refused:
        late.result()
    assert "still being built at its deadline" in refused.value.detail
    lane.open()
    await first
    assert _builds(lane) == 1
    assert len(boxes.kept) == 1  # built for the next request all the same


async def test_a_wait_for_a_build_slot_ends_at_the_requests_deadline() -> None:
    lane = WatchedLane(gated=_is_build)
    boxes = toolboxes(lane)  # one build at a time in the process
    lane.close()
    first = asyncio.create_task(hold(boxes, read_tool_request("one"), "a", deadline()))
    await to_thread.run_sync(lane.entered.wait)
    late = asyncio.create_task(hold(boxes, read_tool_request("two"), "b", passed_deadline()))
    await settle()
    assert late.done()
    with pytest.raises(ToolSetsBusy) as refused:
        late.result()
    assert "before its deadline" in refused.value.detail
    assert boxes.slots.waiting_of("b") == 0  # it holds nothing once refused
    lane.open()
    await first


async def test_a_principals_waiting_sets_are_bounded_and_another_is_still_served() -> None:
    lane = WatchedLane(gated=_is_build)
    boxes = toolboxes(lane, max_waiting_per_principal=2)
    lane.close()
    waiting = [
        asyncio.create_task(hold(boxes, read_tool_request(name), "a", deadline()))
        for name in ("a1", "a2")
    ]
    await to_thread.run_sync(lane.entered.wait)
    await settle()
    assert boxes.slots.waiting_of("a") == 2  # one building, one waiting for a slot
    refused = asyncio.create_task(hold(boxes, read_tool_request("a3"), "a", deadline()))
    other = asyncio.create_task(hold(boxes, read_tool_request("b1"), "b", deadline()))
    await settle()
    # Refused at once, not held in memory until a slot comes or its deadline passes.
    assert refused.done()
    with pytest.raises(ToolSetsBusy) as busy:
        refused.result()
    assert busy.value.http_status == 429
    assert busy.value.retry_after > 0
    assert "2 of this caller's requests already wait" in busy.value.detail
    assert boxes.slots.waiting_of("b") == 1
    lane.open()
    await asyncio.gather(*waiting, other)
    assert len(boxes.kept) == 3
    assert boxes.slots.waiting_of("a") == boxes.slots.waiting_of("b") == 0


async def test_past_the_services_bound_a_principal_with_its_share_is_refused_at_once() -> None:
    lane = WatchedLane(gated=_is_build)
    boxes = toolboxes(lane, max_waiting=2)
    lane.close()
    waiting = [
        asyncio.create_task(hold(boxes, read_tool_request(name), owner, deadline()))
        for name, owner in (("a1", "a"), ("b1", "b"))
    ]
    await to_thread.run_sync(lane.entered.wait)
    await settle()
    refused = asyncio.create_task(hold(boxes, read_tool_request("c1"), "c", deadline()))
    await settle()
    assert refused.done()
    with pytest.raises(ToolSetsBusy) as busy:
        refused.result()
    assert "2 requests wait for their tool sets to be built" in busy.value.detail
    lane.open()
    await asyncio.gather(*waiting)
