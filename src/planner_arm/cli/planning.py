"""The plan commands: plan, validate, replan and get; by the service at --url, through
`planner_arm.client`, or (plan, validate, replan) in this process."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from planner_arm.cli.running import (
    API_KEY_OPTION,
    URL_OPTION,
    fail,
    fresh_request_id,
    json_object,
    planning_errors,
    read_json,
    run_in_process,
    shown,
)
from planner_arm.plan.schemas import PlanRequest, PlanResponse

if TYPE_CHECKING:  # built lazily: `planner-arm --help` need not load the whole service
    from planner_arm.service.wiring import Runtime


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
