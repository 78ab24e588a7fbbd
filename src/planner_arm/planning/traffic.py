"""What this process has measured of its own plan requests, for /capabilities.

The seed hard-codes a latency and a success rate; we report what we served instead, over a
window of recent requests, and say whether there has been any traffic yet.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

# Used until the first plan request: the seed's published figures.
SEED_AVERAGE_LATENCY_MS = 1500.0
SEED_SUCCESS_RATE = 0.92


@dataclass
class TrafficStats:
    window: int = 1000
    _latencies_ms: deque[float] = field(init=False)
    _succeeded: deque[bool] = field(init=False)
    plans_by_source: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._latencies_ms = deque(maxlen=self.window)
        self._succeeded = deque(maxlen=self.window)

    def record_plan(self, source: str, latency_ms: float) -> None:
        self._latencies_ms.append(latency_ms)
        self._succeeded.append(True)
        self.plans_by_source[source] += 1

    def record_failure(self, latency_ms: float) -> None:
        """A plan request the service could not answer with a plan (a 5xx)."""
        self._latencies_ms.append(latency_ms)
        self._succeeded.append(False)

    @property
    def measured(self) -> bool:
        return bool(self._succeeded)

    @property
    def average_latency_ms(self) -> float:
        if not self._latencies_ms:
            return SEED_AVERAGE_LATENCY_MS
        return round(sum(self._latencies_ms) / len(self._latencies_ms), 3)

    @property
    def success_rate(self) -> float:
        if not self._succeeded:
            return SEED_SUCCESS_RATE
        return round(sum(self._succeeded) / len(self._succeeded), 4)
