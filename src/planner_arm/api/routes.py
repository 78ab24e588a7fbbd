"""HTTP endpoints: parse the request, call the planner, shape the answer. Nothing more."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from planner_arm.api.auth import check_api_key
from planner_arm.api.openapi_docs import METRICS_RESPONSES, PLAN_RESPONSES, READY_RESPONSES
from planner_arm.api.state import Services, get_services, service_version
from planner_arm.errors import PlannerError
from planner_arm.metrics import PROMETHEUS_CONTENT_TYPE
from planner_arm.plan.schemas import (
    ArmInfo,
    CapabilitiesResponse,
    ErrorResponse,
    HealthResponse,
    PlanRequest,
    PlanResponse,
    ReadyResponse,
)
from planner_arm.planning.cache import CachingPlanner

SERVICE_CAPABILITIES = ["planning", "task_decomposition", "dependency_resolution", "arm_selection"]
SERVICE_COST_TIER = 2


async def planning_services(request: Request) -> tuple[Services, CachingPlanner]:
    """What a planning endpoint needs, once the caller's key and our readiness are checked.

    One dependency rather than several: FastAPI's dependency solving is a measurable part of
    a request's own cost (benchmarks/load.py).
    """
    services: Services = request.app.state.services
    check_api_key(request, services.api_keys)
    if services.plans is None or services.state == "starting":
        raise PlannerError("the planner is not ready", code="not_ready")
    return services, services.plans


ServicesDep = Annotated[Services, Depends(get_services)]
PlanningDep = Annotated[tuple[Services, CachingPlanner], Depends(planning_services)]


def planning_router(request_model: type[PlanRequest]) -> APIRouter:
    """The planning endpoints, behind the API key, with this app's request limits."""
    router = APIRouter()

    async def create_plan(
        body: PlanRequest, request: Request, planning: PlanningDep
    ) -> PlanResponse:
        """Turn a goal into a validated, executable plan."""
        _, planner = planning
        plan_request = body
        no_cache = "no-cache" in request.headers.get("cache-control", "").lower()
        if plan_request.request_id:
            request.scope["state"]["request_id"] = plan_request.request_id
        request_id: str = request.scope["state"]["request_id"]
        use_cache = plan_request.options.use_cache and not no_cache
        return await planner.plan(plan_request, request_id, use_cache=use_cache)

    # The body's model is this app's (its limits come from config), so it is set here rather
    # than in the signature, where annotations are strings resolved in module scope.
    create_plan.__annotations__["body"] = request_model
    router.post("/plan", response_model=PlanResponse, responses=PLAN_RESPONSES)(create_plan)
    return router


router = APIRouter()


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


@router.get("/ready", response_model=ReadyResponse, responses=READY_RESPONSES)
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
        model_latency_ms=stats.model_latency_ms,
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
        timeout_seconds=settings.planning.timeout_seconds,
    )


@router.get("/metrics", response_class=Response, responses=METRICS_RESPONSES)
async def metrics(services: ServicesDep) -> Response:
    """Prometheus text format."""
    return Response(services.metrics.render(), media_type=PROMETHEUS_CONTENT_TYPE)


def error_response(status: int, code: str, detail: Any, request_id: str) -> JSONResponse:
    body = ErrorResponse(error=code, detail=detail, request_id=request_id)
    return JSONResponse(body.model_dump(), status_code=status)
