"""One contract everywhere (in process): the model named the same by /health, /capabilities and
the start-up log; /plan/validate's warnings in the {code, detail} shape; /plan/specialize
taking the goal, constraints and context /plan/expand takes, and giving them to the model;
a rule-based input that fits its schema whatever the plan's size."""

from __future__ import annotations

import json
from typing import Any

import pytest
import respx

from support.app import answer, good_plan, make_settings, running_app

GOAL = "Fix authentication bug and add tests"


def wide_plan(fan_in: int) -> dict[str, Any]:
    """A /plan answer whose last step, a judge, depends on `fan_in` steps."""
    steps = [
        {"step": n, "action": f"Check module {n}", "required_arm": "retriever",
         "acceptance_criteria": ["Checked"], "depends_on": []}
        for n in range(1, fan_in + 1)
    ]  # fmt: skip
    every = list(range(1, fan_in + 1))
    steps.append({"step": fan_in + 1, "action": "Judge every module", "required_arm": "judge",
                  "acceptance_criteria": ["All good"], "depends_on": every})  # fmt: skip
    return {
        "plan": steps, "rationale": "wide", "confidence": 0.5, "total_estimated_duration": 60,
        "complexity_score": 0.5, "plan_id": "p-wide", "request_id": "r", "parallel_stages": [],
        "critical_path_duration": 60,
        "estimated_cost": {"llm_usd": 0, "prompt_tokens": 0, "completion_tokens": 0},
        "metadata": {"source": "fallback", "model": None, "attempts": 0, "repairs": [],
                     "warnings": [], "latency_ms": 1, "prompt_version": "v"},
    }  # fmt: skip


async def test_with_no_model_no_answer_names_one(capsys: pytest.CaptureFixture[str]) -> None:
    async with running_app(make_settings(llm=False)) as client:
        health = (await client.get("/health")).json()
        capabilities = (await client.get("/capabilities")).json()
    started = [
        json.loads(line)
        for line in capsys.readouterr().err.splitlines()
        if '"service_started"' in line
    ]
    assert health["model"] is None
    assert capabilities["models"] == []
    assert [line["model"] for line in started] == [None]


async def test_with_a_model_every_answer_names_the_chain() -> None:
    settings = make_settings(model={"fallback_models": ["gpt-4o-mini"]})
    async with running_app(settings) as client:
        health = (await client.get("/health")).json()
        capabilities = (await client.get("/capabilities")).json()
    assert capabilities["models"] == [health["model"], "gpt-4o-mini"]


async def test_validate_warnings_have_the_shape_of_every_other_answer() -> None:
    steps = good_plan()["plan"]
    steps[1]["required_arm"] = "code-writer"  # chosen again by rule under fix
    steps[2]["depends_on"] = [1, 42]  # dropped under fix
    steps[0]["colour"] = "red"  # ignored, noted
    async with running_app(make_settings(llm=False)) as client:
        fixed = (await client.post("/plan/validate", json={"plan": steps, "fix": True})).json()
        steps[3]["action"] = ""  # now it stays invalid
        still = (await client.post("/plan/validate", json={"plan": steps, "fix": True})).json()
    assert fixed["valid"] is True
    assert all(set(note) == {"code", "detail"} for note in fixed["warnings"])
    codes = {note["code"] for note in fixed["warnings"]}
    assert {"ignored_step_fields", "arm_selected", "unknown_dependency"} <= codes
    arms = {arm["id"] for arm in make_settings(llm=False).model_dump()["arms"]}
    assert fixed["plan"]["plan"][1]["required_arm"] in arms
    assert still["valid"] is False
    dropped = [note for note in still["warnings"] if note["code"] == "dangling_dependency"]
    assert len(dropped) == 1
    assert "42" in dropped[0]["detail"]


async def test_specialize_an_inline_plan_with_the_goal_constraints_and_context(
    chat_route: respx.Route,
) -> None:
    chat_route.return_value = answer({"query": "expiry check in auth/login.py"})
    body = {
        "previous": wide_plan(3), "step": 1, "goal": GOAL,
        "constraints": ["Python 3.11 only", "  "], "context": {"repo": "acme/auth"},
    }  # fmt: skip
    async with running_app(make_settings()) as client:
        response = await client.post("/plan/specialize", json=body)
        too_long = await client.post(
            "/plan/specialize", json={**body, "constraints": ["x" * 5_000]}
        )
    assert response.status_code == 200, response.text
    assert response.json()["source"] == "llm"
    prompt = json.loads(chat_route.calls.last.request.content)["messages"][1]["content"]
    assert GOAL in prompt
    assert "Python 3.11 only" in prompt
    assert "acme/auth" in prompt
    assert too_long.status_code == 422


async def test_specialize_a_stored_plan_gives_the_model_its_constraints(
    chat_route: respx.Route,
) -> None:
    chat_route.side_effect = [answer(good_plan()), answer({"query": "login handler"})]
    async with running_app(make_settings()) as client:
        sent = {"goal": GOAL, "constraints": ["No schema change"]}
        plan = (await client.post("/plan", json=sent)).json()
        response = await client.post(
            "/plan/specialize", json={"plan_id": plan["plan_id"], "step": 1}
        )
    assert response.status_code == 200, response.text
    prompt = json.loads(chat_route.calls.last.request.content)["messages"][1]["content"]
    assert "No schema change" in prompt


async def test_a_null_optional_field_from_the_model_is_its_default(
    chat_route: respx.Route,
) -> None:
    chat_route.return_value = answer({"query": "login handler", "sources": None, "top_k": None})
    async with running_app(make_settings()) as client:
        response = await client.post("/plan/specialize", json={"previous": wide_plan(2),
                                                               "step": 1})  # fmt: skip
    assert response.json()["source"] == "llm"
    assert response.json()["input"] == {"query": "login handler", "sources": [], "top_k": 5}
    assert chat_route.call_count == 1


@pytest.mark.parametrize("fan_in", [49, 59, 300])
async def test_a_judge_reading_many_steps_gets_a_valid_rule_input(fan_in: int) -> None:
    settings = make_settings(llm=False, server={"max_body_bytes": 1024 * 1024})
    async with running_app(settings) as client:
        response = await client.post(
            "/plan/specialize", json={"previous": wide_plan(fan_in), "step": fan_in + 1}
        )
    assert response.status_code == 200, response.text
    assert response.json()["input"]["inputs_from"] == list(range(1, fan_in + 1))
