"""`planner-arm serve | plan | validate | replan | get | check-config`."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer
from rich.console import Console

from planner_arm.cli_lifecycle import API_KEY_OPTION, URL_OPTION, register, remote_plan
from planner_arm.cli_support import (
    fail,
    in_process,
    json_object,
    planning_errors,
    print_plan,
    settings,
)
from planner_arm.config import Settings
from planner_arm.plan.schemas import PlanRequest, PlanResponse

cli = typer.Typer(
    name="planner-arm",
    help="Turns a goal into a validated, executable plan of arm steps.",
    no_args_is_help=True,
    add_completion=False,
)


@cli.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Address to bind (default from config)")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default from config)")] = None,
) -> None:
    """Start the HTTP service."""
    from planner_arm.api.app import create_app
    from planner_arm.api.server import build_server

    current = settings()
    app = create_app(current)
    server = build_server(app, current, host or current.server.host, port or current.server.port)
    server.run()


@cli.command()
def plan(
    goal: Annotated[str, typer.Argument(help="What to accomplish")],
    constraint: Annotated[
        list[str] | None, typer.Option("--constraint", "-c", help="A constraint (repeatable)")
    ] = None,
    context: Annotated[
        str | None,
        typer.Option("--context", help="What the planner should know, as a JSON object"),
    ] = None,
    request_id: Annotated[
        str | None, typer.Option("--request-id", help="Your id for this request (default: cli)")
    ] = None,
    strategy: Annotated[
        str, typer.Option(help="flat, hierarchical or iterative (see the README)")
    ] = "flat",
    url: Annotated[str | None, URL_OPTION] = None,
    api_key: Annotated[str | None, API_KEY_OPTION] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the full JSON response")] = False,
) -> None:
    """Plan one goal (in this process, or by the service at --url) and print the plan."""
    try:
        # The same checks as the HTTP API: the request model validates goal, context and id.
        request = PlanRequest(
            goal=goal,
            constraints=constraint or [],
            context=json_object(context, "--context") if context else {},
            request_id=request_id,
            strategy=strategy,  # checked by the model: flat, hierarchical or iterative
        )
        if url is not None:
            response = remote_plan(url, api_key, request)
        else:
            response = asyncio.run(_plan_here(settings(), request))
    except planning_errors() as exc:
        raise fail("cannot plan", exc) from None
    print_plan(response, goal, as_json)


async def _plan_here(current: Settings, request: PlanRequest) -> PlanResponse:
    from planner_arm.planning.strategies import StrategyPlanner

    async with in_process(current) as planner:
        return await StrategyPlanner(planner).plan(request, request.request_id or "cli")


@cli.command("check-config")
def check_config() -> None:
    """Validate the configuration and print what the service would run with."""
    current = settings()
    out = Console()
    out.print(
        f"ok: model={current.model.name} models={current.model.chain} "
        f"llm={'configured' if current.llm_enabled else 'disabled'} "
        f"steps={current.planning.min_steps}-{current.planning.max_steps} "
        f"timeout={current.planning.timeout_seconds}s arms={current.arm_ids}",
        highlight=False,
    )


register(cli)


def main() -> None:
    cli()
