"""The plan's life over HTTP (in process): validate an edited plan, replan keeping finished
work, fetch plans by id, idempotent requests, budgets; each rule and each error code."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import httpx
import respx

from planner_arm.config import Settings
from support.app import answer, good_plan, make_settings, running_app
from support.invariants import assert_error_body, assert_valid_plan, sample

GOAL = {"goal": "Fix authentication bug and add tests", "constraints": ["No schema change"]}


def steps() -> list[dict[str, Any]]:
    return copy.deepcopy(good_plan()["plan"])


def no_model() -> Settings:
    return make_settings(llm=False)


async def first_plan(client: httpx.AsyncClient, **headers: str) -> dict[str, Any]:
    response = await client.post("/plan", json=GOAL, headers=headers)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def same_answer(again: httpx.Response, first: httpx.Response) -> bool:
    """The stored answer again, under the repeat's own request id (header and body agree)."""
    repeat, original = again.json(), first.json()
    assert repeat["request_id"] == again.headers["x-request-id"]
    return {**repeat, "request_id": None} == {**original, "request_id": None}


# --- POST /plan/validate ---------------------------------------------------------------------


async def test_a_valid_edited_plan_gets_the_whole_plan_answer_without_a_model_call(
    chat_route: respx.Route,
) -> None:
    async with running_app(make_settings()) as client:
        response = await client.post("/plan/validate", json={"plan": steps()})
        metrics = (await client.get("/metrics")).text
    assert response.status_code == 200
    body = response.json()
    assert body["valid"] is True
    assert body["errors"] == []
    plan = body["plan"]
    assert_valid_plan(plan)
    assert plan["metadata"]["source"] == "validated"
    assert plan["estimated_cost"]["llm_usd"] == 0
    assert plan["parallel_stages"] == [[1], [2, 3], [4]]
    assert plan["critical_path_duration"] == 20 + 60 + 30
    assert not chat_route.called
    assert sample(metrics, "planner_validations_total", outcome="valid") == 1


async def test_every_problem_of_an_edited_plan_is_listed_with_its_step() -> None:
    edited = steps()
    edited[1]["depends_on"] = [3]
    edited[2]["depends_on"] = [2]  # 2 -> 3 -> 2
    edited[0]["required_arm"] = "wizard"
    edited[3]["action"] = ""
    edited[3]["acceptance_criteria"] = []
    async with running_app(no_model()) as client:
        response = await client.post("/plan/validate", json={"plan": edited})
        metrics = (await client.get("/metrics")).text
    body = response.json()
    assert response.status_code == 200
    assert body["valid"] is False
    assert body["plan"] is None
    found = {(error["code"], error["step"]) for error in body["errors"]}
    assert {("unknown_arm", 1), ("empty_action", 4), ("empty_acceptance_criteria", 4)} <= found
    (cycle,) = [error for error in body["errors"] if error["code"] == "cycle"]
    assert "2" in cycle["message"]
    assert "3" in cycle["message"]
    assert sample(metrics, "planner_validations_total", outcome="invalid") == 1


async def test_fix_mends_what_the_pipeline_mends_and_lists_it() -> None:
    edited = steps()
    edited[0]["required_arm"] = "search"  # an alias
    del edited[3]  # no final check any more
    async with running_app(no_model()) as client:
        plain = (await client.post("/plan/validate", json={"plan": edited})).json()
        fixed = (await client.post("/plan/validate", json={"plan": edited, "fix": True})).json()
    assert plain["valid"] is False
    assert {"unknown_arm", "no_final_check"} <= {error["code"] for error in plain["errors"]}
    assert fixed["valid"] is True, fixed["errors"]
    assert fixed["warnings"]
    assert_valid_plan(fixed["plan"])
    assert fixed["plan"]["plan"][0]["required_arm"] == "retriever"
    assert fixed["plan"]["plan"][-1]["required_arm"] == "judge"


async def test_validate_refuses_only_a_body_without_a_list_plan() -> None:
    async with running_app(no_model()) as client:
        not_a_list = await client.post("/plan/validate", json={"plan": {"step": 1}})
        a_list = await client.post("/plan/validate", json=[steps()])
        empty = await client.post("/plan/validate", json={"plan": []})
        wrong_types = await client.post("/plan/validate", json={"plan": [1, "two"]})
    assert_error_body(not_a_list, 422, "invalid_request")
    assert_error_body(a_list, 422, "invalid_request")
    assert empty.status_code == 200
    assert empty.json()["errors"][0]["code"] == "empty_plan"
    assert wrong_types.status_code == 200
    invalid = [e for e in wrong_types.json()["errors"] if e["code"] == "invalid_step"]
    assert [error["loc"] for error in invalid] == [["plan", 0], ["plan", 1]]


# --- POST /replan and GET /plan/{plan_id} ------------------------------------------------------


