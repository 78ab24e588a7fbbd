"""The clients' `validate` over the caller's tools: it sends the tools and the plan's goal, and
the plan it answers is replanned as `previous` with the same tools."""

from __future__ import annotations

import json
from typing import Any

import httpx
import mcp.types
import pytest

from planner_arm.client import AsyncPlannerClient, PlannerClient
from support.app import app_transport, make_settings

BASE = "http://localhost"
GOAL = "Find the film Heat and list its cast"
SEARCH = mcp.types.Tool(
    name="lookup_title",
    description="Look up a film by its title",
    inputSchema={"type": "object", "properties": {"title": {"type": "string"}}},
    outputSchema={"type": "object", "properties": {"movie_id": {"type": "string"}}},
)
CREDITS = mcp.types.Tool(
    name="movie_credits",
    description="The cast of a film",
    inputSchema={
        "type": "object",
        "properties": {"movie_id": {"type": "string"}},
        "required": ["movie_id"],
    },
)
STEPS: list[dict[str, Any]] = [
    {"step": 1, "action": "Find Heat", "required_arm": "lookup_title",
     "acceptance_criteria": ["Heat found"], "depends_on": [], "estimated_cost_tier": 1,
     "estimated_duration_seconds": 5, "input": {"title": "Heat"}},
    {"step": 2, "action": "List its cast", "required_arm": "movie_credits",
     "acceptance_criteria": ["The cast listed"], "depends_on": [1], "estimated_cost_tier": 1,
     "estimated_duration_seconds": 5, "input": {"movie_id": "{{steps.1.output.movie_id}}"}},
]  # fmt: skip


async def test_a_validated_tool_plan_is_replanned_as_previous() -> None:
    tools = [SEARCH, CREDITS]
    async with (
        app_transport(make_settings(llm=False)) as transport,
        AsyncPlannerClient(BASE, transport=transport) as planner,
    ):
        checked = await planner.validate(STEPS, tools=tools, goal=GOAL)
        assert checked.valid, checked.errors
        assert checked.plan is not None
        replanned = await planner.replan(
            previous=checked.plan, step_states={1: "completed", 2: "failed"}, tools=tools
        )
    assert checked.plan.goal == GOAL
    assert [step.writes for step in checked.plan.plan] == [False, False]
    assert replanned.goal == GOAL
    assert replanned.plan[0] == checked.plan.plan[0]
    assert {step.required_arm for step in replanned.plan} <= {"lookup_title", "movie_credits"}


def test_the_blocking_client_sends_the_tools_and_the_plans_goal() -> None:
    sent: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(422, json={"error": "invalid_request", "detail": "x"})

    with PlannerClient(BASE, transport=httpx.MockTransport(answer), retries=0) as planner:
        with pytest.raises(Exception, match="x"):
            planner.validate(STEPS, True, tools=[SEARCH], goal=GOAL, constraints=["no spoilers"])
        with pytest.raises(Exception, match="x"):
            planner.validate(STEPS)
    listed = SEARCH.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert sent[0] == {
        "plan": STEPS,
        "fix": True,
        "tools": [listed],
        "goal": GOAL,
        "constraints": ["no spoilers"],
    }
    assert sent[1] == {"plan": STEPS, "fix": False}
