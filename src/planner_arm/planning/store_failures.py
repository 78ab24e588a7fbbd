"""One way to note a store operation that failed: the answer goes out without it, and the
metric and the log line say so."""

from __future__ import annotations

import structlog

from planner_arm.errors import StoreUnavailable
from planner_arm.metrics import PlannerMetrics


def note_store_failure(metrics: PlannerMetrics, operation: str, error: StoreUnavailable) -> None:
    metrics.child(metrics.store_errors, operation).inc()
    cause = error.__cause__
    structlog.get_logger("planner_arm.store").warning(
        "store_failed", operation=operation, error=error.detail, cause=str(cause or "")[:200]
    )
