"""The iterative strategy in the planner and the replanner: the first stage of the model's
plan (or the fallback's), one model call a round, rounds through to `complete`, the rounds
that do not count toward max_replans, and the round limit that ends a model's endless work."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import respx

from planner_arm.errors import ReplanLimitReached, ReplanRejected
from planner_arm.plan.endpoint_schemas import ReplanRequest
from planner_arm.plan.schemas import PlanRequest, PlanResponse
from support.app import FakeClock, answer, good_plan
from support.factories import make_service
from support.invariants import assert_valid_plan

GOAL = "Fix authentication bug and add tests"


class Service:
    def __init__(self, clock: FakeClock, llm: bool = True, **overrides: Any) -> None:
        self.service = make_service(clock, llm=llm, **overrides)

    async def plan(self, **fields: Any) -> PlanResponse:
        request = PlanRequest(goal=GOAL, strategy="iterative", **fields)
        return await self.service.plans.plan(request, "r0", use_cache=False)

    async def whole(self) -> PlanResponse:
        """The flat plan of the goal, of which the iterative answers are the stages."""
        return await self.service.plans.plan(PlanRequest(goal=GOAL), "w", use_cache=False)

    async def next_round(
        self, previous: PlanResponse, states: dict[str, Any], **fields: Any
    ) -> PlanResponse:
        fields.setdefault("strategy", "iterative")
        request = ReplanRequest(goal=GOAL, previous=previous, step_states=states, **fields)
        return await self.service.plans.replan(request, "r")


def checked(response: PlanResponse, done: set[int], **limits: Any) -> dict[str, Any]:
    body = response.model_dump(mode="json")
    assert_valid_plan(body, consecutive=body["version"] == 1, iterative_done=done, **limits)
    return body


def completed(response: PlanResponse, states: dict[str, Any]) -> dict[str, Any]:
    """The orchestrator ran every step of the answer: all of them completed."""
    return {
        **states,
        **{str(s.step): {"status": "completed", "output": "ok"} for s in response.plan},
    }


def wide_plan() -> dict[str, Any]:
    """Four independent retrievals, then the judge."""
    plan = good_plan()
    first = plan["plan"][0]
    steps = [{**first, "step": n, "action": f"Search part {n} of the code"} for n in range(1, 5)]
    judge = {**plan["plan"][3], "step": 5, "depends_on": [1, 2, 3, 4]}
    return {**plan, "plan": [*steps, judge]}


async def test_plan_answers_only_the_first_stage_of_the_model_plan(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = answer(good_plan())
    response = await Service(fake_clock).plan()
    body = checked(response, set())
    assert [s["action"] for s in body["plan"]] == [good_plan()["plan"][0]["action"]]
    assert (body["strategy"], body["complete"]) == ("iterative", False)
    assert body["total_estimated_duration"] == body["critical_path_duration"] == 20
    assert chat_route.call_count == 1
    (note,) = [w for w in body["metadata"]["warnings"] if w["code"] == "next_stage_only"]
    assert note["detail"].startswith("1 step can start now; 3 steps more planned after")


async def test_a_stage_holds_at_most_three_steps(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = answer(wide_plan())
    body = checked(await Service(fake_clock).plan(), set())
    assert [s["step"] for s in body["plan"]] == [1, 2, 3]
    assert body["parallel_stages"] == [[1, 2, 3]]
    assert all(s["depends_on"] == [] for s in body["plan"])


async def test_a_wrong_shaped_answer_is_repaired_before_the_cut(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.side_effect = [answer({"steps": "not a plan"}), answer(wide_plan())]
    body = checked(await Service(fake_clock).plan(), set())
    assert body["metadata"]["source"] == "llm"
    assert body["metadata"]["attempts"] == 2
    assert len(body["plan"]) == 3


@pytest.mark.parametrize("llm", [True, False])
async def test_without_a_model_the_fallback_plan_is_cut(
    chat_route: respx.Route, fake_clock: FakeClock, llm: bool
) -> None:
    chat_route.return_value = httpx.Response(500, json={})
    body = checked(await Service(fake_clock, llm=llm).plan(), set())
    assert body["metadata"]["source"] == "fallback"
    assert body["complete"] is False
    assert 1 <= len(body["plan"]) <= 3


async def test_rule_based_rounds_reach_complete_with_every_step_of_the_plan(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    service = Service(fake_clock, llm=False)
    whole = await service.whole()
    response, states = await service.plan(), {}
    actions = [s.action for s in response.plan]
    for _ in range(len(whole.plan)):
        if response.complete:
            break
        states = completed(response, states)
        previous = response
        response = await service.next_round(previous, states)
        body = checked(response, {int(n) for n in states}, min_steps=1)
        for kept in previous.plan:  # finished steps are kept exactly
            assert kept.model_dump(mode="json") in body["plan"]
        actions += [s.action for s in response.plan if str(s.step) not in states]
        assert body["replan_count"] == 0
    assert response.complete
    checked(response, {int(n) for n in states})  # a whole plan now, final check last
    assert actions == [s.action for s in whole.plan]  # the goal's plan, stage by stage


async def test_model_rounds_run_one_call_each_through_to_complete(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = answer(good_plan())
    service = Service(fake_clock)
    first = await service.plan()
    states = completed(first, {})
    second = await service.next_round(first, states)
    body = checked(second, {1})
    assert [s["step"] for s in body["plan"]] == [1, 2, 3]
    assert (body["complete"], body["version"], body["replan_count"]) == (False, 2, 0)
    assert body["diff"] == {"kept": [1], "removed": [], "added": [2, 3]}
    prompt = json.loads(chat_route.calls[1].request.content)["messages"][1]["content"]
    assert "previous_plan is not the whole plan" in prompt
    assert "Only the steps that can start now will run now" in prompt
    states = completed(second, states)
    third = await service.next_round(second, states)
    body = checked(third, {1, 2, 3})
    assert (body["complete"], body["plan"][-1]["required_arm"]) == (True, "judge")
    assert body["plan"][-1]["depends_on"] == [2, 3]
    assert chat_route.call_count == 3  # one call a round


async def test_a_model_that_keeps_adding_work_is_stopped_by_the_round_limit(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    service = Service(fake_clock, planning={"iterative_max_rounds": 3})
    chat_route.return_value = answer(good_plan())
    response, states = await service.plan(), {}
    for round_ in range(1, 4):
        states = completed(response, states)
        top = max(int(n) for n in states)
        more = good_plan()  # the finished work, and yet another step after it
        kept = [{**s.model_dump(mode="json")} for s in response.plan]
        extra = {**more["plan"][1], "step": top + 1, "action": f"More work, round {round_}",
                 "depends_on": [top]}  # fmt: skip
        judge = {**more["plan"][3], "step": top + 2, "depends_on": [top + 1]}
        chat_route.return_value = answer({**more, "plan": [*kept, extra, judge]})
        response = await service.next_round(response, states)
        checked(response, {int(n) for n in states}, min_steps=1)
    assert response.complete
    assert response.plan[-1].required_arm == "judge"
    assert chat_route.call_count == 3  # the closing round asks no model
    codes = [w.code for w in response.metadata.warnings]
    assert "iterative_round_limit" in codes


async def test_progress_rounds_do_not_count_toward_max_replans_but_failures_do(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = answer(good_plan())
    service = Service(fake_clock)
    first = await service.plan()
    second = await service.next_round(first, completed(first, {}), max_replans=0)
    assert (second.version, second.replan_count) == (2, 0)
    failed = {"1": {"status": "completed"}, "2": {"status": "failed", "error": "no patch"}}
    with pytest.raises(ReplanLimitReached):
        await service.next_round(second, failed, max_replans=0)
    third = await service.next_round(second, failed)
    assert (third.version, third.replan_count) == (3, 1)
    checked(third, {1})


async def test_an_iterative_round_needs_a_completed_step(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = answer(good_plan())
    service = Service(fake_clock)
    first = await service.plan()
    with pytest.raises(ReplanRejected) as caught:
        await service.next_round(first, {"1": {"status": "running"}})
    assert caught.value.code == "nothing_to_replan"
    with pytest.raises(ReplanRejected):  # a flat replan still needs a failure, mark or reason
        await service.next_round(first, completed(first, {}), strategy="flat")
    assert chat_route.call_count == 1


async def test_an_iterative_round_on_a_flat_plan_cuts_what_is_left(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = answer(good_plan())
    service = Service(fake_clock)
    flat = await service.service.plans.plan(PlanRequest(goal=GOAL), "r", use_cache=False)
    response = await service.next_round(flat, {"1": {"status": "completed"}})
    body = checked(response, {1})
    assert [s["step"] for s in body["plan"]] == [1, 2, 3]
    assert body["diff"] == {"kept": [1, 2, 3], "removed": [4], "added": []}
    prompt = json.loads(chat_route.calls[1].request.content)["messages"][1]["content"]
    assert "previous_plan is not the whole plan" not in prompt  # the flat plan was whole


async def test_a_flat_replan_of_a_partial_plan_by_rule_plans_the_rest(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    service = Service(fake_clock, llm=False)
    first = await service.plan()
    states = {**completed(first, {}), "1": {"status": "failed", "error": "no access"}}
    response = await service.next_round(first, states, strategy="flat")
    body = response.model_dump(mode="json")
    assert_valid_plan(body, consecutive=False)
    assert response.complete
    whole = await service.whole()
    assert len(response.plan) > len(whole.plan)  # the rest of the goal's plan, and a retry
