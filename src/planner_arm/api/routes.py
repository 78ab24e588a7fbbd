"""HTTP endpoints: parse the request, call the planner, shape the answer. Nothing more."""

from __future__ import annotations

import time
from collections.abc import Awaitable
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response

from planner_arm.api import openapi_docs as docs
from planner_arm.api.lifecycle_docs import IDEMPOTENCY_KEY_HEADER, PLAN_WITH_KEY_RESPONSES
from planner_arm.api.plan_streaming import stream_format, streamed_plan
from planner_arm.api.planning_deps import JSONBodyRoute, idempotency_key, planning_services
from planner_arm.api.request_context import request_id_for
from planner_arm.api.state import Services, get_services, service_version
from planner_arm.errors import NotReady
from planner_arm.metrics import PROMETHEUS_CONTENT_TYPE
from planner_arm.plan.arm_inputs import input_schema
from planner_arm.plan.schemas import PlanRequest, PlanResponse
from planner_arm.plan.service_schemas import (
    ArmInfo,
    CapabilitiesResponse,
    HealthResponse,
    ReadyResponse,
)
from planner_arm.planning.lifecycle import PlanLifecycle
from planner_arm.planning.plan_stream import PlanStream

SERVICE_CAPABILITIES = ["planning", "task_decomposition", "dependency_resolution", "arm_selection"]
SERVICE_COST_TIER = 2


ServicesDep = Annotated[Services, Depends(get_services)]
PlanningDep = Annotated[tuple[Services, PlanLifecycle], Depends(planning_services)]


def planning_router(request_model: type[PlanRequest], keys_required: bool) -> APIRouter:
    """The planning endpoints, behind the API key, with this app's request limits."""
    router = APIRouter(route_class=JSONBodyRoute)

    async def create_plan(
        body: PlanRequest, request: Request, planning: PlanningDep
    ) -> PlanResponse | Response:
        """Turn a goal into a validated, executable plan."""
        services, lifecycle = planning
        plan_request = body
        key = idempotency_key(request)
        no_cache = "no-cache" in request.headers.get("cache-control", "").lower()
        request_id = request_id_for(request.scope, plan_request.request_id)
        use_cache = plan_request.options.use_cache and not no_cache
        kind = stream_format(request)
        if kind is None:
            return await lifecycle.plan(
                plan_request, request_id, use_cache=use_cache, idempotency_key=key
            )

        def work(stream: PlanStream) -> Awaitable[PlanResponse]:
            return lifecycle.plan(
                plan_request, request_id, use_cache=use_cache, idempotency_key=key, listener=stream
            )

        planner = lifecycle.planner
        return await streamed_plan(request, kind, planner, services.metrics, request_id, work)

    # The body's model is this app's (its limits come from config), so it is set here rather
    # than in the signature, where annotations are strings resolved in module scope.
    create_plan.__annotations__["body"] = request_model
    router.post(
        "/plan",
        response_model=PlanResponse,
        operation_id="createPlan",
        responses=PLAN_WITH_KEY_RESPONSES,
        openapi_extra=docs.operation_extra(
            docs.PLAN_REQUEST_ID_HEADER,
            docs.CACHE_CONTROL_HEADER,
            IDEMPOTENCY_KEY_HEADER,
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
        # No model configured: null, not the name of a model nobody calls.
        model=services.settings.model.name if services.settings.llm_enabled else None,
        timestamp=datetime.now(UTC).isoformat(),
        uptime_seconds=round(time.monotonic() - services.started_at, 3),
        llm=services.llm_status(),
        circuits=services.circuits(),
        store=await services.store_status(),
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
        model_latency_ms=stats.model_latency_ms,
        success_rate=stats.success_rate,
        model_success_rate=stats.model_success_rate,
        measured=stats.measured,
        plans_by_source=dict(stats.plans_by_source),
        arms=[
            ArmInfo(
                id=a.id,
                capabilities=a.capabilities,
                description=a.description,
                input_schema=input_schema(a.id),
            )
            for a in settings.arms
        ],
        min_steps=settings.planning.min_steps,
        max_steps=settings.planning.max_steps,
        models=settings.model.chain,
        llm=services.llm_status(),  # the same reading as /health's
        timeout_seconds=settings.planning.timeout_seconds,
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
