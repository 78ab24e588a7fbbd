"""HTTP endpoints: parse the request, call the planner, shape the answer. Nothing more."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version as package_version
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from planner_arm.config import Settings
from planner_arm.errors import PlannerError
from planner_arm.llm import LLMClient
from planner_arm.metrics import PROMETHEUS_CONTENT_TYPE, PlannerMetrics
from planner_arm.plan_cache import CachingPlanner
from planner_arm.planner import PlannerArm
from planner_arm.schemas import (
    ArmInfo,
    CapabilitiesResponse,
    ErrorResponse,
    HealthResponse,
    PlanRequest,
    PlanResponse,
    ReadyResponse,
)
from planner_arm.traffic import TrafficStats

SERVICE_CAPABILITIES = ["planning", "task_decomposition", "dependency_resolution", "arm_selection"]
SERVICE_COST_TIER = 2


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
    llm: LLMClient | None = None
    state: str = "starting"  # starting | ready | stopping

    def begin_shutdown(self) -> None:
        """From now on /ready says 503, so the orchestrator sends no new work."""
        self.state = "stopping"
        self.metrics.ready.set(0)

    def llm_status(self) -> Literal["configured", "degraded", "disabled"]:
        if not self.settings.llm_enabled:
            return "disabled"
        guarded = self.planner.llm if self.planner else None
        if guarded is not None and guarded.breakers.degraded:
            return "degraded"
        return "configured"

    def circuits(self) -> dict[str, str]:
        guarded = self.planner.llm if self.planner else None
        return guarded.breakers.states() if guarded is not None else {}


def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


def get_planner(services: Annotated[Services, Depends(get_services)]) -> CachingPlanner:
    if services.plans is None or services.state == "starting":
        raise PlannerError("the planner is not ready", code="not_ready")
    return services.plans


ServicesDep = Annotated[Services, Depends(get_services)]
PlannerDep = Annotated[CachingPlanner, Depends(get_planner)]


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": ErrorResponse} for code in codes}


router = APIRouter()


@router.post(
    "/plan",
    response_model=PlanResponse,
    responses=_errors(413, 422, 502, 503, 504),
)
async def create_plan(
    body: PlanRequest, request: Request, planner: PlannerDep, services: ServicesDep
) -> PlanResponse:
    """Turn a goal into a validated, executable plan."""
    no_cache = "no-cache" in request.headers.get("cache-control", "").lower()
    if body.request_id:
        request.scope["state"]["request_id"] = body.request_id
    request_id: str = request.scope["state"]["request_id"]
    started = time.perf_counter()
    try:
        response = await planner.plan(
            body, request_id, use_cache=body.options.use_cache and not no_cache
        )
    except PlannerError:
        services.stats.record_failure((time.perf_counter() - started) * 1000)
        raise
    services.stats.record_plan(response.metadata.source, response.metadata.latency_ms)
    return response


@router.get("/health", response_model=HealthResponse)
async def health(services: ServicesDep) -> HealthResponse:
    """Liveness: the process answers. Never calls the LLM."""
    return HealthResponse(
        status="healthy",
        version=service_version(),
        model=services.settings.model.name,
        timestamp=datetime.now(UTC).isoformat(),
        uptime_seconds=round(time.monotonic() - services.started_at, 3),
        llm=services.llm_status(),
        circuits=services.circuits(),
    )


@router.get("/ready", response_model=ReadyResponse, responses=_errors(503))
async def ready(services: ServicesDep) -> ReadyResponse:
    """Readiness: 200 once the planner is built, 503 before that and while shutting down."""
    if services.state != "ready":
        raise PlannerError(f"the service is {services.state}", code="not_ready")
    return ReadyResponse(status="ready")


@router.get("/capabilities", response_model=CapabilitiesResponse)
async def capabilities(services: ServicesDep) -> CapabilitiesResponse:
    """What this arm does, measured from this process's own traffic."""
    settings = services.settings
    stats = services.stats
    return CapabilitiesResponse(
        arm_id="planner",
        capabilities=SERVICE_CAPABILITIES,
        cost_tier=SERVICE_COST_TIER,
        average_latency_ms=stats.average_latency_ms,
        success_rate=stats.success_rate,
        measured=stats.measured,
        plans_by_source=dict(stats.plans_by_source),
        arms=[
            ArmInfo(id=a.id, capabilities=a.capabilities, description=a.description)
            for a in settings.arms
        ],
        min_steps=settings.planning.min_steps,
        max_steps=settings.planning.max_steps,
        models=settings.model.chain,
        llm="configured" if settings.llm_enabled else "disabled",
    )


@router.get("/metrics", response_class=Response)
async def metrics(services: ServicesDep) -> Response:
    """Prometheus text format."""
    return Response(services.metrics.render(), media_type=PROMETHEUS_CONTENT_TYPE)


def error_response(status: int, code: str, detail: Any, request_id: str) -> JSONResponse:
    body = ErrorResponse(error=code, detail=detail, request_id=request_id)
    return JSONResponse(body.model_dump(), status_code=status)
