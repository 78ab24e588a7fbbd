"""Time as the service sees it: a monotonic clock with its sleep, and a request's deadline.

Injected everywhere time matters (retries, circuits, caches, stores), so tests drive time by
hand and never sleep for real.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Clock:
    """Monotonic time and sleep; tests pass a fake of both."""

    now: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep


class Deadline:
    """The time one request has left, on an injected clock: built once when the request
    arrives and passed down to everything that waits on its behalf."""

    def __init__(self, seconds: float, clock: Clock) -> None:
        self._clock = clock
        self._started_at = clock.now()
        self._ends_at = self._started_at + seconds

    def elapsed_ms(self) -> float:
        """Milliseconds since the request arrived (an answer's `latency_ms`)."""
        return (self._clock.now() - self._started_at) * 1000

    def remaining(self) -> float:
        return max(0.0, self._ends_at - self._clock.now())

    @property
    def expired(self) -> bool:
        return self.remaining() <= 0.0
