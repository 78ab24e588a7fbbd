"""A partial previous plan (an iterative answer: the work done and the stage being run)
extended with the rest of a whole plan for the goal, so the rule-based replan knows the work
still to do. A step of the whole plan that is already in the previous one (the same action)
is that step; the others follow it, numbered above the previous plan's highest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from planner_arm.plan.replan import SAME_STEP_SIMILARITY, ReplanScope, action_similarity
from planner_arm.plan.schemas import PlanStep


def rest_of(scope: ReplanScope, whole: Sequence[PlanStep]) -> list[PlanStep]:
    """The steps of `whole` (a valid plan for the goal) the previous plan lacks, renumbered
    after it, their dependencies on steps it has pointed at those; its final check among them
    (the replan makes it wait for every step)."""
    number_of: dict[int, int] = {}
    rest: list[PlanStep] = []
    next_number = scope.highest + 1
    for step in whole:  # dependency order: a dependency is numbered before the step
        known = _same_step(step, scope.previous)
        if known is not None:
            number_of[step.step] = known
            continue
        number_of[step.step] = next_number
        deps = sorted({number_of[dep] for dep in step.depends_on if dep in number_of})
        rest.append(step.model_copy(update={"step": next_number, "depends_on": deps}))
        next_number += 1
    return rest


def extended(scope: ReplanScope, rest: Sequence[PlanStep]) -> ReplanScope:
    """`scope` whose previous plan goes on with `rest` (steps still to do, none finished)."""
    return replace(scope, previous=(*scope.previous, *rest))


def _same_step(step: PlanStep, previous: Sequence[PlanStep]) -> int | None:
    scored = [(action_similarity(step.action, old.action), old.step) for old in previous]
    best = max(scored, default=(0.0, 0))
    return best[1] if best[0] >= SAME_STEP_SIMILARITY else None
