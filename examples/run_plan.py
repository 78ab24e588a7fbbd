"""Plan a goal over an MCP server's tools and run the plan with `run_plan`: the data flows
between steps, the write waits for a yes, a failed call is replanned.

    python examples/run_plan.py [PLANNER_URL]     # default http://127.0.0.1:8080

It starts its own MCP server (examples/library_mcp.py) over stdio, and runs as it is with
mcp 1.x and 2.x.
"""

import asyncio
import sys
from pathlib import Path

from mcp import ClientSession, StdioServerParameters, stdio_client

from planner_arm.client import AsyncPlannerClient, PlanStep, run_plan

URL = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080"
SERVER = StdioServerParameters(
    command=sys.executable, args=[str(Path(__file__).with_name("library_mcp.py"))]
)
GOAL = "Place a hold on Dune for alice@example.com"


def approve(step: PlanStep) -> bool:
    """Asked before each step that writes; a person would be asked here."""
    print(f"approve step {step.step}? {step.required_arm} {step.input}")
    return step.required_arm == "place_hold"


async def main() -> None:
    async with stdio_client(SERVER) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        async with AsyncPlannerClient(URL) as planner:
            tools = (await session.list_tools()).tools
            plan = await planner.plan(GOAL, tools=tools, specialize=True)
            for planned in plan.plan:
                print("planned", planned.step, planned.required_arm, planned.input)
            run = await run_plan(planner, session, plan, approve=approve, max_replans=2)
    for ended in run.history:
        print("before the replan:", ended.step, ended.tool, ended.status)
    for ran in run.steps:
        print(ran.step, ran.tool, ran.status, ran.arguments)
    print(f"replans: {run.replans}, hold: {run.steps[-1].result}")


asyncio.run(main())
