"""What a replan must not rewrite or trust (over HTTP, in process): finished steps come back as
they were sent, `input` included; the replan limit is the server's at most; a plan the store
cannot vouch for is counted from what it shows, and the answer says so. Also the step-state
shorthand and a replan with only a reason."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import respx

from support.app import answer, good_plan, make_settings, running_app
from support.invariants import assert_error_body

GOAL = "Fix authentication bug and add tests"
SENT_INPUT = {"query": "where the login handler lives", "sources": ["docs/"], "top_k": 3}


async def planned(client: httpx.AsyncClient) -> dict[str, Any]:
    response = await client.post("/plan", json={"goal": GOAL})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def warning_codes(body: dict[str, Any]) -> list[str]:
    return [note["code"] for note in body["metadata"]["warnings"]]


async def test_a_completed_step_without_input_stays_without_one_under_specialize() -> None:
    async with running_app(make_settings(llm=False)) as client:
        plan = await planned(client)
        response = await client.post("/replan", json={
            "goal": GOAL, "previous": plan, "specialize": True,
            "step_states": {"1": "completed", "2": {"status": "failed", "error": "broke"}},
        })  # fmt: skip
    assert response.status_code == 200, response.text
    body = response.json()
    (kept,) = [step for step in body["plan"] if step["step"] == 1]
    assert kept == plan["plan"][0]  # exactly as sent: it ran with no input
    assert kept["input"] is None
    pending = [step for step in body["plan"] if step["step"] != 1]
    assert all(step["input"] is not None for step in pending)


async def test_a_completed_steps_sent_input_is_not_rewritten() -> None:
    async with running_app(make_settings(llm=False)) as client:
        plan = await planned(client)
        # Not in its normal form (no defaults filled, an unknown field): still history.
        plan["plan"][0]["input"] = {"query": "where the login handler lives", "colour": "red"}
        response = await client.post("/replan", json={
            "goal": GOAL, "previous": plan, "specialize": True,
            "step_states": {"1": {"status": "completed", "output": "auth/login.py"}},
            "reason": "the tests must not touch the database",
        })  # fmt: skip
    assert response.status_code == 200, response.text
    body = response.json()
    (kept,) = [step for step in body["plan"] if step["step"] == 1]
    assert kept["input"] == {"query": "where the login handler lives", "colour": "red"}
    assert "input_replaced" not in warning_codes(body)


async def test_specialize_refuses_a_step_a_stored_replan_reported_finished() -> None:
    async with running_app(make_settings(llm=False)) as client:
        plan = await planned(client)
        replanned = (await client.post("/replan", json={
            "goal": GOAL, "plan_id": plan["plan_id"],
            "step_states": {"1": "completed", "2": "failed"},
        })).json()  # fmt: skip
        finished = await client.post(
            "/plan/specialize", json={"plan_id": replanned["plan_id"], "step": 1}
        )
        newest = max(step["step"] for step in replanned["plan"])
        pending = await client.post(
            "/plan/specialize", json={"plan_id": replanned["plan_id"], "step": newest}
        )
    assert_error_body(finished, 422, "completed_step")
    assert pending.status_code == 200, pending.text


async def test_max_replans_in_the_body_cannot_lift_the_servers_limit() -> None:
    async with running_app(make_settings(llm=False, planning={"max_replans": 1})) as client:
        plan = await planned(client)
        first = await client.post("/replan", json={
            "goal": GOAL, "plan_id": plan["plan_id"], "reason": "first", "max_replans": 100,
        })  # fmt: skip
        assert first.status_code == 200, first.text
        second = await client.post("/replan", json={
            "goal": GOAL, "plan_id": first.json()["plan_id"], "reason": "again",
            "max_replans": 100,
        })  # fmt: skip
        lower = await client.post("/replan", json={
            "goal": GOAL, "plan_id": plan["plan_id"], "reason": "none allowed",
            "max_replans": 0,
        })  # fmt: skip
    assert_error_body(second, 409, "replan_limit")
    assert_error_body(lower, 409, "replan_limit")


async def test_a_made_up_chain_is_counted_from_the_plan_and_flagged() -> None:
    async with running_app(make_settings(llm=False, planning={"max_replans": 2})) as client:
        plan = await planned(client)
        once = (await client.post("/replan", json={
            "goal": GOAL, "plan_id": plan["plan_id"], "reason": "one",
        })).json()  # fmt: skip
        twice = (await client.post("/replan", json={
            "goal": GOAL, "plan_id": once["plan_id"], "reason": "two",
        })).json()  # fmt: skip
        assert twice["replan_count"] == 2
        # Sent back under a new id, with no parent and the count reset: still version 3.
        forged = {**twice, "plan_id": uuid.uuid4().hex, "parent_plan_id": None,
                  "replan_count": 0}  # fmt: skip
        refused = await client.post(
            "/replan", json={"goal": GOAL, "previous": forged, "reason": "three"}
        )
        # A plan from elsewhere, version 1: planned, with the chain flagged as unverified.
        foreign = {**plan, "plan_id": uuid.uuid4().hex}
        accepted = await client.post(
            "/replan", json={"goal": GOAL, "previous": foreign, "reason": "one"}
        )
    assert_error_body(refused, 409, "replan_limit")
    assert accepted.status_code == 200, accepted.text
    assert "replan_chain_unverified" in warning_codes(accepted.json())
    assert "replan_chain_unverified" not in warning_codes(once)


async def test_a_stored_chain_is_not_flagged() -> None:
    async with running_app(make_settings(llm=False)) as client:
        plan = await planned(client)
        sent_back = await client.post(
            "/replan", json={"goal": GOAL, "previous": plan, "reason": "stored, so verified"}
        )
    assert sent_back.status_code == 200, sent_back.text
    assert "replan_chain_unverified" not in warning_codes(sent_back.json())


async def test_step_states_take_the_status_alone_over_http_too() -> None:
    async with running_app(make_settings(llm=False)) as client:
        plan = await planned(client)
        short = await client.post("/replan", json={
            "goal": GOAL, "plan_id": plan["plan_id"],
            "step_states": {"1": "completed", "2": "failed"},
        })  # fmt: skip
        wrong = await client.post("/replan", json={
            "goal": GOAL, "plan_id": plan["plan_id"], "step_states": {"1": "done"},
        })  # fmt: skip
    assert short.status_code == 200, short.text
    assert 1 in short.json()["diff"]["kept"]
    assert 2 in short.json()["diff"]["removed"]
    assert_error_body(wrong, 422, "invalid_request")


async def test_a_model_that_rewrites_a_completed_steps_input_is_undone(
    chat_route: respx.Route,
) -> None:
    revised = good_plan()
    revised["plan"][0]["input"] = {"query": "something else"}
    chat_route.side_effect = [answer(good_plan()), answer(revised)]
    async with running_app(make_settings()) as client:
        plan = await planned(client)
        plan["plan"][0]["input"] = SENT_INPUT
        response = await client.post("/replan", json={
            "goal": GOAL, "previous": plan, "step_states": {"1": "completed"},
            "reason": "the database is off limits",
        })  # fmt: skip
    assert response.status_code == 200, response.text
    (kept,) = [step for step in response.json()["plan"] if step["step"] == 1]
    assert kept == plan["plan"][0]
