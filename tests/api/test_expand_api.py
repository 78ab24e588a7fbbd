"""POST /plan/expand over HTTP (in process): a step replaced by its sub-plan, from the model,
repaired, or by rule; stored as a new version; every error code."""

from __future__ import annotations

import json
from typing import Any

import httpx
import respx

from support.app import answer, good_plan, make_settings, running_app
from support.invariants import assert_error_body, assert_valid_plan, sample

GOAL = {"goal": "Fix authentication bug and add tests", "constraints": ["No schema change"]}


def sub_plan() -> dict[str, Any]:
    step = {"required_arm": "coder", "estimated_cost_tier": 2, "estimated_duration_seconds": 30}
    return {
        "plan": [
            {**step, "step": 1, "action": "Read the token expiry check in auth/login.py",
             "required_arm": "retriever", "acceptance_criteria": ["Expiry check found"],
             "depends_on": []},
            {**step, "step": 2, "action": "Patch the expiry comparison to use UTC",
             "acceptance_criteria": ["Comparison uses UTC"], "depends_on": [1]},
            {**step, "step": 3, "action": "Check the patch against the step's criteria",
             "required_arm": "judge", "acceptance_criteria": ["Root cause addressed"],
             "depends_on": [2]},
        ],
        "rationale": "Read, patch, check.",
        "confidence": 0.8,
        "complexity_score": 0.3,
    }  # fmt: skip


def assert_expanded(body: dict[str, Any], expansions: int = 1) -> None:
    assert_valid_plan(body, consecutive=False, numbers_rise=False, expansions=expansions,
                      max_steps=50)  # fmt: skip


async def planned(client: httpx.AsyncClient) -> dict[str, Any]:
    response = await client.post("/plan", json=GOAL)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_a_step_is_replaced_by_the_model_s_sub_plan_as_a_new_stored_version(
    chat_route: respx.Route,
) -> None:
    chat_route.side_effect = [answer(good_plan()), answer(sub_plan())]
    async with running_app(make_settings()) as client:
        first = await planned(client)
        response = await client.post(
            "/plan/expand", json={**GOAL, "plan_id": first["plan_id"], "step": 2}
        )
        stored = await client.get(f"/plan/{response.json()['plan_id']}")
        metrics = (await client.get("/metrics")).text
    assert response.status_code == 200, response.text
    body = response.json()
    assert_expanded(body)
    assert (body["version"], body["parent_plan_id"], body["replan_count"]) == (
        2,
        first["plan_id"],
        0,
    )
    assert body["diff"] == {"kept": [1, 3, 4], "removed": [2], "added": [5, 6, 7]}
    new = {step["step"]: step for step in body["plan"]}
    assert [new[n]["parent"] for n in (5, 6, 7)] == ["2", "2", "2"]
    assert new[5]["depends_on"] == [1]
    assert new[4]["depends_on"] == [3, 7]
    assert new[1] == first["plan"][0]
    assert new[3] == first["plan"][2]
    assert body["metadata"]["source"] == "llm"
    assert body["metadata"]["attempts"] == 1
    assert stored.json() == body
    assert sample(metrics, "planner_expansions_total", source="llm") == 1
    prompt = json.loads(chat_route.calls[1].request.content)["messages"][1]["content"]
    assert "Write a patch that fixes the token expiry check" in prompt  # the step
    assert "Search the codebase for the authentication logic" in prompt  # what comes before
    assert "Patch addresses the root cause" in prompt  # its criteria


async def test_a_wrongly_shaped_sub_plan_is_sent_back_once_and_the_repair_is_used(
    chat_route: respx.Route,
) -> None:
    chat_route.side_effect = [answer({"thoughts": "I would patch it"}), answer(sub_plan())]
    async with running_app(make_settings()) as client:
        response = await client.post(
            "/plan/expand", json={**GOAL, "previous": await _previous(client), "step": 3}
        )
    body = response.json()
    assert_expanded(body)
    assert body["metadata"]["source"] == "llm"
    assert body["metadata"]["attempts"] == 2
    repair_prompt = json.loads(chat_route.calls[1].request.content)["messages"][-1]["content"]
    assert "I would patch it" in repair_prompt


async def test_a_failing_model_gives_the_rule_based_sub_plan_with_a_warning(
    chat_route: respx.Route,
) -> None:
    chat_route.return_value = httpx.Response(500, json={"error": {"message": "down"}})
    async with running_app(make_settings()) as client:
        response = await client.post(
            "/plan/expand", json={**GOAL, "previous": await _previous(client), "step": 2}
        )
    body = response.json()
    assert_expanded(body)
    assert body["metadata"]["source"] == "fallback"
    assert "fallback_used" in [note["code"] for note in body["metadata"]["warnings"]]
    added = [step for step in body["plan"] if step["step"] > 4]
    assert len(added) >= 3
    assert {step["parent"] for step in added} == {"2"}
    assert added[-1]["required_arm"] == "judge"
    # The sub-plan's own check carries the expanded step's criteria.
    assert any("Patch addresses the root cause" in c for c in added[-1]["acceptance_criteria"])


