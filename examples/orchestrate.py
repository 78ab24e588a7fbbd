"""A small orchestrator on planner-arm: plan a goal, run the plan stage by stage, replan when a
step fails (the finished work is kept), and show the progress as a live table.

    python examples/orchestrate.py "Fix authentication bug and add tests"
    python examples/orchestrate.py "Deploy the billing service to staging" --fail-step 3

It starts nothing: it talks to the service at --url (default http://127.0.0.1:8080, where
`bash scripts/serve.sh` serves). The arms are simulated: every step succeeds after a short
pause, except the one named by --fail-step (by default the first step of the second stage),
which fails once, so the plan is revised through /replan and the run goes on.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from rich.console import Console
from rich.live import Live
from rich.table import Table

from planner_arm.client import PlannerClient, PlannerError
from planner_arm.plan.schemas import PlanResponse, PlanStep

STATUS_STYLE = {
    "pending": "dim",
    "running": "yellow",
    "completed": "green",
    "failed": "bold red",
}


def progress_table(plan: PlanResponse, states: Mapping[int, dict[str, str]], note: str) -> Table:
    table = Table(title=f"plan {plan.plan_id[:8]} v{plan.version} ({plan.metadata.source})")
    for column in ("#", "arm", "action", "after", "status"):
        table.add_column(column)
    for step in plan.plan:
        status = states.get(step.step, {}).get("status", "pending")
        table.add_row(
            str(step.step),
            step.required_arm,
            step.action,
            ", ".join(map(str, step.depends_on)) or "-",
            f"[{STATUS_STYLE[status]}]{status}[/]",
        )
    table.caption = note
    return table


def simulate(step: PlanStep, fail: bool, pause: float) -> dict[str, str]:
    """What an arm would report: an output, or an error for the step chosen to fail."""
    time.sleep(pause)  # the arm at work: long enough to see the table move
    if fail:
        return {"status": "failed", "error": f"{step.required_arm} could not finish the step"}
    return {"status": "completed", "output": f"{step.required_arm} did: {step.action[:60]}"}


def default_fail_step(plan: PlanResponse) -> int:
    stages = plan.parallel_stages
    return stages[1][0] if len(stages) > 1 else stages[0][0]


@dataclass
class Progress:
    """The plan being run, what each step reported so far, and the line under the table."""

    plan: PlanResponse
    states: dict[int, dict[str, str]]
    note: str
    live: Live

    def show(self) -> None:
        self.live.update(progress_table(self.plan, self.states, self.note), refresh=True)


def ready_steps(plan: PlanResponse, states: Mapping[int, dict[str, str]]) -> list[PlanStep]:
    """The steps not yet completed whose dependencies all are, stage by stage."""

    def completed(number: int) -> bool:
        return states.get(number, {}).get("status") == "completed"

    return [
        step
        for stage in plan.parallel_stages
        for step in plan.plan
        if step.step in stage
        and not completed(step.step)
        and all(completed(dep) for dep in step.depends_on)
    ]


def run_ready(
    ready: list[PlanStep], progress: Progress, to_fail: int | None, pause: float
) -> PlanStep | None:
    """Runs the ready steps in turn (a real orchestrator runs them at once) until one fails;
    returns the failed step."""
    for step in ready:
        progress.states[step.step] = {"status": "running"}
        progress.show()
        fail = step.step == to_fail
        progress.states[step.step] = simulate(step, fail, pause)
        progress.show()
        if fail:
            return step
    return None


def replan_after(client: PlannerClient, goal: str, progress: Progress, failure: PlanStep) -> None:
    """Asks for a revised plan; the finished steps it keeps keep their states."""
    states = progress.states
    plan = client.replan(
        goal,
        plan_id=progress.plan.plan_id,
        step_states=states,
        reason=f"step {failure.step} failed: {states[failure.step]['error']}",
    )
    kept = plan.diff.kept if plan.diff else []
    added = plan.diff.added if plan.diff else []
    progress.plan = plan
    progress.states = {number: states[number] for number in kept if number in states}
    progress.note = f"replanned after step {failure.step} failed: kept {kept}, added {added}"
    progress.show()


def run(client: PlannerClient, goal: str, fail_step: int | None, pause: float, out: Console) -> int:
    plan = client.plan(goal, idempotency_key=f"orchestrate-{uuid.uuid4().hex}")
    to_fail: int | None = fail_step if fail_step is not None else default_fail_step(plan)
    note = f"planned {len(plan.plan)} steps; step {to_fail} will fail once"
    with Live(progress_table(plan, {}, note), console=out, auto_refresh=False) as live:
        progress = Progress(plan, {}, note, live)
        while ready := ready_steps(progress.plan, progress.states):
            failure = run_ready(ready, progress, to_fail, pause)
            if failure is not None:
                to_fail = None  # the chosen step fails once only
                replan_after(client, goal, progress, failure)
    plan, states = progress.plan, progress.states
    done = sum(1 for state in states.values() if state.get("status") == "completed")
    out.line()  # off a terminal the live table's last line is left open
    out.print(f"done: {done} of {len(plan.plan)} steps completed, plan version {plan.version}")
    return 0 if done == len(plan.plan) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("goal")
    parser.add_argument("--url", default="http://127.0.0.1:8080")
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--fail-step", type=int, default=None)
    parser.add_argument(
        "--pause", type=float, default=0.3, help="seconds each simulated step takes"
    )
    options = parser.parse_args(argv)
    out = Console()
    try:
        with PlannerClient(options.url, api_key=options.api_key) as client:
            return run(client, options.goal, options.fail_step, options.pause, out)
    except PlannerError as error:
        out.print(f"[red]planner-arm said no:[/red] {error}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
