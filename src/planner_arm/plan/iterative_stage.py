"""The iterative strategy's cut: of a whole plan, only the next stage.

The next stage is the steps not done yet whose every dependency is done (they can all start
now, side by side), at most `limit` of them, in plan order. The plan is complete when the
stage holds every step still to do: then its final check is among them.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from planner_arm.plan.final_check import (
    JUDGE_ACTION,
    JUDGE_ARM,
    JUDGE_COST_TIER,
    JUDGE_CRITERIA,
    JUDGE_DURATION_SECONDS,
)
from planner_arm.plan.schemas import PlanStep


@dataclass(frozen=True)
class Stage:
    steps: list[PlanStep]
    complete: bool  # no step is left to plan after these
    left: int  # steps of the whole plan still to do after this stage


def next_stage(steps: Sequence[PlanStep], done: Collection[int], limit: int) -> Stage:
    """The steps of `steps` not in `done` that can start now, at most `limit`."""
    todo = [step for step in steps if step.step not in done]
    ready = [step for step in todo if all(dep in done for dep in step.depends_on)]
    stage = ready[:limit]
    return Stage(stage, complete=len(stage) == len(todo), left=len(todo) - len(stage))


def first_stage_steps(stage: Sequence[PlanStep]) -> list[PlanStep]:
    """A first stage numbered 1..n, as a /plan answer is (its steps depend on nothing)."""
    return [
        step.model_copy(update={"step": n, "depends_on": []}) for n, step in enumerate(stage, 1)
    ]


def closing_stage(finished: Sequence[PlanStep], number: int, *, with_check: bool) -> list[PlanStep]:
    """The last stage when no more work may be planned: the final check of what was done,
    numbered `number` (nothing when the plan rules want no final check)."""
    if not with_check:
        return []
    depended_on = {dep for step in finished for dep in step.depends_on}
    return [
        PlanStep(
            step=number,
            action=JUDGE_ACTION,
            required_arm=JUDGE_ARM,
            acceptance_criteria=list(JUDGE_CRITERIA),
            depends_on=[step.step for step in finished if step.step not in depended_on],
            estimated_cost_tier=JUDGE_COST_TIER,
            estimated_duration_seconds=JUDGE_DURATION_SECONDS,
        )
    ]
