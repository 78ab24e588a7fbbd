"""The rule-based sub-plan of one step: what the step needs, the step itself, its check.

When the model cannot detail a step (POST /plan/expand, a hierarchical node), the rules must
not plan the whole goal again from the step's words: that repeats the work of the steps
around it ("write a test", "patch the code" for a step that only analyses). A step's own
detail is the same for every kind of step: gather what it needs, do it (split by its
acceptance criteria when more steps are wanted), and check it against those criteria.
"""

from __future__ import annotations

from collections.abc import Sequence

from planner_arm.plan.arms import typical_cost_tier, typical_duration_seconds
from planner_arm.plan.dag import JUDGE_ARM
from planner_arm.plan.draft import DraftPlan, DraftStep
from planner_arm.plan.schemas import PlanStep

_GATHER_ARM = "retriever"
# What gathering means for the arm that does the step.
_GATHER = {
    "retriever": "List the sources and search terms for: {action}",
    "coder": "Read the code, notes and earlier results that this builds on: {action}",
    "executor": "Check the preconditions and inputs of: {action}",
    "guardian": "Collect the material and the policies to check for: {action}",
    "judge": "Collect the results to be checked for: {action}",
    "planner": "Gather what is known about: {action}",
}
_DEFAULT_GATHER = "Gather what is needed for: {action}"


def step_detail(
    step: PlanStep,
    constraints: Sequence[str],
    *,
    arm_ids: Sequence[str],
    size: int,
) -> DraftPlan:
    """A sub-plan of `size` steps (at least 3 when the judge arm exists) that details `step`."""
    action = step.action.strip().rstrip(".")
    gather_arm = _GATHER_ARM if _GATHER_ARM in arm_ids else step.required_arm
    gather = _GATHER.get(step.required_arm, _DEFAULT_GATHER).format(action=action)
    with_check = JUDGE_ARM in arm_ids
    work = max(1, size - 1 - with_check)  # the steps that do the work itself
    criteria = [text for text in step.acceptance_criteria if text.strip()] or [action]
    steps = [_draft(1, gather, gather_arm, [f"What '{action}' needs is at hand"], [])]
    if work == 1:
        steps.append(_draft(2, action, step.required_arm, criteria, [1]))
    else:
        # One part of the work per criterion (the last takes the rest), side by side.
        for index in range(work):
            aim = criteria[index] if index < len(criteria) else criteria[-1]
            part = f"{action}, so that: {aim}" + (
                f" (part {index + 1})" if index >= len(criteria) else ""
            )
            steps.append(_draft(index + 2, part, step.required_arm, [aim], [1]))
    if with_check:
        done = [draft.step for draft in steps[1:] if draft.step is not None]
        checks = [*criteria, *(f"Constraint respected: {text}" for text in constraints)]
        steps.append(
            _draft(len(steps) + 1, f"Check the result of: {action}", JUDGE_ARM, checks, done)
        )
    rationale = (
        "Rule-based detail of one step (no usable model answer): gather what it needs, do it, "
        "and check it against its acceptance criteria."
    )
    return DraftPlan(steps, rationale)


def _draft(number: int, action: str, arm: str, criteria: list[str], after: list[int]) -> DraftStep:
    return DraftStep(
        action, arm, criteria, after, number, typical_cost_tier(arm), typical_duration_seconds(arm)
    )
