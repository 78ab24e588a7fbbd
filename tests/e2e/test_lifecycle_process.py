"""The plan's life against a real service process over loopback HTTP: validate, replan, fetch
by id and the Idempotency-Key, each rule's answer and error as an orchestrator receives it."""

from __future__ import annotations

import copy
from collections.abc import Iterator

import httpx
import pytest

from support.invariants import assert_error_body, assert_valid_plan
from support.service import serving
from support.stub_model import StubLLM

pytestmark = pytest.mark.slow

GOAL = {"goal": "Fix authentication bug and add tests", "constraints": ["No schema change"]}


@pytest.fixture
def client(stub: StubLLM) -> Iterator[httpx.Client]:
    yield from serving({"OPENAI_BASE_URL": stub.base_url})


def test_an_orchestrators_loop_over_real_http(client: httpx.Client, stub: StubLLM) -> None:
    key = {"Idempotency-Key": "loop-1"}
    plan = client.post("/plan", json=GOAL, headers=key).json()
    assert_valid_plan(plan)
    assert client.post("/plan", json=GOAL, headers=key).json()["plan_id"] == plan["plan_id"]
    assert stub.calls == 1  # the repeat was the stored answer

    edited = copy.deepcopy(plan["plan"])
    edited[1]["depends_on"] = [2]
    check = client.post("/plan/validate", json={"plan": edited}).json()
    assert check["valid"] is False
    assert "self_dependency" in {error["code"] for error in check["errors"]}

    states = {"1": {"status": "completed", "output": "found"}, "2": {"status": "failed"}}
    replan = client.post(
        "/replan", json={**GOAL, "plan_id": plan["plan_id"], "step_states": states}
    )
    assert replan.status_code == 200, replan.text
    assert replan.json()["parent_plan_id"] == plan["plan_id"]
    assert client.get(f"/plan/{replan.json()['plan_id']}").json() == replan.json()


def test_each_lifecycle_error_over_real_http(client: httpx.Client) -> None:
    plan_id = client.post("/plan", json=GOAL).json()["plan_id"]
    unknown = {**GOAL, "plan_id": plan_id, "step_states": {"9": {"status": "failed"}}}
    marked = {**GOAL, "plan_id": plan_id, "step_states": {"1": {"status": "completed"}}}
    assert_error_body(client.post("/replan", json=unknown), 422, "unknown_step")
    assert_error_body(
        client.post("/replan", json={**marked, "replan_steps": [1]}), 422, "completed_step"
    )
    assert_error_body(
        client.post("/replan", json={**GOAL, "plan_id": plan_id}), 422, "nothing_to_replan"
    )
    assert_error_body(
        client.post("/replan", json={**GOAL, "plan_id": plan_id, "reason": "x", "max_replans": 0}),
        409,
        "replan_limit",
    )
    assert_error_body(client.get("/plan/no-such-plan"), 404, "plan_not_found")
    assert_error_body(
        client.post("/plan", json=GOAL, headers={"Idempotency-Key": "k" * 256}),
        400,
        "invalid_idempotency_key",
    )
    client.post("/plan", json=GOAL, headers={"Idempotency-Key": "used"})
    assert_error_body(
        client.post("/plan", json={"goal": "Other"}, headers={"Idempotency-Key": "used"}),
        422,
        "idempotency_key_reused",
    )
    over = client.post("/plan", json={**GOAL, "budget": {"max_steps": 2}})
    assert_error_body(over, 422, "budget_exceeded")
    assert_error_body(
        client.post("/plan/validate", json={"plan": "not a list"}), 422, "invalid_request"
    )
    assert_error_body(
        client.post("/plan/validate", content=b"plan", headers={"content-type": "text/plain"}),
        415,
        "unsupported_media_type",
    )
