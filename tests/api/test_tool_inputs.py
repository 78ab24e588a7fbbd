"""Step inputs over the caller's tools (`"specialize": true`): each step's `input` is the
arguments of its call, valid against the tool's own input schema: the model's (asked with
the schema, its answer checked with jsonschema, repaired once), else by rule from the
request's context and goal and the steps before, else `needs` naming what is missing."""

from __future__ import annotations

import json
from typing import Annotated, Any

import httpx
import jsonschema
import pytest
import respx
from pydantic import Field, create_model

from planner_arm.limits import ArmSpec
from planner_arm.plan.schemas import PlanStep
from planner_arm.plan.tool_inputs import ToolSchema, tool_schema
from planner_arm.strategies.specialize import tool_schemas
from planner_arm.tools.arguments import rule_tool_input
from support.app import answer, make_settings, running_app
from support.model_requests import request_data, system_of

SEARCH_SCHEMA = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
    "required": ["title"],
}
CREDITS_SCHEMA = {
    "type": "object",
    "properties": {
        "movie_id": {"type": "string"},
        "language": {"type": "string", "enum": ["en", "fr"]},
        "limit": {"type": "integer", "default": 10},
    },
    "required": ["movie_id", "limit"],
    "additionalProperties": False,
}
TOOLS = [
    {
        "name": "search_movie",
        "description": "Search movies by title and return their ids",
        "inputSchema": SEARCH_SCHEMA,
    },
    {
        "name": "GetMovieCredit",
        "description": "Get the cast and crew of a movie by its movie id",
        "inputSchema": CREDITS_SCHEMA,
    },
]
SCHEMAS = {"search_movie": SEARCH_SCHEMA, "GetMovieCredit": CREDITS_SCHEMA}
GOAL = "Search the movie Titanic by its title, and then get the cast of the movie"
PLAN = {
    "plan": [
        {"step": 1, "tool": "search_movie", "action": "find Titanic", "depends_on": []},
        {"step": 2, "tool": "GetMovieCredit", "action": "list the cast", "depends_on": [1]},
    ]
}


def checkable(schema: dict[str, Any]) -> ToolSchema:
    checked = tool_schema(schema)
    assert checked is not None
    return checked


class Model:
    """The model: the plan, then each step's input from `inputs` (by tool, in turn)."""

    def __init__(self, inputs: dict[str, list[Any]]) -> None:
        self.inputs = inputs
        self.asked: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if not system_of(request).startswith("You prepare the input"):
            return answer(PLAN)
        tool = request_data(request)["arm"]
        self.asked.append(tool)
        return answer(self.inputs[tool].pop(0))


def _inputs(body: dict[str, Any]) -> dict[str, Any]:
    return {step["required_arm"]: step["input"] for step in body["plan"]}


def _warnings(body: dict[str, Any]) -> dict[str, str]:
    return {note["code"]: note["detail"] for note in body["metadata"]["warnings"]}


async def test_the_model_writes_arguments_valid_against_each_tools_schema(
    chat_route: respx.Route,
) -> None:
    model = Model(
        {
            "search_movie": [{"title": "Titanic"}],
            # Wrapped, with a key the schema does not name: unwrapped, and the key dropped.
            "GetMovieCredit": [
                {"arguments": {"movie_id": "{{steps.1.output}}", "limit": 5, "inputs_from": [1]}}
            ],
        }
    )
    chat_route.side_effect = model
    async with running_app(make_settings()) as client:
        response = await client.post(
            "/plan", json={"goal": GOAL, "tools": TOOLS, "specialize": True}
        )
    assert response.status_code == 200, response.text
    body = response.json()
    assert _inputs(body) == {
        "search_movie": {"title": "Titanic"},
        "GetMovieCredit": {"movie_id": "{{steps.1.output}}", "limit": 5},
    }
    # Each input call showed the model its tool's own schema, as data.
    shown = {
        request_data(call.request)["arm"]: request_data(call.request)["input_schema"]
        for call in chat_route.calls[1:]
    }
    assert shown == SCHEMAS
    assert "input_by_rule" not in _warnings(body)


async def test_an_answer_that_breaks_the_schema_is_repaired_once(chat_route: respx.Route) -> None:
    model = Model(
        {
            "search_movie": [{"title": "Titanic"}],
            "GetMovieCredit": [
                {"movie_id": 603, "limit": "many"},
                {"movie_id": "603", "limit": 3, "language": "en"},
            ],
        }
    )
    chat_route.side_effect = model
    async with running_app(make_settings()) as client:
        body = (
            await client.post("/plan", json={"goal": GOAL, "tools": TOOLS, "specialize": True})
        ).json()
    assert model.asked.count("GetMovieCredit") == 2
    repair = json.loads(chat_route.calls[-1].request.content)["messages"][-1]["content"]
    assert "movie_id: 603 is not of type 'string'" in repair
    assert _inputs(body)["GetMovieCredit"] == {"movie_id": "603", "limit": 3, "language": "en"}


