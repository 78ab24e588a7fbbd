"""What every command shares: the service's options, the settings, the service of this
process (built by the composition root, closed after), the JSON a command reads, how text is
shown and how a command fails."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from planner_arm.config import ConfigError, Settings, load_settings
from planner_arm.plan.drawing import shown_text

if TYPE_CHECKING:  # built lazily: `planner-arm --help` need not load the whole service
    from planner_arm.service.wiring import Runtime

T = TypeVar("T")

URL_OPTION = typer.Option("--url", help="A running service; without it, this process plans")
API_KEY_OPTION = typer.Option(
    "--api-key", help="The service's API key, when it needs one (every plan endpoint does)"
)


def _err() -> Console:
    return Console(stderr=True)


def shown(text: str, style: str = "") -> Text:
    """Text from a plan, a model or a caller, as the terminal gets it: never read as markup,
    never as a control sequence (`shown_text`: ESC is printed as `\\u001b`)."""
    return Text(shown_text(text), style=style)


def fail(what: str, error: object, code: int = 1) -> typer.Exit:
    """Say why on stderr; the caller raises the Exit this returns. A service's error already
    names its code; an unauthorized one says how to give the key."""
    said = str(error)
    if getattr(error, "code", None) == "unauthorized":
        said += " (give the service's key with --api-key)"
    # Escaped: an error may quote a rule such as `^[a-z][a-z0-9_-]{0,31}$`, which is not markup,
    # or a caller's text, which may hold control characters.
    _err().print(f"[red]{escape(what)}:[/red] {escape(shown_text(said))}", highlight=False)
    return typer.Exit(code)


def planning_errors() -> tuple[type[Exception], ...]:
    """What a command turns into a one-line message and exit 1: a bad argument, the planner's
    refusal in this process, or the service's answer through the client."""
    from planner_arm.client import PlannerError as ServiceSaid
    from planner_arm.errors import PlannerError

    return (ValueError, PlannerError, ServiceSaid)


def fresh_request_id() -> str:
    """A run's request id when the caller gives none: new each run, as the service's are, so
    the logs of two runs are told apart."""
    return str(uuid.uuid4())


def settings(**overrides: Any) -> Settings:
    try:
        return load_settings(**overrides)
    except ConfigError as exc:
        raise fail("configuration error", exc, 2) from None


@asynccontextmanager
async def in_process(current: Settings) -> AsyncIterator[Runtime]:
    """The service of this process, built by the composition root, closed after."""
    from planner_arm.logging import configure_logging
    from planner_arm.service.wiring import build_runtime

    configure_logging("WARNING", "console")
    runtime = build_runtime(current)
    try:
        yield runtime
    finally:
        await runtime.aclose()


def run_in_process(work: Callable[[Runtime], Awaitable[T]]) -> T:
    """`work(runtime)` in this process, with the runtime built and closed around it."""

    async def run() -> T:
        async with in_process(settings()) as runtime:
            return await work(runtime)

    return asyncio.run(run())


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
