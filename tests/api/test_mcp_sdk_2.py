"""The MCP server on mcp 2.x: `planner-arm mcp` run by a Python whose SDK is 2.x
(support/mcp_sdk.py), spoken to over stdio by the 1.x client of these tests, answers what the
server on 1.x answers in process: the same tools and schemas, plans, error texts,
progress and resources."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import McpError
from mcp.shared.memory import create_connected_server_and_client_session
from mcp.types import TextContent, TextResourceContents

from planner_arm.api.mcp_server import build_mcp_server
from support.factories import make_service
from support.mcp_sdk import python_with_mcp_2

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
GOAL = "Fix authentication bug and add tests"
_WHICH = (
    "import importlib.metadata as m, planner_arm.api.mcp_server as s; "
    "print(m.version('mcp'), s.__file__)"
)


@asynccontextmanager
async def over_stdio(python: Path) -> AsyncIterator[ClientSession]:
    # No model: the rule-based planner answers, the same plan in both processes.
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("OPENAI_", "LLM_", "PLANNER_"))
    }
    server = StdioServerParameters(command=str(python), args=["-m", "planner_arm", "mcp"], env=env)
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def answers(session: ClientSession) -> dict[str, Any]:
    """What an agent sees: the tools, a plan with its progress, errors, and its resource."""
    tools = [tool.model_dump(mode="json") for tool in (await session.list_tools()).tools]
    progress: list[str | None] = []

    async def report(done: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    made = await session.call_tool("plan", {"goal": GOAL}, progress_callback=report)
    assert made.structuredContent is not None
    plan_id = made.structuredContent["plan_id"]
    refused = [
        await session.call_tool(name, arguments)
        for name, arguments in (
            ("plan", {"goal": " "}),
            ("plan", {"goal": GOAL, "context": '{"a": ' * 100 + "1" + "}" * 100}),
            ("replan", {"goal": GOAL, "step_states": {}}),
            ("get_plan", {"plan_id": "no-such-plan"}),
            ("nope", {}),
        )
    ]
    nested = await session.call_tool(
        "replan",
        {"request": {"plan_id": plan_id, "step_states": {"1": "completed", "2": "failed"}}},
    )
    read = (await session.read_resource(f"plan://{plan_id}")).contents[0]  # type: ignore[arg-type]
    assert isinstance(read, TextResourceContents)
    with pytest.raises(McpError) as missing:
        await session.read_resource("plan://no-such-plan")  # type: ignore[arg-type]
    texts = []
    for result in refused:
        assert result.isError is True
        assert isinstance(result.content[0], TextContent)
        texts.append(result.content[0].text)
    assert nested.structuredContent is not None
    return {
        "tools": tools,
        "steps": [step["action"] for step in made.structuredContent["plan"]],
        "progress": progress,
        "errors": texts,
        "replanned": nested.structuredContent["parent_plan_id"] == plan_id,
        "resource": json.loads(read.text) == made.structuredContent,
        "missing": missing.value.error.message,
    }


@pytest.fixture
def python(request: pytest.FixtureRequest) -> Path:
    """The Python with mcp 2.x, checked to import that SDK and the service of this checkout."""
    python = python_with_mcp_2(request.config.cache)
    which = subprocess.run(
        [str(python), "-c", _WHICH], capture_output=True, text=True, check=True, cwd="/"
    ).stdout.split()
    assert which[0].startswith("2.")
    assert Path(which[1]).is_relative_to(REPO / "src")
    return python


async def test_the_server_on_mcp_2_answers_as_on_mcp_1(python: Path) -> None:
    async with over_stdio(python) as session:
        on_2 = await answers(session)
    server = build_mcp_server(make_service(llm=False))
    async with create_connected_server_and_client_session(server) as session:
        on_1 = await answers(session)

    assert on_2 == on_1
    assert {tool["name"] for tool in on_2["tools"]} == {
        "plan",
        "replan",
        "validate_plan",
        "expand_step",
        "specialize_step",
        "get_plan",
    }
    assert len(on_2["progress"]) == len(on_2["steps"]) > 1
    for number, (message, action) in enumerate(
        zip(on_2["progress"], on_2["steps"], strict=True), 1
    ):
        assert message is not None
        assert message.startswith(f"step {number}: {action} (")
    assert on_2["errors"] == [
        "invalid_request: goal: Value error, goal must not be blank",
        "invalid_request: context: the JSON text nests arrays and objects more than 64 deep",
        "invalid_request: Value error, give exactly one of previous and plan_id",
        "plan_not_found: No plan with id 'no-such-plan' is stored (or it has expired).",
        "Unknown tool: nope",
    ]
    assert on_2["replanned"] is True
    assert on_2["resource"] is True
    assert on_2["missing"] == (
        "plan_not_found: No plan with id 'no-such-plan' is stored (or it has expired)."
    )
