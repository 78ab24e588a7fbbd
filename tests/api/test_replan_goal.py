"""/replan's goal: a stored plan's own when the body leaves it out, and the stored one (with
`stored_request_used`, as /plan/specialize says it) when the body names another; a plan
sent whole gives its own when the body has none."""

from __future__ import annotations

from typing import Any

import httpx

from support.app import make_settings, running_app
from support.invariants import assert_error_body, assert_valid_plan

GOAL = "Fix authentication bug and add tests"


async def planned(client: httpx.AsyncClient) -> dict[str, Any]:
    response = await client.post("/plan", json={"goal": GOAL})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def states() -> dict[str, Any]:
    return {"step_states": {"1": "completed", "2": {"status": "failed", "error": "timed out"}}}


async def test_a_stored_plan_is_replanned_without_a_goal() -> None:
    async with running_app(make_settings(llm=False)) as client:
        first = await planned(client)
        response = await client.post("/replan", json={"plan_id": first["plan_id"], **states()})
        stored = (await client.get(f"/plan/{response.json()['plan_id']}")).json()
    assert response.status_code == 200, response.text
    body = response.json()
    assert_valid_plan(body, consecutive=False)
    assert body["goal"] == stored["goal"] == GOAL
    assert body["parent_plan_id"] == first["plan_id"]
    assert [note["code"] for note in body["metadata"]["warnings"]].count("stored_request_used") == 0


async def test_a_different_goal_for_a_stored_plan_is_overruled_and_said() -> None:
    async with running_app(make_settings(llm=False)) as client:
        first = await planned(client)
        other = {"goal": "Write the release notes", "plan_id": first["plan_id"], **states()}
        response = await client.post("/replan", json=other)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["goal"] == GOAL
    notes = [note for note in body["metadata"]["warnings"] if note["code"] == "stored_request_used"]
    assert notes == [
        {
            "code": "stored_request_used",
            "detail": "the stored request's goal was used, not the body's",
        }
    ]


async def test_the_same_goal_for_a_stored_plan_is_no_warning() -> None:
    async with running_app(make_settings(llm=False)) as client:
        first = await planned(client)
        same = {"goal": GOAL, "plan_id": first["plan_id"], **states()}
        body = (await client.post("/replan", json=same)).json()
    assert "stored_request_used" not in [note["code"] for note in body["metadata"]["warnings"]]


async def test_a_plan_sent_whole_gives_its_own_goal_or_the_bodys() -> None:
    async with running_app(make_settings(llm=False)) as client:
        first = await planned(client)
        own = await client.post("/replan", json={"previous": first, **states()})
        changed = await client.post(
            "/replan", json={"previous": first, "goal": "Fix the login bug", **states()}
        )
    assert own.status_code == 200, own.text
    assert own.json()["goal"] == GOAL
    assert changed.json()["goal"] == "Fix the login bug"  # the caller's plan, the caller's goal


async def test_a_plan_sent_whole_without_a_goal_needs_one_in_the_body() -> None:
    async with running_app(make_settings(llm=False)) as client:
        first = await planned(client)
        first["goal"] = None  # as a plan made before answers carried their goal
        response = await client.post("/replan", json={"previous": first, **states()})
        blank = await client.post(
            "/replan", json={"plan_id": first["plan_id"], "goal": " ", **states()}
        )
    body = assert_error_body(response, 422, "invalid_request")
    assert "goal is required: the plan sent in `previous` names no goal" in body["detail"]
    assert_error_body(blank, 422, "invalid_request")  # a blank goal is still refused


async def test_the_replan_schema_does_not_require_a_goal() -> None:
    async with running_app(make_settings(llm=False)) as client:
        schema = (await client.get("/openapi.json")).json()
    request = schema["components"]["schemas"]["ReplanRequest"]
    assert "goal" not in request.get("required", [])
    assert "leave it out" in request["properties"]["goal"]["description"]
