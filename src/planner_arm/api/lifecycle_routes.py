"""The plan's life after /plan: check an edited plan, replan keeping finished work, fetch a
plan by id; and the Idempotency-Key every planning POST reads."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response

from planner_arm.api import lifecycle_docs as docs
from planner_arm.api.openapi_docs import PLAN_REQUEST_ID_HEADER, REQUEST_ID_HEADER, operation_extra
from planner_arm.api.plan_streaming import stream_format, streamed_plan
from planner_arm.api.planning_deps import JSONBodyRoute, idempotency_key, planning_services
from planner_arm.api.request_context import request_id_for
from planner_arm.api.state import Services
from planner_arm.plan.replan_schemas import ReplanRequest
from planner_arm.plan.schemas import PlanResponse
from planner_arm.plan.validate_schemas import ValidateRequest, ValidateResponse
from planner_arm.planning.lifecycle import PlanLifecycle
from planner_arm.planning.plan_stream import PlanStream

PlanningDep = Annotated[tuple[Services, PlanLifecycle], Depends(planning_services)]


def lifecycle_router(replan_model: type[ReplanRequest], keys_required: bool) -> APIRouter:
    """/plan/validate, /replan and GET /plan/{plan_id}, behind the API key."""
    router = APIRouter(route_class=JSONBodyRoute)

    async def validate_plan(
        body: ValidateRequest, request: Request, planning: PlanningDep
    ) -> ValidateResponse:
        """Check an edited plan without calling a model: every problem at once."""
        _, lifecycle = planning
        return lifecycle.validate(body, request_id_for(request.scope, body.request_id))

    async def replan(
        body: ReplanRequest, request: Request, planning: PlanningDep
    ) -> PlanResponse | Response:
        """Revise a plan after a failure or a change, keeping the finished steps."""
        services, lifecycle = planning
        key = idempotency_key(request)
        request_id = request_id_for(request.scope, body.request_id)
        kind = stream_format(request)
        if kind is None:
            return await lifecycle.replan(body, request_id, idempotency_key=key)

        def work(_: PlanStream) -> Awaitable[PlanResponse]:
            # The replanner's answer merges kept and new steps: they stream once it is made.
            return lifecycle.replan(body, request_id, idempotency_key=key)

        planner = lifecycle.planner
        return await streamed_plan(request, kind, planner, services.metrics, request_id, work)

    async def get_plan(plan_id: str, planning: PlanningDep) -> PlanResponse:
        """A plan answered by /plan or /replan, as it was given, while its TTL lasts."""
        _, lifecycle = planning
        return await lifecycle.get(plan_id)

    # The replan body's limits come from config, like /plan's (see planning_router).
    replan.__annotations__["body"] = replan_model
    router.post(
        "/plan/validate",
        response_model=ValidateResponse,
        operation_id="validatePlan",
        responses=docs.VALIDATE_RESPONSES,
        openapi_extra=operation_extra(REQUEST_ID_HEADER, secured=True, required=keys_required),
    )(validate_plan)
    router.post(
        "/replan",
        response_model=PlanResponse,
        operation_id="replanPlan",
        responses=docs.REPLAN_RESPONSES,
        openapi_extra=operation_extra(
            PLAN_REQUEST_ID_HEADER,
            docs.IDEMPOTENCY_KEY_HEADER,
            secured=True,
            required=keys_required,
        ),
    )(replan)
    router.get(
        "/plan/{plan_id}",
        response_model=PlanResponse,
        operation_id="getPlan",
        responses=docs.GET_PLAN_RESPONSES,
        openapi_extra=operation_extra(REQUEST_ID_HEADER, secured=True, required=keys_required),
    )(get_plan)
    return router
