"""The one way tests build the service's objects: `make_service`, through the composition root,
so a constructor change touches only the root; and the request deadline and job a test passes
down to a strategy."""

from __future__ import annotations

import random
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from planner_arm.clock import Deadline
from planner_arm.llm.usage import Usage
from planner_arm.metrics import PlannerMetrics
from planner_arm.plan.schemas import Budget
from planner_arm.principal import ANONYMOUS
from planner_arm.service.wiring import Runtime, build_runtime
from planner_arm.strategies.job import Job
from support.app import FakeClock, make_settings

R = TypeVar("R", bound=BaseModel)


def make_service(clock: FakeClock | None = None, *, llm: bool = True, **overrides: Any) -> Runtime:
    """The service's object graph on `make_settings(llm, **overrides)`: with a model client
    (at the respx-mocked URL) unless `llm` is False, fresh metrics, `clock` (the real clock
    when None) and a seeded jitter source, so retry waits are the same on every run."""
    settings = make_settings(llm=llm, **overrides)
    return build_runtime(
        settings,
        metrics=PlannerMetrics("test", "test"),
        http_client=httpx.AsyncClient() if llm else None,
        clock=clock.as_clock() if clock is not None else None,
        rng=random.Random(3),
    )


def request_deadline(service: Runtime) -> Deadline:
    """A request's deadline, as the plan service builds it when a request arrives."""
    return Deadline(service.settings.planning.timeout_seconds, service.clock)


def request_job(
    runtime: Runtime,
    request: R,
    request_id: str = "r",
    deadline: Deadline | None = None,
    budget: Budget | None = None,
) -> Job[R]:
    """A request's job, as the plan service builds it, over the configured arms: within
    `deadline` (a request deadline of its own by default) and the cap of `budget` (the
    request's own when it has one)."""
    budget = budget or getattr(request, "budget", None)
    cap = budget.max_llm_usd if budget is not None else None
    return Job(
        request,
        request_id,
        deadline or request_deadline(runtime),
        runtime.plans.toolboxes.configured.plain,
        Usage(ANONYMOUS.id, cap),
    )