async def test_after_two_bad_answers_the_rule_fills_the_arguments_from_the_context(
    chat_route: respx.Route,
) -> None:
    bad = {"movie_id": None}
    model = Model({"search_movie": [{"title": "Titanic"}], "GetMovieCredit": [bad, bad, bad]})
    chat_route.side_effect = model
    request = {
        "goal": GOAL,
        "tools": TOOLS,
        "specialize": True,
        "context": {"movieId": 597, "language": "fr"},
    }
    async with running_app(make_settings()) as client:
        body = (await client.post("/plan", json=request)).json()
    credits = _inputs(body)["GetMovieCredit"]
    assert credits == {"movie_id": "597", "language": "fr", "limit": 10}
    jsonschema.validate(credits, CREDITS_SCHEMA)
    assert _warnings(body)["input_by_rule"].startswith("step 2: invalid_input")


async def test_without_a_model_ids_come_from_the_goal_or_the_step_before() -> None:
    tools = [TOOLS[1]]
    async with running_app(make_settings(llm=False)) as client:
        given = await client.post(
            "/plan",
            json={"goal": "Get the cast of movie 603", "tools": tools, "specialize": True},
        )
        chained = await client.post(
            "/plan", json={"goal": GOAL, "tools": TOOLS, "specialize": True}
        )
    assert _inputs(given.json()) == {"GetMovieCredit": {"movie_id": "603", "limit": 10}}
    inputs = _inputs(chained.json())
    # The title of a search tool is what the step searches for, not the step's sentence.
    assert inputs["search_movie"] == {"title": "Titanic"}
    assert inputs["GetMovieCredit"] == {"movie_id": "{{steps.1.output}}", "limit": 10}


async def test_a_step_sent_back_with_arguments_that_break_the_schema_gets_new_ones() -> None:
    async with running_app(make_settings(llm=False)) as client:
        made = (
            await client.post(
                "/plan",
                json={"goal": "Get the cast of movie 603", "tools": [TOOLS[1]]},
            )
        ).json()
        made["plan"][0]["input"] = {"movie_id": 603}
        states = {"1": "pending"}
        replanned = await client.post(
            "/replan",
            json={
                "goal": "Get the cast of movie 603",
                "tools": [TOOLS[1]],
                "previous": made,
                "step_states": states,
                "reason": "the cast must be in French",
                "specialize": True,
            },
        )
    assert replanned.status_code == 200, replanned.text
    body = replanned.json()
    for step in body["plan"]:
        jsonschema.validate(step["input"], CREDITS_SCHEMA)


def _step(action: str, depends_on: list[int] | None = None) -> PlanStep:
    return PlanStep(
        step=3,
        action=action,
        required_arm="get_order",
        acceptance_criteria=["done"],
        depends_on=depends_on or [],
    )


