"""POST /plan/expand: one step of a plan replaced by its sub-plan, as a new version."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from planner_arm.api.expand_docs import EXPAND_RESPONSES
from planner_arm.api.lifecycle_docs import IDEMPOTENCY_KEY_HEADER
from planner_arm.api.openapi_docs import PLAN_REQUEST_ID_HEADER, operation_extra
from planner_arm.api.planning_deps import JSONBodyRoute, idempotency_key, planning_services
from planner_arm.api.request_context import request_id_for
from planner_arm.api.state import Services
from planner_arm.plan.expand_schemas import ExpandRequest
from planner_arm.plan.schemas import PlanResponse
from planner_arm.planning.lifecycle import PlanLifecycle

PlanningDep = Annotated[tuple[Services, PlanLifecycle], Depends(planning_services)]


def expand_router(expand_model: type[ExpandRequest], keys_required: bool) -> APIRouter:
    """/plan/expand, behind the API key."""
    router = APIRouter(route_class=JSONBodyRoute)

    async def expand_plan(
        body: ExpandRequest, request: Request, planning: PlanningDep
    ) -> PlanResponse:
        """Replace one step of a plan by a sub-plan for it (a new version of the plan)."""
        _, lifecycle = planning
        request_id = request_id_for(request.scope, body.request_id)
        key = idempotency_key(request)
        return await lifecycle.expand(body, request_id, idempotency_key=key)

    # The body's limits come from config, like /plan's.
    expand_plan.__annotations__["body"] = expand_model
    router.post(
        "/plan/expand",
        response_model=PlanResponse,
        operation_id="expandPlanStep",
        responses=EXPAND_RESPONSES,
        openapi_extra=operation_extra(
            PLAN_REQUEST_ID_HEADER, IDEMPOTENCY_KEY_HEADER, secured=True, required=keys_required
        ),
    )(expand_plan)
    return router
