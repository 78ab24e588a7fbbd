"""The shapes tools come in: an MCP tool as `tools/list` gives it, Anthropic's, OpenAI's with or
without a description, ours; in a request and in the configured arms. An item of no shape is
one problem that names the accepted shapes."""

from __future__ import annotations

import random
from typing import Any

import httpx
import mcp.types
import pytest
import respx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent

from planner_arm.api.app import create_app
from planner_arm.config import ConfigError, load_settings
from planner_arm.limits import ArmSpec
from planner_arm.tool_shapes import ACCEPTED_SHAPES, shape_problem
from support.app import answer, make_settings, running_app, with_lifespan
from support.model_requests import listed_tools

GOAL = "Search the movie Titanic by its title, and then get the cast of the movie"
MCP_SEARCH = mcp.types.Tool(
    name="search_movie",
    title="Search movies",
    description="Search movies by title and return their ids",
    inputSchema={"type": "object", "properties": {"title": {"type": "string"}}},
    outputSchema={"type": "object", "properties": {"movie_id": {"type": "string"}}},
    annotations=mcp.types.ToolAnnotations(readOnlyHint=True),
)
ANTHROPIC_CREDITS = {
    "name": "GetMovieCredit",
    "description": "Get the cast and crew of a movie by its movie id",
    "input_schema": {
        "type": "object",
        "properties": {"movie_id": {"type": "string"}},
        "required": ["movie_id"],
    },
}
UNDESCRIBED_OPENAI = {
    "type": "function",
    "function": {
        "name": "book_seats",
        "parameters": {"type": "object", "properties": {"movie_id": {}, "seats": {}}},
    },
}


def _tools() -> list[dict[str, Any]]:
    # Exactly what an MCP client session's list_tools() gives, as JSON.
    listed = MCP_SEARCH.model_dump(mode="json", by_alias=True, exclude_none=True)
    return [listed, ANTHROPIC_CREDITS, UNDESCRIBED_OPENAI]


def _steps(body: dict[str, Any]) -> list[tuple[str, list[int]]]:
    return [(step["required_arm"], step["depends_on"]) for step in body["plan"]]


async def test_mcp_anthropic_and_undescribed_openai_tools_are_planned_over() -> None:
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post("/plan", json={"goal": GOAL, "tools": _tools()})
    assert response.status_code == 200, response.text
    body = response.json()
    assert _steps(body) == [("search_movie", []), ("GetMovieCredit", [1])]
    warnings = {note["code"]: note["detail"] for note in body["metadata"]["warnings"]}
    assert warnings["tool_without_description"] == ("planned from name and parameters: book_seats")


async def test_a_tool_without_description_is_shown_to_the_model_by_name_and_parameters(
    chat_route: respx.Route,
) -> None:
    chat_route.return_value = answer(
        {"plan": [{"step": 1, "tool": "book_seats", "action": "book", "depends_on": []}]}
    )
    async with running_app(make_settings()) as client:
        response = await client.post(
            "/plan", json={"goal": "Book two seats for Heat", "tools": _tools()}
        )
    assert response.status_code == 200, response.text
    listed = listed_tools(chat_route.calls[0].request)
    described = {tool["name"]: tool.get("description") for tool in listed}
    assert described["book_seats"] == "book seats (takes movie_id, seats)"
    assert described["search_movie"] == "Search movies by title and return their ids"
    codes = [note["code"] for note in response.json()["metadata"]["warnings"]]
    assert "tool_without_description" in codes


async def test_a_tool_of_no_shape_is_one_sentence_per_bad_tool() -> None:
    tools = [ANTHROPIC_CREDITS, {"tool": "x", "summary": "y"}, "search", {"title": "t"}]
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post("/plan", json={"goal": GOAL, "tools": tools})
    assert response.status_code == 422
    body = response.json()
    assert body["error"] == "invalid_request"
    assert [problem["loc"] for problem in body["errors"]] == [
        ["body", "tools", 1],
        ["body", "tools", 2],
        ["body", "tools", 3],
    ]
    messages = [problem["message"] for problem in body["errors"]]
    assert messages == [
        f"{ACCEPTED_SHAPES}; this item has tool, summary",
        f"{ACCEPTED_SHAPES}; this item is a str, not an object",
        f"{ACCEPTED_SHAPES}; this item has title",
    ]
    assert body["detail"].startswith(f"The request is not valid: body.tools.1: {messages[0]}")
    assert "request_id" in body


async def test_a_known_shape_with_a_bad_field_names_that_field_only() -> None:
    tools = [{"name": "search", "inputSchema": "not a schema"}]
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post("/plan", json={"goal": GOAL, "tools": tools})
    assert response.status_code == 422
    assert [problem["loc"] for problem in response.json()["errors"]] == [
        ["body", "tools", 0, "mcp", "inputSchema"]
    ]


