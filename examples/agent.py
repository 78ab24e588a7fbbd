"""An agent over a small MCP server of its own: it plans a goal over the server's tools,
shows the plan, asks a person before each step that writes, runs the plan (data flowing
between steps, a failed call replanned) and says what was done.

    python examples/agent.py [PLANNER_URL] [GOAL]     # default http://127.0.0.1:8080

The server is examples/library_mcp.py, started over stdio; its first hold fails, as a busy
service does. Each write is asked about on the terminal (answer y to go ahead); the plan is
also a page, at the address printed under it. Runs with mcp 1.x and 2.x.
"""

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters, stdio_client

from planner_arm.client import AsyncPlannerClient, PlanResponse, PlanStep, RunEvent, run_plan

URL = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080"
GOAL = sys.argv[2] if len(sys.argv) > 2 else "Place a hold on Dune for alice@example.com"
SERVER = StdioServerParameters(
    command=sys.executable, args=[str(Path(__file__).with_name("library_mcp.py"))]
)


def show(plan: PlanResponse) -> None:
    print(f"plan {plan.plan_id} (version {plan.version}, {plan.metadata.source}):")
    for step in plan.plan:
        writes = " [writes]" if step.writes else ""
        after = f" after {step.depends_on}" if step.depends_on else ""
        print(f"  {step.step}. {step.required_arm}{writes}{after}: {json.dumps(step.input)}")
    print(f"  as a page: {URL}/plan/{plan.plan_id}")


async def ask_a_person(step: PlanStep) -> bool:
    """A write goes ahead only when the person at the terminal says y."""
    question = (
        f"step {step.step} {step.required_arm} writes {json.dumps(step.input)}: go ahead? [y/N] "
    )
    answer = await asyncio.to_thread(input, question)
    print()
    return answer.strip().lower() in {"y", "yes"}


def report(event: RunEvent) -> None:
    if event.kind == "replanned":
        print(f"replanned after a failure: plan {event.plan_id}")
    elif event.outcome is not None:
        ended = event.outcome
        why = f": {ended.error}" if ended.error else ""
        print(f"  step {ended.step} {ended.tool} {ended.status}{why}")


def done(value: Any) -> str:
    return json.dumps(value)[:100]


async def main() -> None:
    async with stdio_client(SERVER) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        async with AsyncPlannerClient(URL) as planner:
            tools = (await session.list_tools()).tools
            plan = await planner.plan(GOAL, tools=tools, specialize=True)
            show(plan)
            run = await run_plan(
                planner, session, plan, approve=ask_a_person, on_progress=report, max_replans=2
            )
    print("done:" if run.completed else f"stopped: {run.error or 'some steps could not run'}")
    for step in run.steps:
        what = done(step.result) if step.status == "completed" else step.error
        print(f"  {step.step}. {step.tool} {step.status}: {what}")


asyncio.run(main())
