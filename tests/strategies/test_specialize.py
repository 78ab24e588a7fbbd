"""Step inputs over a mocked model: the model's valid input, one repair of a bad one, the rule
when it stays bad or the model fails, the arm's schema as structured output, a refused
response_format, the deadline over many steps, and how many calls it all costs."""

from __future__ import annotations

import json
from typing import Any

import httpx
import respx

from planner_arm.clock import Deadline
from planner_arm.plan.dag import ancestors_of_each
from planner_arm.plan.endpoint_schemas import SpecializeRequest
from planner_arm.plan.inputs import check_input, input_schema
from planner_arm.plan.schemas import (
    Budget,
    EstimatedCost,
    PlanMetadata,
    PlanRequest,
    PlanResponse,
    PlanStep,
)
from planner_arm.service.wiring import Runtime
from planner_arm.strategies.answer_schemas import decoding_schema
from planner_arm.strategies.prompts.specialize import SPECIALIZE_SYSTEM_PROMPT, SpecializeBrief
from planner_arm.strategies.specialize import Specializer
from support.app import FakeClock, answer
from support.factories import make_service, request_deadline, request_job
from support.model_requests import request_data

GOAL = "Fix authentication bug and add tests"
BRIEF = SpecializeBrief(GOAL)
CODER_INPUT = {"instruction": "Fix the expiry check found in {{steps.1.output}}",
               "language": "python", "files": ["auth/login.py"]}  # fmt: skip


class Specializing:
    """The service's specializer, and a request deadline of its own for each call."""

    def __init__(self, service: Runtime) -> None:
        self.service = service
        self.specializer: Specializer = service.specializer

    def deadline(self) -> Deadline:
        return request_deadline(self.service)

    async def specialize(
        self,
        response: PlanResponse,
        brief: SpecializeBrief,
        deadline: Deadline,
        budget: Budget | None = None,
    ) -> PlanResponse:
        job = request_job(self.service, PlanRequest(goal=GOAL), "r", deadline, budget)
        return await self.specializer.specialize(job, response, brief)

    async def one_step(self, plan: PlanResponse, number: int, goal: str, request_id: str) -> Any:
        brief = SpecializeBrief(goal)
        body = SpecializeRequest(plan_id=plan.plan_id, step=number, goal=goal)
        job = request_job(self.service, body, request_id)
        return await self.specializer.one_step(job, plan, number, brief)


def build(clock: FakeClock, llm: bool = True, **overrides: Any) -> Specializing:
    return Specializing(make_service(clock, llm=llm, **overrides))


def plan_of(steps: list[PlanStep]) -> PlanResponse:
    return PlanResponse(
        plan=steps, rationale="r", confidence=0.8, total_estimated_duration=60,
        complexity_score=0.3, plan_id="p1", request_id="r1", parallel_stages=[],
        critical_path_duration=60,
        estimated_cost=EstimatedCost(llm_usd=0.0, prompt_tokens=100, completion_tokens=50),
        metadata=PlanMetadata(source="llm", model="m", attempts=1, repairs=[], warnings=[],
                              latency_ms=5.0, prompt_version="v"),
    )  # fmt: skip


def four_steps() -> PlanResponse:
    return plan_of([
        PlanStep(step=1, action="Search the codebase for the login handler",
                 required_arm="retriever", acceptance_criteria=["Found"]),
        PlanStep(step=2, action="Patch the expiry check", required_arm="coder",
                 acceptance_criteria=["Fixed"], depends_on=[1]),
        PlanStep(step=3, action="Run `pytest -q`", required_arm="executor",
                 acceptance_criteria=["Green"], depends_on=[2]),
        PlanStep(step=4, action="Validate the fix", required_arm="judge",
                 acceptance_criteria=["All good"], depends_on=[3]),
    ])  # fmt: skip


def sent(route: respx.Route, index: int = -1) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(route.calls[index].request.content)
    return body


async def one(specializer: Specializing, number: int = 2) -> Any:
    return await specializer.one_step(four_steps(), number, GOAL, "r2")


