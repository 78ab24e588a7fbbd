"""The clients plan over the caller's tools and worked examples: `tools=` takes the tools an
MCP client session lists (`mcp.types.Tool`, 1.x as installed, and a model with the 2.x SDK's
field names), their JSON in any shape the service reads, or any object with `name` and
`inputSchema`; `plan`, `stream`, `replan` and `expand` of both clients send them."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import mcp.types
import pytest
from mcp.server.fastmcp import FastMCP
from mcp.shared.memory import create_connected_server_and_client_session
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from planner_arm.client import AsyncPlannerClient, PlannerClient, run_plan
from planner_arm.client.calls import tool_json
from support.app import app_transport, make_settings
from support.stub_model import PLAN

API_DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"
BASE = "http://localhost"
GOAL = "List the cast of the movie Heat"
SEARCH = mcp.types.Tool(
    name="lookup_title",
    description="Look up a film by its title",
    inputSchema={"type": "object", "properties": {"title": {"type": "string"}}},
    outputSchema={"type": "object", "properties": {"movie_id": {"type": "string"}}},
    annotations=mcp.types.ToolAnnotations(readOnlyHint=True),
)
CREDITS = mcp.types.Tool(
    name="movie_credits",
    description="The cast of a film",
    inputSchema={"type": "object", "properties": {"movie_id": {}}, "required": ["movie_id"]},
)
EXAMPLE = {"request": "Cast of Alien", "steps": [{"tool": "lookup_title"}]}


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class Annotations2(_Model):
    """`mcp.types.ToolAnnotations` as the 2.x SDK writes it: snake_case, camelCase aliases."""

    read_only_hint: bool | None = None
    destructive_hint: bool | None = None


class Tool2(_Model):
    """`mcp.types.Tool` as the 2.x SDK writes it (its models are built this way)."""

    name: str
    title: str | None = None
    description: str | None = None
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None
    annotations: Annotations2 | None = None
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


def _steps(plan: Any) -> list[tuple[str, list[int]]]:
    return [(step.required_arm, step.depends_on) for step in plan.plan]


@pytest.mark.parametrize(
    "tools",
    [
        pytest.param([SEARCH, CREDITS], id="mcp-1.x"),
        pytest.param(
            [Tool2.model_validate(tool.model_dump(by_alias=True)) for tool in (SEARCH, CREDITS)],
            id="mcp-2.x",
        ),
        pytest.param(
            [tool.model_dump(by_alias=True) for tool in (SEARCH, CREDITS)], id="their-dicts"
        ),
        pytest.param(
            [
                SimpleNamespace(**tool.model_dump(by_alias=True, exclude={"annotations"}))
                for tool in (SEARCH, CREDITS)
            ],
            id="any-object",
        ),
    ],
)
async def test_the_tools_an_mcp_session_lists_are_planned_over_as_they_are(
    tools: list[Any],
) -> None:
    async with (
        app_transport(make_settings(llm=False)) as transport,
        AsyncPlannerClient(BASE, transport=transport) as planner,
    ):
        plan = await planner.plan(GOAL, tools=tools, examples=[EXAMPLE])
        events = [event async for event in planner.stream(GOAL, tools=tools)]
        replanned = await planner.replan(
            GOAL, plan_id=plan.plan_id, step_states={1: "completed", 2: "failed"}, tools=tools
        )
        expanded = await planner.expand(GOAL, plan_id=plan.plan_id, step=2, tools=tools)
    # The output schema says lookup_title makes the movie_id movie_credits needs.
    assert _steps(plan) == [("lookup_title", []), ("movie_credits", [1])]
    assert events[-1].event == "plan"
    assert [step["required_arm"] for step in events[-1].data["plan"]] == [
        "lookup_title",
        "movie_credits",
    ]
    assert {step.required_arm for step in replanned.plan} <= {"lookup_title", "movie_credits"}
    assert {step.required_arm for step in expanded.plan} <= {"lookup_title", "movie_credits"}


def test_a_2x_model_is_sent_by_mcps_own_field_names() -> None:
    tool = Tool2(
        name="wipe",
        input_schema={"type": "object"},
        annotations=Annotations2(destructive_hint=True),
    )
    assert tool_json(tool) == {
        "name": "wipe",
        "inputSchema": {"type": "object"},
        "annotations": {"destructiveHint": True},
    }
    hints = SimpleNamespace(readOnlyHint=True, title=None)
    duck = SimpleNamespace(name="read", inputSchema={}, description=None, annotations=hints)
    assert tool_json(duck) == {
        "name": "read",
        "inputSchema": {},
        "annotations": {"readOnlyHint": True},
    }
    with pytest.raises(TypeError, match="not int"):
        tool_json(3)


def test_the_blocking_client_sends_tools_and_examples_on_each_planning_call() -> None:
    sent: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(422, json={"error": "invalid_request", "detail": "x"})

    tools = [SEARCH, {"type": "function", "function": {"name": "f"}}]
    listed = [SEARCH.model_dump(mode="json", by_alias=True, exclude_none=True), tools[1]]
    with PlannerClient(BASE, transport=httpx.MockTransport(answer), retries=0) as planner:
        calls = [
            lambda: planner.plan(GOAL, tools=tools, examples=[EXAMPLE]),
            lambda: list(planner.stream(GOAL, tools=tools, examples=[EXAMPLE])),
            lambda: planner.replan(GOAL, previous=PLAN, tools=tools, examples=[EXAMPLE]),
            lambda: planner.expand(GOAL, plan_id="p", step=1, tools=tools, examples=[EXAMPLE]),
        ]
        for call in calls:
            with pytest.raises(Exception, match="x"):
                call()
    assert [body["tools"] for body in sent] == [listed] * 4
    assert [body["examples"] for body in sent] == [[EXAMPLE]] * 4


def _movie_server() -> FastMCP:
    server = FastMCP("movies")

    @server.tool(description="The cast of a movie, by its movie id")
    def get_movie_credits(movie_id: int) -> str:
        return f"cast of movie {movie_id}"

    @server.tool(description="The weather forecast for a city")
    def get_weather(city: str) -> str:
        return f"sunny in {city}"

    return server


async def test_the_loop_plans_over_an_mcp_servers_tools_and_runs_them() -> None:
    # docs/api.md's example runs this loop against a real service and server
    # (tests/e2e/test_run_plan_example.py); here it runs in process.
    goal = "Get the cast of movie 603, then the weather forecast for the city"
    async with (
        app_transport(make_settings(llm=False)) as transport,
        create_connected_server_and_client_session(_movie_server()) as session,
        AsyncPlannerClient(BASE, transport=transport) as planner,
    ):
        tools = (await session.list_tools()).tools
        plan = await planner.plan(goal, context={"city": "Paris"}, tools=tools, specialize=True)
        run = await run_plan(planner, session, plan)
    assert [step.input for step in plan.plan] == [{"movie_id": 603}, {"city": "Paris"}]
    assert [(step.status, step.result) for step in run.steps] == [
        ("completed", "cast of movie 603"),
        ("completed", "sunny in Paris"),
    ]
