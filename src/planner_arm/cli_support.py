"""What the CLI's commands share: the in-process planner, the client of a running service,
reading JSON arguments, and printing a plan."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from planner_arm.config import ConfigError, Settings, load_settings
from planner_arm.plan.schemas import PlanResponse


def err() -> Console:
    return Console(stderr=True)


def fail(what: str, error: object, code: int = 1) -> typer.Exit:
    """Say why on stderr (with the service's error code when it answered one); the caller
    raises the Exit this returns."""
    service_code = getattr(error, "code", None)
    said = f"{service_code}: {error}" if isinstance(service_code, str) else str(error)
    err().print(f"[red]{what}:[/red] {said}", highlight=False)
    return typer.Exit(code)


def planning_errors() -> tuple[type[Exception], ...]:
    """What a command turns into a one-line message and exit 1: a bad argument, the planner's
    refusal in this process, or the service's answer through the client."""
    from planner_arm.client import PlannerError as ServiceSaid
    from planner_arm.errors import PlannerError

    return (ValueError, PlannerError, ServiceSaid)


def settings() -> Settings:
    try:
        return load_settings()
    except ConfigError as exc:
        raise fail("configuration error", exc, 2) from None


@asynccontextmanager
async def in_process(settings: Settings) -> AsyncIterator[Any]:
    """A PlannerArm of this process (the model when a key or base URL is set), closed after."""
    from planner_arm.api.state import service_version
    from planner_arm.llm.client import LLMClient
    from planner_arm.llm.prompts import PROMPT_VERSION
    from planner_arm.logging import configure_logging
    from planner_arm.metrics import PlannerMetrics
    from planner_arm.planning.planner import PlannerArm

    configure_logging("WARNING", "console")
    llm = LLMClient(settings) if settings.llm_enabled else None
    try:
        yield PlannerArm(settings, llm, PlannerMetrics(service_version(), PROMPT_VERSION))
    finally:
        if llm is not None:
            await llm.aclose()


def json_object(text: str, option: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{option} is not JSON: {exc.msg} at character {exc.pos}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{option} must be a JSON object, not {type(value).__name__}")
    return value


def read_json(path: str, option: str) -> Any:
    """The JSON in file `path` ("-": standard input)."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"{option}: cannot read {path}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{option}: {path} is not JSON: {exc.msg}") from None


def print_plan(response: PlanResponse, title: str, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(response.model_dump(mode="json"), indent=2))
        return
    table = Table(title=title[:80], show_lines=False)
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
        f"plan_id={response.plan_id} version={response.version} source={meta.source} "
        f"model={meta.model} attempts={meta.attempts} confidence={response.confidence} "
        f"critical_path={response.critical_path_duration}s stages={response.parallel_stages}",
        highlight=False,
    )
    for note in meta.warnings:
        out.print(f"warning {note.code}: {note.detail}", highlight=False)