@pytest.mark.parametrize(
    ("schema", "step", "context", "expected"),
    [
        # A bare `id` is an id of what the tool's name is about: "order #A-17".
        (
            {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
            _step("Check order #A-17"),
            {},
            {"id": "A-17"},
        ),
        # const, a single enum value; an optional argument only from the context.
        (
            {
                "type": "object",
                "properties": {
                    "kind": {"const": "order"},
                    "mode": {"enum": ["fast"]},
                    "note": {"type": "string"},
                    "verbose": {"type": "boolean"},
                },
                "required": ["kind", "mode"],
            },
            _step("Check it"),
            {"verbose": True},
            {"kind": "order", "mode": "fast", "verbose": True},
        ),
        # A query argument takes what the step looks for; naming nothing, its object words.
        (
            {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
            _step("Find late orders"),
            {},
            {"query": "late orders"},
        ),
        # An integer id given as text, and the reference to the step before otherwise.
        (
            {
                "type": "object",
                "properties": {"order_id": {"type": "integer"}, "user_id": {"type": "string"}},
                "required": ["order_id", "user_id"],
            },
            _step("Check order 42", [1, 2]),
            {},
            {"order_id": 42, "user_id": "{{steps.2.output}}"},
        ),
    ],
)
def test_the_rule_fills_what_is_clearly_given(
    schema: dict[str, Any], step: PlanStep, context: dict[str, Any], expected: dict[str, Any]
) -> None:
    value = rule_tool_input(step, checkable(schema), "the goal", context)
    assert value == expected
    jsonschema.validate(value, schema)


def test_the_rule_names_every_required_argument_it_cannot_fill() -> None:
    schema = {
        "type": "object",
        "properties": {"order_id": {"type": "integer"}, "reason": {"type": "string"}},
        "required": ["order_id", "reason"],
    }
    value = rule_tool_input(_step("Refund order 42"), checkable(schema), None, {})
    assert value == {
        "needs": "human_or_model",
        "missing": ["reason"],
        "arguments": {"order_id": 42},
        "instruction": "Refund order 42",
    }


async def test_capabilities_publish_a_configured_tools_own_input_schema() -> None:
    async with running_app(make_settings(llm=False, arms=TOOLS)) as client:
        arms = {arm["id"]: arm for arm in (await client.get("/capabilities")).json()["arms"]}
    assert arms["GetMovieCredit"]["input_schema"] == CREDITS_SCHEMA


async def test_one_step_of_a_plan_over_tools_gets_its_arguments_when_the_tools_are_sent() -> None:
    request = {"goal": "Get the cast of movie 603", "tools": [TOOLS[1]]}
    async with running_app(make_settings(llm=False)) as client:
        made = (await client.post("/plan", json=request)).json()
        over_tools = await client.post(
            "/plan/specialize", json={"plan_id": made["plan_id"], "step": 1, "tools": TOOLS}
        )
        without = await client.post(
            "/plan/specialize", json={"plan_id": made["plan_id"], "step": 1}
        )
        bad = await client.post(
            "/plan/specialize",
            json={"plan_id": made["plan_id"], "step": 1, "tools": [{"oops": 1}]},
        )
    assert over_tools.status_code == 200, over_tools.text
    assert over_tools.json()["input"] == {"movie_id": "603", "limit": 10}
    # Without them, the step's tool is no arm of the service's: refused, as /replan refuses it.
    assert without.status_code == 422, without.text
    assert without.json()["error"] == "invalid_previous"
    assert [item["code"] for item in without.json()["errors"]] == ["unknown_arm"]
    assert bad.status_code == 422
    assert bad.json()["errors"][0]["message"].startswith("a tool is one of")


def test_only_the_schemas_of_the_tools_a_plan_calls_are_read() -> None:
    arms = [ArmSpec.model_validate(tool) for tool in TOOLS]
    broken = ArmSpec(id="broken", description="x", input_schema={"type": "object", "required": 3})
    found = tool_schemas([*arms, broken], {"GetMovieCredit", "broken"})
    assert {arm: schema.schema for arm, schema in found.items()} == {
        "GetMovieCredit": CREDITS_SCHEMA
    }


def test_a_callers_regular_expressions_are_not_run() -> None:
    # A pattern such as `^(a+)+$` backtracks for minutes on 'a' * 40 + 'b', where every
    # caller's requests run: no pattern of a caller's schema is run, so a value a pattern
    # would refuse is no problem, while the rest of the schema still holds.
    schema = {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": "^a+$"}},
        "patternProperties": {"^n_": {"type": "integer"}},
        "required": ["code"],
    }
    assert checkable(schema).problems({"code": "b", "n_one": "x"}) == []
    assert checkable(schema).problems({"code": 7}) == ["code: 7 is not of type 'string'"]


def _mcp_tool(name: str, description: str, **params: Any) -> dict[str, Any]:
    """A tool as an MCP server's `tools/list` gives it: pydantic's schemas of its parameters
    and of its result."""
    output = create_model(f"{name}_result", **{f"{name.split('_')[-1]}_id": (str, ...)})
    return {
        "name": name,
        "description": description,
        "inputSchema": create_model(f"{name}_arguments", **params).model_json_schema(),
        "outputSchema": output.model_json_schema(),
    }


LIBRARY_TOOLS = [
    _mcp_tool(
        "search_books",
        "Search the catalogue by title, author or keyword; returns matching books with their "
        "book_id.",
        query=(str, ...),
        limit=(int, 10),
    ),
    _mcp_tool(
        "find_member",
        "Look up a library member by e-mail address.",
        email=(Annotated[str, Field(json_schema_extra={"format": "email"})], ...),
    ),
    _mcp_tool(
        "place_hold",
        "Place a hold on a book for a member.",
        book_id=(str, ...),
        member_id=(str, ...),
    ),
]


async def test_without_a_model_a_search_step_searches_for_what_the_goal_names() -> None:
    goal = "Search for the book Dune and place a hold on it for the member alice@example.com"
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post(
            "/plan", json={"goal": goal, "tools": LIBRARY_TOOLS, "specialize": True}
        )
    assert response.status_code == 200, response.text
    steps = {step["required_arm"]: step for step in response.json()["plan"]}
    # The search gets the title, never the sentence nor the other part's address.
    assert steps["search_books"]["input"] == {"query": "Dune"}
    assert steps["find_member"]["input"] == {"email": "alice@example.com"}
    # Each id is the output of the step that finds it.
    source = {step["step"]: name for name, step in steps.items()}
    hold = steps["place_hold"]["input"]
    assert set(hold) == {"book_id", "member_id"}
    assert source[int(hold["book_id"].split(".")[1])] == "search_books"
    assert source[int(hold["member_id"].split(".")[1])] == "find_member"
