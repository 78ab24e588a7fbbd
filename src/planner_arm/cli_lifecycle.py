"""`planner-arm validate | replan | get`, and the remote side of `plan`.

With `--url` each command talks to a running service through `planner_arm.client`; without
it, `validate` and `replan` run in this process (a replan then needs the plan as a file:
this process has no store), and `get`, which reads a store, needs `--url`.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer
from rich.console import Console

from planner_arm.cli_support import (
    fail,
    in_process,
    planning_errors,
    print_plan,
    read_json,
    settings,
)
from planner_arm.plan.schemas import PlanRequest, PlanResponse

URL_OPTION = typer.Option("--url", help="A running service; without it, this process plans")
API_KEY_OPTION = typer.Option("--api-key", help="The service's API key, when it needs one")


def remote_plan(url: str, api_key: str | None, request: PlanRequest) -> PlanResponse:
    from planner_arm.client import PlannerClient

    with PlannerClient(url, api_key=api_key) as client:
        return client.plan(
            request.goal,
            request.constraints,
            request.context,
            strategy=request.strategy,
            request_id=request.request_id,
        )


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


def register(cli: typer.Typer) -> None:
    """Adds the lifecycle commands to the CLI."""

    @cli.command()
    def validate(
        plan_file: Annotated[
            str,
            typer.Argument(
                help="A JSON file: a list of steps or a whole plan answer; - reads stdin"
            ),
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
            where = f"step {error.step}: " if error.step is not None else ""
            out.print(f"  {error.code}: {where}{error.message}", highlight=False)
        for note in answer.warnings:
            out.print(f"  warning {note}", highlight=False)
        raise typer.Exit(0 if answer.valid else 1)

    @cli.command()
    def replan(
        goal: Annotated[str, typer.Option(help="The plan's goal")],
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
                from planner_arm.client import PlannerClient

                if (answer is None) == (plan_id is None):
                    raise ValueError("give exactly one of --plan-id and --previous")
                with PlannerClient(url, api_key=api_key) as client:
                    given = PlanResponse.model_validate(answer) if answer is not None else None
                    response = client.replan(goal, previous=given, plan_id=plan_id, **fields)
            elif answer is None:
                raise ValueError("without --url, give the plan as --previous FILE")
            else:
                response = asyncio.run(_replan_here(goal, answer, fields))
        except planning_errors() as exc:
            raise fail("cannot replan", exc) from None
        print_plan(response, goal, as_json)

    @cli.command()
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


def _validate_here(steps: Any, fix: bool) -> Any:
    from planner_arm.plan.arms import ArmResolver
    from planner_arm.plan.validate_schemas import ValidateRequest
    from planner_arm.plan.validation import PlanRules
    from planner_arm.planning.lifecycle import validate_edited

    current = settings()
    body = ValidateRequest(plan=steps, fix=fix)
    resolver = ArmResolver(current.arms, current.arm_aliases)
    return validate_edited(body, PlanRules.from_settings(current), resolver, "cli")


async def _replan_here(goal: str, previous: Any, fields: dict[str, Any]) -> PlanResponse:
    from planner_arm.plan.replan_schemas import ReplanRequest
    from planner_arm.planning.replan import Replanner

    request = ReplanRequest(goal=goal, previous=previous, **fields)
    assert request.previous is not None  # given above
    async with in_process(settings()) as planner:
        return await Replanner(planner).replan(request, request.previous, "cli")
