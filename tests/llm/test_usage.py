"""A request's bill: what a call costs at known prices, the next call's likely cost, and the cap
that stops the calls."""

from __future__ import annotations

import pytest

from planner_arm.config import Price
from planner_arm.llm.usage import Usage, estimate_call_usd, llm_cost_usd, price_for
from planner_arm.plan.schemas import Budget


def test_the_next_call_is_estimated_from_the_calls_so_far_or_the_prompt() -> None:
    price = Price(input_per_million=1.0, output_per_million=2.0)
    first = estimate_call_usd(Usage(), 4000, 500, price)
    assert first == pytest.approx((1000 * 1.0 + 500 * 2.0) / 1e6)
    assert estimate_call_usd(Usage(calls=2, usd=0.004), 4000, 500, price) == pytest.approx(0.002)
    assert estimate_call_usd(Usage(), 4000, 500, None) == 0.0


def test_calls_stop_once_the_spend_would_pass_the_limit() -> None:
    budget = Budget(max_llm_usd=0.01)
    assert Usage(usd=0.004, limit_usd=budget.max_llm_usd).within_limit(0.006)
    assert not Usage(usd=0.005, limit_usd=budget.max_llm_usd).within_limit(0.006)
    assert Usage(usd=5.0).within_limit(1.0)


# --- cost -----------------------------------------------------------------------------------

PRICES = {
    "gpt-4o": Price(input_per_million=2.50, output_per_million=10.00),
    "gpt-4o-mini": Price(input_per_million=0.15, output_per_million=0.60),
}


def test_cost_from_per_million_prices() -> None:
    # (1000 * 0.15 + 500 * 0.60) / 1e6
    assert llm_cost_usd("gpt-4o-mini", 1000, 500, PRICES) == pytest.approx(0.00045)
    # (1000 * 2.50 + 500 * 10.00) / 1e6
    assert llm_cost_usd("gpt-4o", 1000, 500, PRICES) == pytest.approx(0.0075)


@pytest.mark.parametrize(
    ("model", "priced_as"),
    [
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),  # longest matching name, not "gpt-4o"
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("GPT-4o-Mini", "gpt-4o-mini"),
    ],
)
def test_dated_model_names_use_their_base_price(model: str, priced_as: str) -> None:
    assert price_for(model, PRICES) == PRICES[priced_as]
    expected = llm_cost_usd(priced_as, 2000, 300, PRICES)
    assert llm_cost_usd(model, 2000, 300, PRICES) == expected > 0


@pytest.mark.parametrize("model", ["claude-3-haiku", "gpt-4omni", "gpt-4", ""])
def test_unpriced_model_costs_nothing(model: str) -> None:
    assert price_for(model, PRICES) is None
    assert llm_cost_usd(model, 1000, 1000, PRICES) == 0.0


def test_negative_token_counts_count_as_zero() -> None:
    assert llm_cost_usd("gpt-4o", -5, 1_000_000, PRICES) == 10.0
