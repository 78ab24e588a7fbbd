"""Stage 2 against a real service process over loopback HTTP, with the stub model server:
inputs the model writes, answers of the wrong shape (repaired once, else the rule), the model
call count, POST /plan/specialize, and no model at all."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from planner_arm.plan.dag import ancestors_of_each
from planner_arm.plan.inputs import check_input
from planner_arm.plan.schemas import PlanStep
from support.invariants import assert_error_body, assert_valid_plan
from support.model_requests import request_data
from support.service import serving
from support.stub_model import Reply, Status, StubLLM

pytestmark = pytest.mark.slow

GOAL = {"goal": "Fix authentication bug and add tests", "specialize": True}


def serve(env: dict[str, str]) -> Iterator[httpx.Client]:
    # One step at a time, so the stub's script meets the steps in order.
    yield from serving({"PLANNER_SPECIALIZE__MAX_CONCURRENCY": "1", **env}, timeout=15)


@pytest.fixture
def client(stub: StubLLM) -> Iterator[httpx.Client]:
    yield from serve({"OPENAI_BASE_URL": stub.base_url})


@pytest.fixture
def no_model() -> Iterator[httpx.Client]:
    yield from serve({})


def reply(value: Any) -> Reply:
    return Reply(content=value if isinstance(value, str) else json.dumps(value))


def assert_inputs_valid(plan: dict[str, Any]) -> None:
    steps = [PlanStep.model_validate(item) for item in plan["plan"]]
    earlier = ancestors_of_each(steps)
    for item in steps:
        assert item.input is not None, item
        assert check_input(item.required_arm, item.input, earlier[item.step]) == item.input


def test_the_model_fills_inputs_and_bad_answers_end_with_the_rule(
    client: httpx.Client, stub: StubLLM
) -> None:
    stub.script(
        Reply(),  # the plan: retriever, coder, coder, judge
        reply("I would search the auth module."),  # step 1: prose...
        reply({"query": "token expiry check", "top_k": 3}),  # ...repaired
        reply({"instruction": "Fix the expiry check in {{steps.1.output}}", "files": ["a.py"]}),
        reply({"instruction": "Use {{steps.2.output}}"}),  # step 3: does not depend on 2...
        reply(["still", "not", "an", "object"]),  # ...and not repaired: the rule
        reply({"criteria": ["Tests pass"], "inputs_from": [2, 3]}),
    )
    response = client.post("/plan", json=GOAL)
    assert response.status_code == 200, response.text
    body = response.json()
    assert_valid_plan(body)
    assert_inputs_valid(body)
    inputs = [item["input"] for item in body["plan"]]
    assert inputs[0] == {"query": "token expiry check", "sources": [], "top_k": 3}
    assert inputs[1]["files"] == ["a.py"]
    assert inputs[3] == {"criteria": ["Tests pass"], "inputs_from": [2, 3]}
    assert "{{steps.2.output}}" not in inputs[2]["instruction"]  # the rule's, not the model's
    warnings = [note for note in body["metadata"]["warnings"] if note["code"] == "input_by_rule"]
    assert [note["detail"][:22] for note in warnings] == ["step 3: invalid_input:"]
    assert stub.calls == body["metadata"]["attempts"] == 7
    assert stub.requests[1]["response_format"] == {"type": "json_object"}
    assert "query" in request_data(stub.requests[1])["input_schema"]["properties"]


def test_specialize_one_step_over_real_http(client: httpx.Client, stub: StubLLM) -> None:
    plan = client.post("/plan", json={"goal": GOAL["goal"]}).json()
    assert all(item["input"] is None for item in plan["plan"])
    stub.script(reply({"instruction": "Add a regression test", "language": "python"}))
    one = client.post("/plan/specialize", json={"plan_id": plan["plan_id"], "step": 3})
    assert one.status_code == 200, one.text
    assert one.json() | {"request_id": None} == {
        "plan_id": plan["plan_id"], "step": 3, "required_arm": "coder",
        "input": {"instruction": "Add a regression test", "language": "python", "files": []},
        "source": "llm", "model": "gpt-3.5-turbo", "request_id": None, "warnings": [],
    }  # fmt: skip
    before = stub.calls
    # A failure and its retries: the one attempt loop every strategy uses allows
    # retry.max_llm_calls (3) calls, for a step's input as for a plan.
    stub.script(Status(503), Status(503), Status(503))
    down = client.post("/plan/specialize", json={"previous": plan, "step": 1}).json()
    assert down["source"] == "rule"
    detail = down["warnings"][0]["detail"]
    assert detail.startswith("step 1: llm_unavailable: gpt-3.5-turbo: server_error")
    assert stub.calls == before + 3
    assert_error_body(
        client.post("/plan/specialize", json={"plan_id": plan["plan_id"], "step": 5}),
        422,
        "unknown_step",
    )
    assert_error_body(
        client.post("/plan/specialize", json={"plan_id": "gone", "step": 1}), 404, "plan_not_found"
    )


def test_no_model_at_all_fills_every_input_by_rule(no_model: httpx.Client) -> None:
    assert no_model.get("/capabilities").json()["llm"] == "disabled"
    body = no_model.post("/plan", json=GOAL).json()
    assert_valid_plan(body)
    assert_inputs_valid(body)
    assert body["metadata"]["source"] == "fallback"
    one = no_model.post("/plan/specialize", json={"previous": body, "step": 1}).json()
    assert (one["source"], one["warnings"]) == ("rule", [])
    assert one["input"] == body["plan"][0]["input"]
