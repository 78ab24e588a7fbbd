"""The MCP server in the app, spoken to by the SDK's own client over streamable HTTP (the app
in process through an ASGI transport, its lifespan running; no model, so every plan is the
rule-based planner's): tools with the service's schemas, the same plans as the HTTP API,
plans as resources, progress per step, errors as tool errors, and the API keys."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import Any
from unittest.mock import ANY

import httpx
import pytest
import respx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server.fastmcp.exceptions import ToolError
from mcp.shared.exceptions import McpError
from mcp.shared.memory import create_connected_server_and_client_session
from mcp.types import TextContent, TextResourceContents

from planner_arm.api.app import create_app
from planner_arm.api.hosts import LOOPBACK_HOSTS
from planner_arm.api.mcp import mcp_transport_security
from planner_arm.api.mcp_server import build_mcp_server, tool_error_text
from planner_arm.config import Settings
from planner_arm.errors import PlanNotFound
from planner_arm.plan.schemas import PlanRequest, PlanResponse
from support.app import make_settings, with_lifespan
from support.factories import make_service
from support.invariants import assert_valid_plan
from support.sse import pieces_of, streamed

GOAL = "Fix authentication bug and add tests"
BASE = "http://localhost:8080"  # a loopback host: what /mcp answers to out of the box
KEY = "key-one-0123456789"
TOOLS = {"plan", "replan", "validate_plan", "expand_step", "specialize_step", "get_plan"}


@asynccontextmanager
async def served_app(settings: Settings | None = None) -> AsyncIterator[httpx.AsyncClient]:
    """The app with its lifespan running, and an HTTP client of it (no key of its own). Not a
    fixture: the MCP session manager's task group must close in the task that opened it."""
    settings = settings or make_settings(llm=False)
    app = create_app(settings, http_client=httpx.AsyncClient(), rng=random.Random(7))
    async with with_lifespan(app) as served:
        transport = httpx.ASGITransport(app=served, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as http:
            yield http


@asynccontextmanager
async def mcp_session(
    http: httpx.AsyncClient,
    key: str | None = None,
    base: str = BASE,
    origin: str | None = None,
) -> AsyncIterator[ClientSession]:
    """An initialized SDK client session with the app's /mcp at `base` (its Host), sending
    `key` and `origin` if given."""
    headers = {"authorization": f"Bearer {key}"} if key else {}
    if origin is not None:
        headers["origin"] = origin
    async with (
        httpx.AsyncClient(transport=http._transport, headers=headers) as client,
        streamable_http_client(f"{base}/mcp", http_client=client) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def error_text(result: Any) -> str:
    assert result.isError is True
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def test_the_tools_carry_the_services_own_schemas() -> None:
    async with served_app() as http:
        async with mcp_session(http) as session:
            listed = (await session.list_tools()).tools
        tools = {tool.name: tool for tool in listed}
        assert set(tools) == TOOLS
        plan = tools["plan"]
        # The endpoint body's fields are the tool's own arguments, with the config's limits.
        assert set(plan.inputSchema["properties"]) == set(PlanRequest.model_fields)
        assert plan.inputSchema["required"] == ["goal"]
        assert plan.inputSchema["properties"]["goal"]["maxLength"] == 8_000
        assert plan.outputSchema is not None
        assert set(PlanResponse.model_fields) <= set(plan.outputSchema["properties"])
        assert tools["get_plan"].annotations is not None
        assert tools["get_plan"].annotations.readOnlyHint is True


async def test_server_info_names_the_service_and_its_version() -> None:
    async with served_app() as http:
        async with (
            httpx.AsyncClient(transport=http._transport) as client,
            streamable_http_client(f"{BASE}/mcp", http_client=client) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            result = await session.initialize()
        health = (await http.get("/health")).json()
    assert result.serverInfo.name == "planner-arm"
    assert result.serverInfo.version == health["version"] == version("planner-arm")


async def test_plan_answers_the_plan_the_http_api_stores() -> None:
    async with served_app() as http:
        async with mcp_session(http) as session:
            result = await session.call_tool("plan", {"goal": GOAL})
        assert result.isError is False
        assert result.structuredContent is not None
        answer = PlanResponse.model_validate(result.structuredContent)
        assert_valid_plan(result.structuredContent)
        stored = await http.get(f"/plan/{answer.plan_id}")
        assert stored.status_code == 200
        assert PlanResponse.model_validate(stored.json()) == answer
        # The same request to the HTTP API is the same plan (the rule-based planner's, cached).
        direct = await http.post("/plan", json={"goal": GOAL})
        assert [step["action"] for step in direct.json()["plan"]] == [s.action for s in answer.plan]


async def test_replan_after_a_failed_step_keeps_the_finished_one() -> None:
    async with served_app() as http:
        async with mcp_session(http) as session:
            first = await session.call_tool("plan", {"goal": GOAL})
            assert first.structuredContent is not None
            plan_id = first.structuredContent["plan_id"]
            states = {"1": {"status": "completed", "output": "found"}, "2": {"status": "failed"}}
            result = await session.call_tool(
                "replan", {"goal": GOAL, "plan_id": plan_id, "step_states": states}
            )
            fetched = await session.call_tool("get_plan", {"plan_id": plan_id})
        assert result.isError is False
        revised = result.structuredContent
        assert revised is not None
        assert_valid_plan(revised, consecutive=False)
        assert revised["parent_plan_id"] == plan_id
        assert revised["plan"][0] == first.structuredContent["plan"][0]
        assert fetched.structuredContent == first.structuredContent


async def test_an_agent_calls_each_tool_with_the_fields_it_knows() -> None:
    async with served_app() as http, mcp_session(http) as session:
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        made = await session.call_tool(
            "plan",
            # A list sent as JSON text, as some agent hosts send every argument, is read too.
            {"goal": GOAL, "constraints": '["Do not touch the database schema"]'},
        )
        assert made.structuredContent is not None
        plan_id = made.structuredContent["plan_id"]
        revised = await session.call_tool(
            "replan", {"plan_id": plan_id, "step_states": {"1": "completed", "2": "failed"}}
        )
        expanded = await session.call_tool("expand_step", {"plan_id": plan_id, "step": 2})
        checked = await session.call_tool("validate_plan", {"plan": made.structuredContent["plan"]})
    assert made.isError is False
    assert made.structuredContent["constraints"] == ["Do not touch the database schema"]
    # Revising the plan by its id: the goal and constraints are the plan's own.
    for answer in (revised, expanded):
        assert answer.isError is False, answer.content
        assert answer.structuredContent is not None
        assert answer.structuredContent["goal"] == GOAL
        assert answer.structuredContent["constraints"] == ["Do not touch the database schema"]
        assert answer.structuredContent["parent_plan_id"] == plan_id
    assert checked.structuredContent is not None
    assert checked.structuredContent["valid"] is True
    for name in ("replan", "expand_step"):
        assert "goal" not in listed[name].inputSchema.get("required", [])


async def test_the_tools_speak_to_an_agent() -> None:
    async with served_app() as http, mcp_session(http) as session:
        listed = (await session.list_tools()).tools
    for tool in listed:
        assert tool.description is not None
        assert "POST" not in tool.description, tool.name
        assert "GET /" not in tool.description, tool.name
        for field, schema in tool.inputSchema["properties"].items():
            assert schema.get("description"), f"{tool.name}.{field} is not described"
    plan = next(tool for tool in listed if tool.name == "plan")
    assert plan.description is not None
    assert plan.description.startswith("Break a goal into a validated, executable plan")


async def test_the_request_nested_as_before_is_still_read() -> None:
    async with served_app() as http, mcp_session(http) as session:
        nested = await session.call_tool("plan", {"request": {"goal": GOAL}})
        flat = await session.call_tool("plan", {"goal": GOAL})
        blank = await session.call_tool("plan", {"request": {"goal": " "}})
        both = await session.call_tool("plan", {"request": {"goal": GOAL}, "goal": GOAL})
    assert nested.isError is False
    assert nested.structuredContent is not None
    assert flat.structuredContent is not None
    assert nested.structuredContent["plan"] == flat.structuredContent["plan"]
    assert error_text(blank) == "invalid_request: goal: Value error, goal must not be blank"
    assert error_text(both) == "invalid_request: request: Extra inputs are not permitted"


async def test_a_problem_of_the_whole_request_is_named_without_a_location() -> None:
    async with served_app() as http, mcp_session(http) as session:
        neither = await session.call_tool("replan", {"goal": GOAL, "step_states": {}})
        unknown_plan = await session.call_tool("replan", {"plan_id": "no-such-plan"})
        no_goal = await session.call_tool("expand_step", {"step": 2})
    assert error_text(neither) == (
        "invalid_request: Value error, give exactly one of previous and plan_id"
    )
    assert error_text(unknown_plan) == (
        "plan_not_found: No plan with id 'no-such-plan' is stored (or it has expired)."
    )
    assert error_text(no_goal) == "invalid_request: goal: Field required"


async def test_a_plan_is_a_resource() -> None:
    async with served_app() as http:
        async with mcp_session(http) as session:
            templates = (await session.list_resource_templates()).resourceTemplates
            made = await session.call_tool("plan", {"goal": GOAL})
            assert made.structuredContent is not None
            plan_id = made.structuredContent["plan_id"]
            read = await session.read_resource(f"plan://{plan_id}")  # type: ignore[arg-type]
        assert [template.uriTemplate for template in templates] == ["plan://{plan_id}"]
        content = read.contents[0]
        assert isinstance(content, TextResourceContents)
        assert content.mimeType == "application/json"
        assert json.loads(content.text) == made.structuredContent


async def test_a_missing_plan_resource_says_its_error_once() -> None:
    async with served_app() as http, mcp_session(http) as session:
        with pytest.raises(McpError) as failed:
            await session.read_resource("plan://no-such-plan")  # type: ignore[arg-type]
    assert failed.value.error.message == (
        "plan_not_found: No plan with id 'no-such-plan' is stored (or it has expired)."
    )


async def test_each_step_is_reported_as_progress() -> None:
    async with served_app() as http:
        reported: list[tuple[float, str | None]] = []

        async def progress(done: float, total: float | None, message: str | None) -> None:
            reported.append((done, message))

        async with mcp_session(http) as session:
            result = await session.call_tool("plan", {"goal": GOAL}, progress_callback=progress)
            quiet = await session.call_tool("plan", {"goal": "Write the release notes"})
        assert result.structuredContent is not None
        steps = result.structuredContent["plan"]
        assert [done for done, _ in reported] == [float(n) for n in range(1, len(steps) + 1)]
        assert [message for _, message in reported] == [
            f"step {step['step']}: {step['action']} ({step['required_arm']})" for step in steps
        ]
        assert quiet.isError is False  # without a progressToken: the plain answer


async def test_a_bad_request_is_a_tool_error_and_the_session_goes_on() -> None:
    async with served_app() as http:
        async with mcp_session(http) as session:
            blank = await session.call_tool("plan", {"goal": "   "})
            missing = await session.call_tool("get_plan", {"plan_id": "no-such-plan"})
            unknown_step = await session.call_tool(
                "expand_step", {"goal": GOAL, "plan_id": "no-such-plan", "step": 2}
            )
            after = await session.call_tool("plan", {"goal": GOAL})
        assert error_text(blank) == "invalid_request: goal: Value error, goal must not be blank"
        assert error_text(missing) == (
            "plan_not_found: No plan with id 'no-such-plan' is stored (or it has expired)."
        )
        assert error_text(unknown_step).startswith("plan_not_found: ")
        assert after.isError is False


async def test_a_tool_schema_that_refers_outside_itself_is_a_tool_error() -> None:
    remote = "http://127.0.0.1:9/unit.json"
    tool = {
        "name": "get_weather",
        "inputSchema": {"type": "object", "properties": {"unit": {"$ref": remote}}},
    }
    async with served_app() as http, mcp_session(http) as session:
        refused = await session.call_tool(
            "plan", {"goal": "Get the weather in Paris", "tools": [tool], "specialize": True}
        )
    text = error_text(refused)
    assert text.startswith("invalid_request: tools: ")
    assert f"tool 0 ('get_weather'): inputSchema: $ref '{remote}' points outside" in text


async def test_an_argument_sent_as_json_text_is_held_to_the_bodys_nesting_limit() -> None:
    # 30 KB, under the size limit: the body's check sees one string, the parser would recurse.
    deep_text = '{"a": ' * 5000 + "1" + "}" * 5000
    settings = make_settings(llm=False, server={"max_json_depth": 4})
    over_text = json.dumps({"a": {"b": [[1]]}})  # the arguments, context, a, b, [1]: five
    async with served_app(settings) as http, mcp_session(http) as session:
        deep = await session.call_tool("plan", {"goal": GOAL, "context": deep_text})
        over = await session.call_tool("plan", {"goal": GOAL, "context": over_text})
        nested_over = await session.call_tool(
            "plan", {"request": {"goal": GOAL, "context": over_text}}
        )
        within = await session.call_tool("plan", {"goal": GOAL, "context": '{"a": [[1]]}'})
    refusal = "invalid_request: context: the JSON text nests arrays and objects more than 4 deep"
    assert error_text(deep) == error_text(over) == error_text(nested_over) == refusal
    assert within.isError is False


async def test_arguments_over_stdio_are_held_to_the_bodys_nesting_limit() -> None:
    # No HTTP body to measure: the arguments arrive as objects, parsed by the transport.
    runtime = make_service(llm=False, server={"max_json_depth": 4})
    over = {"a": {"b": [[1]]}}
    server = build_mcp_server(runtime)
    async with create_connected_server_and_client_session(server) as session:
        refused = await session.call_tool("plan", {"goal": GOAL, "context": over})
        within = await session.call_tool("plan", {"goal": GOAL, "context": {"a": {"b": [1]}}})
    assert error_text(refused) == (
        "invalid_request: context: the value nests arrays and objects more than 4 deep"
    )
    assert within.isError is False


async def test_a_broken_plan_sent_back_is_the_same_tool_error_for_every_tool() -> None:
    async with served_app() as http, mcp_session(http) as session:
        made = await session.call_tool("plan", {"goal": GOAL})
        assert made.structuredContent is not None
        broken = json.loads(json.dumps(made.structuredContent))
        broken["plan"][0]["acceptance_criteria"] = [""]
        states = {"1": "completed", "2": "failed"}
        answers = [
            await session.call_tool(
                "replan", {"goal": GOAL, "previous": broken, "step_states": states}
            ),
            await session.call_tool("expand_step", {"goal": GOAL, "previous": broken, "step": 2}),
            await session.call_tool("specialize_step", {"previous": broken, "step": 2}),
        ]
    texts = {error_text(result) for result in answers}
    assert texts == {
        "invalid_previous: the plan sent back is not one to work on: step 1: no non-empty "
        "acceptance criterion"
    }


async def test_mcp_is_behind_the_api_keys() -> None:
    settings = make_settings(llm=False, auth={"api_keys": [KEY]})
    async with served_app(settings) as http:
        refused = await http.post(
            "/mcp",
            headers={"authorization": "Bearer wrong-key", "accept": "application/json"},
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        )
        missing = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        no_stream = await http.get("/mcp", headers={"authorization": f"Bearer {KEY}"})
        async with mcp_session(http, key=KEY) as session:
            tools = (await session.list_tools()).tools
    assert refused.status_code == 401
    assert refused.json()["error"] == "unauthorized"
    assert refused.json()["detail"] == "the API key is not valid"
    assert refused.headers["www-authenticate"].startswith("Bearer")
    assert (missing.status_code, missing.json()["error"]) == (401, "unauthorized")
    # Stateless: no server-to-client stream to open, so a GET is the protocol's 405.
    assert (no_stream.status_code, no_stream.json()["error"]) == (405, "method_not_allowed")
    assert {tool.name for tool in tools} == TOOLS


LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
MCP_ACCEPT = {"accept": "application/json, text/event-stream"}


@pytest.mark.parametrize(
    ("headers", "status", "error"),
    [
        # A page of evil.example whose name now resolves to 127.0.0.1 (DNS rebinding).
        (
            {"host": "evil.example:8080", "origin": "http://evil.example:8080"},
            421,
            "host_not_allowed",
        ),
        ({"host": "evil.example"}, 421, "host_not_allowed"),
        ({"host": "localhost.evil.example:8080"}, 421, "host_not_allowed"),
        # A page of another origin calling the loopback address directly.
        ({"host": "127.0.0.1:8080", "origin": "http://evil.example"}, 403, "origin_not_allowed"),
        ({"host": "localhost:8080", "origin": "null"}, 403, "origin_not_allowed"),
        (
            {"host": "localhost:8080", "origin": "http://localhost.evil.example"},
            403,
            "origin_not_allowed",
        ),
    ],
)
@pytest.mark.parametrize("keys", [[], [KEY]])
async def test_a_foreign_host_or_origin_is_refused_before_the_key(
    headers: dict[str, str], status: int, error: str, keys: list[str]
) -> None:
    async with served_app(make_settings(llm=False, auth={"api_keys": keys})) as http:
        sent = {**MCP_ACCEPT, **headers, "authorization": f"Bearer {KEY}"}
        refused = await http.post("/mcp", json=LIST_TOOLS, headers=sent)
        planned = await http.post("/plan", json={"goal": GOAL}, headers=sent)
    assert refused.status_code == status
    body = refused.json()
    assert body["error"] == error
    assert set(body) == {"error", "detail", "request_id"}
    assert "evil" not in body["detail"]  # the caller's input is not echoed
    if keys:  # the key guards the HTTP API: a page has none to send
        assert planned.status_code == 200
    else:  # nothing else does: the same rule as /mcp
        assert (planned.status_code, planned.json()) == (status, {**body, "request_id": ANY})


@pytest.mark.parametrize(
    ("base", "origin"),
    [
        ("http://127.0.0.1:8080", None),
        ("http://localhost", "http://localhost:3000"),
        ("http://[::1]:9000", "http://[::1]:9000"),
        ("http://127.0.0.1:8080", "https://127.0.0.1"),
    ],
)
async def test_loopback_hosts_and_origins_are_served_out_of_the_box(
    base: str, origin: str | None
) -> None:
    async with served_app() as http, mcp_session(http, base=base, origin=origin) as session:
        tools = (await session.list_tools()).tools
    assert {tool.name for tool in tools} == TOOLS


async def test_the_configured_and_the_bound_hosts_are_served_too() -> None:
    server = {
        "host": "planner.internal",
        "mcp_allowed_hosts": ["planner-arm.octollm.svc", "10.0.0.7"],
        "cors_allow_origins": ["https://console.example"],
    }
    accepted = [
        ("http://planner.internal:8080", None),
        ("http://planner-arm.octollm.svc:8080", "http://planner-arm.octollm.svc:8080"),
        ("http://10.0.0.7", None),
        ("http://localhost:8080", "https://console.example"),  # a trusted CORS origin
    ]
    async with served_app(make_settings(llm=False, server=server)) as http:
        for base, origin in accepted:
            async with mcp_session(http, base=base, origin=origin) as session:
                assert {tool.name for tool in (await session.list_tools()).tools} == TOOLS
        other = await http.post(
            "/mcp", json=LIST_TOOLS, headers={**MCP_ACCEPT, "host": "planner.example:8080"}
        )
    assert (other.status_code, other.json()["error"]) == (421, "host_not_allowed")


@pytest.mark.parametrize(
    ("bound", "named"),
    [
        ("0.0.0.0", None),  # noqa: S104 (a setting: nothing is bound here)
        ("::", None),
        ("127.0.0.1", None),  # loopback is there anyway
        ("fd00::7", "[fd00::7]"),
        ("planner.internal", "planner.internal"),
    ],
)
def test_the_bound_host_is_served_unless_it_is_a_wildcard(bound: str, named: str | None) -> None:
    server = make_settings(llm=False, server={"host": bound}).server
    hosts = mcp_transport_security(server).allowed_hosts
    loopback = [form for name in LOOPBACK_HOSTS for form in (name, f"{name}:*")]
    assert hosts == loopback + ([named, f"{named}:*"] if named else [])


def test_an_unexpected_failure_is_named_but_not_shown() -> None:
    failure = RuntimeError("secret internals")
    assert tool_error_text(failure, ToolError("x")) == (
        "internal_error: the planner failed unexpectedly; the service log has the cause"
    )
    assert tool_error_text(PlanNotFound("gone"), ToolError("x")) == "plan_not_found: gone"
    assert tool_error_text(None, ToolError("Unknown tool: nope")) == "Unknown tool: nope"


def test_the_mcp_sdk_is_imported_only_when_mcp_is_first_called() -> None:
    """A service nobody calls over MCP never loads the SDK (nor the server-sent events library
    it answers with): plans are made without it; the first call to /mcp loads it and is
    answered."""
    import subprocess
    import sys

    script = """
import asyncio, json, sys
import httpx
sys.path.insert(0, "tests")
from support.app import make_settings, with_lifespan
from support.factories import make_service
from planner_arm.api.app import create_app

def loaded():
    return [name in sys.modules for name in ("mcp", "sse_starlette")]

async def main():
    app = create_app(make_settings(llm=False), http_client=httpx.AsyncClient())
    async with with_lifespan(app) as served:
        transport = httpx.ASGITransport(app=served)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            planned = await http.post("/plan", json={"goal": "Fix the login bug"})
            before = loaded()
            hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-03-26", "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}}}
            headers = {"accept": "application/json, text/event-stream"}
            answered = await http.post("/mcp", json=hello, headers=headers)
    print(json.dumps([planned.status_code, before, answered.status_code, loaded()]))

asyncio.run(main())
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == [200, [False, False], 200, [True, True]]


async def test_progress_names_the_requests_own_tools(chat_route: respx.Route) -> None:
    tools = [
        {"id": "search_movie", "description": "Search movies by title and return their ids"},
        {"id": "GetMovieCredit", "description": "Get the cast and crew of a movie by its id"},
    ]
    plan = {
        "plan": [
            {"step": 1, "tool": "search_movie", "action": "find the id", "depends_on": []},
            {"step": 2, "tool": "get_movie_credit", "action": "list the cast", "depends_on": [1]},
        ]
    }
    chat_route.return_value = streamed(pieces_of(json.dumps(plan)))
    reported: list[str | None] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        reported.append(message)

    goal = "Find the movie Titanic, then list its cast"
    async with served_app(make_settings()) as http, mcp_session(http) as session:
        result = await session.call_tool(
            "plan", {"goal": goal, "tools": tools}, progress_callback=progress
        )
    assert result.isError is False, result.content
    assert result.structuredContent is not None
    assert [step["required_arm"] for step in result.structuredContent["plan"]] == [
        "search_movie",
        "GetMovieCredit",
    ]
    # Each step went out once, as written, its tool read among the request's: none withdrawn.
    assert reported == [
        "step 1: find the id (search_movie)",
        "step 2: list the cast (GetMovieCredit)",
    ]