async def test_without_a_model_every_expansion_is_rule_based_and_can_go_deeper() -> None:
    async with running_app(make_settings(llm=False)) as client:
        first = await planned(client)
        once = await client.post(
            "/plan/expand", json={**GOAL, "plan_id": first["plan_id"], "step": 2}
        )
        new_step = once.json()["diff"]["added"][0]
        twice = await client.post(
            "/plan/expand", json={**GOAL, "plan_id": once.json()["plan_id"], "step": new_step}
        )
    assert_expanded(once.json())
    assert_expanded(twice.json(), expansions=2)
    assert twice.json()["version"] == 3
    # The answer says why the rules planned the sub-plan, once.
    warnings = twice.json()["metadata"]["warnings"]
    assert [(w["code"], w["detail"].split(":")[0]) for w in warnings] == [
        ("fallback_used", "llm_disabled")
    ]
    assert {
        s["parent"] for s in twice.json()["plan"] if s["step"] in twice.json()["diff"]["added"]
    } == {str(new_step)}


async def test_a_rule_based_sub_plan_details_the_step_without_redoing_the_others() -> None:
    async with running_app(make_settings(llm=False)) as client:
        first = await planned(client)
        expanded = (
            await client.post("/plan/expand", json={**GOAL, "plan_id": first["plan_id"], "step": 2})
        ).json()
    assert_expanded(expanded)
    replaced = next(step for step in first["plan"] if step["step"] == 2)
    others = {step["action"] for step in first["plan"] if step["step"] != 2}
    added = [step for step in expanded["plan"] if step["step"] in expanded["diff"]["added"]]
    for step in added:
        assert replaced["action"].rstrip(".") in step["action"], step["action"]
        assert step["action"] not in others
    assert set(replaced["acceptance_criteria"]) <= set(added[-1]["acceptance_criteria"])


async def test_the_same_idempotency_key_expands_once(chat_route: respx.Route) -> None:
    chat_route.side_effect = [answer(sub_plan())]
    async with running_app(make_settings()) as client:
        body = {**GOAL, "previous": await _previous(client), "step": 2}
        headers = {"Idempotency-Key": "expand-1"}
        first = await client.post("/plan/expand", json=body, headers=headers)
        again = await client.post("/plan/expand", json=body, headers=headers)
    assert first.json()["plan_id"] == again.json()["plan_id"]
    assert chat_route.call_count == 1


async def test_each_bad_request_has_its_own_error(chat_route: respx.Route) -> None:
    async with running_app(make_settings()) as client:
        previous = await _previous(client)
        missing = await client.post("/plan/expand", json={**GOAL, "plan_id": "nope", "step": 2})
        unknown = await client.post("/plan/expand", json={**GOAL, "previous": previous, "step": 9})
        final = await client.post("/plan/expand", json={**GOAL, "previous": previous, "step": 4})
        both = await client.post(
            "/plan/expand", json={**GOAL, "previous": previous, "plan_id": "x", "step": 2}
        )
        budget = await client.post(
            "/plan/expand",
            json={**GOAL, "previous": previous, "step": 2, "budget": {"max_steps": 5}},
        )
    assert_error_body(missing, 404, "plan_not_found")
    assert assert_error_body(unknown, 422, "unknown_step")["errors"][0]["step"] == 9
    assert_error_body(final, 422, "step_not_expandable")
    assert_error_body(both, 422, "invalid_request")
    assert assert_error_body(budget, 422, "budget_exceeded")["figures"] == {
        "max_steps": 5,
        "steps": 6,
    }
    assert not chat_route.called  # every refusal came before any model call


async def _previous(client: httpx.AsyncClient) -> dict[str, Any]:
    """A /plan answer made without the model (the validated good plan)."""
    response = await client.post("/plan/validate", json={"plan": good_plan()["plan"]})
    plan: dict[str, Any] = response.json()["plan"]
    return plan


async def test_expanding_a_specialized_plan_leaves_no_input_naming_the_replaced_step() -> None:
    """The steps after the replaced one read its output; once it is gone their inputs are
    made again, and the new steps get one too: every input of the answer holds."""
    from planner_arm.plan.dag import ancestors_of_each
    from planner_arm.plan.inputs import check_input
    from planner_arm.plan.schemas import PlanStep

    async with running_app(make_settings(llm=False)) as client:
        first = await client.post("/plan", json={**GOAL, "specialize": True})
        assert first.status_code == 200, first.text
        assert any("{{steps.2.output}}" in json.dumps(s["input"]) for s in first.json()["plan"])
        expanded = await client.post(
            "/plan/expand", json={**GOAL, "plan_id": first.json()["plan_id"], "step": 2}
        )
        asked = await client.post(
            "/plan/expand",
            json={**GOAL, "plan_id": (await planned(client))["plan_id"], "step": 2,
                  "specialize": True},
        )  # fmt: skip
    for response in (expanded, asked):
        assert response.status_code == 200, response.text
        body = response.json()
        assert_expanded(body)
        earlier = ancestors_of_each([PlanStep.model_validate(s) for s in body["plan"]])
        for step in body["plan"]:
            assert step["input"] is not None, step
            check_input(step["required_arm"], step["input"], earlier[step["step"]])


async def test_a_step_of_an_iterative_stage_is_not_expanded() -> None:
    async with running_app(make_settings(llm=False)) as client:
        stage = (await client.post("/plan", json={**GOAL, "strategy": "iterative"})).json()
        refused = await client.post(
            "/plan/expand", json={**GOAL, "plan_id": stage["plan_id"], "step": 1}
        )
    assert stage["complete"] is False
    assert_error_body(refused, 422, "step_not_expandable")
    assert "replan_steps" in refused.json()["detail"]
