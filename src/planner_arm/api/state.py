"""What the handlers share: the services the lifespan builds, and the service version."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from importlib.metadata import version as package_version
from typing import Literal

from fastapi import Request

from planner_arm.config import Settings
from planner_arm.llm.client import LLMClient
from planner_arm.metrics import PlannerMetrics
from planner_arm.planning.cache import CachingPlanner
from planner_arm.planning.lifecycle import PlanLifecycle
from planner_arm.planning.planner import PlannerArm
from planner_arm.planning.traffic import TrafficStats
from planner_arm.store.base import PlanStore


def service_version() -> str:
    return package_version("planner-arm")


@dataclass
class Services:
    """What the handlers need, built by the app's lifespan and closed by it."""

    settings: Settings
    metrics: PlannerMetrics
    stats: TrafficStats
    started_at: float = field(default_factory=time.monotonic)
    planner: PlannerArm | None = None
    plans: CachingPlanner | None = None
    lifecycle: PlanLifecycle | None = None
    store: PlanStore | None = None
    llm: LLMClient | None = None
    state: str = "starting"  # starting | ready | stopping
    # The planning endpoints' API keys, as bytes for constant-time comparison.
    api_keys: list[bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.api_keys = [k.get_secret_value().encode() for k in self.settings.auth.api_keys]

    def begin_shutdown(self) -> None:
        """From now on /ready says 503, so the orchestrator sends no new work."""
        self.state = "stopping"
        self.metrics.ready.set(0)

    def llm_status(self) -> Literal["configured", "degraded", "disabled"]:
        if not self.settings.llm_enabled:
            return "disabled"
        if self.planner is not None and self.planner.model_health().degraded:
            return "degraded"
        return "configured"

    async def store_status(self) -> Literal["memory", "redis", "degraded"]:
        """The store's kind, or `degraded` when it does not answer now (plans still go out)."""
        if self.store is None:
            return "memory"
        return self.store.kind if await self.store.healthy() else "degraded"

    def circuits(self) -> dict[str, str]:
        return self.planner.model_health().circuits if self.planner is not None else {}


async def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services
