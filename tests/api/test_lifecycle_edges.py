"""Edges of the plan's life an orchestrator hits (found by review): odd step keys, a made-up
plan id, a budget the rule-based replan must fit, a final check that would run too early,
replans recorded like every answer, replayed answers under the caller's request id."""

from __future__ import annotations

import copy
from typing import Any

import httpx
import pytest

from support.app import good_plan, make_settings, running_app
from support.invariants import assert_error_body, assert_valid_plan, sample

GOAL = {"goal": "Fix authentication bug and add tests", "constraints": ["No schema change"]}


async def first_plan(client: httpx.AsyncClient) -> dict[str, Any]:
    response = await client.post("/plan", json=GOAL)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.parametrize("key", ["²", "01", " 1", "1.0", "-1"])
async def test_a_step_state_key_that_is_not_a_step_number_is_unknown_step(key: str) -> None:
    async with running_app(make_settings(llm=False)) as client:
        plan_id = (await first_plan(client))["plan_id"]
        response = await client.post(
            "/replan",
            json={**GOAL, "plan_id": plan_id, "step_states": {key: {"status": "failed"}}},
        )
    assert_error_body(response, 422, "unknown_step")


async def test_a_made_up_plan_id_does_not_reset_the_replan_limit() -> None:
    async with running_app(make_settings(llm=False)) as client:
        plan_id = (await first_plan(client))["plan_id"]
        request = {**GOAL, "plan_id": plan_id, "reason": "scope changed", "max_replans": 1}
        replanned = (await client.post("/replan", json=request)).json()
        renamed = {**replanned, "plan_id": "never-stored", "replan_count": 0, "version": 1}
        again = await client.post(
            "/replan", json={**GOAL, "previous": renamed, "reason": "x", "max_replans": 1}
        )
    assert replanned["replan_count"] == 1
    assert_error_body(again, 409, "replan_limit")


async def test_the_rule_based_replan_fits_the_budget_before_refusing() -> None:
    async with running_app(make_settings(llm=False)) as client:
        plan = await first_plan(client)
        states = {str(step["step"]): {"status": "completed"} for step in plan["plan"][:2]}
        states[str(plan["plan"][2]["step"])] = {"status": "failed", "error": "tests time out"}
        budget = {"max_steps": len(plan["plan"])}  # no room for an extra diagnose step
        response = await client.post(
            "/replan",
            json={**GOAL, "plan_id": plan["plan_id"], "step_states": states, "budget": budget},
        )
    assert response.status_code == 200, response.text
    body = response.json()
    assert_valid_plan(body, consecutive=False)
    assert len(body["plan"]) <= budget["max_steps"]
    criteria = " ".join(c for step in body["plan"] for c in step["acceptance_criteria"])
    assert "tests time out" in criteria


async def test_validate_refuses_a_final_check_that_would_run_before_the_work() -> None:
    edited = copy.deepcopy(good_plan()["plan"])
    edited[3]["depends_on"] = [2]  # the judge no longer waits for step 3
    async with running_app(make_settings(llm=False)) as client:
        plain = (await client.post("/plan/validate", json={"plan": edited})).json()
        fixed = (await client.post("/plan/validate", json={"plan": edited, "fix": True})).json()
    assert plain["valid"] is False
    (error,) = plain["errors"]
    assert error["code"] == "no_final_check"
    assert error["step"] == 4
    assert "[3]" in error["message"]
    assert fixed["valid"] is True
    assert_valid_plan(fixed["plan"])


async def test_a_replan_is_recorded_and_logged_under_the_callers_request_id(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with running_app(make_settings(llm=False)) as client:
        plan_id = (await first_plan(client))["plan_id"]
        response = await client.post(
            "/replan",
            json={**GOAL, "plan_id": plan_id, "reason": "scope changed", "request_id": "rp-7"},
        )
        metrics = (await client.get("/metrics")).text
        capabilities = (await client.get("/capabilities")).json()
    assert response.status_code == 200
    assert sample(metrics, "planner_plans_total", source="fallback") == 2
    assert sample(metrics, "planner_replans_total", source="fallback") == 1
    assert capabilities["plans_by_source"]["fallback"] == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if '"rp-7"' in line]
    assert any('"plan_created"' in line and plan_id in line for line in lines), lines


async def test_a_replayed_answer_carries_this_requests_id() -> None:
    async with running_app(make_settings(llm=False)) as client:
        key = {"Idempotency-Key": "same-key"}
        first = await client.post("/plan", json={**GOAL, "request_id": "first"}, headers=key)
        again = await client.post("/plan", json={**GOAL, "request_id": "again"}, headers=key)
    assert again.json()["plan_id"] == first.json()["plan_id"]
    assert again.json()["request_id"] == "again"
    assert again.headers["x-request-id"] == "again"


async def test_validate_takes_a_request_id_like_every_planning_endpoint() -> None:
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post(
            "/plan/validate", json={"plan": good_plan()["plan"], "request_id": "edit-1"}
        )
    assert response.status_code == 200
    assert response.headers["x-request-id"] == "edit-1"
    assert response.json()["plan"]["request_id"] == "edit-1"


async def test_budget_figures_are_whole_numbers_where_the_limits_are() -> None:
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post("/plan", json={**GOAL, "budget": {"max_steps": 2}})
    assert_error_body(response, 422, "budget_exceeded")
    figures = response.json()["figures"]
    assert figures == {"max_steps": 2, "steps": 3}
    assert all(type(value) is int for value in figures.values())
