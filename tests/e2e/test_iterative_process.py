"""An orchestrator's iterative loop against a real service process over loopback HTTP: plan
the first stage, run it, report it through /replan, and again until the plan is complete;
with the stub model (a wrong-shaped answer included, a failed step on the way) and with no
model at all."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from support.invariants import assert_valid_plan
from support.service import serving
from support.sse import parse_sse
from support.stub_model import Reply, Streamed, StubLLM

pytestmark = pytest.mark.slow

ITERATIVE = {"goal": "Fix authentication bug and add tests", "strategy": "iterative"}


@pytest.fixture
def client(stub: StubLLM) -> Iterator[httpx.Client]:
    yield from serving({"OPENAI_BASE_URL": stub.base_url})


@pytest.fixture
def no_model_client() -> Iterator[httpx.Client]:
    yield from serving({})


def run_to_complete(client: httpx.Client, fail_once: int | None = None) -> list[dict[str, Any]]:
    """Plan, then run each stage (every step completes, but `fail_once` the first time) and
    report it, until the answer is complete."""
    answers = [client.post("/plan", json=ITERATIVE).json()]
    assert_valid_plan(answers[-1], iterative_done=())
    states: dict[str, dict[str, str]] = {}
    while not answers[-1]["complete"]:
        assert len(answers) <= 12, "the rounds did not end"
        for step in answers[-1]["plan"]:
            number = str(step["step"])
            if number in states:
                continue
            failed = step["step"] == fail_once
            states[number] = (
                {"status": "failed", "error": "the patch broke the build"}
                if failed
                else {"status": "completed", "output": f"step {number} done"}
            )
            fail_once = None if failed else fail_once
        body = {**ITERATIVE, "plan_id": answers[-1]["plan_id"], "step_states": states}
        response = client.post("/replan", json=body)
        assert response.status_code == 200, response.text
        answers.append(response.json())
        done = {int(n) for n, state in states.items() if state["status"] == "completed"}
        assert_valid_plan(answers[-1], consecutive=False, iterative_done=done, min_steps=1)
        states = {n: s for n, s in states.items() if s["status"] == "completed"}
    return answers


def test_the_model_plans_stage_by_stage_to_a_complete_plan(
    client: httpx.Client, stub: StubLLM
) -> None:
    stub.script(Reply(content=json.dumps({"steps": "not a plan"})))  # repaired, then the plan
    answers = run_to_complete(client)
    assert [len(a["plan"]) for a in answers] == [1, 3, 4]
    assert answers[-1]["plan"][-1]["required_arm"] == "judge"
    assert stub.calls == len(answers) + 1  # one call a round, and the repair
    assert all(a["replan_count"] == 0 for a in answers)
    assert client.get(f"/plan/{answers[-1]['plan_id']}").json()["complete"] is True


def test_a_failed_step_is_retried_and_counts_as_a_replan(
    client: httpx.Client, stub: StubLLM
) -> None:
    stub.default = Reply(content="no plan here")  # the model is no use: rules plan each round
    answers = run_to_complete(client, fail_once=1)
    assert answers[-1]["complete"] is True
    assert answers[-1]["replan_count"] == 1  # only the round with the failure counted
    assert all(a["metadata"]["source"] == "fallback" for a in answers)


def test_no_model_at_all_still_reaches_a_complete_plan(no_model_client: httpx.Client) -> None:
    answers = run_to_complete(no_model_client)
    assert len(answers) > 2
    assert answers[-1]["complete"] is True
    assert all(a["metadata"]["attempts"] == 0 for a in answers)


def test_a_streamed_stage_over_real_http(client: httpx.Client, stub: StubLLM) -> None:
    stub.script(Streamed())
    response = client.post("/plan", json=ITERATIVE, headers={"accept": "text/event-stream"})
    events = parse_sse(response.text)
    plan = events[-1][1]
    assert [name for name, _ in events] == ["plan.started", "step", "plan"]
    assert [data for name, data in events if name == "step"] == plan["plan"]
