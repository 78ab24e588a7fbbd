"""What a request's model calls cost: tokens and dollars added up, and the price table lookup.

Shared by the LLM layer (which adds each call) and the pipeline (which reports the total).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from planner_arm.config_sections import Price


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
