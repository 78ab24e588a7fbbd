"""What this process has measured of its own plan requests, for /capabilities.

The seed hard-codes a latency and a success rate; we report what we served instead, over a
window of recent requests, and say whether there has been any traffic yet.

Latency is measured over the answers that were planned (by the model or the fallback), not
over repeats from the cache, which take about no time and would make planning look faster
than it is; the model's own path is reported apart as well.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

# Used until the first plan request: the seed's published figures.
SEED_AVERAGE_LATENCY_MS = 1500.0
SEED_SUCCESS_RATE = 0.92


def _average(values: deque[float]) -> float | None:
    return round(sum(values) / len(values), 3) if values else None


@dataclass
class TrafficStats:
    window: int = 1000
    _latencies_ms: deque[float] = field(init=False)
    _model_latencies_ms: deque[float] = field(init=False)
    _succeeded: deque[bool] = field(init=False)
    _model_succeeded: deque[bool] = field(init=False)
    plans_by_source: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._latencies_ms = deque(maxlen=self.window)
        self._model_latencies_ms = deque(maxlen=self.window)
        self._succeeded = deque(maxlen=self.window)
        self._model_succeeded = deque(maxlen=self.window)

    def record_plan(
        self, source: str, latency_ms: float, *, repeat: bool = False, model_asked: bool = False
    ) -> None:
        """An answered plan request; `repeat` when it repeated a plan made for another;
        `model_asked` when a model was asked for it (the plan is the model's, or a fallback
        after the model failed)."""
        self._succeeded.append(True)
        self.plans_by_source[source] += 1
        if repeat:
            return
        if model_asked:
            self._model_succeeded.append(source == "llm")
        self._latencies_ms.append(latency_ms)
        if source == "llm":
            self._model_latencies_ms.append(latency_ms)

    def record_failure(self, latency_ms: float) -> None:
        """A plan request the service could not answer with a plan (a 5xx)."""
        self._latencies_ms.append(latency_ms)
        self._succeeded.append(False)
        self._model_succeeded.append(False)  # only a failed model ends a request in an error

    @property
    def measured(self) -> bool:
        return bool(self._succeeded)

    @property
    def average_latency_ms(self) -> float:
        """Over the planned answers and the failures; the seed's figure until there are any."""
        average = _average(self._latencies_ms)
        return SEED_AVERAGE_LATENCY_MS if average is None else average

    @property
    def model_latency_ms(self) -> float | None:
        """Over the model's own plans only; None until the model has made one."""
        return _average(self._model_latencies_ms)

    @property
    def success_rate(self) -> float:
        if not self._succeeded:
            return SEED_SUCCESS_RATE
        return round(sum(self._succeeded) / len(self._succeeded), 4)

    @property
    def model_success_rate(self) -> float | None:
        """The share of the requests a model was asked for that it answered with a usable
        plan. `success_rate` counts a fallback plan as a success, so it stays 1.0 through a
        model outage; this one does not. None until a model has been asked."""
        if not self._model_succeeded:
            return None
        return round(sum(self._model_succeeded) / len(self._model_succeeded), 4)
