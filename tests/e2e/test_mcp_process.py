"""The MCP server as a desktop agent host and a remote agent reach it, with the SDK's own
client: `planner-arm mcp` started over stdio, and the real service process's /mcp over
loopback HTTP behind its API key (the stub model behind both)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent, TextResourceContents

from support.invariants import assert_valid_plan
from support.service import free_port, serving, start_service, wait_for_line
from support.stub_model import Held, StubLLM

pytestmark = pytest.mark.slow

GOAL = "Fix authentication bug and add tests"
KEY = "key-one-0123456789"
TOOLS = {"plan", "replan", "validate_plan", "expand_step", "specialize_step", "get_plan"}


@pytest.fixture
def url(stub: StubLLM) -> Iterator[str]:
    for http in serving({"OPENAI_BASE_URL": stub.base_url, "PLANNER_API_KEYS": KEY}):
        yield str(http.base_url).rstrip("/") + "/mcp"


@asynccontextmanager
async def over_http(url: str, key: str) -> AsyncIterator[ClientSession]:
    headers = {"authorization": f"Bearer {key}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def an_agents_loop(session: ClientSession) -> None:
    """What an agent does: list the tools, plan with progress, replan after a failed step,
    read the plan back as a resource, and get a tool error for a bad request."""
    tools = {tool.name for tool in (await session.list_tools()).tools}
    steps_seen: list[str] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        steps_seen.append(message or "")

    made = await session.call_tool("plan", {"goal": GOAL}, progress_callback=progress)
    plan = made.structuredContent
    assert plan is not None
    states = {"1": {"status": "completed"}, "2": {"status": "failed", "error": "tests broke"}}
    revised = await session.call_tool(
        "replan", {"goal": GOAL, "plan_id": plan["plan_id"], "step_states": states}
    )
    read = await session.read_resource(f"plan://{plan['plan_id']}")  # type: ignore[arg-type]
    bad = await session.call_tool("replan", {"goal": GOAL, "step_states": {}})

    assert tools == TOOLS
    assert plan["metadata"]["source"] == "llm"
    assert_valid_plan(plan)
    assert [line.split(":")[0] for line in steps_seen if line.startswith("step")] == [
        f"step {step['step']}" for step in plan["plan"]
    ]
    assert revised.isError is False
    assert revised.structuredContent is not None
    assert revised.structuredContent["parent_plan_id"] == plan["plan_id"]
    assert_valid_plan(revised.structuredContent, consecutive=False)
    content = read.contents[0]
    assert isinstance(content, TextResourceContents)
    assert json.loads(content.text) == plan
    assert bad.isError is True
    assert isinstance(bad.content[0], TextContent)
    assert bad.content[0].text.startswith("invalid_request: ")
    assert "give exactly one of previous and plan_id" in bad.content[0].text


async def test_an_agent_over_streamable_http(url: str) -> None:
    async with over_http(url, KEY) as session:
        await an_agents_loop(session)


async def test_a_wrong_key_is_refused_over_http(url: str) -> None:
    async with httpx.AsyncClient() as http:
        refused = await http.post(
            url,
            headers={"x-api-key": "not-the-key", "accept": "application/json, text/event-stream"},
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        )
    assert refused.status_code == 401
    assert refused.json()["error"] == "unauthorized"
    # The SDK's client raises the HTTP error from its task group, at the handshake.
    with pytest.raises(ExceptionGroup) as failed:
        async with over_http(url, "not-the-key"):
            pass
    (error,) = failed.value.exceptions
    assert isinstance(error, httpx.HTTPStatusError)
    assert error.response.status_code == 401


async def test_an_agent_over_stdio(stub: StubLLM) -> None:
    command = Path(sys.executable).with_name("planner-arm")
    env = {**os.environ, "OPENAI_BASE_URL": stub.base_url}
    server = StdioServerParameters(command=str(command), args=["mcp"], env=env)
    async with (
        stdio_client(server) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        await an_agents_loop(session)


async def test_a_tool_call_in_flight_at_sigterm_gets_its_answer(stub: StubLLM) -> None:
    port = free_port()
    process, lines, reader = start_service(port, {"OPENAI_BASE_URL": stub.base_url})
    release = threading.Event()
    stub.script(Held(release))
    try:
        async with over_http(f"http://127.0.0.1:{port}/mcp", KEY) as session:
            # The SDK's client checks an answer against the tool's listed output schema,
            # listing the tools first if it has not: after the signal nothing new connects.
            await session.list_tools()
            call = asyncio.create_task(session.call_tool("plan", {"goal": GOAL}))
            assert await asyncio.to_thread(stub.arrived.wait, 10)  # waiting on the model
            process.send_signal(signal.SIGTERM)
            said: list[str] = []
            await asyncio.to_thread(wait_for_line, lines, "Waiting for connections to close", said)
            release.set()
            result = await asyncio.wait_for(call, 15)
        assert process.wait(timeout=10) in (0, -15)
    finally:
        release.set()
        process.kill()
        reader.join(timeout=5)
    assert result.isError is False
    assert result.structuredContent is not None
    assert result.structuredContent["metadata"]["source"] == "llm"
