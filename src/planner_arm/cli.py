"""The command line: `planner-arm serve | mcp | plan | validate | replan | get | show`, and
`check-config`.

Every command builds the service through the same composition root as the app. With `--url`,
plan, validate, replan and get talk to a running service through `planner_arm.client`;
without it, plan, validate and replan run in this process (a replan then needs the plan as a
file: this process has no store of earlier plans), and get, which reads a store, needs --url;
show draws a plan from the service at --url or from a file, in the terminal or as Mermaid text.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from rich.tree import Tree
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from planner_arm.config import ConfigError, Settings, load_settings
from planner_arm.plan.drawing import shown_text
from planner_arm.plan.schemas import PlanRequest, PlanResponse

if TYPE_CHECKING:  # built lazily: `planner-arm --help` need not load the whole service
    from planner_arm.service.wiring import Runtime

T = TypeVar("T")


# The words `--help` uses for the kinds of value an option takes.
VALUE_WORDS = {"str": "TEXT", "int": "INTEGER", "float": "NUMBER", "Path": "PATH"}


def value_name(option: TyperOption) -> str:
    """What `--help` shows an option takes: FLAG for an on/off option, else the kind of value
    in words (TEXT, INTEGER), followed by "..." when the option may be repeated."""
    if option.is_flag:
        return "FLAG"
    kind = option.bare_type()
    repeated = kind.startswith("list[")
    word = VALUE_WORDS.get(kind.removeprefix("list[").removesuffix("]"), "VALUE")
    return f"{word} ..." if repeated else word


class NamedArgument(TyperArgument):
    """An argument `--help` shows by its name in capitals (GOAL), with no Python type."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None


def with_readable_values(params: list[Any]) -> list[Any]:
    """`params` as `--help` shows them: options with their values in words, arguments by name."""
    for param in params:
        if isinstance(param, TyperOption) and param.metavar is None:
            param.metavar = value_name(param)
        elif isinstance(param, TyperArgument) and param.metavar is None:
            param.metavar = (param.name or "value").upper()
            param.__class__ = NamedArgument  # typer builds the argument; only its help changes
    return params


class ReadableCommand(TyperCommand):
    """A command whose `--help` names what each option takes (`TEXT`, `INTEGER`, `FLAG`),
    not the Python type it is read into (`<str>`, `<list[str]>`, `<bool>`)."""

    def get_params(self, ctx: Any) -> list[Any]:
        return with_readable_values(super().get_params(ctx))


class ReadableGroup(TyperGroup):
    """The command group, its `--help` as readable as its commands'."""

    def get_params(self, ctx: Any) -> list[Any]:
        return with_readable_values(super().get_params(ctx))


cli = typer.Typer(
    name="planner-arm",
    help="Turns a goal into a validated, executable plan of arm steps.",
    no_args_is_help=True,
    add_completion=False,
    cls=ReadableGroup,
)

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


def print_plan(response: PlanResponse, title: str, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(response.model_dump(mode="json"), indent=2))
        return
    table = Table(title=shown(title[:80]), show_lines=False)
    for column in ("#", "arm", "action", "after", "tier", "seconds"):
        table.add_column(column)
    for step in response.plan:
        table.add_row(
            str(step.step),
            shown(step.required_arm),
            shown(step.action),
            ", ".join(map(str, step.depends_on)) or "-",
            str(step.estimated_cost_tier),
            str(step.estimated_duration_seconds),
        )
    out = Console()
    out.print(table)
    meta = response.metadata
    out.print(
        shown(
            f"plan_id={response.plan_id} version={response.version} source={meta.source} "
            f"model={meta.model} attempts={meta.attempts} confidence={response.confidence} "
            f"critical_path={response.critical_path_duration}s stages={response.parallel_stages}"
        ),
        highlight=False,
    )
    for note in meta.warnings:
        out.print(shown(f"warning {note.code}: {note.detail}"), highlight=False)


@cli.command(cls=ReadableCommand)
def serve(
    host: Annotated[str | None, typer.Option(help="Address to bind (default from config)")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default from config)")] = None,
) -> None:
    """Start the HTTP service."""
    from planner_arm.api.app import create_app
    from planner_arm.api.server import build_server

    # Into the settings: the app warns when it listens beyond loopback without keys, and /mcp
    # answers to the host it is bound to.
    bind = {name: value for name, value in (("host", host), ("port", port)) if value}
    current = settings(server=bind)
    app = create_app(current)
    build_server(app, current).run()


