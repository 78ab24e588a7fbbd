"""Deeper plans against a real service process over loopback HTTP, with the stub model server
and with no model at all: the hierarchical strategy and POST /plan/expand, their cost in model
calls, an answer that is not the requested shape, and each answer a valid plan."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from support.invariants import assert_error_body, assert_valid_plan
from support.service import serving
from support.stub_model import PLAN_JSON, Reply, StubLLM

pytestmark = pytest.mark.slow

GOAL = {"goal": "Fix authentication bug and add tests", "constraints": ["No schema change"]}


@pytest.fixture
def client(stub: StubLLM) -> Iterator[httpx.Client]:
    yield from serving({"OPENAI_BASE_URL": stub.base_url}, timeout=15)


@pytest.fixture
def no_model_client() -> Iterator[httpx.Client]:
    yield from serving({}, timeout=15)


def test_a_hierarchical_plan_costs_one_call_plus_one_per_phase(
    client: httpx.Client, stub: StubLLM
) -> None:
    # The phases, then one phase's sub-plan is not a plan and is asked again once.
    stub.script(Reply(PLAN_JSON), Reply('{"thoughts": "no plan here"}'))
    response = client.post("/plan", json={**GOAL, "strategy": "hierarchical"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert_valid_plan(body, max_steps=50)
    assert body["strategy"] == "hierarchical"
    assert stub.calls == 1 + 3 + 1
    assert len(body["plan"]) == 3 * 4 + 1  # three phases of four steps, the final check
    assert [node["id"] for node in body["tree"]] == ["1", "2", "3", "4"]
    assert {step["parent"] for step in body["plan"]} == {"1", "2", "3", None}
    assert client.get(f"/plan/{body['plan_id']}").json() == body


def test_expanding_a_step_over_real_http(client: httpx.Client, stub: StubLLM) -> None:
    plan = client.post("/plan", json=GOAL).json()
    expanded = client.post(
        "/plan/expand", json={**GOAL, "plan_id": plan["plan_id"], "step": 2},
        headers={"Idempotency-Key": "expand-e2e"},
    )  # fmt: skip
    assert expanded.status_code == 200, expanded.text
    body = expanded.json()
    assert_valid_plan(body, consecutive=False, numbers_rise=False, expansions=1, max_steps=50)
    assert body["diff"] == {"kept": [1, 3, 4], "removed": [2], "added": [5, 6, 7, 8]}
    assert stub.calls == 2
    again = client.post(
        "/plan/expand", json={**GOAL, "plan_id": plan["plan_id"], "step": 2},
        headers={"Idempotency-Key": "expand-e2e"},
    )  # fmt: skip
    assert again.json()["plan_id"] == body["plan_id"]
    assert stub.calls == 2
    final = client.post("/plan/expand", json={**GOAL, "plan_id": body["plan_id"], "step": 4})
    assert_error_body(final, 422, "step_not_expandable")


def test_with_no_model_both_are_rule_based(no_model_client: httpx.Client) -> None:
    deep = no_model_client.post("/plan", json={**GOAL, "strategy": "hierarchical"}).json()
    assert_valid_plan(deep, max_steps=50)
    assert deep["metadata"]["source"] == "fallback"
    assert any(node["children"] for node in deep["tree"])
    plan = no_model_client.post("/plan", json=GOAL).json()
    expanded = no_model_client.post(
        "/plan/expand", json={**GOAL, "plan_id": plan["plan_id"], "step": 2}
    ).json()
    assert_valid_plan(expanded, consecutive=False, numbers_rise=False, expansions=1, max_steps=50)
    assert expanded["metadata"]["source"] == "fallback"
