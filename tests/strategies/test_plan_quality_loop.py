"""The planner asks the model once to mend what only it can (a constraint no step addresses,
a step copied from the example), and keeps the plan with a warning when it does not."""

from __future__ import annotations

import json
from typing import Any

import respx

from planner_arm.plan.schemas import PlanRequest
from planner_arm.strategies.prompts.plans import example_texts
from support.app import FakeClock, answer, good_plan
from support.factories import make_service

DEPLOY = PlanRequest(goal="Build the inventory API", constraints=["Deploy to Kubernetes"])


def with_deploy_step() -> dict[str, Any]:
    plan = good_plan()
    judge = plan["plan"][-1]
    deploy = {
        "step": judge["step"],
        "action": "Deploy the service to the Kubernetes cluster",
        "required_arm": "executor",
        "acceptance_criteria": ["Pods are running"],
        "depends_on": judge["depends_on"],
        "estimated_cost_tier": 2,
        "estimated_duration_seconds": 60,
    }
    plan["plan"][-1:] = [
        deploy,
        {**judge, "step": judge["step"] + 1, "depends_on": [judge["step"]]},
    ]
    return plan


def last_user_message(route: respx.Route) -> str:
    return str(json.loads(route.calls.last.request.content)["messages"][-1]["content"])


async def test_an_ignored_constraint_earns_one_repair_prompt_naming_it(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.side_effect = [answer(good_plan()), answer(with_deploy_step())]
    response = await make_service(fake_clock).plans.plan(DEPLOY, "r1", use_cache=False)
    assert response.metadata.source == "llm"
    assert response.metadata.attempts == 2
    assert "'Deploy to Kubernetes'" in last_user_message(chat_route)
    assert "needs mending" in last_user_message(chat_route)
    assert any("Kubernetes" in step.action for step in response.plan)
    assert response.metadata.warnings == []


async def test_a_model_that_ignores_it_twice_keeps_its_plan_with_a_warning(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = answer(good_plan())
    response = await make_service(fake_clock).plans.plan(DEPLOY, "r2", use_cache=False)
    # Usable either time: the model's plan, not the fallback, and no third call.
    assert response.metadata.source == "llm"
    assert response.metadata.attempts == 2
    [warning] = response.metadata.warnings
    assert warning.code == "constraint_not_addressed"
    assert "Deploy to Kubernetes" in warning.detail


async def test_without_a_repair_left_the_plan_is_kept_at_once_with_a_warning(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = answer(good_plan())
    planner = make_service(fake_clock, retry={"repairs_per_model": 0})
    response = await planner.plans.plan(DEPLOY, "r3", use_cache=False)
    assert (response.metadata.source, response.metadata.attempts) == ("llm", 1)
    assert [w.code for w in response.metadata.warnings] == ["constraint_not_addressed"]


async def test_a_repair_that_breaks_the_plan_keeps_the_first_plan(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.side_effect = [answer(good_plan()), answer("sorry, no plan")]
    response = await make_service(fake_clock).plans.plan(DEPLOY, "r4", use_cache=False)
    assert response.metadata.source == "llm"
    assert [w.code for w in response.metadata.warnings] == ["constraint_not_addressed"]


async def test_a_step_copied_from_the_example_is_sent_back(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    copied = good_plan()
    copied["plan"][0]["action"] = example_texts()[0]
    chat_route.side_effect = [answer(copied), answer(good_plan())]
    request = PlanRequest(goal="Fix authentication bug and add tests")
    response = await make_service(fake_clock).plans.plan(request, "r5", use_cache=False)
    assert response.metadata.attempts == 2
    assert "repeats the rules' example text" in last_user_message(chat_route)
    assert response.metadata.warnings == []


async def test_a_prohibition_is_mended_locally_with_one_call(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = answer(good_plan())
    never = "Never restart the production database"
    request = PlanRequest(goal="Fix authentication bug", constraints=[never])
    response = await make_service(fake_clock).plans.plan(request, "r6", use_cache=False)
    assert response.metadata.attempts == 1
    assert f"Constraint respected: {never}" in response.plan[-1].acceptance_criteria
    assert "constraint_check_added" in {note.code for note in response.metadata.repairs}


async def test_a_style_constraint_costs_no_extra_call(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = answer(good_plan())
    request = PlanRequest(
        goal="Fix authentication bug", constraints=["Be brief", "Use plain English"]
    )
    response = await make_service(fake_clock).plans.plan(request, "r7", use_cache=False)
    # No step or criterion can address how the answer reads: nothing to send back.
    assert response.metadata.attempts == chat_route.call_count == 1
    assert response.metadata.warnings == []


async def test_a_quality_repair_the_deadline_cannot_hold_is_not_spent(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    def slow(_: object) -> object:
        fake_clock.time += 6.0  # of the 10 s deadline: a second call would not finish
        return answer(good_plan())

    chat_route.side_effect = slow
    response = await make_service(fake_clock).plans.plan(DEPLOY, "r8", use_cache=False)
    assert chat_route.call_count == 1
    assert response.metadata.source == "llm"
    assert [w.code for w in response.metadata.warnings] == ["constraint_not_addressed"]
