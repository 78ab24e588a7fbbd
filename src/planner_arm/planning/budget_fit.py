"""The rule-based planner as the strategies use it: a plan within the planning limits and the
caller's budget (the template fitted to fewer steps until the plan fits, or `BudgetExceeded`
with the figures of the smallest plan when none does), with the fixed confidence that lets a
caller tell it from a model's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from planner_arm.config_sections import PlanningSettings
from planner_arm.errors import BudgetExceeded
from planner_arm.plan.arms import ArmResolver
from planner_arm.plan.budget import budget_figures, budget_problems, refuse_impossible_budget
from planner_arm.plan.draft import DraftPlan
from planner_arm.plan.schemas import Budget, PlanRequest, PlanStep
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


class RuleBasedPlanner:
    def __init__(
        self,
        planning: PlanningSettings,
        resolver: ArmResolver,
        rules: PlanRules,
        confidence: float,
    ) -> None:
        self.planning = planning
        self.resolver = resolver
        self.rules = rules
        # Low and fixed, so a caller can tell a rule-based plan from a model's.
        self.confidence = confidence

    def refuse_impossible(self, budget: Budget | None) -> None:
        refuse_impossible_budget(budget, self.planning)

    def plan(self, request: PlanRequest, budget: Budget | None) -> tuple[DraftPlan, ValidPlan]:
        """The rule-based plan of `request` that fits `budget` (BudgetExceeded when none)."""
        return budgeted_fallback(
            request.goal,
            request.constraints,
            request.context,
            planning=self.planning,
            resolver=self.resolver,
            rules=self.rules,
            budget=budget,
        )

    def whole_plan(self, request: PlanRequest) -> Sequence[PlanStep]:
        """The goal's rule-based plan, within the budget when one fits, else as it comes (a
        replan checks the budget on its own revision)."""
        try:
            return self.plan(request, request.budget)[1].steps
        except BudgetExceeded:
            draft = fallback_plan(
                request.goal,
                request.constraints,
                request.context,
                planning=self.planning,
                resolver=self.resolver,
            )
            return validate_plan(draft, self.rules).steps
