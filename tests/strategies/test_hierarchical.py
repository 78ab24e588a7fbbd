"""The hierarchical strategy over HTTP (in process, the model mocked with respx): phases, each
expanded in parallel, compound steps expanded again to max_depth, the model-call count, bad
sub-plan answers, the deadline, the budget, no model at all, and streaming."""

from __future__ import annotations

from typing import Any

import httpx
import respx

from support.app import FakeClock, answer, good_plan, make_settings, running_app
from support.invariants import assert_valid_plan
from support.model_requests import request_data
from support.sse import parse_sse

GOAL = {"goal": "Fix authentication bug and add tests", "strategy": "hierarchical"}


def sub_plan(action: str, *, compound: bool = False) -> dict[str, Any]:
    step = {"required_arm": "coder", "estimated_cost_tier": 2, "estimated_duration_seconds": 30}
    middle = {**step, "step": 2, "action": f"Carry out the work of {action[:40]}",
              "acceptance_criteria": ["Work done"], "depends_on": [1]}  # fmt: skip
    if compound:
        middle["compound"] = True
    return {
        "plan": [
            {**step, "step": 1, "action": f"Prepare the ground for {action[:40]}",
             "required_arm": "retriever", "acceptance_criteria": ["Inputs found"],
             "depends_on": []},
            middle,
            {**step, "step": 3, "action": f"Check the result of {action[:40]}",
             "required_arm": "judge", "acceptance_criteria": ["Criteria met"], "depends_on": [2]},
        ],
        "rationale": "Prepare, do, check.",
        "confidence": 0.8,
        "complexity_score": 0.3,
    }  # fmt: skip


def detailed_action(request: httpx.Request) -> str | None:
    """The action of the step a sub-plan prompt asks about; None for the phases prompt."""
    data = request_data(request)
    if "step_to_detail" not in data:
        return None
    action: str = data["step_to_detail"]["action"]
    return action


def model(*, compound: bool = False, clock: FakeClock | None = None, seconds: float = 0.0) -> Any:
    """Phases: the good plan; every sub-plan: three steps (the middle one compound)."""

    def reply(request: httpx.Request) -> httpx.Response:
        if clock is not None:
            clock.time += seconds
        action = detailed_action(request)
        if action is None:
            return answer(good_plan())
        return answer(sub_plan(action, compound=compound))

    return reply


def assert_hierarchical(body: dict[str, Any]) -> None:
    assert_valid_plan(body, max_steps=50)
    assert body["strategy"] == "hierarchical"


async def test_each_phase_but_the_final_check_is_expanded_in_one_call_each(
    chat_route: respx.Route,
) -> None:
    chat_route.side_effect = model()
    async with running_app(make_settings()) as client:
        response = await client.post("/plan", json=GOAL)
    body = response.json()
    assert_hierarchical(body)
    assert chat_route.call_count == 1 + 3  # the phases, then phases 1-3
    assert body["metadata"]["attempts"] == 4
    assert len(body["plan"]) == 3 * 3 + 1
    assert [node["id"] for node in body["tree"]] == ["1", "2", "3", "4"]
    assert [node["step"] for node in body["tree"]] == [None, None, None, 10]
    assert [child["id"] for child in body["tree"][1]["children"]] == ["2.1", "2.2", "2.3"]
    parents = [step["parent"] for step in body["plan"]]
    assert parents == ["1"] * 3 + ["2"] * 3 + ["3"] * 3 + [None]
    deps = {step["step"]: step["depends_on"] for step in body["plan"]}
    assert deps[4] == [3]  # phase 2 starts after phase 1's last sub-step
    assert deps[7] == [3]  # phase 3 too: 2 and 3 ran side by side and still do
    assert deps[10] == [6, 9]


async def test_compound_steps_are_expanded_again_only_while_depth_remains(
    chat_route: respx.Route,
) -> None:
    chat_route.side_effect = model(compound=True)
    async with running_app(make_settings()) as client:
        deep = (await client.post("/plan", json={**GOAL, "max_depth": 3})).json()
        calls_deep = chat_route.call_count
        two = (await client.post("/plan", json={**GOAL, "max_depth": 2})).json()
        calls_two = chat_route.call_count - calls_deep
        one = (await client.post("/plan", json={**GOAL, "max_depth": 1})).json()
    assert_hierarchical(deep)
    assert calls_deep == 1 + 3 + 3  # phases, phases 1-3, each one's compound step
    assert len(deep["plan"]) == 3 * (2 + 3) + 1
    nested = deep["tree"][1]["children"][1]
    assert nested["id"] == "2.2"
    assert nested["step"] is None
    assert [child["id"] for child in nested["children"]] == ["2.2.1", "2.2.2", "2.2.3"]
    assert {s["parent"] for s in deep["plan"]} == {"1", "1.2", "2", "2.2", "3", "3.2", None}
    assert calls_two == 1 + 3
    assert len(two["plan"]) == 10
    assert_hierarchical(one)
    assert len(one["plan"]) == 4
    assert one["tree"][0]["children"] == []


