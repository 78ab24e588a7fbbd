"""The endpoints are module-level functions: two apps in one process each read bodies with
their own limits, and registering an app's endpoints changes none of the module's."""

from __future__ import annotations

import inspect

from fastapi.routing import APIRoute

from planner_arm.api import routes
from planner_arm.plan.endpoint_schemas import ExpandRequest, ReplanRequest
from planner_arm.plan.schemas import PlanRequest
from support.app import make_settings, running_app

ENDPOINTS = [
    routes.create_plan,
    routes.replan,
    routes.expand_plan,
    routes.specialize_step,
    routes.validate_edited_plan,
    routes.get_plan,
    routes.plan_headers,
]


def _body_models() -> list[object]:
    return [
        inspect.signature(endpoint, eval_str=True).parameters["body"].annotation
        for endpoint in (routes.create_plan, routes.replan, routes.expand_plan)
    ]


async def test_two_apps_in_one_process_keep_their_own_limits() -> None:
    tight = make_settings(llm=False, limits={"max_goal_chars": 50})
    async with running_app(tight) as tight_client, running_app(make_settings(llm=False)) as wide:
        refused = await tight_client.post("/plan", json={"goal": "g" * 51})
        refused_replan = await tight_client.post("/replan", json={"goal": "g" * 51, "plan_id": "p"})
        accepted = await wide.post("/plan", json={"goal": "g" * 51})
        tight_schema = (await tight_client.get("/openapi.json")).json()
        wide_schema = (await wide.get("/openapi.json")).json()
    assert refused.status_code == 422
    assert refused_replan.status_code == 422
    assert "at most 50 characters" in refused.text
    assert accepted.status_code == 200
    goal = ["components", "schemas", "PlanRequest", "properties", "goal", "maxLength"]
    for schema, limit in ((tight_schema, 50), (wide_schema, 8000)):
        for part in goal:
            schema = schema[part]
        assert schema == limit
    # The module's endpoints still name the default models, whatever app was built.
    assert _body_models() == [PlanRequest, ReplanRequest, ExpandRequest]


async def test_every_planning_endpoint_is_a_named_module_function() -> None:
    router = routes.planning_router(make_settings(llm=False))
    for route in router.routes:
        assert isinstance(route, APIRoute)
        endpoint = inspect.unwrap(route.endpoint)
        assert endpoint in ENDPOINTS
        assert getattr(routes, endpoint.__name__) is endpoint
