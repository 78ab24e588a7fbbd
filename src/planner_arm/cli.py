"""`planner-arm serve | plan | check-config`."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from planner_arm.config import ConfigError, Settings, load_settings
from planner_arm.plan.schemas import PlanRequest, PlanResponse

cli = typer.Typer(
    name="planner-arm",
    help="Turns a goal into a validated, executable plan of arm steps.",
    no_args_is_help=True,
    add_completion=False,
)


def _err() -> Console:
    return Console(stderr=True)


def _settings() -> Settings:
    try:
        return load_settings()
    except ConfigError as exc:
        _err().print(f"[red]configuration error:[/red] {exc}", highlight=False)
        raise typer.Exit(2) from None


@cli.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Address to bind (default from config)")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default from config)")] = None,
) -> None:
    """Start the HTTP service."""
    from planner_arm.api.app import create_app
    from planner_arm.api.server import build_server

    settings = _settings()
    app = create_app(settings)
    server = build_server(app, settings, host or settings.server.host, port or settings.server.port)
    server.run()


async def _plan_once(settings: Settings, request: PlanRequest, request_id: str) -> PlanResponse:
    from planner_arm.api.state import service_version
    from planner_arm.llm.client import LLMClient
    from planner_arm.llm.prompts import PROMPT_VERSION
    from planner_arm.logging import configure_logging
    from planner_arm.metrics import PlannerMetrics
    from planner_arm.planning.planner import PlannerArm

    configure_logging("WARNING", "console")
    llm = LLMClient(settings) if settings.llm_enabled else None
    planner = PlannerArm(settings, llm, PlannerMetrics(service_version(), PROMPT_VERSION))
    try:
        return await planner.plan(request, request_id)
    finally:
        if llm is not None:
            await llm.aclose()


@cli.command()
def plan(
    goal: Annotated[str, typer.Argument(help="What to accomplish")],
    constraint: Annotated[
        list[str] | None, typer.Option("--constraint", "-c", help="A constraint (repeatable)")
    ] = None,
    context: Annotated[
        str | None,
        typer.Option(
            "--context", help='What the planner should know, as a JSON object: \'{"repo": "api"}\''
        ),
    ] = None,
    request_id: Annotated[
        str | None, typer.Option("--request-id", help="Your id for this request (default: cli)")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the full JSON response")] = False,
) -> None:
    """Plan one goal in this process and print the plan."""
    from planner_arm.errors import PlannerError

    settings = _settings()
    try:
        # The same checks as the HTTP API: the request model validates goal, context and id.
        request = PlanRequest(
            goal=goal,
            constraints=constraint or [],
            context=_json_object(context, "--context") if context else {},
            request_id=request_id,
        )
        response = asyncio.run(_plan_once(settings, request, request.request_id or "cli"))
    except (ValueError, PlannerError) as exc:
        _err().print(f"[red]cannot plan:[/red] {exc}", highlight=False)
        raise typer.Exit(1) from None
    if as_json:
        typer.echo(json.dumps(response.model_dump(mode="json"), indent=2))
        return
    table = Table(title=goal[:80], show_lines=False)
    for column in ("#", "arm", "action", "after", "tier", "seconds"):
        table.add_column(column)
    for step in response.plan:
        table.add_row(
            str(step.step),
            step.required_arm,
            step.action,
            ", ".join(map(str, step.depends_on)) or "-",
            str(step.estimated_cost_tier),
            str(step.estimated_duration_seconds),
        )
    out = Console()
    out.print(table)
    meta = response.metadata
    out.print(
        f"source={meta.source} model={meta.model} attempts={meta.attempts} "
        f"confidence={response.confidence} critical_path={response.critical_path_duration}s "
        f"stages={response.parallel_stages}",
        highlight=False,
    )


def _json_object(text: str, option: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{option} is not JSON: {exc.msg} at character {exc.pos}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{option} must be a JSON object, not {type(value).__name__}")
    return value


@cli.command("check-config")
def check_config() -> None:
    """Validate the configuration and print what the service would run with."""
    settings = _settings()
    out = Console()
    out.print(
        f"ok: model={settings.model.name} models={settings.model.chain} "
        f"llm={'configured' if settings.llm_enabled else 'disabled'} "
        f"steps={settings.planning.min_steps}-{settings.planning.max_steps} "
        f"timeout={settings.planning.timeout_seconds}s arms={settings.arm_ids}",
        highlight=False,
    )


def main() -> None:
    cli()
