"""One place that records a finished plan request: the metrics, the traffic figures that
/capabilities reports, and the one `plan_created` log line.

The planner records the answers it planned; the cache records the answers it repeated (hits
and the followers of a shared planning run). Work is counted once: repairs and the planning
latency belong to the answer that did the planning, not to its repeats.
"""

from __future__ import annotations

from typing import Any

import structlog

from planner_arm.metrics import PlannerMetrics
from planner_arm.plan.schemas import PlanRequest, PlanResponse
from planner_arm.planning.traffic import TrafficStats

# The goal is the caller's text: only its opening is logged, so logs stay small and hold
# as little of it as they can.
LOG_GOAL_CHARS = 100


class PlanRecorder:
    def __init__(self, metrics: PlannerMetrics, stats: TrafficStats | None = None) -> None:
        self.metrics = metrics
        self.stats = stats if stats is not None else TrafficStats()
        # Bound once: a module-level lazy logger rebuilds itself on every call.
        self._log = structlog.get_logger("planner_arm.planning.recorder").bind()

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
