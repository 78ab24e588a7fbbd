"""What a request's model calls use: the calls, tokens and dollars added up across retries and
models (the bill), the dollars set aside for calls in flight, whose calls they are and the
cap the caller put on them; and the prices that turn tokens into dollars.

A model whose server reports no token usage, or that has no price where it is served (the
built-in prices are OpenAI's, for OpenAI's API), costs 0: the bill says which and why
(`uncounted`), so the answer can say so too.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field

from planner_arm.config import Price

# A token is about four characters of English; the estimate only has to be the right size.
CHARS_PER_TOKEN = 4
# Why a call's cost may be missing from the bill.
USAGE_NOT_REPORTED = "usage_not_reported"
NO_PRICE = "no_price_for_model"


@dataclass
class Usage:
    """One request's model calls, added up. `owner`: whose they are (a principal's id, as the
    call slots are shared among them); `limit_usd`: the caller's cap on the dollars (its
    budget's max_llm_usd), None for none."""

    owner: Hashable = None
    limit_usd: float | None = None
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: float = 0.0
    # The likely cost of calls in flight, set aside so calls made at once see each other.
    reserved: float = 0.0
    # (reason, detail) for each model whose calls the dollars leave out, once each; the detail
    # starts with the model's name.
    uncounted: list[tuple[str, str]] = field(default_factory=list)
    # The dollars spent before this ledger began, when it is a part of a larger one.
    base_usd: float = 0.0

    def within_limit(self, next_call_usd: float) -> bool:
        """False once the next call would take the dollars, with those set aside for the
        calls in flight, past `limit_usd`: the models are then not asked again."""
        if self.limit_usd is None:
            return True
        return self.usd + self.reserved + next_call_usd <= self.limit_usd

    def not_counted(self, reason: str, detail: str) -> None:
        if (reason, detail) not in self.uncounted:
            self.uncounted.append((reason, detail))

    def part(self) -> Usage:
        """A ledger for calls made beside others of the same request (a hierarchical plan's
        nodes, each its own count of calls): it starts at the dollars spent so far, so the cap
        bounds the whole; `absorb` adds it back."""
        return Usage(self.owner, self.limit_usd, usd=self.usd, base_usd=self.usd)

    def absorb(self, part: Usage) -> None:
        """`part`'s calls added to this ledger (its dollars past those it started at)."""
        self.calls += part.calls
        self.prompt_tokens += part.prompt_tokens
        self.completion_tokens += part.completion_tokens
        self.usd += part.usd - part.base_usd
        for reason, detail in part.uncounted:
            self.not_counted(reason, detail)


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
    return cost_usd(price_for(model, pricing), prompt_tokens, completion_tokens)


def cost_usd(price: Price | None, prompt_tokens: int, completion_tokens: int) -> float:
    """USD for one call at `price` (per million tokens); 0.0 without a price."""
    if price is None:
        return 0.0
    cost = (
        max(0, prompt_tokens) * price.input_per_million
        + max(0, completion_tokens) * price.output_per_million
    ) / 1_000_000
    return round(cost, 8)


def estimate_call_usd(
    usage: Usage, prompt_chars: int, max_completion_tokens: int, price: Price | None
) -> float:
    """What the next model call will likely cost: the mean of this request's calls so far, or
    before the first one the prompt's size and a full-length answer at the model's price."""
    if usage.calls and usage.usd > 0:
        return usage.usd / usage.calls
    if price is None:
        return 0.0
    prompt_tokens = prompt_chars / CHARS_PER_TOKEN
    return (
        prompt_tokens * price.input_per_million + max_completion_tokens * price.output_per_million
    ) / 1_000_000