def failed_step_two(plan_id: str) -> dict[str, Any]:
    return {
        **GOAL,
        "plan_id": plan_id,
        "step_states": {
            "1": {"status": "completed", "output": "auth/login.py:42"},
            "2": {"status": "failed", "error": "the patch breaks the session tests"},
        },
    }


async def test_a_rule_based_replan_keeps_finished_work_and_numbers_new_steps_above() -> None:
    async with running_app(no_model()) as client:
        first = await first_plan(client)
        response = await client.post("/replan", json=failed_step_two(first["plan_id"]))
        fetched = await client.get(f"/plan/{response.json()['plan_id']}")
        metrics = (await client.get("/metrics")).text
    assert response.status_code == 200, response.text
    body = response.json()
    assert_valid_plan(body, consecutive=False)
    assert body["metadata"]["source"] == "fallback"
    assert body["version"] == 2
    assert body["replan_count"] == 1
    assert body["parent_plan_id"] == first["plan_id"]
    assert body["plan"][0] == first["plan"][0]  # the completed step, field for field
    highest = max(step["step"] for step in first["plan"])
    assert all(step["step"] > highest for step in body["plan"][1:])
    assert body["diff"]["kept"] == [1]
    assert 2 in body["diff"]["removed"]
    assert set(body["diff"]["added"]) == {step["step"] for step in body["plan"][1:]}
    retry = [
        step for step in body["plan"] if "session tests" in " ".join(step["acceptance_criteria"])
    ]
    assert retry, "the failed step's error is carried into a retry step's criteria"
    assert fetched.status_code == 200
    assert fetched.json() == body
    assert sample(metrics, "planner_replans_total", source="fallback") == 1


async def test_a_model_replan_cannot_change_a_finished_step(chat_route: respx.Route) -> None:
    revised = good_plan()
    revised["plan"][0]["action"] = "Search the whole monorepo again"  # a finished step, changed
    chat_route.side_effect = [answer(good_plan()), answer(revised)]
    async with running_app(make_settings()) as client:
        first = await first_plan(client)
        body = {**failed_step_two(first["plan_id"]), "previous": None}
        del body["previous"]
        response = await client.post("/replan", json=body)
    assert response.status_code == 200, response.text
    replan = response.json()
    assert replan["metadata"]["source"] == "llm"
    assert replan["plan"][0] == first["plan"][0]
    assert_valid_plan(replan, consecutive=False)
    assert chat_route.call_count == 2


async def test_the_whole_previous_plan_can_be_sent_instead_of_its_id() -> None:
    async with running_app(no_model()) as client:
        first = await first_plan(client)
        request = failed_step_two(first["plan_id"])
        del request["plan_id"]
        response = await client.post("/replan", json={**request, "previous": first})
    assert response.status_code == 200, response.text
    assert response.json()["parent_plan_id"] == first["plan_id"]


async def test_replans_stop_at_the_limit_counted_by_the_service() -> None:
    async with running_app(no_model()) as client:
        plan = await first_plan(client)
        for _ in range(3):
            request = {**GOAL, "plan_id": plan["plan_id"], "reason": "the scope changed"}
            answered = await client.post("/replan", json=request)
            assert answered.status_code == 200, answered.text
            plan = answered.json()
        over = await client.post(
            "/replan", json={**GOAL, "plan_id": plan["plan_id"], "reason": "x"}
        )
        # A caller cannot reset the count by editing the plan it sends back.
        edited = {**plan, "replan_count": 0}
        sent_back = await client.post("/replan", json={**GOAL, "previous": edited, "reason": "x"})
    assert plan["replan_count"] == 3
    assert_error_body(over, 409, "replan_limit")
    assert "Max replans exceeded" in over.json()["detail"]
    assert_error_body(sent_back, 409, "replan_limit")


async def test_replan_errors_name_the_step() -> None:
    async with running_app(no_model()) as client:
        plan_id = (await first_plan(client))["plan_id"]
        unknown = await client.post(
            "/replan", json={**GOAL, "plan_id": plan_id, "step_states": {"9": {"status": "failed"}}}
        )
        completed = await client.post(
            "/replan",
            json={
                **GOAL,
                "plan_id": plan_id,
                "step_states": {"1": {"status": "completed"}},
                "replan_steps": [1],
            },
        )
        nothing = await client.post("/replan", json={**GOAL, "plan_id": plan_id})
        missing = await client.post("/replan", json={**GOAL, "plan_id": "no-such-plan"})
        absent = await client.get("/plan/no-such-plan")
    assert_error_body(unknown, 422, "unknown_step")
    assert unknown.json()["errors"][0]["step"] == 9
    assert_error_body(completed, 422, "completed_step")
    assert_error_body(nothing, 422, "nothing_to_replan")
    assert_error_body(missing, 404, "plan_not_found")
    assert_error_body(absent, 404, "plan_not_found")