def test_shapes_are_told_apart_in_order_and_read_as_arms() -> None:
    specs = [
        ArmSpec.model_validate(MCP_SEARCH.model_dump(mode="json", by_alias=True)),
        ArmSpec.model_validate(ANTHROPIC_CREDITS),
        ArmSpec.model_validate({"name": "ping", "description": "Ping a host"}),
        ArmSpec.model_validate(
            {"type": "function", "name": "flat", "parameters": {"type": "object"}}
        ),
        # The 2.x SDK's own field names (a model dumped without aliases).
        ArmSpec.model_validate(
            {
                "name": "wipe",
                "input_schema": {"type": "object"},
                "output_schema": {"type": "object"},
                "annotations": {"title": "Wipe a disk", "destructive_hint": True},
            }
        ),
    ]
    search, credits, ping, flat, wipe = specs
    assert (search.id, search.title) == ("search_movie", "Search movies")
    assert search.output_schema == {
        "type": "object",
        "properties": {"movie_id": {"type": "string"}},
    }
    assert search.annotations is not None
    assert search.annotations["readOnlyHint"] is True
    assert not search.destructive()
    assert credits.input_schema == ANTHROPIC_CREDITS["input_schema"]
    assert (ping.id, ping.description, ping.input_schema) == ("ping", "Ping a host", None)
    assert (flat.id, flat.input_schema) == ("flat", {"type": "object"})
    # No description: the title (here the annotations') stands in for it.
    assert (wipe.description, wipe.title, wipe.output_schema) == (
        "Wipe a disk",
        "Wipe a disk",
        {"type": "object"},
    )
    assert wipe.destructive()


def test_a_long_foreign_description_is_cut_not_refused() -> None:
    spec = ArmSpec.model_validate(
        {"name": "long", "title": "T" * 3_000, "description": "word " * 1_000, "inputSchema": {}}
    )
    assert len(spec.description) == 2_000
    assert spec.description.endswith("…")
    assert spec.title is not None
    assert len(spec.title) == 2_000


def test_the_configured_arms_take_the_same_shapes() -> None:
    settings = load_settings(arms=_tools())
    assert settings.arm_ids == ["search_movie", "GetMovieCredit", "book_seats"]
    assert settings.arms[2].description == "book seats (takes movie_id, seats)"
    with pytest.raises(ConfigError) as caught:
        load_settings(arms=[{"name": "x", "inputSchema": []}])
    assert "arms.0" in str(caught.value)


def _mcp(name: str, description: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "description": description, "inputSchema": {"type": "object"}, **fields}


LOOKUP = _mcp(
    "lookup_title",
    "Look up a film by its title",
    outputSchema={
        "type": "object",
        "properties": {
            "results": {"type": "array", "items": {"properties": {"movie_id": {}, "year": {}}}}
        },
    },
)
CREDITS = _mcp(
    "movie_credits",
    "The cast of a film",
    inputSchema={"type": "object", "properties": {"movie_id": {}}, "required": ["movie_id"]},
)


@pytest.mark.parametrize(
    ("lookup", "steps"),
    [
        # Its result holds a movie_id: it is the step that makes the id the cast needs.
        (LOOKUP, [("lookup_title", []), ("movie_credits", [1])]),
        # Without the output schema nothing says it yields one.
        ({**LOOKUP, "outputSchema": None}, [("movie_credits", [])]),
        # A tool that says it destroys is never added to make what another step needs.
        (
            {**LOOKUP, "annotations": {"destructiveHint": True, "readOnlyHint": False}},
            [("movie_credits", [])],
        ),
    ],
)
async def test_an_output_schema_makes_a_tool_a_producer_unless_it_is_destructive(
    lookup: dict[str, Any], steps: list[tuple[str, list[int]]]
) -> None:
    goal = "List the cast of the movie Heat"
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post("/plan", json={"goal": goal, "tools": [lookup, CREDITS]})
    assert response.status_code == 200, response.text
    assert _steps(response.json()) == steps


async def test_the_mcp_servers_plan_tool_takes_the_same_shapes_and_the_same_422() -> None:
    app = create_app(
        make_settings(llm=False), http_client=httpx.AsyncClient(), rng=random.Random(7)
    )
    async with with_lifespan(app) as served:
        transport = httpx.ASGITransport(app=served, raise_app_exceptions=False)
        async with (
            httpx.AsyncClient(transport=transport) as http,
            streamable_http_client("http://localhost:8080/mcp", http_client=http) as (
                read,
                write,
                _,
            ),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            made = await session.call_tool("plan", {"goal": GOAL, "tools": _tools()})
            refused = await session.call_tool("plan", {"goal": GOAL, "tools": [{"tool": "x"}]})
    assert made.isError is False
    assert made.structuredContent is not None
    assert [step["required_arm"] for step in made.structuredContent["plan"]] == [
        "search_movie",
        "GetMovieCredit",
    ]
    assert refused.isError is True
    block = refused.content[0]
    assert isinstance(block, TextContent)
    assert block.text == f"invalid_request: tools.0: {ACCEPTED_SHAPES}; this item has tool"


async def test_a_tool_that_is_no_arm_is_named_by_its_place_and_name() -> None:
    tools = [ANTHROPIC_CREDITS, {"name": " padded ", "description": "Spaces around its name"}]
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post("/plan", json={"goal": GOAL, "tools": tools})
    assert response.status_code == 422
    (problem,) = response.json()["errors"]
    assert problem["loc"] == ["body", "tools"]
    assert problem["message"] == (
        "Value error, tool 1 (' padded '): id: Value error, an arm id has no leading or "
        "trailing spaces"
    )


def test_the_problem_quotes_a_dozen_keys_each_cut_short() -> None:
    item = {f"{n}{'k' * 100}": n for n in range(20)}
    keys = shape_problem(item).removeprefix(f"{ACCEPTED_SHAPES}; this item has ").split(", ")
    assert len(keys) == 12
    assert keys[0] == "0" + "k" * 38 + "…"
    assert shape_problem({}) == f"{ACCEPTED_SHAPES}; this item has no keys"
