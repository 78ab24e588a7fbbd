"""PlanStream on its own: pings while nothing happens, and a caller who leaves cancels the work."""

from __future__ import annotations

import asyncio

from planner_arm.metrics import PlannerMetrics
from planner_arm.plan.arms import ArmResolver
from planner_arm.plan.schemas import PlanResponse
from planner_arm.plan.validation import PlanRules
from planner_arm.service.stream import PING, PlanStream
from support.app import FakeClock, make_settings


def new_stream(metrics: PlannerMetrics) -> PlanStream:
    settings = make_settings(llm=False)
    return PlanStream(
        plan_id="p1",
        request_id="r1",
        arms=ArmResolver(settings.arms, settings.arm_aliases),
        rules=PlanRules.from_settings(settings),
        metrics=metrics,
        clock=FakeClock().as_clock(),
    )


async def test_a_quiet_stream_pings_and_a_caller_who_leaves_cancels_the_work() -> None:
    metrics = PlannerMetrics("test", "v")
    stream = new_stream(metrics)
    cancelled = asyncio.Event()

    async def work(_: PlanStream) -> PlanResponse:
        try:
            await asyncio.Event().wait()  # a model that never answers
        except asyncio.CancelledError:
            cancelled.set()
            raise
        raise AssertionError("unreachable")

    events = stream.events(work, ping_seconds=0.01)
    assert (await anext(events)).name == PING
    assert (await anext(events)).name == PING
    await events.aclose()  # the caller left
    assert cancelled.is_set()
    assert 'planner_streams_total{outcome="disconnected"} 1.0' in metrics.render().decode()
