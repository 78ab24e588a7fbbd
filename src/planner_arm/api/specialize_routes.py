"""POST /plan/specialize: the arm input of one step of a plan, sent whole or stored."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from planner_arm.api.lifecycle_docs import GET_PLAN_RESPONSES
from planner_arm.api.openapi_docs import (
    PLAN_RESPONSES,
    REQUEST_ID_HEADER,
    error_doc,
    ok_doc,
    operation_extra,
)
from planner_arm.api.planning_deps import JSONBodyRoute, planning_services
from planner_arm.api.request_context import request_id_for
from planner_arm.api.state import Services
from planner_arm.plan.specialize_schemas import SpecializeRequest, SpecializeResponse
from planner_arm.planning.lifecycle import PlanLifecycle

PlanningDep = Annotated[tuple[Services, PlanLifecycle], Depends(planning_services)]

SPECIALIZED: dict[str, Any] = {
    "plan_id": "5d0c2b0b6c9e4d7f9a0f3e1b2c4d6e8f",
    "step": 2,
    "required_arm": "coder",
    "input": {
        "instruction": "Fix the token expiry check in the login handler found in "
        "{{steps.1.output}}",
        "language": "python",
        "files": ["auth/login.py"],
    },
    "source": "llm",
    "model": "gpt-4o-mini",
    "request_id": "0b6f6b1e-3f7a-4c55-9d9e-0f1a2b3c4d5e",
    "warnings": [],
}

SPECIALIZE_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: ok_doc(
        "The step's input, valid against its arm's input_schema in /capabilities; `source` "
        "says whether the model wrote it or the rules derived it.",
        SPECIALIZED,
    ),
    401: PLAN_RESPONSES[401],
    404: error_doc(
        "No stored plan has this `plan_id` (never stored, or its TTL passed).",
        "plan_not_found",
        "No plan with id '5d0c2b0b6c9e4d7f9a0f3e1b2c4d6e8f' is stored (or it has expired); "
        "send the whole plan as `previous` instead.",
    ),
    413: PLAN_RESPONSES[413],
    415: PLAN_RESPONSES[415],
    422: error_doc(
        "The plan has no such step (`unknown_step`), or the body is not valid "
        "(`invalid_request`: not exactly one of previous and plan_id, a bad field); "
        "`errors` lists each problem of a bad body.",
        "unknown_step",
        "the plan has no step 9 (its steps are [1, 2, 3])",
    ),
    500: PLAN_RESPONSES[500],
    503: {
        **GET_PLAN_RESPONSES[503],
        "description": "The plan store (Redis) does not answer (`store_unavailable`), or the "
        "service is starting or shutting down; `Retry-After` says when to try again.",
    },
}


def specialize_router(keys_required: bool) -> APIRouter:
    """POST /plan/specialize, behind the API key."""
    router = APIRouter(route_class=JSONBodyRoute)

    async def specialize_step(
        body: SpecializeRequest, request: Request, planning: PlanningDep
    ) -> SpecializeResponse:
        """Fill one step's arm input: by the model, checked against the arm's schema, else
        by rule."""
        _, lifecycle = planning
        return await lifecycle.specialize(body, request_id_for(request.scope, body.request_id))

    router.post(
        "/plan/specialize",
        response_model=SpecializeResponse,
        operation_id="specializeStep",
        responses=SPECIALIZE_RESPONSES,
        openapi_extra=operation_extra(REQUEST_ID_HEADER, secured=True, required=keys_required),
    )(specialize_step)
    return router