@cli.command(cls=ReadableCommand)
def mcp() -> None:
    """Serve the planner over MCP on stdin/stdout, for a desktop agent host."""
    from planner_arm.api.mcp_server import build_mcp_server

    async def run(runtime: Runtime) -> None:
        await build_mcp_server(runtime).run_stdio_async()

    # Logs go to stderr: stdout carries the protocol.
    run_in_process(run)


@cli.command(cls=ReadableCommand)
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
        str | None,
        typer.Option("--request-id", help="Your id for this request (default: a new UUID)"),
    ] = None,
    strategy: Annotated[
        str, typer.Option(help="flat, hierarchical or iterative (see docs/api.md)")
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
            response = _remote_plan(url, api_key, request)
        else:
            response = run_in_process(
                lambda runtime: runtime.plans.plan(
                    request, request.request_id or fresh_request_id(), use_cache=False
                )
            )
    except planning_errors() as exc:
        raise fail("cannot plan", exc) from None
    print_plan(response, goal, as_json)


def _remote_plan(url: str, api_key: str | None, request: PlanRequest) -> PlanResponse:
    from planner_arm.client import PlannerClient

    with PlannerClient(url, api_key=api_key) as client:
        return client.plan(
            request.goal,
            request.constraints,
            request.context,
            strategy=request.strategy,
            request_id=request.request_id,
        )


@cli.command(cls=ReadableCommand)
def validate(
    plan_file: Annotated[
        str,
        typer.Argument(help="A JSON file: a list of steps or a whole plan answer; - reads stdin"),
    ],
    fix: Annotated[bool, typer.Option(help="Mend what /plan would mend")] = False,
    url: Annotated[str | None, URL_OPTION] = None,
    api_key: Annotated[str | None, API_KEY_OPTION] = None,
) -> None:
    """Check an edited plan; exit 0 when it is valid, 1 when it is not."""
    try:
        data = read_json(plan_file, "plan_file")
        steps = data["plan"] if isinstance(data, dict) and "plan" in data else data
        if url is not None:
            from planner_arm.client import PlannerClient

            with PlannerClient(url, api_key=api_key) as client:
                answer = client.validate(steps, fix=fix)
        else:
            answer = _validate_here(steps, fix)
    except planning_errors() as exc:
        raise fail("cannot validate", exc) from None
    out = Console()
    out.print("valid" if answer.valid else "invalid", highlight=False)
    for error in answer.errors:
        out.print(
            shown(f"  {problem_line(error.code, error.step, error.message)}"), highlight=False
        )
    for note in answer.warnings:
        out.print(shown(f"  warning {note.code}: {note.detail}"), highlight=False)
    raise typer.Exit(0 if answer.valid else 1)


def problem_line(code: str, step: int | None, message: str) -> str:
    """One problem of a plan: its code, then the step it is about, named once (most messages
    already begin with it: "step 2: ...", "step 2 depends on step 5 ...")."""
    if step is not None:
        own = f"step {step}"
        message = message.removeprefix(f"{own}: ")
        if not re.match(rf"{own}\b", message):
            message = f"{own}: {message}"
    return f"{code}: {message}"


def _validate_here(steps: Any, fix: bool) -> Any:
    from planner_arm.plan.endpoint_schemas import ValidateRequest

    body = ValidateRequest(plan=steps, fix=fix)

    async def check(runtime: Runtime) -> Any:
        return await runtime.plans.validate(body, fresh_request_id())

    return run_in_process(check)


def _step_states(entries: list[str]) -> dict[str, dict[str, str]]:
    """`N=status` or `N=status:text` (the text is the output, or the error of a failure)."""
    states: dict[str, dict[str, str]] = {}
    for entry in entries:
        number, _, rest = entry.partition("=")
        status, _, text = rest.partition(":")
        if not number.strip().isdigit() or not status:
            raise ValueError(f"--state {entry!r}: write N=status or N=status:text")
        state = {"status": status.strip()}
        if text:
            state["error" if status.strip() == "failed" else "output"] = text.strip()
        states[number.strip()] = state
    return states


@cli.command(cls=ReadableCommand)
def replan(
    goal: Annotated[
        str | None, typer.Option(help="The plan's goal (default: the one the plan names)")
    ] = None,
    plan_id: Annotated[str | None, typer.Option(help="A plan stored by the service")] = None,
    previous: Annotated[
        str | None, typer.Option(help="A JSON file with the whole plan answer; - reads stdin")
    ] = None,
    state: Annotated[
        list[str] | None,
        typer.Option(help="A step's state: N=status or N=status:text (repeatable)"),
    ] = None,
    replan_step: Annotated[
        list[int] | None, typer.Option(help="A step to plan again (repeatable)")
    ] = None,
    reason: Annotated[str | None, typer.Option(help="Why the plan must change")] = None,
    url: Annotated[str | None, URL_OPTION] = None,
    api_key: Annotated[str | None, API_KEY_OPTION] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the full JSON")] = False,
) -> None:
    """Revise a plan after a failure or a change, keeping the finished steps."""
    try:
        states = _step_states(state or [])
        answer = read_json(previous, "--previous") if previous else None
        fields: dict[str, Any] = {
            "step_states": states,
            "replan_steps": replan_step or [],
            "reason": reason,
        }
        if url is not None:
            response = _remote_replan(url, api_key, goal, answer, plan_id, fields)
        elif answer is None:
            raise ValueError("without --url, give the plan as --previous FILE")
        else:
            response = _replan_here(goal, answer, fields)
    except planning_errors() as exc:
        raise fail("cannot replan", exc) from None
    print_plan(response, response.goal or goal or "", as_json)


def _remote_replan(
    url: str,
    api_key: str | None,
    goal: str | None,
    answer: Any,
    plan_id: str | None,
    fields: dict[str, Any],
) -> PlanResponse:
    from planner_arm.client import PlannerClient

    if (answer is None) == (plan_id is None):
        raise ValueError("give exactly one of --plan-id and --previous")
    with PlannerClient(url, api_key=api_key) as client:
        given = PlanResponse.model_validate(answer) if answer is not None else None
        # Without --goal, the service takes the plan's own (the stored plan's, or the file's).
        return client.replan(goal, previous=given, plan_id=plan_id, **fields)


def _replan_here(goal: str | None, previous: Any, fields: dict[str, Any]) -> PlanResponse:
    from planner_arm.plan.endpoint_schemas import ReplanRequest

    # Without --goal, the request model takes the one the plan carries.
    given = {"goal": goal} if goal is not None else {}
    request = ReplanRequest(previous=previous, **given, **fields)
    return run_in_process(lambda runtime: runtime.plans.replan(request, fresh_request_id()))


@cli.command(cls=ReadableCommand)
def get(
    plan_id: Annotated[str, typer.Argument(help="The plan_id of an answer")],
    url: Annotated[str | None, URL_OPTION] = None,
    api_key: Annotated[str | None, API_KEY_OPTION] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the full JSON")] = False,
) -> None:
    """Fetch a plan the service answered, while its TTL lasts."""
    if url is None:
        raise fail("cannot get", "plans are kept by a running service: give its --url")
    from planner_arm.client import PlannerClient

    try:
        with PlannerClient(url, api_key=api_key) as client:
            response = client.get(plan_id)
    except planning_errors() as exc:
        raise fail("cannot get", exc) from None
    print_plan(response, f"plan {plan_id}", as_json)


def _show_tree(response: PlanResponse) -> Tree:
    """The plan as a tree: a branch per stage, a line per step; the critical path starred."""
    from planner_arm.plan.estimation import critical_path, parallel_stages

    steps = {step.step: step for step in response.plan}
    on_path = set(critical_path(response.plan))
    meta = response.metadata
    source = "rule-based" if meta.source == "fallback" else meta.source
    title = shown(f"plan {response.plan_id} · version {response.version} · {response.strategy}")
    title.append(shown_text(f" · source {source}" + (f" ({meta.model})" if meta.model else "")))
    tree = Tree(title)
    for index, numbers in enumerate(parallel_stages(response.plan), 1):
        branch = tree.add(Text(f"stage {index}", style="bold"))
        for number in numbers:
            step = steps[number]
            mark = "★" if number in on_path else " "
            line = Text(f"{mark} {step.step} ", style="bold red" if mark == "★" else "")
            line.append(shown_text(step.required_arm), style="cyan")
            line.append(f"  {shown_text(step.action)}\n")
            after = f"after {', '.join(map(str, step.depends_on))} · " if step.depends_on else ""
            line.append(
                f"{after}{step.estimated_duration_seconds} s · tier {step.estimated_cost_tier}",
                style="dim",
            )
            branch.add(line)
    return tree


def show_plan(response: PlanResponse) -> None:
    """The plan in the terminal: what it is for (goal, constraints), the tree by stage, then
    its estimates and warnings."""
    from planner_arm.plan.estimation import critical_path

    out = Console()
    if response.goal is not None:
        out.print(shown(f"goal: {response.goal}", style="bold"), highlight=False)
    for constraint in response.constraints:
        out.print(shown(f"constraint: {constraint}"), highlight=False)
    out.print(_show_tree(response))
    path = " → ".join(map(str, critical_path(response.plan))) or "-"
    cost = response.estimated_cost
    tiers = sum(step.estimated_cost_tier for step in response.plan)
    out.print(
        Text(
            f"★ critical path {path}: {response.critical_path_duration} s "
            f"({response.total_estimated_duration} s one after another); cost tiers {tiers}; "
            f"planning ${cost.llm_usd:.4f} ({cost.prompt_tokens}+{cost.completion_tokens} "
            f"tokens); confidence {response.confidence}"
        )
    )
    if not response.complete:
        out.print(Text("only the next stage: run it, then /replan for the next one"))
    for note in response.metadata.warnings:
        out.print(shown(f"warning {note.code}: {note.detail}", style="yellow"))


@cli.command(cls=ReadableCommand)
def show(
    plan_id: Annotated[
        str | None, typer.Argument(help="The plan_id of an answer kept by the service at --url")
    ] = None,
    file: Annotated[
        str | None,
        typer.Option("--file", help="A JSON file with a whole plan answer; - reads stdin"),
    ] = None,
    mermaid: Annotated[
        bool, typer.Option("--mermaid", help="Print Mermaid flowchart text instead")
    ] = False,
    url: Annotated[str | None, URL_OPTION] = None,
    api_key: Annotated[str | None, API_KEY_OPTION] = None,
) -> None:
    """Draw a plan: by stage, with arms, dependencies, estimates and the critical path."""
    try:
        if (plan_id is None) == (file is None):
            raise ValueError("give a plan_id (with --url) or --file, not both")
        if file is not None:
            response = PlanResponse.model_validate(read_json(file, "--file"))
        elif url is None:
            raise ValueError("plans are kept by a running service: give its --url")
        else:
            from planner_arm.client import PlannerClient

            with PlannerClient(url, api_key=api_key) as client:
                response = client.get(str(plan_id))
        if mermaid:
            from planner_arm.plan.drawing import mermaid_flowchart

            typer.echo(mermaid_flowchart(response.plan, response.goal), nl=False)
        else:
            show_plan(response)
    except planning_errors() as exc:
        raise fail("cannot show", exc) from None


# check-config names each arm up to this many; a tool set of hundreds is only counted.
LISTED_ARMS = 10


def configuration_summary(current: Settings) -> str:
    """What the service would run with: the models, the profile and the step bounds its
    plans keep, the tools, keys and tenants read, the deadline."""
    from planner_arm.plan.validation import PlanRules, profile_of

    ids = current.arm_ids
    rules = PlanRules.for_arms(current.planning, ids)
    models = current.model.chain if current.llm_enabled else []
    where = f" base_url={current.model.base_url}" if current.model.base_url else ""
    entries = current.auth.key_entries
    # A plain key is a tenant of its own; named tenants share their keys' plans.
    tenants = {tenant or f"key {index}" for index, (tenant, _) in enumerate(entries)}
    more = [f"+{len(ids) - LISTED_ARMS} more"] if len(ids) > LISTED_ARMS else []
    return (
        f"ok: models={models} llm={'configured' if current.llm_enabled else 'disabled'}{where}\n"
        f"profile={profile_of(current.planning, ids)} "
        f"steps={rules.min_steps}-{rules.max_steps} tools={len(ids)} keys={len(entries)} "
        f"tenants={len(tenants)} timeout={current.planning.timeout_seconds}s\n"
        f"arms={ids[:LISTED_ARMS] + more}"
    )


@cli.command("check-config", cls=ReadableCommand)
def check_config() -> None:
    """Validate the configuration and print what the service would run with."""
    Console().print(configuration_summary(settings()), highlight=False, soft_wrap=True)


def main() -> None:
    cli()
