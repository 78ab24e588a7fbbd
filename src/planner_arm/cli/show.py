"""The show command: a plan drawn by stage in the terminal, or as Mermaid text."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text
from rich.tree import Tree

from planner_arm.cli.running import (
    API_KEY_OPTION,
    URL_OPTION,
    fail,
    planning_errors,
    read_json,
    shown,
)
from planner_arm.plan.drawing import shown_text
from planner_arm.plan.schemas import PlanResponse


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
