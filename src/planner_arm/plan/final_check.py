"""The plan's final check: the judge step that validates the results against the goal.

A final check is only worth its name if it runs after everything it checks, so it must
depend, directly or through other steps, on every other step. A judge step the model left
without those dependencies would run first (at stage one), checking nothing.
"""

from __future__ import annotations

from planner_arm.plan.draft import repair
from planner_arm.plan.schemas import PlanStep

JUDGE_ARM = "judge"
JUDGE_ACTION = "Validate that the plan's results meet the goal and its acceptance criteria"
JUDGE_CRITERIA = (
    "Every earlier step's acceptance criteria are met",
    "The combined result satisfies the goal and its constraints",
)
JUDGE_COST_TIER = 2
JUDGE_DURATION_SECONDS = 30


def judge_step(steps: list[PlanStep]) -> PlanStep:
    """A final judge step that depends on every step nothing else depends on."""
    depended_on = {dep for step in steps for dep in step.depends_on}
    return PlanStep(
        step=len(steps) + 1,
        action=JUDGE_ACTION,
        required_arm=JUDGE_ARM,
        acceptance_criteria=list(JUDGE_CRITERIA),
        depends_on=[step.step for step in steps if step.step not in depended_on],
        estimated_cost_tier=JUDGE_COST_TIER,
        estimated_duration_seconds=JUDGE_DURATION_SECONDS,
    )


def steps_before(steps: list[PlanStep], number: int) -> set[int]:
    """Every step that `number` depends on, directly or through others."""
    deps_of = {step.step: step.depends_on for step in steps}
    seen: set[int] = set()
    todo = list(deps_of[number])
    while todo:
        dep = todo.pop()
        if dep not in seen:
            seen.add(dep)
            todo.extend(deps_of[dep])
    return seen


def complete_final_check(steps: list[PlanStep]) -> str | None:
    """Makes the last step depend on every other step; the repair entry, or None if it did.

    The steps it lacks are added through the ones among them that nothing else depends on,
    which reach the rest: the fewest new dependencies, and the plan's parallelism kept.
    """
    final = steps[-1]
    others = steps[:-1]
    reached = steps_before(steps, final.step)
    missing = [step.step for step in others if step.step not in reached]
    if not missing:
        return None
    depended_on = {dep for step in others for dep in step.depends_on}
    added = [number for number in missing if number not in depended_on]
    steps[-1] = final.model_copy(update={"depends_on": sorted({*final.depends_on, *added})})
    listed = ", ".join(map(str, added))
    return repair("final_check_dependencies", f"step {final.step} now depends on {listed}")