async def test_a_bad_sub_plan_is_repaired_and_a_failing_node_falls_back(
    chat_route: respx.Route,
) -> None:
    seen: dict[str, int] = {}

    def reply(request: httpx.Request) -> httpx.Response:
        action = detailed_action(request)
        if action is None:
            return answer(good_plan())
        seen[action] = seen.get(action, 0) + 1
        if action.startswith("Search"):  # phase 1: a wrong shape, then a good answer
            return (
                answer({"idea": "look around"}) if seen[action] == 1 else answer(sub_plan(action))
            )
        if action.startswith("Write a regression"):  # phase 3: the model keeps failing
            return httpx.Response(500, json={"error": {"message": "down"}})
        return answer(sub_plan(action))

    chat_route.side_effect = reply
    async with running_app(make_settings()) as client:
        body = (await client.post("/plan", json=GOAL)).json()
    assert_hierarchical(body)
    assert body["metadata"]["source"] == "llm"
    assert "fallback_used" in [note["code"] for note in body["metadata"]["warnings"]]
    phase_3 = [step for step in body["plan"] if step["parent"] == "3"]
    assert len(phase_3) >= 3  # the rule-based sub-plan
    assert phase_3[-1]["required_arm"] == "judge"
    assert next(step["action"] for step in body["plan"] if step["parent"] == "1").startswith(
        "Prepare the ground"
    )


async def test_phases_not_expanded_before_the_deadline_stay_single_steps(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    # Each call takes 4 s of a 10 s deadline, one at a time: the phases and one node fit.
    chat_route.side_effect = model(clock=fake_clock, seconds=4.0)
    settings = make_settings(
        planning={"timeout_seconds": 10}, expansion={"concurrency": 1}, retry={"max_llm_calls": 1}
    )
    async with running_app(settings, fake_clock) as client:
        body = (await client.post("/plan", json=GOAL)).json()
    assert_hierarchical(body)
    skipped = [n for n in body["metadata"]["warnings"] if n["code"] == "node_not_expanded"]
    assert skipped
    single = [node for node in body["tree"][:3] if node["step"] is not None]
    assert len(single) == len(skipped)
    expanded = [node for node in body["tree"][:3] if node["children"]]
    assert expanded
    assert body["metadata"]["latency_ms"] <= 10_000 + 4_000  # the last call started in time


async def test_without_a_model_phases_and_sub_plans_are_rule_based() -> None:
    async with running_app(make_settings(llm=False)) as client:
        body = (await client.post("/plan", json=GOAL)).json()
    assert_hierarchical(body)
    assert body["metadata"]["source"] == "fallback"
    # The answer says why the rules planned it, once.
    assert [(w["code"], w["detail"].split(":")[0]) for w in body["metadata"]["warnings"]] == [
        ("fallback_used", "llm_disabled")
    ]
    expanded = [node for node in body["tree"] if node["children"]]
    assert len(expanded) == len(body["tree"]) - 1  # every phase but the final check
    assert len(body["plan"]) > len(body["tree"])


async def test_the_budget_folds_expansions_back_into_single_steps(
    chat_route: respx.Route,
) -> None:
    chat_route.side_effect = model()
    async with running_app(make_settings()) as client:
        response = await client.post("/plan", json={**GOAL, "budget": {"max_steps": 8}})
    body = response.json()
    assert_hierarchical(body)
    assert len(body["plan"]) <= 8
    folded = [n for n in body["metadata"]["warnings"] if n["code"] == "node_not_expanded"]
    assert folded
    assert "the budget allows 8" in folded[0]["detail"]


async def test_a_streamed_hierarchical_plan_sends_its_steps_once_it_is_made(
    chat_route: respx.Route,
) -> None:
    chat_route.side_effect = model()
    async with running_app(make_settings()) as client:
        response = await client.post("/plan", json=GOAL, headers={"accept": "text/event-stream"})
    events = parse_sse(response.text)
    assert events[0][0] == "plan.started"
    assert events[-1][0] == "plan"
    plan = events[-1][1]
    assert_hierarchical(plan)
    assert plan["plan_id"] == events[0][1]["plan_id"]
    assert [data for name, data in events if name == "step"] == plan["plan"]


async def test_a_hierarchical_plan_is_replanned_flat_keeping_the_finished_steps_parents() -> None:
    async with running_app(make_settings(llm=False)) as client:
        deep = (await client.post("/plan", json=GOAL)).json()
        states = {"1": {"status": "completed"}, "2": {"status": "failed", "error": "broke"}}
        replan = await client.post(
            "/replan", json={**GOAL, "plan_id": deep["plan_id"], "step_states": states}
        )
    body = replan.json()
    assert replan.status_code == 200, replan.text
    assert_valid_plan(body, consecutive=False, max_steps=50)
    assert body["strategy"] == "flat"
    assert body["tree"] is None
    assert body["plan"][0] == deep["plan"][0]
    assert body["plan"][0]["parent"] == "1"
