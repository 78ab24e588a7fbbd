"""One place that records a finished plan request: the metrics, the traffic figures that
/capabilities reports, the one `plan_created` log line, and the answer's plan id, source and
step count on the request's span when it is traced.

The plan service records every answer once, planned or repeated (a cache hit, a follower of a
shared planning run). Work is counted once: repairs and the planning latency belong to the
answer that did the planning, not to its repeats.

/capabilities reports what this process served, over a window of recent requests, and says
whether there has been any traffic yet. Latency is measured over the answers that were planned
(by the model or the fallback), not over repeats from the cache, which take about no time and
would make planning look faster than it is; the model's own path is reported apart as well.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

import structlog
from opentelemetry import trace

from planner_arm.metrics import PlannerMetrics
from planner_arm.plan.schemas import PlanRequest, PlanResponse
from planner_arm.tracing import PLAN_ID, PLAN_SOURCE, PLAN_STEPS

# The goal is the caller's text: only its opening is logged, so logs stay small and hold
# as little of it as they can.
LOG_GOAL_CHARS = 100


# Reported until the first plan request: the figures this service is specified with.
UNMEASURED_LATENCY_MS = 1500.0
UNMEASURED_SUCCESS_RATE = 0.92


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
        """Over the planned answers and the failures; the specified figure until there are any."""
        average = _average(self._latencies_ms)
        return UNMEASURED_LATENCY_MS if average is None else average

    @property
    def model_latency_ms(self) -> float | None:
        """Over the model's own plans only; None until the model has made one."""
        return _average(self._model_latencies_ms)

    @property
    def success_rate(self) -> float:
        if not self._succeeded:
            return UNMEASURED_SUCCESS_RATE
        return round(sum(self._succeeded) / len(self._succeeded), 4)

    @property
    def model_success_rate(self) -> float | None:
        """The share of the requests a model was asked for that it answered with a usable
        plan. `success_rate` counts a fallback plan as a success, so it stays 1.0 through a
        model outage; this one does not. None until a model has been asked."""
        if not self._model_succeeded:
            return None
        return round(sum(self._model_succeeded) / len(self._model_succeeded), 4)


class PlanRecorder:
    def __init__(self, metrics: PlannerMetrics, stats: TrafficStats | None = None) -> None:
        self.metrics = metrics
        self.stats = stats if stats is not None else TrafficStats()
        # Bound once: a module-level lazy logger rebuilds itself on every call.
        self._log = structlog.get_logger("planner_arm.service.recorder").bind()

    def planned(self, response: PlanResponse, request: PlanRequest, *, repeat: bool) -> None:
        """An answered plan request. `repeat`: the plan was made for another request (a cache
        hit, or a follower of a shared planning run), so its repairs are not counted again."""
        meta = response.metadata
        metrics = self.metrics
        metrics.child(metrics.plans, meta.source).inc()
        metrics.plan_steps.observe(len(response.plan))
        if not repeat:
            for note in meta.repairs:
                metrics.child(metrics.repairs, note.code).inc()
        reason = _fallback_reason(response) if meta.source == "fallback" else None
        model_asked = meta.source == "llm" or reason not in (None, "llm_disabled")
        self.stats.record_plan(meta.source, meta.latency_ms, repeat=repeat, model_asked=model_asked)
        span = trace.get_current_span()
        if span.is_recording():
            span.set_attributes(
                {
                    PLAN_ID: response.plan_id,
                    PLAN_SOURCE: meta.source,
                    PLAN_STEPS: len(response.plan),
                }
            )
        fields: dict[str, Any] = {
            "request_id": response.request_id,
            "plan_id": response.plan_id,
            "goal": request.goal[:LOG_GOAL_CHARS],
            "source": meta.source,
            "model": meta.model,
            "attempts": meta.attempts,
            "steps": len(response.plan),
            "repairs": len(meta.repairs),
            "duration_ms": meta.latency_ms,
        }
        if meta.source == "fallback":  # why the rules answered, without reading the body
            fields["fallback_reason"] = reason
        if meta.cached_plan_id is not None:
            fields["cached_plan_id"] = meta.cached_plan_id
        if response.parent_plan_id is not None:  # a replan: where it sits in its chain
            fields |= {"version": response.version, "parent_plan_id": response.parent_plan_id}
        self._log.info("plan_created", **fields)

    def failed(self, latency_ms: float) -> None:
        """A plan request answered with an error instead of a plan (the fallback is off)."""
        self.stats.record_failure(latency_ms)


def _fallback_reason(response: PlanResponse) -> str | None:
    """The reason of the answer's `fallback_used` warning (its detail opens with it)."""
    for note in response.metadata.warnings:
        if note.code == "fallback_used":
            return note.detail.split(":", 1)[0].strip()
    return None
