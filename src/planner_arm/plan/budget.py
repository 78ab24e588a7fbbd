"""The caller's budget and what a request's model calls cost.

The budget says what a plan may not exceed (steps, critical path) and when model calls must
stop (spend): a budget no valid plan can meet is refused before any model call, and a model
answer over budget is sent back (one repair prompt). `Spend` adds up one request's calls
(tokens and dollars, across retries and models) from the price table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from planner_arm.config import PlanningSettings, Price
from planner_arm.errors import BudgetExceeded, PlanValidationError
from planner_arm.plan.estimation import critical_path_duration
from planner_arm.plan.schemas import Budget, PlanStep


@dataclass
class Spend:
    """What one request's LLM calls cost, added up across retries and models."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: float = 0.0
    # The likely cost of calls in flight, set aside so calls made at once see each other.
    reserved: float = 0.0
    warnings: list[str] = field(default_factory=list)

    def warn_once(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)


def price_for(model: str, pricing: Mapping[str, Price]) -> Price | None:
    """The price of `model`, or of the longest priced name it extends with '-'
    ("gpt-4o-mini-2024-07-18" -> "gpt-4o-mini"); None when nothing matches. Case-insensitive.
    """
    wanted = model.strip().lower()
    best: tuple[int, Price] | None = None
    for name, price in pricing.items():
        key = name.lower()
        if (wanted == key or wanted.startswith(key + "-")) and (best is None or len(key) > best[0]):
            best = (len(key), price)
    return best[1] if best else None


def llm_cost_usd(
    model: str, prompt_tokens: int, completion_tokens: int, pricing: Mapping[str, Price]
) -> float:
    """USD for one call from the per-million prices; 0.0 for an unpriced model."""
    price = price_for(model, pricing)
    if price is None:
        return 0.0
    cost = (
        max(0, prompt_tokens) * price.input_per_million
        + max(0, completion_tokens) * price.output_per_million
    ) / 1_000_000
    return round(cost, 8)


# A token is about four characters of English; the estimate only has to be the right size.
CHARS_PER_TOKEN = 4


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


def estimate_call_usd(
    spend: Spend, prompt_chars: int, max_completion_tokens: int, price: Price | None
) -> float:
    """What the next model call will likely cost: the mean of this request's calls so far, or
    before the first one the prompt's size and a full-length answer at the model's price."""
    if spend.calls and spend.usd > 0:
        return spend.usd / spend.calls
    if price is None:
        return 0.0
    prompt_tokens = prompt_chars / CHARS_PER_TOKEN
    return (
        prompt_tokens * price.input_per_million + max_completion_tokens * price.output_per_million
    ) / 1_000_000


def call_within_budget(spend: Spend, budget: Budget | None, next_call_usd: float) -> bool:
    """False once the next call would take the request's spend past `budget.max_llm_usd`:
    the planner then stops calling models (and the rule-based planner answers)."""
    if budget is None or budget.max_llm_usd is None:
        return True
    return spend.usd + spend.reserved + next_call_usd <= budget.max_llm_usd


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
