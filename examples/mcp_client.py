"""An agent's loop on planner-arm's MCP server, with the official SDK's own client: list the
tools, plan a goal (each step reported as progress as it is accepted), then replan after a
step failed, by the plan's id and each step's state.

    python examples/mcp_client.py [URL]     # default http://127.0.0.1:8080/mcp

It runs as it is with the SDK the service uses (mcp 1.x) and with the one `pip install mcp`
gets today (2.x).
"""

import asyncio
import json
import sys
from typing import Any

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

URL = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080/mcp"
GOAL = "Fix authentication bug and add tests"


def answer(result: Any) -> Any:
    """A tool's answer. 2.x names it `structured_content`, 1.x `structuredContent`; both
    carry it as JSON text too. A tool error's text is its code, then what went wrong."""
    text = result.content[0].text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise SystemExit(text) from None


async def main() -> None:
    # The client yields (read, write) in 2.x, and a session-id getter after them in 1.x.
    async with (
        streamable_http_client(URL) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = (await session.list_tools()).tools
        print("tools:", ", ".join(sorted(tool.name for tool in tools)))

        async def report(progress: float, total: float | None, message: str | None) -> None:
            print(f"progress {progress:.0f}: {message}")

        made = await session.call_tool("plan", {"goal": GOAL}, progress_callback=report)
        plan = answer(made)

        states = {"1": "completed", "2": {"status": "failed", "error": "the tests fail"}}
        revised = answer(
            await session.call_tool("replan", {"plan_id": plan["plan_id"], "step_states": states})
        )
        print(f"replanned, version {revised['version']} of {revised['goal']!r}:")
        print("  diff:", revised["diff"])
        for step in revised["plan"]:
            print(f"  {step['step']}. {step['action']} [{step['required_arm']}]")


asyncio.run(main())
