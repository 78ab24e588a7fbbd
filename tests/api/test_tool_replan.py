"""A rule-based replan over a caller's tools: a failed call is tried again with the same
tool, reading the same earlier steps; no step is added to "diagnose" it, since no tool is for
that and one picked by its words could be a write."""

from __future__ import annotations

from planner_arm.client import AsyncPlannerClient
from support.app import app_transport, make_settings
from support.library_server import server

BASE = "http://localhost"
GOAL = "Place a hold on Dune for alice@example.com"


async def test_a_failed_call_is_tried_again_on_the_steps_it_read() -> None:
    tools = [
        tool.model_dump(by_alias=True, exclude_none=True) for tool in await server.list_tools()
    ]
    async with (
        app_transport(make_settings(llm=False)) as transport,
        AsyncPlannerClient(BASE, transport=transport) as planner,
    ):
        plan = await planner.plan(GOAL, tools=tools, specialize=True)
        hold = next(step for step in plan.plan if step.required_arm == "place_hold")
        states: dict[int, object] = {
            step.step: "completed" for step in plan.plan if step.step != hold.step
        }
        states[hold.step] = {"status": "failed", "error": "the holds service is busy"}
        again = await planner.replan(
            plan_id=plan.plan_id, step_states=states, tools=tools, specialize=True
        )
    assert again.diff is not None
    assert again.diff.removed == [hold.step]
    (added,) = [step for step in again.plan if step.step in again.diff.added]
    assert added.required_arm == "place_hold"
    assert added.depends_on == hold.depends_on
    assert any("the holds service is busy" in text for text in added.acceptance_criteria)
    # Each argument still reads the step it read before.
    assert added.input == hold.input
    kept = [step for step in again.plan if step.step in again.diff.kept]
    assert [step.required_arm for step in kept] == [
        step.required_arm for step in plan.plan if step.step != hold.step
    ]
