"""The HTTP endpoints: parse the request, call the plan service, shape the answer. Nothing more.

Each endpoint is a module-level function. `build_routers(settings)` registers them: the
planning endpoints behind the API key (POST /plan, /replan, /plan/expand, /plan/specialize,
/plan/validate, GET /plan/{plan_id}, which is also a page for a browser: api/plan_page.py, and
HEAD /plan/{plan_id}) on a router of this app's, since their body models take this app's limits
from the settings and their documentation says whether a key is required; and the probes
(/health, /ready, /capabilities, /metrics) on the module's `probes` router.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from datetime import UTC, datetime
from time import monotonic
from typing import Any, TypeVar

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel

from planner_arm.api.auth import serving_without_keys
from planner_arm.api.deps import (
    JSONBodyRoute,
    PlanningDep,
    ReadinessDep,
    StateDep,
    idempotency_key,
    stream_format,
)
from planner_arm.api.middleware import request_id_for
from planner_arm.api.openapi import responses as docs
from planner_arm.api.plan_page import JSON_TYPE, plan_page_response, wants_html
from planner_arm.api.streaming import streamed_plan
from planner_arm.config import Settings
from planner_arm.errors import NotReady
from planner_arm.metrics import PROMETHEUS_CONTENT_TYPE
from planner_arm.plan.endpoint_schemas import (
    ArmInfo,
    CapabilitiesResponse,
    ExpandRequest,
    HealthResponse,
    ModelFailureNote,
    ReadyResponse,
    ReplanRequest,
    SpecializeRequest,
    SpecializeResponse,
    ValidateRequest,
    ValidateResponse,
)
from planner_arm.plan.schemas import PlanNote, PlanRequest, PlanResponse, request_model_for
from planner_arm.plan.tool_inputs import step_input_schema
from planner_arm.service.stream import PlanStream
from planner_arm.service.wiring import service_version

# A stored plan is its caller's: no shared cache keeps it, and a private one keeps it apart
# for each key (and for the page and the JSON).
PLAN_READ_HEADERS = {
    "Cache-Control": "private, no-store",
    "Vary": "Accept, Authorization, X-API-Key",
}
SERVING_WITHOUT_KEYS = PlanNote(
    code="serving_without_keys",
    detail="No API keys, and the service listens beyond loopback: anyone who reaches it plans "
    "as the one anonymous caller and reads its plans. Set PLANNER_API_KEYS.",
)
SERVICE_CAPABILITIES = ["planning", "task_decomposition", "dependency_resolution", "arm_selection"]
SERVICE_COST_TIER = 2


# The planning endpoints.


async def create_plan(
    body: PlanRequest, request: Request, caller: PlanningDep
) -> PlanResponse | Response:
    """Turn a goal into a validated, executable plan."""
    key = idempotency_key(request)
    no_cache = "no-cache" in request.headers.get("cache-control", "").lower()
    request_id = request_id_for(request.scope, body.request_id)
    use_cache = body.options.use_cache and not no_cache
    kind = stream_format(request)
    principal = caller.principal
    if kind is None:
        return await caller.plans.plan(
            body, request_id, use_cache=use_cache, idempotency_key=key, principal=principal
        )

    def work(stream: PlanStream) -> Awaitable[PlanResponse]:
        return caller.plans.plan(
            body,
            request_id,
            use_cache=use_cache,
            idempotency_key=key,
            listener=stream,
            principal=principal,
        )

    return await streamed_plan(request, kind, caller.plans.stream, request_id, work)


async def replan(
    body: ReplanRequest, request: Request, caller: PlanningDep
) -> PlanResponse | Response:
    """Revise a plan after a failure or a change, keeping the finished steps."""
    key = idempotency_key(request)
    request_id = request_id_for(request.scope, body.request_id)
    kind = stream_format(request)
    principal = caller.principal
    if kind is None:
        return await caller.plans.replan(body, request_id, idempotency_key=key, principal=principal)

    def work(_: PlanStream) -> Awaitable[PlanResponse]:
        # The replanner's answer merges kept and new steps: they stream once it is made.
        return caller.plans.replan(body, request_id, idempotency_key=key, principal=principal)

    return await streamed_plan(request, kind, caller.plans.stream, request_id, work)


async def expand_plan(body: ExpandRequest, request: Request, caller: PlanningDep) -> PlanResponse:
    """Replace one step of a plan by a sub-plan for it (a new version of the plan)."""
    request_id = request_id_for(request.scope, body.request_id)
    return await caller.plans.expand(
        body, request_id, idempotency_key=idempotency_key(request), principal=caller.principal
    )


async def specialize_step(
    body: SpecializeRequest, request: Request, caller: PlanningDep
) -> SpecializeResponse:
    """Fill one step's arm input: by the model, checked against the arm's schema, else
    by rule."""
    request_id = request_id_for(request.scope, body.request_id)
    return await caller.plans.specialize(body, request_id, principal=caller.principal)


async def validate_edited_plan(
    body: ValidateRequest, request: Request, caller: PlanningDep
) -> ValidateResponse:
    """Check an edited plan without calling a model: every problem at once."""
    request_id = request_id_for(request.scope, body.request_id)
    return await caller.plans.validate(body, request_id, principal=caller.principal)


async def get_plan(plan_id: str, request: Request, caller: PlanningDep) -> Response:
    """A plan answered by /plan or /replan, as it was given, while its TTL lasts; with
    `Accept: text/html`, drawn as a page."""
    plan = await caller.plans.get(plan_id, principal=caller.principal)
    answer = (
        plan_page_response(plan)
        if wants_html(request)
        else Response(plan.model_dump_json(), media_type=JSON_TYPE)
    )
    answer.headers.update(PLAN_READ_HEADERS)
    return answer


async def plan_headers(plan_id: str, request: Request, caller: PlanningDep) -> Response:
    """HEAD: the status and headers GET would answer with (its length included), no
    body."""
    answer = await get_plan(plan_id, request, caller)
    return Response(status_code=answer.status_code, headers=dict(answer.headers))


def build_routers(settings: Settings) -> list[APIRouter]:
    """Every route of the app, with this app's request limits and key requirement."""
    return [planning_router(settings), probes]


