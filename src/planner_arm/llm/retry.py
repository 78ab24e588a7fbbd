"""When a failed model call is worth another try, how long to wait first, and the deadline.

The clock and the sleep are injected, so tests drive time by hand and never sleep for real.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from enum import Enum

from planner_arm.clock import Clock, Deadline
from planner_arm.config import RetrySettings
from planner_arm.errors import (
    LLMError,
    LLMRateLimited,
    LLMRejected,
    LLMTransientError,
    LLMUnsupportedFormat,
)


class Next(Enum):
    SAME_MODEL = "same_model"  # try the same model again, after `wait` seconds
    NEXT_MODEL = "next_model"  # this model will not answer this request: move on


@dataclass(frozen=True)
class Decision:
    next: Next
    reason: str
    wait: float = 0.0


@dataclass
class RetryPolicy:
    """Exponential backoff with jitter for transient errors; Retry-After for 429."""

    settings: RetrySettings
    clock: Clock = field(default_factory=Clock)
    rng: random.Random = field(default_factory=random.Random)

    def backoff(self, retry_number: int) -> float:
        """Seconds before retry `retry_number` (1 for the first retry)."""
        base = self.settings.backoff_base_seconds * 2.0 ** (retry_number - 1)
        capped = min(base, self.settings.backoff_max_seconds)
        spread = capped * self.settings.jitter
        return max(0.0, capped - spread + float(self.rng.random()) * spread)

    def decide(self, error: LLMError, retry_number: int) -> Decision:
        """What to do after `error`; `retry_number` is the retry this would be (1-based)."""
        if isinstance(error, LLMUnsupportedFormat):
            # The client now leaves response_format out for this model: try again at once.
            return Decision(Next.SAME_MODEL, "response_format_unsupported")
        if isinstance(error, LLMRejected):
            # Bad key, unknown model, context too long: the same call fails the same way.
            return Decision(Next.NEXT_MODEL, error.code)
        if isinstance(error, LLMRateLimited):
            wait = error.retry_after
            if wait is None:
                wait = self.backoff(retry_number)
            return Decision(Next.SAME_MODEL, "rate_limited", wait)
        if isinstance(error, LLMTransientError):
            return Decision(Next.SAME_MODEL, error.code, self.backoff(retry_number))
        return Decision(Next.NEXT_MODEL, error.code)

    async def wait(self, seconds: float, deadline: Deadline) -> bool:
        """Sleep before a retry if the retry can still start in time; False if it cannot.

        A wait that would leave no time for the call itself is not worth starting: the
        fallback answers sooner.
        """
        if seconds >= deadline.remaining():
            return False
        if seconds > 0:
            await self.clock.sleep(seconds)
        return not deadline.expired
