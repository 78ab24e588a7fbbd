"""Stage 2 over HTTP (in process): the arms' input schemas in /capabilities, POST
/plan/specialize with a plan sent or stored and each of its errors, `"specialize": true` on
/plan and /replan, and the counter of inputs by source."""

from __future__ import annotations

import json
import socket
from typing import Any

import httpx
import respx

from planner_arm.plan.dag import ancestors_of_each
from planner_arm.plan.inputs import check_input, input_schema
from planner_arm.plan.schemas import PlanStep
from support.app import answer, good_plan, make_settings, running_app
from support.invariants import assert_error_body, assert_valid_plan, sample
from support.model_requests import request_data, system_of
from support.sse import check_reset_rule, parse_sse

GOAL = {"goal": "Fix authentication bug and add tests", "constraints": ["No schema change"]}


def assert_inputs_valid(plan: dict[str, Any]) -> None:
    steps = [PlanStep.model_validate(item) for item in plan["plan"]]
    earlier = ancestors_of_each(steps)
    for item in steps:
        assert item.input is not None, item
        assert check_input(item.required_arm, item.input, earlier[item.step]) == item.input


async def test_capabilities_publish_each_arms_input_schema() -> None:
    custom = {"id": "translator", "capabilities": ["translation"], "description": "Translates"}
    settings = make_settings(llm=False, arms=[*make_settings(llm=False).model_dump()["arms"],
                                              custom])  # fmt: skip
    async with running_app(settings) as client:
        arms = {arm["id"]: arm for arm in (await client.get("/capabilities")).json()["arms"]}
    assert arms["retriever"]["input_schema"] == input_schema("retriever")
    assert {"command", "needs"} <= set(arms["executor"]["input_schema"]["properties"])
    assert arms["translator"]["input_schema"]["required"] == ["instruction"]


async def test_plan_with_specialize_and_no_model_fills_every_input_by_rule() -> None:
    async with running_app(make_settings(llm=False)) as client:
        plain = (await client.post("/plan", json=GOAL)).json()
        response = await client.post("/plan", json={**GOAL, "specialize": True})
        metrics = (await client.get("/metrics")).text
    assert all(item["input"] is None for item in plain["plan"])
    body = response.json()
    assert_valid_plan(body)
    assert_inputs_valid(body)
    assert "input_by_rule" not in {note["code"] for note in body["metadata"]["warnings"]}
    assert sample(metrics, "planner_specializations_total", source="rule") == len(body["plan"])


async def test_plan_with_specialize_asks_the_model_once_per_step(chat_route: respx.Route) -> None:
    calls: list[str] = []

    def reply(request: httpx.Request) -> httpx.Response:
        system = system_of(request)
        calls.append(system[:40])
        if system.startswith("You are the planner"):
            return answer(good_plan())
        arm = request_data(request)["arm"]
        if arm == "retriever":
            return answer({"query": "login handler", "top_k": 3})
        if arm == "coder":
            return answer({"instruction": "Patch {{steps.1.output}}"})
        return answer("no idea")  # the judge's input: not JSON, twice -> the rule

    chat_route.side_effect = reply
    async with running_app(make_settings()) as client:
        response = await client.post("/plan", json={**GOAL, "specialize": True})
        metrics = (await client.get("/metrics")).text
    body = response.json()
    assert_valid_plan(body)
    assert_inputs_valid(body)
    assert body["plan"][0]["input"] == {"query": "login handler", "sources": [], "top_k": 3}
    assert body["metadata"]["attempts"] == chat_route.call_count == 1 + 3 + 2
    (late,) = [note for note in body["metadata"]["warnings"] if note["code"] == "input_by_rule"]
    assert late["detail"].startswith("step 4: invalid_input")
    assert sample(metrics, "planner_specializations_total", source="llm") == 3
    assert sample(metrics, "planner_specializations_total", source="rule") == 1


async def test_specialize_one_step_of_a_stored_plan_or_a_sent_one() -> None:
    async with running_app(make_settings(llm=False)) as client:
        plan = (await client.post("/plan", json=GOAL)).json()
        stored = await client.post("/plan/specialize", json={"plan_id": plan["plan_id"], "step": 1})
        sent = await client.post(
            "/plan/specialize",
            json={"previous": plan, "step": len(plan["plan"]), "request_id": "mine-1"},
        )
    assert stored.status_code == 200, stored.text
    first = stored.json()
    assert first["plan_id"] == plan["plan_id"]
    assert (first["step"], first["source"], first["warnings"]) == (1, "rule", [])
    assert first["required_arm"] == plan["plan"][0]["required_arm"]
    assert check_input(first["required_arm"], first["input"], frozenset()) == first["input"]
    last = sent.json()
    assert last["request_id"] == sent.headers["x-request-id"] == "mine-1"
    assert last["required_arm"] == "judge"
    assert last["input"]["criteria"] == plan["plan"][-1]["acceptance_criteria"]


