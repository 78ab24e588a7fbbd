"""The caller's budget on /plan: the model is told, an answer over budget is sent back once,
the rule-based plan fits it, a budget no plan meets is refused, the cache keeps budgets apart."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import respx

from planner_arm.errors import BudgetExceeded
from planner_arm.plan.schemas import PlanRequest
from support.app import FakeClock, answer, good_plan
from support.factories import make_service
from support.invariants import assert_valid_plan

GOAL = "Fix authentication bug and add tests"


def five_steps() -> dict[str, Any]:
    """good_plan with one more coder step before the final check: 5 steps."""
    plan = good_plan()
    extra = {**plan["plan"][2], "step": 4, "action": "Update the changelog for the fix"}
    judge = {**plan["plan"][3], "step": 5, "depends_on": [2, 3, 4]}
    plan["plan"][3:] = [extra, judge]
    return plan


def user_message(call: Any) -> str:
    return str(json.loads(call.request.content)["messages"][1]["content"])


def last_message(call: Any) -> str:
    return str(json.loads(call.request.content)["messages"][-1]["content"])


async def test_an_answer_over_budget_gets_one_repair_prompt_and_the_repair_is_kept(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.side_effect = [answer(five_steps()), answer(good_plan())]
    request = PlanRequest(goal=GOAL, budget={"max_steps": 4})
    response = await make_service(fake_clock).plans.plan(request, "r", use_cache=False)
    assert response.metadata.source == "llm"
    assert len(response.plan) == 4
    assert chat_route.call_count == 2
    assert "at most 4 steps" in user_message(chat_route.calls[0])
    repair = last_message(chat_route.calls[1])
    assert "the plan has 5 steps; the budget allows 4" in repair


async def test_a_model_that_stays_over_budget_gives_a_rule_based_plan_within_it(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = answer(five_steps())
    budget = {"max_steps": 4, "max_duration_seconds": 200}
    response = await make_service(fake_clock).plans.plan(
        PlanRequest(goal=GOAL, budget=budget), "r", use_cache=False
    )
    body = response.model_dump(mode="json")
    assert_valid_plan(body)
    assert body["metadata"]["source"] == "fallback"
    assert len(body["plan"]) <= 4  # unbudgeted, the rule-based plan has 6 steps
    assert body["critical_path_duration"] <= 200
    assert chat_route.call_count == 2  # the answer and its one repair
    assert any("invalid_plan" in w["detail"] for w in body["metadata"]["warnings"])


async def test_without_a_model_the_rule_based_plan_keeps_to_max_steps(
    fake_clock: FakeClock,
) -> None:
    planner = make_service(fake_clock, llm=False)
    response = await planner.plans.plan(
        PlanRequest(goal=GOAL, budget={"max_steps": 3}), "r", use_cache=False
    )
    assert_valid_plan(response.model_dump(mode="json"))
    assert len(response.plan) <= 3
    assert response.plan[-1].required_arm == "judge"


async def test_no_fitting_plan_after_the_model_failed_is_budget_exceeded(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = httpx.Response(500, json={})
    request = PlanRequest(goal=GOAL, budget={"max_duration_seconds": 1})
    with pytest.raises(BudgetExceeded) as caught:
        await make_service(fake_clock).plans.plan(request, "r", use_cache=False)
    assert caught.value.figures["max_duration_seconds"] == 1
    assert caught.value.figures["critical_path_duration"] > 1


async def test_max_steps_below_the_minimum_is_refused_without_a_model_call(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = answer(good_plan())
    request = PlanRequest(goal=GOAL, budget={"max_steps": 2})
    with pytest.raises(BudgetExceeded) as caught:
        await make_service(fake_clock).plans.plan(request, "r", use_cache=False)
    assert caught.value.figures == {"max_steps": 2, "steps": 3}  # min_steps is 3
    assert chat_route.call_count == 0


async def test_a_cached_plan_is_not_handed_to_a_request_whose_budget_it_breaks(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.side_effect = [answer(five_steps()), answer(good_plan())]
    caching = make_service(fake_clock).plans
    unbudgeted = await caching.plan(PlanRequest(goal=GOAL), "r1", use_cache=True)
    assert len(unbudgeted.plan) == 5
    budgeted = PlanRequest(goal=GOAL, budget={"max_steps": 4})
    response = await caching.plan(budgeted, "r2", use_cache=True)
    assert response.metadata.source == "llm"  # planned afresh, not the cached 5 steps
    assert len(response.plan) == 4
    again = await caching.plan(budgeted, "r3", use_cache=True)
    assert again.metadata.source == "cache"
    assert again.metadata.cached_plan_id == response.plan_id
