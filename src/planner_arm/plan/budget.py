"""The caller's budget: what a plan may not exceed (steps, critical path) and when model calls
must stop (`max_llm_usd`, which the attempt loop keeps: llm/usage.py).

A budget no valid plan can meet is refused before any model call, and a model answer over
budget is sent back (one repair prompt).
"""

from __future__ import annotations

from collections.abc import Sequence

from planner_arm.errors import BudgetExceeded, PlanValidationError
from planner_arm.plan.estimation import critical_path_duration
from planner_arm.plan.schemas import Budget, PlanStep


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
