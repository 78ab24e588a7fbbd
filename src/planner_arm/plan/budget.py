"""The caller's budget: what a plan may not exceed (steps, critical path) and when model calls
must stop (`max_llm_usd`, which the attempt loop keeps: llm/usage.py).

A budget no valid plan can meet is refused before any model call, and a model answer over
budget is sent back (one repair prompt).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from planner_arm.config import PlanningSettings
from planner_arm.errors import BudgetExceeded, PlanValidationError
from planner_arm.plan.draft import DraftPlan
from planner_arm.plan.estimation import critical_path_duration
from planner_arm.plan.schemas import Budget, PlanRequest, PlanStep
from planner_arm.plan.validation import PlanRules, ValidPlan, validate_plan


def budget_problems(steps: Sequence[PlanStep], budget: Budget | None) -> list[str]:
    """One sentence per limit the plan passes, with both figures; [] when it fits."""
    if budget is None:
        return []
    problems = []
    if budget.max_steps is not None and len(steps) > budget.max_steps:
        problems.append(f"the plan has {len(steps)} steps; the budget allows {budget.max_steps}")
    if budget.max_duration_seconds is not None:
        longest = critical_path_duration(steps)
        if longest > budget.max_duration_seconds:
            problems.append(
                f"the critical path takes {longest} s; the budget allows "
                f"{budget.max_duration_seconds} s"
            )
    return problems


def budget_figures(steps: Sequence[PlanStep], budget: Budget) -> dict[str, float | int]:
    """The figures a budget_exceeded error carries: each limit and the plan's value."""
    figures: dict[str, float | int] = {}
    if budget.max_steps is not None:
        figures |= {"max_steps": budget.max_steps, "steps": len(steps)}
    if budget.max_duration_seconds is not None:
        figures |= {
            "max_duration_seconds": budget.max_duration_seconds,
            "critical_path_duration": critical_path_duration(steps),
        }
    return figures


def describe_budget(budget: Budget | None) -> str:
    """The budget as a rule for the model's prompt; "" when there is none worth telling."""
    if budget is None:
        return ""
    rules = []
    if budget.max_steps is not None:
        rules.append(f"at most {budget.max_steps} steps in all")
    if budget.max_duration_seconds is not None:
        rules.append(
            f"the longest chain of dependent steps (the critical path) at most "
            f"{budget.max_duration_seconds} seconds in total"
        )
    return ("Budget: " + "; ".join(rules) + ".") if rules else ""


def refuse_impossible_budget(budget: Budget | None, min_steps: int) -> None:
    """BudgetExceeded when the budget allows fewer steps than any valid plan has (`min_steps`,
    the plan rules'): asking a model for it would only spend calls on answers that cannot be
    used."""
    if budget is None or budget.max_steps is None or budget.max_steps >= min_steps:
        return
    raise BudgetExceeded(
        f"no plan fits the budget: it allows {budget.max_steps} steps, and the smallest plan "
        f"allowed has {min_steps}",
        figures={"max_steps": budget.max_steps, "steps": min_steps},
    )


def check_answer_budget(steps: Sequence[PlanStep], budget: Budget | None) -> None:
    """PlanValidationError `over_budget` naming each limit the model's plan passes, so the
    attempt loop sends it back with those problems in the repair prompt."""
    problems = budget_problems(steps, budget)
    if problems:
        raise PlanValidationError("; ".join(problems), code="over_budget", errors=problems)


def fit_to_budget(
    draft_of: Callable[[PlanningSettings], DraftPlan],
    planning: PlanningSettings,
    rules: PlanRules,
    budget: Budget | None,
) -> tuple[DraftPlan, ValidPlan]:
    """The plan `draft_of` makes with as many steps as the planning limits and the budget
    allow (it is given the limits with `max_steps` set to the size tried); BudgetExceeded when
    even the smallest does not fit.

    Fewer steps also shorten the critical path, so sizes are tried from the largest allowed
    down to `min_steps`; durations are never shrunk to fit (they are estimates, not wishes).
    """
    largest = planning.max_steps
    if budget is not None and budget.max_steps is not None:
        largest = min(largest, budget.max_steps)
    best: tuple[DraftPlan, ValidPlan] | None = None
    for size in range(largest, planning.min_steps - 1, -1):
        draft = draft_of(planning.model_copy(update={"max_steps": size}))
        best = (draft, validate_plan(draft, rules))
        if not budget_problems(best[1].steps, budget):
            return best
    if best is None:  # the budget allows fewer steps than the configured minimum
        draft = draft_of(planning)
        best = (draft, validate_plan(draft, rules))
    assert budget is not None  # without a budget the first size fits
    problems = budget_problems(best[1].steps, budget)
    raise BudgetExceeded(
        "no plan fits the budget: " + "; ".join(problems)
        + f" (the smallest plan allowed has {planning.min_steps} steps)",
        figures=budget_figures(best[1].steps, budget),
    )  # fmt: skip


@dataclass
class BudgetedPlanner:
    """A rule-based planner, of the configured agents (`rules/planner.py`) or of a caller's
    tool set (`tools/planner.py`): each says how it drafts a request within planning limits,
    and this fits that draft to the budget."""

    planning: PlanningSettings
    rules: PlanRules
    confidence: float

    def draft(self, request: PlanRequest, planning: PlanningSettings) -> DraftPlan:
        """The request's rule-based draft within `planning`'s limits."""
        raise NotImplementedError

    def plan(self, request: PlanRequest, budget: Budget | None) -> tuple[DraftPlan, ValidPlan]:
        """The rule-based plan of `request` that fits `budget` (BudgetExceeded when none)."""
        return fit_to_budget(
            lambda planning: self.draft(request, planning), self.planning, self.rules, budget
        )

    def whole_plan(self, request: PlanRequest) -> Sequence[PlanStep]:
        """The goal's rule-based plan, within the budget when one fits, else as it comes (a
        replan checks the budget on its own revision)."""
        try:
            return self.plan(request, request.budget)[1].steps
        except BudgetExceeded:
            return validate_plan(self.draft(request, self.planning), self.rules).steps
