"""The one way tests build a planner: make_planner, so a constructor change touches only here."""

from __future__ import annotations

import random
from typing import Any

import httpx

from planner_arm.llm.client import LLMClient
from planner_arm.metrics import PlannerMetrics
from planner_arm.planning.planner import PlannerArm
from support.app import FakeClock, make_settings


def make_planner(
    clock: FakeClock | None = None, *, llm: bool = True, **overrides: Any
) -> PlannerArm:
    """A PlannerArm on `make_settings(llm, **overrides)`: with a model client (at the
    respx-mocked URL) unless `llm` is False, fresh metrics, `clock` (the real clock when None)
    and a seeded jitter source, so retry waits are the same on every run."""
    settings = make_settings(llm=llm, **overrides)
    client = LLMClient(settings, httpx.AsyncClient()) if llm else None
    return PlannerArm(
        settings,
        client,
        PlannerMetrics("test", "test"),
        clock.as_clock() if clock is not None else None,
        random.Random(3),
    )