def planning_router(settings: Settings) -> APIRouter:
    """The planning endpoints, each body read as this app's request model (its limits from
    the settings) and each documented as needing a key when the app has keys."""
    router = APIRouter(route_class=JSONBodyRoute)
    keys_required = bool(settings.auth.api_keys)

    def extra(*headers: dict[str, object]) -> dict[str, object]:
        return docs.operation_extra(*headers, secured=True, required=keys_required)

    limits = settings.limits
    router.post(
        "/plan",
        response_model=PlanResponse,
        operation_id="createPlan",
        responses=docs.PLAN_WITH_KEY_RESPONSES,
        openapi_extra=extra(
            docs.PLAN_REQUEST_ID_HEADER, docs.CACHE_CONTROL_HEADER, docs.IDEMPOTENCY_KEY_HEADER
        ),
    )(reading_body_as(create_plan, request_model_for(limits)))
    router.post(
        "/plan/specialize",
        response_model=SpecializeResponse,
        operation_id="specializeStep",
        responses=docs.SPECIALIZE_RESPONSES,
        openapi_extra=extra(docs.REQUEST_ID_HEADER),
    )(specialize_step)
    router.post(
        "/plan/validate",
        response_model=ValidateResponse,
        operation_id="validatePlan",
        responses=docs.VALIDATE_RESPONSES,
        openapi_extra=extra(docs.REQUEST_ID_HEADER),
    )(validate_edited_plan)
    router.post(
        "/replan",
        response_model=PlanResponse,
        operation_id="replanPlan",
        responses=docs.REPLAN_RESPONSES,
        openapi_extra=extra(docs.PLAN_REQUEST_ID_HEADER, docs.IDEMPOTENCY_KEY_HEADER),
    )(reading_body_as(replan, request_model_for(limits, ReplanRequest)))
    router.get(
        "/plan/{plan_id}",
        response_model=PlanResponse,
        operation_id="getPlan",
        responses=docs.GET_PLAN_RESPONSES,
        openapi_extra=extra(docs.REQUEST_ID_HEADER),
    )(get_plan)
    router.head("/plan/{plan_id}", include_in_schema=False)(plan_headers)
    router.post(
        "/plan/expand",
        response_model=PlanResponse,
        operation_id="expandPlanStep",
        responses=docs.EXPAND_RESPONSES,
        openapi_extra=extra(docs.PLAN_REQUEST_ID_HEADER, docs.IDEMPOTENCY_KEY_HEADER),
    )(reading_body_as(expand_plan, request_model_for(limits, ExpandRequest)))
    return router