async def test_a_budget_no_plan_fits_is_refused_with_the_figures() -> None:
    async with running_app(no_model()) as client:
        plan_id = (await first_plan(client))["plan_id"]
        response = await client.post(
            "/replan",
            json={**failed_step_two(plan_id), "budget": {"max_duration_seconds": 1}},
        )
    assert_error_body(response, 422, "budget_exceeded")
    figures = response.json()["figures"]
    assert figures["max_duration_seconds"] == 1
    assert figures["critical_path_duration"] > 1


async def test_plan_refuses_a_budget_no_plan_fits_with_the_figures(
    chat_route: respx.Route,
) -> None:
    too_long = good_plan()
    too_long["plan"][1]["estimated_duration_seconds"] = 900
    chat_route.side_effect = lambda request: answer(too_long)
    async with running_app(make_settings()) as client:
        over = await client.post("/plan", json={**GOAL, "budget": {"max_duration_seconds": 1}})
        below_minimum = await client.post("/plan", json={**GOAL, "budget": {"max_steps": 2}})
    assert_error_body(over, 422, "budget_exceeded")
    figures = over.json()["figures"]
    assert figures["max_duration_seconds"] == 1
    assert figures["critical_path_duration"] > 1
    assert "the budget allows 1 s" in chat_route.calls[1].request.content.decode()
    assert_error_body(below_minimum, 422, "budget_exceeded")
    assert below_minimum.json()["figures"] == {"max_steps": 2, "steps": 3}
    assert chat_route.call_count == 2  # the over-budget answer and its repair; none for 2 steps


async def test_plan_keeps_to_a_step_budget_over_http() -> None:
    async with running_app(no_model()) as client:
        response = await client.post("/plan", json={**GOAL, "budget": {"max_steps": 3}})
    assert response.status_code == 200, response.text
    body = response.json()
    assert_valid_plan(body)
    assert len(body["plan"]) == 3


# --- Idempotency-Key ---------------------------------------------------------------------------


async def test_the_same_key_and_body_is_planned_once(chat_route: respx.Route) -> None:
    chat_route.side_effect = lambda request: answer(good_plan())
    async with running_app(make_settings()) as client:
        key = {"Idempotency-Key": "order-42"}
        body = {**GOAL, "options": {"use_cache": False}}
        first = await client.post("/plan", json=body, headers=key)
        again = await client.post("/plan", json=body, headers=key)
        metrics = (await client.get("/metrics")).text
    assert first.status_code == again.status_code == 200
    assert same_answer(again, first)
    assert chat_route.call_count == 1
    assert sample(metrics, "planner_idempotent_replays_total") == 1


async def test_concurrent_requests_with_one_key_cost_one_model_call(
    chat_route: respx.Route,
) -> None:
    release, called = asyncio.Event(), asyncio.Event()

    async def slow_answer(request: httpx.Request) -> httpx.Response:
        called.set()
        await release.wait()
        return answer(good_plan())

    chat_route.side_effect = slow_answer
    async with running_app(make_settings()) as client:
        key = {"Idempotency-Key": "together"}
        body = {**GOAL, "options": {"use_cache": False}}
        calls = [client.post("/plan", json=body, headers=key) for _ in range(5)]
        pending = asyncio.gather(*calls)
        await called.wait()
        release.set()
        answers = await pending
    assert {response.status_code for response in answers} == {200}
    assert len({response.json()["plan_id"] for response in answers}) == 1
    assert chat_route.call_count == 1


async def test_a_key_reused_with_another_body_or_too_long_is_refused() -> None:
    async with running_app(no_model()) as client:
        await first_plan(client, **{"Idempotency-Key": "k-1"})
        other = await client.post(
            "/plan", json={"goal": "Something else"}, headers={"Idempotency-Key": "k-1"}
        )
        too_long = await client.post("/plan", json=GOAL, headers={"Idempotency-Key": "k" * 256})
        replan_reuse = await client.post(
            "/replan",
            json={**GOAL, "plan_id": "x", "reason": "y"},
            headers={"Idempotency-Key": "k-1"},
        )
    assert_error_body(other, 422, "idempotency_key_reused")
    assert_error_body(too_long, 400, "invalid_idempotency_key")
    assert_error_body(replan_reuse, 422, "idempotency_key_reused")


async def test_a_replan_with_a_key_is_replanned_once() -> None:
    async with running_app(no_model()) as client:
        plan_id = (await first_plan(client))["plan_id"]
        key = {"Idempotency-Key": "replan-1"}
        first = await client.post("/replan", json=failed_step_two(plan_id), headers=key)
        again = await client.post("/replan", json=failed_step_two(plan_id), headers=key)
    assert first.status_code == 200
    assert same_answer(again, first)


async def test_health_names_the_store() -> None:
    async with running_app(no_model()) as client:
        health = (await client.get("/health")).json()
    assert health["store"] == "memory"
