"""The caller's budget on /plan: a budget no valid plan can meet is refused before any model
call, a model answer over budget is sent back (one repair prompt), and a model call is not
made once its likely cost would pass `max_llm_usd`. The limits themselves are plan/budget.py's.
"""

from __future__ import annotations

from collections.abc import Sequence

from planner_arm.config import Settings
from planner_arm.config_sections import PlanningSettings
from planner_arm.errors import BudgetExceeded, PlanValidationError
from planner_arm.llm.prompts import Message
from planner_arm.plan.budget import budget_problems, call_within_budget, estimate_call_usd
from planner_arm.plan.schemas import Budget, PlanStep
from planner_arm.plan.spend import Spend, price_for


def refuse_impossible_budget(budget: Budget | None, planning: PlanningSettings) -> None:
    """BudgetExceeded when the budget allows fewer steps than any valid plan has: asking a
    model for it would only spend calls on answers that cannot be used."""
    if budget is None or budget.max_steps is None or budget.max_steps >= planning.min_steps:
        return
    raise BudgetExceeded(
        f"no plan fits the budget: it allows {budget.max_steps} steps, and the smallest plan "
        f"allowed has {planning.min_steps}",
        figures={"max_steps": budget.max_steps, "steps": planning.min_steps},
    )


def check_answer_budget(steps: Sequence[PlanStep], budget: Budget | None) -> None:
    """PlanValidationError `over_budget` naming each limit the model's plan passes, so the
    attempt loop sends it back with those problems in the repair prompt."""
    problems = budget_problems(steps, budget)
    if problems:
        raise PlanValidationError("; ".join(problems), code="over_budget", errors=problems)


def spend_allows(
    model: str, messages: list[Message], spend: Spend, budget: Budget | None, settings: Settings
) -> bool:
    """False once the next call's likely cost would take the spend past max_llm_usd."""
    if budget is None or budget.max_llm_usd is None:
        return True
    prompt_chars = sum(len(message["content"]) for message in messages)
    price = price_for(model, settings.pricing)
    estimate = estimate_call_usd(spend, prompt_chars, settings.model.max_tokens, price)
    return call_within_budget(spend, budget, estimate)


def reserve_call(
    model: str, messages: list[Message], spend: Spend, budget: Budget | None, settings: Settings
) -> float | None:
    """For calls made side by side: the next call's likely cost, set aside in
    `spend.reserved` (the caller gives it back once the call is paid); None when it would take
    the spend, with what the calls in flight set aside, past max_llm_usd."""
    if budget is None or budget.max_llm_usd is None:
        return 0.0
    prompt_chars = sum(len(message["content"]) for message in messages)
    price = price_for(model, settings.pricing)
    estimate = estimate_call_usd(spend, prompt_chars, settings.model.max_tokens, price)
    if not call_within_budget(spend, budget, estimate):
        return None
    spend.reserved += estimate
    return estimate
