"""OpenAPI extras of POST /plan/expand: every status with an example."""

from __future__ import annotations

import copy
from typing import Any

from planner_arm.api import openapi_examples as examples
from planner_arm.api.lifecycle_docs import PLAN_WITH_KEY_RESPONSES, REPLAN_RESPONSES
from planner_arm.api.openapi_docs import error_doc, ok_doc


def _expanded_example() -> dict[str, Any]:
    """The /plan example with step 2 detailed in steps 5-7."""
    plan = copy.deepcopy(examples.PLAN)
    first, _, test, check = plan["plan"]
    sub = [
        {**first, "step": 5, "action": "Read the token expiry check in auth/login.py",
         "acceptance_criteria": ["Expiry comparison located"], "depends_on": [1], "parent": "2",
         "estimated_cost_tier": 1, "estimated_duration_seconds": 20},
        {**first, "step": 6, "action": "Patch the expiry comparison to use UTC", "parent": "2",
         "required_arm": "coder", "acceptance_criteria": ["Patch addresses the root cause"],
         "depends_on": [5], "estimated_cost_tier": 3, "estimated_duration_seconds": 40},
        {**check, "step": 7, "action": "Check that the patch fixes the expiry check",
         "acceptance_criteria": ["Patch addresses the root cause"], "depends_on": [6],
         "parent": "2"},
    ]  # fmt: skip
    plan["plan"] = [first, *sub, test, {**check, "depends_on": [3, 7]}]
    plan.update(
        version=2,
        parent_plan_id=plan["plan_id"],
        plan_id="9a1e7c3d5b2f4e6a8c0d1f3b5a7e9c2d",
        replan_count=0,
        diff={"kept": [1, 3, 4], "removed": [2], "added": [5, 6, 7]},
        parallel_stages=[[1], [3, 5], [6], [7], [4]],
        total_estimated_duration=180,
        critical_path_duration=140,
    )
    return plan


EXPAND = _expanded_example()

EXPAND_RESPONSES: dict[int | str, dict[str, Any]] = {
    **PLAN_WITH_KEY_RESPONSES,
    200: ok_doc(
        "The new version of the plan: the step replaced by its sub-plan, numbered above the "
        "highest, each new step's `parent` the replaced step; `diff` says what changed.",
        EXPAND,
    ),
    404: REPLAN_RESPONSES[404],
    422: error_doc(
        "The body breaks a limit, or names a step the plan does not have (`unknown_step`), "
        "the plan's final check (`step_not_expandable`), a plan with no room for a sub-plan "
        "(`plan_too_large`), a plan with a dependency cycle or an unknown dependency "
        "(`invalid_previous`), no expansion fits the budget (`budget_exceeded`, with "
        "`figures`), or reuses an Idempotency-Key with another body (`idempotency_key_reused`).",
        "unknown_step",
        "the plan has no step 9 (it has steps [1, 2, 3, 4])",
        errors=[{"code": "unknown_step", "message": "no step 9", "step": 9}],
    ),
}
