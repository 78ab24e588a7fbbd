"""The iterative strategy over the API: /plan answers the first stage, /replan rounds by
plan_id through to `complete` (each round stored), and a streamed answer that sends only the
stage's steps."""

from __future__ import annotations

import json
from typing import Any

import httpx
import respx

from support.app import answer, good_plan, make_settings, running_app
from support.invariants import assert_error_body, assert_valid_plan
from support.sse import parse_sse, pieces_of, streamed

GOAL = "Fix authentication bug and add tests"
ITERATIVE = {"goal": GOAL, "strategy": "iterative"}


async def rounds(client: httpx.AsyncClient, first: dict[str, Any]) -> list[dict[str, Any]]:
    """An orchestrator's loop: run every step of the answer, report them, until complete."""
    answers, states = [first], {}
    while not answers[-1]["complete"]:
        assert len(answers) <= 10, "the rounds did not end"
        for step in answers[-1]["plan"]:
            states[str(step["step"])] = {"status": "completed", "output": f"did {step['step']}"}
        body = {**ITERATIVE, "plan_id": answers[-1]["plan_id"], "step_states": states}
        response = await client.post("/replan", json=body)
        assert response.status_code == 200, response.text
        answers.append(response.json())
        done = {int(number) for number in states}
        assert_valid_plan(answers[-1], consecutive=False, iterative_done=done, min_steps=1)
    return answers


async def test_rounds_by_plan_id_reach_a_complete_plan_without_a_model() -> None:
    async with running_app(make_settings(llm=False)) as client:
        first = (await client.post("/plan", json=ITERATIVE)).json()
        assert_valid_plan(first, iterative_done=())
        answers = await rounds(client, first)
        stored = (await client.get(f"/plan/{answers[-1]['plan_id']}")).json()
    assert len(answers) > 2
    assert [a["version"] for a in answers] == list(range(1, len(answers) + 1))
    assert all(a["replan_count"] == 0 for a in answers)
    assert stored == answers[-1]
    assert stored["complete"] is True
    assert stored["plan"][-1]["required_arm"] == "judge"


async def test_rounds_with_the_model_cost_one_call_each(chat_route: respx.Route) -> None:
    chat_route.return_value = answer(good_plan())
    async with running_app(make_settings()) as client:
        first = (await client.post("/plan", json=ITERATIVE)).json()
        answers = await rounds(client, first)
    assert [len(a["plan"]) for a in answers] == [1, 3, 4]
    assert [a["complete"] for a in answers] == [False, False, True]
    assert chat_route.call_count == len(answers)


async def test_a_failed_step_counts_toward_max_replans(chat_route: respx.Route) -> None:
    chat_route.return_value = answer(good_plan())
    async with running_app(make_settings(planning={"max_replans": 0})) as client:
        first = (await client.post("/plan", json=ITERATIVE)).json()
        progress = {**ITERATIVE, "plan_id": first["plan_id"],
                    "step_states": {"1": {"status": "completed"}}}  # fmt: skip
        second = await client.post("/replan", json=progress)
        assert second.status_code == 200, second.text
        failure = {**ITERATIVE, "plan_id": second.json()["plan_id"],
                   "step_states": {"1": {"status": "completed"},
                                   "2": {"status": "failed", "error": "no"}}}  # fmt: skip
        refused = await client.post("/replan", json=failure)
    assert_error_body(refused, 409, "replan_limit")


async def test_a_streamed_stage_sends_only_the_steps_of_the_answer(
    chat_route: respx.Route,
) -> None:
    chat_route.return_value = streamed(pieces_of(json.dumps(good_plan())))
    async with running_app(make_settings()) as client:
        response = await client.post(
            "/plan", json=ITERATIVE, headers={"accept": "text/event-stream"}
        )
    events = parse_sse(response.text)
    assert [name for name, _ in events] == ["plan.started", "step", "plan"]
    plan = events[-1][1]
    assert [data for name, data in events if name == "step"] == plan["plan"]
    assert plan["complete"] is False
    assert events[0][1]["plan_id"] == plan["plan_id"]