async def test_specialize_uses_the_stored_goal_for_the_model(chat_route: respx.Route) -> None:
    chat_route.side_effect = [answer(good_plan()), answer({"query": "expiry check"})]
    async with running_app(make_settings()) as client:
        plan = (await client.post("/plan", json=GOAL)).json()
        response = await client.post(
            "/plan/specialize", json={"plan_id": plan["plan_id"], "step": 1}
        )
    assert response.json()["source"] == "llm"
    assert response.json()["input"]["query"] == "expiry check"
    prompt = httpx.Response(200, content=chat_route.calls[1].request.content).json()
    assert GOAL["goal"] in prompt["messages"][1]["content"]


class ModelByPrompt:
    """The model for respx: a plan to every planning prompt, an input to every specialize
    prompt; it keeps what each specialize prompt told it (the JSON line of its user message:
    goal, constraints, context, the step)."""

    def __init__(self, value: dict[str, Any]) -> None:
        self.value = value
        self.specialize_prompts: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        messages = httpx.Response(200, content=request.content).json()["messages"]
        if messages[0]["content"].startswith("You are the planner"):
            return answer(good_plan())
        user = messages[1]["content"]
        self.specialize_prompts.append(json.loads(user.splitlines()[1]))
        return answer(self.value)


async def test_a_plan_sent_whole_is_specialized_with_its_stored_request(
    chat_route: respx.Route,
) -> None:
    model = ModelByPrompt({"query": "expiry check"})
    chat_route.side_effect = model
    context = {"repository": "acme/auth"}
    async with running_app(make_settings()) as client:
        plan = (await client.post("/plan", json={**GOAL, "context": context})).json()
        response = await client.post("/plan/specialize", json={"previous": plan, "step": 1})
    assert response.status_code == 200, response.text
    assert response.json()["source"] == "llm"
    assert response.json()["warnings"] == []
    (request,) = model.specialize_prompts
    assert request["goal"] == GOAL["goal"]
    assert request["constraints"] == GOAL["constraints"]
    assert request["context"] == context


async def test_the_stored_request_wins_over_the_bodys_and_the_body_only_adds(
    chat_route: respx.Route,
) -> None:
    model = ModelByPrompt({"query": "expiry check"})
    chat_route.side_effect = model
    async with running_app(make_settings()) as client:
        plan = (await client.post("/plan", json={**GOAL, "context": {"repo": "acme/auth"}})).json()
        body = {"step": 1, "goal": "Rewrite the billing service", "constraints": ["Python 3.11"],
                "context": {"repo": "acme/billing", "ticket": "AUTH-7"}}  # fmt: skip
        by_id = await client.post("/plan/specialize", json={**body, "plan_id": plan["plan_id"]})
        sent = await client.post("/plan/specialize", json={**body, "previous": plan})
    for response in (by_id, sent):
        assert response.status_code == 200, response.text
        (note,) = response.json()["warnings"]
        assert note == {
            "code": "stored_request_used",
            "detail": "the stored request's goal and context ['repo'] were used, not the body's",
        }
    for request in model.specialize_prompts:
        assert request["goal"] == GOAL["goal"]
        assert request["constraints"] == [*GOAL["constraints"], "Python 3.11"]
        assert request["context"] == {"repo": "acme/auth", "ticket": "AUTH-7"}
    assert len(model.specialize_prompts) == 2


async def test_a_step_the_store_has_as_completed_gets_no_new_input_when_sent_whole(
    chat_route: respx.Route,
) -> None:
    model = ModelByPrompt({"query": "expiry check"})
    chat_route.side_effect = model
    async with running_app(make_settings()) as client:
        plan = (await client.post("/plan", json=GOAL)).json()
        states = {"1": "completed", "2": "failed"}
        replan = await client.post(
            "/replan", json={**GOAL, "plan_id": plan["plan_id"], "step_states": states}
        )
        revised = replan.json()
        # The revision sent back whole, as an orchestrator holds it: nothing in it says step 1
        # is done; the store does.
        finished = await client.post("/plan/specialize", json={"previous": revised, "step": 1})
        pending = await client.post(
            "/plan/specialize", json={"previous": revised, "step": revised["plan"][-1]["step"]}
        )
    assert replan.status_code == 200, replan.text
    assert revised["plan"][0]["step"] == 1
    body = assert_error_body(finished, 422, "completed_step")
    assert "step 1 was reported completed" in body["detail"]
    assert pending.status_code == 200, pending.text
    # The model was asked for the pending step's input, never for the finished one's.
    asked = {request["step"]["step"] for request in model.specialize_prompts}
    assert asked == {revised["plan"][-1]["step"]}


