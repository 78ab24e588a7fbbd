"""How long one model call may take: its own timeout, bounded by what the request's deadline
leaves once time is kept back for the next model of the chain and for the fallback.

Without the bound a hanging model would run until the deadline cancelled it: never counted
as a timeout, its circuit never opening, and no time left for the next model.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner_arm.config import Settings


@dataclass(frozen=True)
class CallBudget:
    call_timeout: float
    next_model_reserve: float
    fallback_reserve: float

    @classmethod
    def from_settings(cls, settings: Settings) -> CallBudget:
        return cls(
            call_timeout=settings.model.call_timeout_seconds,
            next_model_reserve=settings.retry.next_model_reserve_seconds,
            fallback_reserve=settings.retry.fallback_reserve_seconds,
        )

    def kept_back(self, remaining: float, models_after: int) -> float:
        """Seconds of `remaining` that this model may not use: the fallback's share, and
        the next model's when there is one (never more than half of what is left)."""
        usable = max(0.0, remaining - self.fallback_reserve)
        next_model = min(self.next_model_reserve, usable / 2) if models_after else 0.0
        return self.fallback_reserve + next_model

    def for_call(self, remaining: float, models_after: int) -> float:
        """Seconds the next call of this model may take; 0 when it has no time at all."""
        usable = remaining - self.kept_back(remaining, models_after)
        return max(0.0, min(self.call_timeout, usable))

    def wait_fits(
        self, wait: float, remaining: float, models_after: int, min_call_seconds: float
    ) -> bool:
        """Would a retry after `wait` seconds still leave its call `min_call_seconds`?"""
        return wait + min_call_seconds <= remaining - self.kept_back(remaining, models_after)