Endpoint = TypeVar("Endpoint", bound=Callable[..., Awaitable[Any]])


def reading_body_as(endpoint: Endpoint, model: type[BaseModel]) -> Endpoint:
    """`endpoint` with its `body` read as `model`, a subclass of the model it names whose
    limits come from this app's settings (so its checks and its OpenAPI schema agree): the
    endpoint itself under the default limits, else a view of it whose signature, which is what
    FastAPI reads, names `model`. The module's function is left as it is, for every app."""
    signature = inspect.signature(endpoint, eval_str=True)
    body = signature.parameters["body"]
    if model is body.annotation:
        return endpoint

    @functools.wraps(endpoint)
    async def with_body(*args: Any, **kwargs: Any) -> Any:
        return await endpoint(*args, **kwargs)

    parameters = [
        body.replace(annotation=model) if p is body else p for p in signature.parameters.values()
    ]
    with_body.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    return with_body  # type: ignore[return-value]


# The probes: open to every caller, the same for every app.
probes = APIRouter()


@probes.get(
    "/health",
    response_model=HealthResponse,
    operation_id="getHealth",
    responses=docs.HEALTH_RESPONSES,
    openapi_extra=docs.operation_extra(docs.REQUEST_ID_HEADER),
)
async def health(state: StateDep) -> HealthResponse:
    """Liveness: the process answers. Never calls a model."""
    runtime = state["runtime"]
    settings = runtime.settings
    store, policy = await runtime.store_status()
    models = runtime.model_health()
    failed = models.last_failure
    return HealthResponse(
        status="healthy",
        version=service_version(),
        # No model configured: null, not the name of a model nobody calls.
        model=settings.model.name if settings.llm_enabled else None,
        timestamp=datetime.now(UTC).isoformat(),
        uptime_seconds=round(monotonic() - state["readiness"].started_at, 3),
        llm=runtime.llm_status(),
        circuits=models.circuits,
        llm_last_error=ModelFailureNote(**asdict(failed)) if failed is not None else None,
        store=store,
        store_eviction_policy=policy,
        auth="keys" if settings.auth.enabled else "none",
        warnings=[SERVING_WITHOUT_KEYS] if serving_without_keys(settings) else [],
    )


@probes.get(
    "/ready",
    response_model=ReadyResponse,
    operation_id="getReadiness",
    responses=docs.READY_RESPONSES,
    openapi_extra=docs.operation_extra(docs.REQUEST_ID_HEADER),
)
async def ready(readiness: ReadinessDep) -> ReadyResponse:
    """Readiness: 200 while the service takes plan requests; 503 while starting or stopping."""
    if readiness.state != "ready":
        raise NotReady(f"the service is {readiness.state}")
    return ReadyResponse(status="ready")


@probes.get(
    "/capabilities",
    response_model=CapabilitiesResponse,
    operation_id="getCapabilities",
    responses=docs.CAPABILITIES_RESPONSES,
    openapi_extra=docs.operation_extra(docs.REQUEST_ID_HEADER),
)
async def capabilities(state: StateDep) -> CapabilitiesResponse:
    """What this arm does, measured from this process's own traffic."""
    runtime = state["runtime"]
    settings = runtime.settings
    stats = runtime.stats
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
                input_schema=step_input_schema(a),
            )
            for a in settings.arms
        ],
        min_steps=settings.planning.min_steps,
        max_steps=settings.planning.max_steps,
        # No model configured: none is named, as /health and the start-up log say.
        models=settings.model.chain if settings.llm_enabled else [],
        llm=runtime.llm_status(),  # the same reading as /health's
        timeout_seconds=settings.planning.timeout_seconds,
    )


@probes.get(
    "/metrics",
    response_class=Response,
    operation_id="getMetrics",
    responses=docs.METRICS_RESPONSES,
    openapi_extra=docs.operation_extra(docs.REQUEST_ID_HEADER),
)
async def metrics(state: StateDep) -> Response:
    """Prometheus text format."""
    return Response(state["runtime"].metrics.render(), media_type=PROMETHEUS_CONTENT_TYPE)