async def test_another_tenants_record_is_never_read() -> None:
    keys = {"auth": {"api_keys": ["key-one-0123456789", "key-two-9876543210"]}}
    one = {"authorization": "Bearer key-one-0123456789"}
    two = {"authorization": "Bearer key-two-9876543210"}
    async with running_app(make_settings(llm=False, **keys)) as client:
        plan = (await client.post("/plan", json=GOAL, headers=one)).json()
        states = {"1": "completed", "2": "failed"}
        revised = (await client.post("/replan", headers=one, json={
            **GOAL, "plan_id": plan["plan_id"], "step_states": states})).json()  # fmt: skip
        own = await client.post("/plan/specialize", headers=one,
                                json={"previous": revised, "step": 1})  # fmt: skip
        other = await client.post("/plan/specialize", headers=two,
                                  json={"previous": revised, "step": 1})  # fmt: skip
    assert_error_body(own, 422, "completed_step")
    assert other.status_code == 200, other.text


async def test_each_specialize_error() -> None:
    async with running_app(make_settings(llm=False)) as client:
        plan = (await client.post("/plan", json=GOAL)).json()
        unknown = await client.post(
            "/plan/specialize", json={"plan_id": plan["plan_id"], "step": 9}
        )
        missing = await client.post("/plan/specialize", json={"plan_id": "nope", "step": 1})
        both = await client.post(
            "/plan/specialize", json={"plan_id": plan["plan_id"], "previous": plan, "step": 1}
        )
        neither = await client.post("/plan/specialize", json={"step": 1})
        no_step = await client.post("/plan/specialize", json={"plan_id": plan["plan_id"]})
        zero = await client.post("/plan/specialize", json={"plan_id": plan["plan_id"], "step": 0})
        text = await client.post("/plan/specialize", content="step=1",
                                 headers={"content-type": "text/plain"})  # fmt: skip
    body = assert_error_body(unknown, 422, "unknown_step")
    assert "no step 9" in body["detail"]
    assert_error_body(missing, 404, "plan_not_found")
    for bad in (both, neither, no_step, zero):
        assert_error_body(bad, 422, "invalid_request")
    assert_error_body(text, 415, "unsupported_media_type")


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_a_store_that_does_not_answer_is_503() -> None:
    store = {"url": f"redis://127.0.0.1:{closed_port()}/0", "socket_timeout_seconds": 0.2}
    async with running_app(make_settings(llm=False, store=store)) as client:
        response = await client.post("/plan/specialize", json={"plan_id": "p1", "step": 1})
    assert_error_body(response, 503, "store_unavailable")
    assert response.headers["retry-after"]


async def test_a_plan_sent_whole_is_specialized_while_the_store_does_not_answer() -> None:
    async with running_app(make_settings(llm=False)) as client:
        plan = (await client.post("/plan", json=GOAL)).json()
    store = {"url": f"redis://127.0.0.1:{closed_port()}/0", "socket_timeout_seconds": 0.2}
    async with running_app(make_settings(llm=False, store=store)) as client:
        response = await client.post("/plan/specialize", json={"previous": plan, "step": 1})
    assert response.status_code == 200, response.text
    (note,) = response.json()["warnings"]
    assert note["code"] == "plan_record_unread"
    assert note["detail"].endswith("only the plan sent was read")


async def test_replan_with_specialize_keeps_kept_inputs_and_fills_new_steps() -> None:
    async with running_app(make_settings(llm=False)) as client:
        plan = (await client.post("/plan", json={**GOAL, "specialize": True})).json()
        states = {"1": {"status": "completed", "output": "found"},
                  "2": {"status": "failed", "error": "tests broke"}}  # fmt: skip
        again = {**GOAL, "plan_id": plan["plan_id"], "step_states": states, "specialize": True}
        replan = await client.post("/replan", json=again)
    assert replan.status_code == 200, replan.text
    body = replan.json()
    assert_valid_plan(body, consecutive=False)
    assert_inputs_valid(body)
    assert body["plan"][0]["input"] == plan["plan"][0]["input"]
    assert set(body["diff"]["added"])
    for number in body["diff"]["added"]:
        (added,) = [item for item in body["plan"] if item["step"] == number]
        assert added["input"] is not None


async def test_a_streamed_plan_sends_its_steps_again_with_their_inputs() -> None:
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post(
            "/plan", json={**GOAL, "specialize": True}, headers={"accept": "text/event-stream"}
        )
    events = parse_sse(response.text)
    plan = check_reset_rule(events)  # the steps after the last reset are the plan's
    assert_inputs_valid(plan)
    last_steps = [data for name, data in events if name == "step"][-len(plan["plan"]) :]
    assert all(step["input"] is not None for step in last_steps)
