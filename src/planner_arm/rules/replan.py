"""The rule-based replan, for when no model gives a usable revision: finished steps kept, each
failed step replaced by a diagnose step and a retry that carries the error in its criteria,
each marked step planned again, and the steps after them rewired.

A partial previous plan (an iterative answer: the work done and the stage being run) is first
extended with the rest of a whole plan for the goal, so the replan knows the work still to do:
a step of the whole plan that is already in the previous one (the same action) is that step;
the others follow it, numbered above the previous plan's highest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from planner_arm.errors import PlanValidationError
from planner_arm.plan.arms import ArmResolver
from planner_arm.plan.draft import DraftPlan, DraftStep
from planner_arm.plan.replan import (
    SAME_STEP_SIMILARITY,
    MergedPlan,
    ReplanScope,
    action_similarity,
    merge_replan,
)
from planner_arm.plan.schemas import PlanStep
from planner_arm.plan.validation import PlanRules


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


MAX_ERROR_CHARS = 200


def rule_based_replan(
    scope: ReplanScope,
    rules: PlanRules,
    resolver: ArmResolver,
    fits: Callable[[MergedPlan], bool] = lambda merged: True,
) -> tuple[DraftPlan, MergedPlan]:
    """A valid revised plan without a model. When a diagnose step per failure would make too
    many steps, or a plan that does not `fit` (the caller's budget), each retry does its own
    diagnosis instead. Over a caller's tools no step diagnoses (no tool is for that: one
    chosen by the words would be called for nothing, or write): a failed call is tried again
    as it was, on the steps it read, its error in its criteria."""
    if resolver.over_tools:
        draft = _revision(scope, resolver, diagnose=False, retry_as_was=True)
        return draft, merge_replan(scope, draft, rules)
    try:
        draft = _revision(scope, resolver, diagnose=True)
        merged = merge_replan(scope, draft, rules)
        if fits(merged):
            return draft, merged
    except PlanValidationError:
        pass
    draft = _revision(scope, resolver, diagnose=False)
    return draft, merge_replan(scope, draft, rules)


def _revision(
    scope: ReplanScope, resolver: ArmResolver, *, diagnose: bool, retry_as_was: bool = False
) -> DraftPlan:
    failed, replaced = scope.failed, scope.replaced
    next_id = scope.highest + 1
    replacement: dict[int, int] = {}
    steps: list[DraftStep] = []

    def rewired(deps: list[int]) -> list[int]:
        return [replacement.get(dep, dep) for dep in deps]

    for old in scope.previous:  # dependency order, so a step's inputs are rewired first
        deps = rewired(old.depends_on)
        if old.step not in replaced:
            steps.append(
                DraftStep(
                    old.action, old.required_arm, list(old.acceptance_criteria), deps, old.step,
                    old.estimated_cost_tier, old.estimated_duration_seconds,
                )
            )  # fmt: skip
            continue
        criteria = list(old.acceptance_criteria)
        action = old.action
        if old.step in failed:
            error = _clip(failed[old.step]) or "no error was reported"
            criteria.append(f"The failure of step {old.step} does not recur: {error}")
            if diagnose:
                steps.append(_diagnose_step(old.step, old.action, error, deps, next_id, resolver))
                deps = [next_id]
                next_id += 1
            elif not retry_as_was:
                action = f"Find why step {old.step} failed, then: {old.action}"
        elif scope.reason:
            criteria.append(f"Planned again because: {_clip(scope.reason)}")
        steps.append(
            DraftStep(
                action, old.required_arm, criteria, deps, next_id,
                old.estimated_cost_tier, old.estimated_duration_seconds,
            )
        )  # fmt: skip
        replacement[old.step] = next_id
        next_id += 1
    kept = len(scope.finished)
    rationale = (
        f"Rule-based replan (no usable model revision): {kept} finished steps kept as they "
        f"were; {len(failed)} failed steps "
        + (
            "diagnosed and retried"
            if diagnose
            else "retried"
            if retry_as_was
            else "retried with their diagnosis"
        )
        + f"; {len(scope.marked - set(failed))} marked steps planned again; the steps after "
        "them wait for the new ones."
    )
    return DraftPlan(steps, rationale)


def _diagnose_step(
    number: int, action: str, error: str, deps: list[int], step_id: int, resolver: ArmResolver
) -> DraftStep:
    text = f"Diagnose why step {number} failed ({_clip(action, 80)}) and how to avoid it"
    arm = resolver.select(f"Diagnose and debug the failure, analyse the root cause: {action}")
    return DraftStep(
        action=text,
        required_arm=arm,
        acceptance_criteria=[
            f"The cause of the error is identified: {error}",
            "A change for the next attempt is written down",
        ],
        depends_on=list(deps),
        step=step_id,
    )


def _clip(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
