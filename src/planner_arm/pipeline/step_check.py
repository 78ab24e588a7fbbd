"""The checks one streamed step can pass on its own, before the rest of the plan is written.

A step is sent early only when it reads the same way alone as inside the whole answer: its
number is its position, its arm resolves (by id, alias or the selector), it has an action and
a non-empty acceptance criterion, and it depends only on steps already sent. Its estimates are
filled exactly as validation fills them. Anything else waits for the final plan, which stays
the authority: a step sent early that the final checks change is withdrawn then.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from planner_arm.errors import PlanParseError, PlanValidationError
from planner_arm.pipeline.normalise import normalise_plan
from planner_arm.plan.arms import ArmResolver
from planner_arm.plan.draft import DraftPlan, repair_code
from planner_arm.plan.schemas import PlanStep
from planner_arm.plan.validation import PlanRules, validate_plan

# Repairs that depend on the rest of the plan (names of other steps, renumbering): such a
# step may read differently once the whole answer is known.
_PLAN_WIDE_REPAIRS = frozenset({"step_id_mapped", "dependency_dropped", "dependency_reference"})


def checked_step(
    raw: Any, position: int, sent: frozenset[int], arms: ArmResolver, rules: PlanRules
) -> PlanStep | None:
    """`raw` (the model's step object) as the /plan step numbered `position`, or None when it
    cannot be checked alone or depends on a step not sent yet."""
    if not isinstance(raw, dict):
        return None
    try:
        draft = normalise_plan({"plan": [raw]}, arms)
    except PlanParseError:
        return None
    if len(draft.steps) != 1 or any(
        repair_code(entry) in _PLAN_WIDE_REPAIRS for entry in draft.repairs
    ):
        return None
    step = draft.steps[0]
    if step.step not in (None, position) or not step.action.strip():
        return None
    if step.required_arm not in rules.arm_ids:
        return None
    if not any(text.strip() for text in step.acceptance_criteria):
        return None
    depends_on = step.depends_on
    if len(set(depends_on)) != len(depends_on) or not set(depends_on) <= sent:
        return None
    alone = DraftPlan(steps=[dataclasses.replace(step, step=1, depends_on=[])])
    one_step = dataclasses.replace(rules, min_steps=1, max_steps=1, require_validation_step=False)
    try:
        valid = validate_plan(alone, one_step)
    except PlanValidationError:
        return None
    return valid.steps[0].model_copy(update={"step": position, "depends_on": sorted(depends_on)})
