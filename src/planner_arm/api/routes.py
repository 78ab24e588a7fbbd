"""HTTP endpoints: parse the request, call the planner, shape the answer. Nothing more."""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from email.message import Message
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.routing import APIRoute

from planner_arm.api import openapi_docs as docs
from planner_arm.api.auth import check_api_key
from planner_arm.api.request_context import use_request_id
from planner_arm.api.state import Services, get_services, service_version
from planner_arm.errors import NotReady, PlannerError, UnsupportedMediaType
from planner_arm.metrics import PROMETHEUS_CONTENT_TYPE
from planner_arm.plan.schemas import (
    ArmInfo,
    CapabilitiesResponse,
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
    if services.state == "stopping":
        # Requests already admitted finish; a new one might outlast the drain and be cut off,
        # so it is sent at once to try again, elsewhere or later.
        raise NotReady("the service is shutting down", code="shutting_down")
    if services.plans is None or services.state == "starting":
        raise NotReady("the planner is not ready")
    return services, services.plans


def _is_json(content_type: str) -> bool:
    if content_type == "application/json":  # what nearly every caller sends
        return True
    message = Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


class JSONBodyRoute(APIRoute):
    """A route whose body must be declared as JSON: anything else is a 415 that says so,
    rather than a 422 about a string that is not an object."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def handle_json(request: Request) -> Response:
            content_type = request.headers.get("content-type", "")
            if not _is_json(content_type) and await request.body():
                raise UnsupportedMediaType(
                    "The body must be JSON, sent with content-type: application/json "
                    f"(this one was {'sent as ' + content_type if content_type else 'untyped'})."
                )
            return await handle(request)

        return handle_json


ServicesDep = Annotated[Services, Depends(get_services)]
PlanningDep = Annotated[tuple[Services, CachingPlanner], Depends(planning_services)]


def planning_router(request_model: type[PlanRequest], keys_required: bool) -> APIRouter:
    """The planning endpoints, behind the API key, with this app's request limits."""
    router = APIRouter(route_class=JSONBodyRoute)

    async def create_plan(
        body: PlanRequest, request: Request, planning: PlanningDep
    ) -> PlanResponse:
        """Turn a goal into a validated, executable plan."""
        services, planner = planning
        plan_request = body
        no_cache = "no-cache" in request.headers.get("cache-control", "").lower()
        if plan_request.request_id:
            use_request_id(request.scope, plan_request.request_id)
        request_id: str = request.scope["state"]["request_id"]
        started = time.perf_counter()
        try:
            response = await planner.plan(
                plan_request, request_id, use_cache=plan_request.options.use_cache and not no_cache
            )
        except PlannerError:
            services.stats.record_failure((time.perf_counter() - started) * 1000)
            raise
        services.stats.record_plan(response.metadata.source, response.metadata.latency_ms)
        return response

    # The body's model is this app's (its limits come from config), so it is set here rather
    # than in the signature, where annotations are strings resolved in module scope.
    create_plan.__annotations__["body"] = request_model
    router.post(
        "/plan",
        response_model=PlanResponse,
        operation_id="createPlan",
        responses=docs.PLAN_RESPONSES,
        openapi_extra=docs.operation_extra(
            docs.PLAN_REQUEST_ID_HEADER,
            docs.CACHE_CONTROL_HEADER,
            secured=True,
            required=keys_required,
        ),
    )(create_plan)
    return router


router = APIRouter()


@router.get(
    "/health",
    response_model=HealthResponse,
    operation_id="getHealth",
    responses=docs.HEALTH_RESPONSES,
    openapi_extra=docs.operation_extra(docs.REQUEST_ID_HEADER),
)
async def health(services: ServicesDep) -> HealthResponse:
    """Liveness: the process answers. Never calls a model."""
    return HealthResponse(
        status="healthy",
        version=service_version(),
        model=services.settings.model.name,
        timestamp=datetime.now(UTC).isoformat(),
        uptime_seconds=round(time.monotonic() - services.started_at, 3),
        llm=services.llm_status(),
        circuits=services.circuits(),
    )


@router.get(
    "/ready",
    response_model=ReadyResponse,
    operation_id="getReadiness",
    responses=docs.READY_RESPONSES,
    openapi_extra=docs.operation_extra(docs.REQUEST_ID_HEADER),
)
async def ready(services: ServicesDep) -> ReadyResponse:
    """Readiness: 200 while the service takes plan requests; 503 while starting or stopping."""
    if services.state != "ready":
        raise NotReady(f"the service is {services.state}")
    return ReadyResponse(status="ready")


@router.get(
    "/capabilities",
    response_model=CapabilitiesResponse,
    operation_id="getCapabilities",
    responses=docs.CAPABILITIES_RESPONSES,
    openapi_extra=docs.operation_extra(docs.REQUEST_ID_HEADER),
)
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


@router.get(
    "/metrics",
    response_class=Response,
    operation_id="getMetrics",
    responses=docs.METRICS_RESPONSES,
    openapi_extra=docs.operation_extra(docs.REQUEST_ID_HEADER),
)
async def metrics(services: ServicesDep) -> Response:
    """Prometheus text format."""
    return Response(services.metrics.render(), media_type=PROMETHEUS_CONTENT_TYPE)
