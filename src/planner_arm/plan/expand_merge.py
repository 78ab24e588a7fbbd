"""A step of a plan replaced by its sub-plan (POST /plan/expand): pure, no I/O.

The other steps keep their numbers and content, but for their dependencies; the sub-plan's
steps are numbered above the plan's highest, carry `parent`, start from the replaced step's
dependencies, and the steps that waited for it wait for the sub-plan's last steps. The list
stays in dependency order (the sub-plan takes the replaced step's place in it), so numbers
no longer rise along the list. The final check still depends on every other step.
"""

from __future__ import annotations

from collections.abc import Sequence
from graphlib import CycleError

from planner_arm.errors import ExpandRejected
from planner_arm.plan.final_check import JUDGE_ARM, complete_final_check, steps_before
from planner_arm.plan.schemas import PlanStep
from planner_arm.plan.validation import PlanRules, stable_topological_order


def expandable_step(steps: Sequence[PlanStep], number: int, rules: PlanRules) -> PlanStep:
    """The step to expand; ExpandRejected `unknown_step`, `step_not_expandable`, or
    `invalid_previous` (a plan sent back with repeated numbers or unknown dependencies)."""
    by_number = {step.step: step for step in steps}
    dangling = [
        f"step {step.step} depends on {dep}"
        for step in steps
        for dep in step.depends_on
        if dep not in by_number or dep == step.step
    ]
    if len(by_number) != len(steps) or dangling:
        detail = "; ".join(dangling) or "step numbers repeat"
        raise ExpandRejected(
            f"the plan to expand is not a valid plan: {detail}", code="invalid_previous"
        )
    target = by_number.get(number)
    if target is None:
        raise ExpandRejected(
            f"the plan has no step {number} (it has steps {sorted(by_number)})",
            code="unknown_step",
            errors=[{"code": "unknown_step", "step": number, "message": f"no step {number}"}],
        )
    _in_dependency_order(list(steps))  # ExpandRejected on a cycle
    final = steps[-1] if steps else None
    if rules.require_validation_step and target is final and target.required_arm == JUDGE_ARM:
        message = (
            f"step {number} is the plan's final check, which validates everything else; "
            "expand the work it checks instead"
        )
        raise ExpandRejected(
            message,
            code="step_not_expandable",
            errors=[{"code": "step_not_expandable", "step": number, "message": message}],
        )
    return target


def surroundings(steps: Sequence[PlanStep], number: int) -> tuple[list[PlanStep], list[PlanStep]]:
    """The steps `number` waits for (directly or not) and the steps that wait for it."""
    listed = list(steps)
    before = steps_before(listed, number)
    after = [step for step in listed if number in steps_before(listed, step.step)]
    return [step for step in listed if step.step in before], after


def splice(
    steps: Sequence[PlanStep],
    number: int,
    sub: Sequence[PlanStep],
    *,
    parent: str,
    rules: PlanRules,
) -> list[PlanStep]:
    """`steps` with step `number` replaced by `sub` (a valid plan numbered 1..k in order)."""
    target = next(step for step in steps if step.step == number)
    highest = max(step.step for step in steps)
    renumber = {local.step: highest + index for index, local in enumerate(sub, 1)}
    sinks = _last_steps(sub, renumber)
    new_steps = [_placed(local, renumber, target, parent) for local in sub]
    merged: list[PlanStep] = []
    for step in steps:
        merged += new_steps if step.step == number else [_rewired(step, number, sinks)]
    ordered = _in_dependency_order(merged)
    if rules.require_validation_step and rules.require_dependency_check:
        complete_final_check(ordered)
    return ordered


def _last_steps(sub: Sequence[PlanStep], renumber: dict[int, int]) -> list[int]:
    """The sub-plan steps no other sub-plan step waits for, by their numbers in the plan."""
    needed = {dep for local in sub for dep in local.depends_on}
    return sorted(renumber[local.step] for local in sub if local.step not in needed)


def _rewired(step: PlanStep, number: int, sinks: list[int]) -> PlanStep:
    """A step that waited for step `number` waits for the sub-plan's last steps instead."""
    if number not in step.depends_on:
        return step
    deps = {dep for dep in step.depends_on if dep != number} | set(sinks)
    return step.model_copy(update={"depends_on": sorted(deps)})


def _placed(local: PlanStep, renumber: dict[int, int], target: PlanStep, parent: str) -> PlanStep:
    """A sub-plan step as it stands in the plan; the sub-plan's first steps wait for what the
    replaced step waited for."""
    deps = sorted(renumber[dep] for dep in local.depends_on) or sorted(target.depends_on)
    return local.model_copy(
        update={"step": renumber[local.step], "depends_on": deps, "parent": parent}
    )


def _in_dependency_order(steps: list[PlanStep]) -> list[PlanStep]:
    """Stable: a plan already in order stays as it is; the final check stays last."""
    position = {step.step: index for index, step in enumerate(steps)}
    try:
        order = stable_topological_order(
            [[position[dep] for dep in step.depends_on if dep in position] for step in steps]
        )
    except CycleError:
        raise ExpandRejected(
            "the plan to expand has a dependency cycle", code="invalid_previous"
        ) from None
    return [steps[index] for index in order]
