"""When a call is sent again: on 429 and 503 (after the service's `Retry-After`), on an
Idempotency-Key still in progress (409), and when no answer came; never past a total bound.

A POST is sent again with the same Idempotency-Key, so the service answers a repeat with the
plan it already made: a retried call never plans twice.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from planner_arm.client.errors import Conflict, PlannerError, TransportError, Unavailable

# Without a Retry-After: 0.5 s, 1 s, 2 s, ... at most this.
MAX_BACKOFF_SECONDS = 8.0


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a `Retry-After` header: a number of seconds or an HTTP date."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def is_retryable(error: PlannerError) -> bool:
    """A failure another try may not have: busy, rate limited, starting, or no answer."""
    if isinstance(error, TransportError | Unavailable):
        return True
    return isinstance(error, Conflict) and error.code == "idempotency_in_progress"


@dataclass(frozen=True)
class RetryPolicy:
    """`retries` more tries after the first; every try and wait within `total_seconds`."""

    retries: int = 2
    total_seconds: float = 120.0

    def wait_before(self, attempt: int, error: PlannerError, remaining: float) -> float | None:
        """Seconds to wait before try `attempt + 1` (attempts count from 0) after `error`,
        or None when there is no further try: not retryable, none left, or the wait
        (the service's Retry-After, else a doubling backoff) would pass the bound."""
        if attempt >= self.retries or not is_retryable(error):
            return None
        if error.retry_after is not None:
            wait = error.retry_after
        else:
            wait = min(MAX_BACKOFF_SECONDS, 0.5 * 2**attempt)
        if wait >= remaining:
            return None
        return wait


class Tries:
    """The tries of one call, as both clients make them: each try's timeout (`per_try`
    seconds, cut to what is left of the total), and the wait before the next one."""

    def __init__(self, policy: RetryPolicy, per_try: float, clock: Callable[[], float]) -> None:
        self._policy = policy
        self._per_try = per_try
        self._clock = clock
        self._started = clock()
        self._attempt = 0

    def _remaining(self) -> float:
        return self._policy.total_seconds - (self._clock() - self._started)

    def timeout(self) -> float:
        """The bound of the next try."""
        return max(0.001, min(self._per_try, self._remaining()))

    def wait_after(self, error: PlannerError, cause: BaseException | None = None) -> float:
        """Seconds to wait before the next try after `error`; raises `error` (from `cause`)
        when there is none."""
        wait = self._policy.wait_before(self._attempt, error, self._remaining())
        if wait is None:
            raise error from cause
        self._attempt += 1
        return wait