async def test_the_models_valid_input_is_used(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = answer(CODER_INPUT)
    result = await one(build(fake_clock))
    assert (result.source, result.model, result.warnings) == ("llm", "gpt-3.5-turbo", [])
    assert result.input == CODER_INPUT
    assert chat_route.call_count == 1
    messages = sent(chat_route)["messages"]
    assert messages[0]["content"] == SPECIALIZE_SYSTEM_PROMPT
    data = request_data(sent(chat_route))  # the arm's schema and the step, as data
    assert (data["arm"], data["input_schema"]) == ("coder", input_schema("coder"))
    assert data["step"]["action"] == "Patch the expiry check"
    assert data["goal"] == GOAL
    assert sent(chat_route)["response_format"] == {"type": "json_object"}


async def test_structured_output_carries_the_arms_schema(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = answer(CODER_INPUT)
    await one(build(fake_clock, model={"response_format": "json_schema"}))
    fmt = sent(chat_route)["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "coder_input"
    # The arm's schema without its words for a reader, which the user message carries.
    assert fmt["json_schema"]["schema"] == decoding_schema(input_schema("coder"))
    assert "description" in json.dumps(input_schema("coder"))
    assert '"description"' not in json.dumps(fmt["json_schema"]["schema"])


async def test_a_wrong_shape_is_repaired_once(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.side_effect = [
        answer("Sure! The coder should fix the expiry check."),
        answer({"input": CODER_INPUT}),  # wrapped: still the right object
    ]
    result = await one(build(fake_clock))
    assert result.source == "llm"
    assert result.input == CODER_INPUT
    repair = sent(chat_route, 1)["messages"]
    assert len(repair) == 4
    assert "could not be used" in repair[3]["content"]


async def test_a_dangling_reference_earns_a_repair(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    dangling = {**CODER_INPUT, "instruction": "Use {{steps.3.output}}"}
    chat_route.side_effect = [answer(dangling), answer(CODER_INPUT)]
    result = await one(build(fake_clock))
    assert result.input == CODER_INPUT
    assert (
        "step 3, which this step does not depend on"
        in sent(chat_route, 1)["messages"][3]["content"]
    )


async def test_invalid_twice_gives_the_rule_input_with_the_reason(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = answer({"language": "python"})  # no instruction, twice
    result = await one(build(fake_clock))
    assert result.source == "rule"
    assert chat_route.call_count == 2
    assert check_input("coder", result.input, frozenset({1})) == result.input
    (warning,) = result.warnings
    assert warning.code == "input_by_rule"
    assert warning.detail.startswith("step 2: invalid_input:")
    assert "instruction" in warning.detail


async def test_a_refused_response_format_is_asked_again_without_it(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    refused = httpx.Response(400, json={"error": {"message": "response_format is not supported"}})
    chat_route.side_effect = [refused, answer(CODER_INPUT), answer(CODER_INPUT)]
    specializer = build(fake_clock, model={"response_format": "json_schema"})
    assert (await one(specializer)).source == "llm"
    assert "response_format" in sent(chat_route, 0)
    assert "response_format" not in sent(chat_route, 1)
    await one(specializer)
    assert "response_format" not in sent(chat_route, 2)  # remembered
    assert chat_route.call_count == 3


async def test_a_failing_model_gives_the_rule_input(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = httpx.Response(401, json={"error": {"message": "bad key"}})
    result = await one(build(fake_clock))
    assert result.source == "rule"
    assert chat_route.call_count == 1
    # The reason, the model and its error's code, then what the provider said.
    detail = result.warnings[0].detail
    assert detail.startswith("step 2: llm_unavailable: gpt-3.5-turbo: auth_failed: HTTP 401")


async def test_no_model_fills_every_step_by_rule_without_warnings(fake_clock: FakeClock) -> None:
    specializer = build(fake_clock, llm=False)
    plan = four_steps()
    filled = await specializer.specialize(plan, BRIEF, specializer.deadline())
    earlier = ancestors_of_each(filled.plan)
    for item in filled.plan:
        assert item.input is not None
        assert check_input(item.required_arm, item.input, earlier[item.step]) == item.input
    assert filled.plan[2].input == {"command": "pytest -q", "needs": None, "instruction": None,
                                    "working_dir": ".", "timeout_seconds": 60,
                                    "expect_exit_code": 0}  # fmt: skip
    assert filled.metadata.warnings == []
    assert filled.metadata.attempts == 1


async def test_one_call_per_step_and_the_cost_is_added(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    def reply(request: httpx.Request) -> httpx.Response:
        schema = json.dumps(request_data(request)["input_schema"])
        if '"query"' in schema:
            return answer({"query": "login handler"})
        if '"command"' in schema:
            return answer({"command": "pytest -q"})
        if '"criteria"' in schema:
            return answer({"criteria": ["fixed"], "inputs_from": [3]})
        return answer(CODER_INPUT)

    chat_route.side_effect = reply
    specializer = build(fake_clock)
    filled = await specializer.specialize(four_steps(), BRIEF, specializer.deadline())
    assert chat_route.call_count == 4
    assert filled.metadata.attempts == 1 + 4
    assert filled.estimated_cost.prompt_tokens > 100
    assert filled.plan[0].input == {"query": "login handler", "sources": [], "top_k": 5}
    assert filled.plan[3].input == {"criteria": ["fixed"], "inputs_from": [3]}
    assert filled.metadata.warnings == []


async def test_the_deadline_bounds_many_steps(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    def slow(request: httpx.Request) -> httpx.Response:
        fake_clock.time += 2.0  # each answer takes two seconds
        return answer({"instruction": "do it"})

    chat_route.side_effect = slow
    worker = {"id": "worker", "capabilities": ["work"], "description": "Works"}
    judge = {"id": "judge", "capabilities": ["judging"], "description": "Judges"}
    specializer = build(fake_clock, specialize={"max_concurrency": 1}, arms=[worker, judge])
    steps = [PlanStep(step=n, action=f"Do part {n}", required_arm="worker",
                      acceptance_criteria=["done"], depends_on=[n - 1] if n > 1 else [])
             for n in range(1, 21)]  # fmt: skip
    started = fake_clock.time
    filled = await specializer.specialize(plan_of(steps), BRIEF, specializer.deadline())
    assert fake_clock.time - started <= 10.0 + 2.0  # the deadline, and one answer in flight
    by_model = [item for item in filled.plan if item.input == {"instruction": "do it",
                                                               "inputs_from": []}]  # fmt: skip
    assert 3 <= len(by_model) <= 5
    assert chat_route.call_count == len(by_model)
    late = [note for note in filled.metadata.warnings if note.code == "input_by_rule"]
    assert len(late) == 20 - len(by_model)
    assert all("deadline" in note.detail for note in late)
    for item in filled.plan:
        assert item.input is not None
        assert item.input["instruction"]


async def test_a_kept_input_stays_and_a_dangling_one_is_replaced(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = answer({"query": "anything"})
    plan = four_steps()
    kept = {"query": "the login handler", "sources": ["src/"], "top_k": 3}
    bad = {"criteria": ["ok"], "inputs_from": [9]}
    steps = [plan.plan[0].model_copy(update={"input": kept}), plan.plan[1],
             plan.plan[2], plan.plan[3].model_copy(update={"input": bad})]  # fmt: skip
    specializer = build(fake_clock, llm=False)
    filled = await specializer.specialize(plan_of(steps), BRIEF, specializer.deadline())
    assert filled.plan[0].input == kept
    assert filled.plan[3].input == {"criteria": ["All good"], "inputs_from": [3]}
    (note,) = filled.metadata.warnings
    assert note.code == "input_replaced"
    assert note.detail.startswith("step 4: inputs_from names step 9")
    assert chat_route.call_count == 0


async def test_the_deadline_already_spent_means_rule_inputs_at_once(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    specializer = build(fake_clock)
    deadline = Deadline(1.0, fake_clock.as_clock())
    fake_clock.time += 5
    filled = await specializer.specialize(four_steps(), BRIEF, deadline)
    assert chat_route.call_count == 0
    assert {note.code for note in filled.metadata.warnings} == {"input_by_rule"}
    assert len(filled.metadata.warnings) == 4


async def test_steps_filled_at_once_never_spend_past_max_llm_usd(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    """Four steps ask the model side by side: each call's likely cost is set aside before it
    is made, so together they stay within the caller's max_llm_usd."""
    # Each call costs 0.003 (2000 output tokens at 1.5 $/M), a little under its estimate.
    chat_route.return_value = answer({}, prompt_tokens=0, completion_tokens=2000)
    specializer = build(fake_clock)
    budget = Budget(max_llm_usd=0.007)
    result = await specializer.specialize(four_steps(), BRIEF, specializer.deadline(), budget)
    assert result.estimated_cost.llm_usd <= 0.007
    assert 1 <= chat_route.call_count <= 2
    reasons = [w.detail for w in result.metadata.warnings if w.code == "input_by_rule"]
    assert len(reasons) == 4
    assert any("spend_budget" in reason for reason in reasons)
