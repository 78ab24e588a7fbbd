"""The rule-based plan within the caller's budget: the template fitted to fewer steps until the
plan fits, or `BudgetExceeded` with the figures of the smallest plan when none does."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from planner_arm.config_sections import PlanningSettings
from planner_arm.errors import BudgetExceeded
from planner_arm.plan.arms import ArmResolver
from planner_arm.plan.budget import budget_figures, budget_problems
from planner_arm.plan.draft import DraftPlan
from planner_arm.plan.schemas import Budget
from planner_arm.plan.validation import PlanRules, ValidPlan, validate_plan
from planner_arm.planning.fallback import fallback_plan


def budgeted_fallback(
    goal: str,
    constraints: Sequence[str],
    context: Mapping[str, Any],
    *,
    planning: PlanningSettings,
    resolver: ArmResolver,
    rules: PlanRules,
    budget: Budget | None,
) -> tuple[DraftPlan, ValidPlan]:
    """The fallback plan, with as many steps as the planning limits and the budget allow.

    Fewer steps also shorten the critical path, so sizes are tried from the largest allowed
    down to `min_steps`; durations are never shrunk to fit (they are estimates, not wishes).
    """
    largest = planning.max_steps
    if budget is not None and budget.max_steps is not None:
        largest = min(largest, budget.max_steps)
    best: tuple[DraftPlan, ValidPlan] | None = None
    for size in range(largest, planning.min_steps - 1, -1):
        fitted = planning.model_copy(update={"max_steps": size})
        draft = fallback_plan(goal, constraints, context, planning=fitted, resolver=resolver)
        valid = validate_plan(draft, rules)
        best = (draft, valid)
        if not budget_problems(valid.steps, budget):
            return best
    if best is None:  # the budget allows fewer steps than the configured minimum
        draft = fallback_plan(goal, constraints, context, planning=planning, resolver=resolver)
        best = (draft, validate_plan(draft, rules))
    assert budget is not None  # without a budget the first size fits
    problems = budget_problems(best[1].steps, budget)
    raise BudgetExceeded(
        "no plan fits the budget: " + "; ".join(problems)
        + f" (the smallest plan allowed has {planning.min_steps} steps)",
        figures=budget_figures(best[1].steps, budget),
    )  # fmt: skip
