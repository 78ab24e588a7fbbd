"""The one way tests build the service's objects: `make_service`, through the composition root,
so a constructor change touches only the root; and the request deadline a test passes down."""

from __future__ import annotations

import random
from typing import Any

import httpx

from planner_arm.clock import Deadline
from planner_arm.metrics import PlannerMetrics
from planner_arm.service.wiring import Service, build_service
from support.app import FakeClock, make_settings


def make_service(clock: FakeClock | None = None, *, llm: bool = True, **overrides: Any) -> Service:
    """The service's object graph on `make_settings(llm, **overrides)`: with a model client
    (at the respx-mocked URL) unless `llm` is False, fresh metrics, `clock` (the real clock
    when None) and a seeded jitter source, so retry waits are the same on every run."""
    settings = make_settings(llm=llm, **overrides)
    return build_service(
        settings,
        metrics=PlannerMetrics("test", "test"),
        http_client=httpx.AsyncClient() if llm else None,
        clock=clock.as_clock() if clock is not None else None,
        rng=random.Random(3),
    )


def request_deadline(service: Service) -> Deadline:
    """A request's deadline, as the plan service builds it when a request arrives."""
    return Deadline(service.settings.planning.timeout_seconds, service.clock)
