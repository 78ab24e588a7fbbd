"""What a stored plan keeps: the answer, and of its request only what a later request reads
(goal, constraints, context, strategy), never the step outputs of a replan or a budget; and an
answer does not repeat each long constraint in full. respx on the model, the memory store."""

from __future__ import annotations

import json

import pytest
import respx

from planner_arm.plan.endpoint_schemas import ReplanRequest
from planner_arm.plan.schemas import PlanRequest
from planner_arm.principal import ANONYMOUS
from planner_arm.service.records import StoredPlan, StoredRequest
from support.app import answer, good_plan
from support.factories import make_service

LONG = "Keep the public session API exactly as it is documented today " + "x" * 900


async def test_a_stored_plan_keeps_only_what_a_later_request_reads(
    chat_route: respx.Route,
) -> None:
    chat_route.side_effect = lambda request: answer(good_plan())
    service = make_service()
    request = PlanRequest(
        goal="Fix authentication bug and add tests",
        constraints=[LONG],
        context={"files": ["auth/login.py"]},
        budget={"max_steps": 6},
    )
    planned = await service.plans.plan(request, "r1", use_cache=False)
    replan = ReplanRequest(
        goal=request.goal,
        plan_id=planned.plan_id,
        step_states={"1": {"status": "completed", "output": "o" * 5000}},
        reason="the tests changed",
    )
    replanned = await service.plans.replan(replan, "r2")
    for plan_id in (planned.plan_id, replanned.plan_id):
        record = await service.store.get_plan(ANONYMOUS, plan_id)
        assert record is not None
        assert set(record) == {"response", "request"}
        assert set(record["request"]) - {"step_states"} == {
            "goal",
            "constraints",
            "context",
            "strategy",
        }
        assert "o" * 100 not in str(record)  # no step output of the replan
    replanned_record = await service.store.get_plan(ANONYMOUS, replanned.plan_id)
    assert replanned_record is not None
    # Of the reported states, the status alone: a later specialize refuses a finished step.
    assert replanned_record["request"]["step_states"] == {"1": "completed"}
    stored = await service.store.get_plan(ANONYMOUS, planned.plan_id)
    assert stored is not None
    assert stored["request"]["constraints"] == [LONG]  # a replan reads the whole request
    # The answer names the constraint it missed, without repeating all of it.
    notes = [n for n in planned.metadata.warnings if n.code == "constraint_not_addressed"]
    assert notes
    assert all(len(note.detail) < 300 for note in notes)
    assert "Keep the public session API" in notes[0].detail


@pytest.mark.parametrize("state", ["failed", {"status": "failed", "error": "tests fail"}])
def test_a_stored_request_reads_a_status_either_way_it_was_kept(state: object) -> None:
    typed = StoredRequest.model_validate({"goal": "g", "step_states": {"2": state}})
    assert typed.step_states == {"2": "failed"}
    assert (typed.constraints, typed.context) == ([], {})


async def test_a_record_is_kept_without_step_states_when_none_were_reported() -> None:
    service = make_service(llm=False)
    planned = await service.plans.plan(PlanRequest(goal="Fix the login bug"), "r1", use_cache=False)
    data = await service.store.get_plan(ANONYMOUS, planned.plan_id)
    assert data is not None
    assert "step_states" not in data["request"]
    assert json.loads(StoredPlan.model_validate(data).as_text()) == data


async def test_a_record_with_a_lone_surrogate_is_still_written() -> None:
    # Requests refuse lone surrogates at the edge; a record read back from an older store may
    # hold one (JSON can escape one), and pydantic's writer refuses it where Python's keeps it.
    service = make_service(llm=False)
    planned = await service.plans.plan(PlanRequest(goal="Fix the login bug"), "r1", use_cache=False)
    context = {"note": "half a pair: \ud800"}
    record = StoredPlan(response=planned, request=StoredRequest(goal="g", context=context))
    assert json.loads(record.as_text())["request"]["context"] == context
