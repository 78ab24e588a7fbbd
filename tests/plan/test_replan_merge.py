"""Replan domain rules: the request checks (each error code), the merge of a revision onto the
previous plan, and the rule-based replan; random revisions always merge into a valid plan
that keeps the finished steps verbatim, or are rejected for the repair prompt."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from planner_arm.errors import PlanValidationError, ReplanLimitReached, ReplanRejected
from planner_arm.llm.usage import Usage
from planner_arm.pipeline.assembly import assemble_response, validated_response
from planner_arm.plan.arms import ArmResolver
from planner_arm.plan.draft import DraftPlan, DraftStep
from planner_arm.plan.edited import check_edited_plan
from planner_arm.plan.endpoint_schemas import ReplanRequest
from planner_arm.plan.replan import MergedPlan, ReplanScope, merge_replan, plan_diff, replan_scope
from planner_arm.plan.schemas import PlanResponse
from planner_arm.plan.validation import PlanRules, ValidPlan
from planner_arm.rules.replan import rule_based_replan
from support.app import good_plan, make_settings
from support.invariants import assert_valid_plan

SETTINGS = make_settings(llm=False)
RULES = PlanRules.from_settings(SETTINGS)
RESOLVER = ArmResolver(SETTINGS.arms, SETTINGS.arm_aliases)


def previous_plan() -> PlanResponse:
    """1 retriever; 2 patch and 3 test (coders) after 1; 4 judge after 2 and 3."""
    check = check_edited_plan(good_plan()["plan"], RULES, RESOLVER)
    return validated_response(check, request_id="r0", prompt_version="v")


def request(**fields: Any) -> ReplanRequest:
    return ReplanRequest(goal="Fix authentication bug and add tests", previous=previous_plan(),
                         **fields)  # fmt: skip


def scope_of(**fields: Any) -> ReplanScope:
    req = request(**fields)
    assert req.previous is not None
    return replan_scope(req.previous, req, default_max_replans=3)


FAILED_2 = {"1": {"status": "completed", "output": "auth/login.py"},
            "2": {"status": "failed", "error": "patch breaks session tests"}}  # fmt: skip


def draft(*rows: tuple[int, str, str, list[int]]) -> DraftPlan:
    return DraftPlan([DraftStep(action, arm, ["It is done and checked"], deps, number, 2, 30)
                      for number, arm, action, deps in rows], rationale="Revised.")  # fmt: skip


def answer_body(merged: MergedPlan, previous: PlanResponse) -> dict[str, Any]:
    response = assemble_response(
        draft=DraftPlan([], "Revised."), valid=ValidPlan(merged.steps, merged.repairs), goal="g",
        source="llm", model="m", usage=Usage(), request_id="r", latency_ms=1.0,
        prompt_version="v",
    )  # fmt: skip
    body = response.model_copy(
        update={"version": 2, "replan_count": 1, "parent_plan_id": previous.plan_id,
                "diff": plan_diff(list(previous.plan), response.plan)}
    ).model_dump(mode="json")  # fmt: skip
    assert_valid_plan(body, consecutive=False)
    return body


# --- the request checks ------------------------------------------------------------------


def test_exactly_one_of_previous_and_plan_id() -> None:
    with pytest.raises(ValidationError, match="exactly one of previous and plan_id"):
        ReplanRequest(goal="g")
    with pytest.raises(ValidationError, match="exactly one"):
        request(plan_id="abc")


def test_replan_limit_from_the_answer_the_request_and_the_server() -> None:
    previous = previous_plan().model_copy(update={"replan_count": 3, "version": 4})
    req = ReplanRequest(goal="g", previous=previous, step_states=FAILED_2)
    with pytest.raises(ReplanLimitReached, match="Max replans exceeded") as caught:
        replan_scope(previous, req, default_max_replans=3)
    assert caught.value.code == "replan_limit"
    req = ReplanRequest(goal="g", previous=previous, step_states=FAILED_2, max_replans=5)
    assert replan_scope(previous, req, default_max_replans=6).failed == {2: FAILED_2["2"]["error"]}
    with pytest.raises(ReplanLimitReached):  # the server's count of the stored chain wins
        replan_scope(previous, req, default_max_replans=6, replan_count=5)


def test_a_request_may_lower_the_replan_limit_but_never_raise_it() -> None:
    previous = previous_plan().model_copy(update={"replan_count": 3, "version": 4})
    raised = ReplanRequest(goal="g", previous=previous, step_states=FAILED_2, max_replans=100)
    with pytest.raises(ReplanLimitReached) as caught:
        replan_scope(previous, raised, default_max_replans=3)
    assert "3" in caught.value.detail
    lowered = ReplanRequest(goal="g", previous=previous, step_states=FAILED_2, max_replans=3)
    with pytest.raises(ReplanLimitReached):
        replan_scope(previous, lowered, default_max_replans=10)
    assert replan_scope(previous, lowered, default_max_replans=10, replan_count=2).failed


@pytest.mark.parametrize(
    ("fields", "code", "steps"),
    [
        ({"step_states": {"9": {"status": "failed"}}}, "unknown_step", [9]),
        ({"step_states": {"two": {"status": "failed"}}}, "unknown_step", [None]),
        ({"replan_steps": [2, 7], "reason": "x"}, "unknown_step", [7]),
        ({"step_states": FAILED_2, "replan_steps": [1, 3]}, "completed_step", [1]),
        ({"step_states": {"1": {"status": "running"}}, "replan_steps": [1]}, "completed_step", [1]),
        ({"step_states": {"1": {"status": "completed"}}}, "nothing_to_replan", []),
        ({"step_states": {"2": {"status": "completed"}}, "reason": "x"},
         "inconsistent_step_states", [2]),
    ],
)  # fmt: skip
def test_each_rejection_has_its_code(fields: dict[str, Any], code: str, steps: list[Any]) -> None:
    with pytest.raises(ReplanRejected) as caught:
        scope_of(**fields)
    assert caught.value.code == code
    assert [problem["step"] for problem in caught.value.errors] == steps


def test_a_reason_alone_is_enough_to_replan() -> None:
    scope = scope_of(reason="The tests must not touch the database")
    assert scope.replaced == frozenset()
    assert scope.reason == "The tests must not touch the database"


# --- the merge ---------------------------------------------------------------------------


def test_finished_steps_come_back_verbatim_whatever_the_model_did() -> None:
    scope = scope_of(step_states=FAILED_2)
    previous = previous_plan()
    revision = draft(
        (1, "judge", "Search the codebase for the authentication logic again", []),  # reworded
        (2, "coder", "Patch the token expiry check without touching sessions", [1]),
        (3, "coder", "Write a regression test for the expiry bug", [1]),
        (4, "judge", "Validate the fix against the goal and the constraints", [2, 3]),
    )
    merged = merge_replan(scope, revision, RULES)
    body = answer_body(merged, previous)
    assert merged.steps[0] == previous.plan[0]
    assert "finished_step_restored: step 1 was changed" in merged.repairs
    numbers = [step.step for step in merged.steps]
    assert numbers[0] == 1
    assert all(number > 4 for number in numbers[1:])  # changed or new: above the highest
    assert body["diff"] == {"kept": [1], "removed": [2, 3, 4], "added": numbers[1:]}


def test_unchanged_pending_steps_keep_their_numbers() -> None:
    scope = scope_of(step_states={"1": {"status": "completed"}, "3": {"status": "failed"}})
    previous = previous_plan()
    revision = DraftPlan(
        [DraftStep(**_fields(previous, 1)), DraftStep(**_fields(previous, 2)),
         DraftStep("Write the regression test as a unit test", "coder", ["It fails first"],
                   [1], 3, 3, 40),
         DraftStep(**_fields(previous, 4))], rationale="r")  # fmt: skip
    merged = merge_replan(scope, revision, RULES)
    answer_body(merged, previous)
    by_number = {step.step: step for step in merged.steps}
    assert by_number[2] == previous.plan[1]
    assert 3 not in by_number
    assert 4 not in by_number  # the judge's inputs changed
    assert by_number[5].action == "Write the regression test as a unit test"
    assert by_number[6].required_arm == "judge"
    assert by_number[6].depends_on == [2, 5]


def test_a_renumbered_finished_step_proposed_twice_is_planned_once() -> None:
    scope = scope_of(step_states=FAILED_2)
    previous = previous_plan()
    revision = draft(
        (1, "retriever", "Search the codebase for the authentication logic", []),
        (2, "retriever", "Search the codebase for the authentication logic.", []),
        (3, "coder", "Patch the expiry check", [2]),
        (4, "judge", "Check everything", [3]),
    )
    merged = merge_replan(scope, revision, RULES)
    answer_body(merged, previous)
    actions = [step.action for step in merged.steps]
    assert actions.count(previous.plan[0].action) == 1
    assert "finished_step_deduplicated: step 1 proposed 2 times" in merged.repairs
    patch = next(step for step in merged.steps if step.action == "Patch the expiry check")
    assert patch.depends_on == [1]  # its reference to the copy points at the finished step


def test_a_finished_step_left_out_is_restored_and_a_final_check_appended() -> None:
    scope = scope_of(step_states=FAILED_2)
    merged = merge_replan(scope, draft((7, "coder", "Patch the expiry check", [1])), RULES)
    answer_body(merged, previous_plan())
    assert merged.steps[0] == previous_plan().plan[0]
    assert "finished_step_restored: step 1 was left out" in merged.repairs
    assert merged.steps[-1].required_arm == "judge"
    assert any(entry.startswith("judge_step_appended") for entry in merged.repairs)


def test_a_model_judge_that_misses_a_branch_is_made_to_wait_for_it() -> None:
    scope = scope_of(step_states=FAILED_2)
    revision = draft(
        (5, "coder", "Patch the expiry check", [1]),
        (6, "coder", "Write a test for the expiry check", [1]),
        (7, "judge", "Check the patch", [5]),
    )
    merged = merge_replan(scope, revision, RULES)
    assert merged.steps[-1].depends_on == [5, 6]


def test_a_cycle_and_too_many_steps_go_back_to_the_model() -> None:
    scope = scope_of(step_states=FAILED_2)
    with pytest.raises(PlanValidationError, match=r"dependency cycle: 5 -> 6 -> 5"):
        merge_replan(scope, draft((5, "coder", "A b", [6]), (6, "coder", "C d", [5])), RULES)
    many = draft(*[(n, "coder", f"Do part {n} of it", [1]) for n in range(5, 13)])
    with pytest.raises(PlanValidationError, match="steps still to do") as caught:
        merge_replan(scope, many, RULES)
    assert caught.value.code == "wrong_step_count"


# --- the rule-based replan ------------------------------------------------------------------


def test_a_plan_at_the_step_bound_without_a_final_check_is_replanned_by_rule() -> None:
    # As long as the bound allows, with no final check of its own (edited, or from another
    # planner): the one the replan appends is outside the bound, as on /plan.
    body = previous_plan().model_dump(mode="json")
    body["plan"] = [
        {"step": n, "action": f"Carry out part {n} of the fix", "required_arm": "coder",
         "acceptance_criteria": ["It is done"], "depends_on": [n - 1] if n > 1 else []}
        for n in range(1, RULES.max_steps + 1)
    ]  # fmt: skip
    previous = PlanResponse.model_validate(body)
    req = ReplanRequest(goal="g", previous=previous, reason="the deadline moved")
    scope = replan_scope(previous, req, default_max_replans=3)
    _, merged = rule_based_replan(scope, RULES, RESOLVER)
    assert len(merged.steps) == RULES.max_steps + 1
    assert merged.steps[-1].required_arm == "judge"


def test_rule_based_replan_diagnoses_and_retries_each_failure() -> None:
    scope = scope_of(step_states=FAILED_2)
    _, merged = rule_based_replan(scope, RULES, RESOLVER)
    answer_body(merged, previous_plan())
    by_action = {step.action: step for step in merged.steps}
    diagnose = next(step for step in merged.steps if step.action.startswith("Diagnose why step 2"))
    retry = by_action["Write a patch that fixes the token expiry check"]
    assert retry.step > 4
    assert retry.depends_on == [diagnose.step]
    assert any("patch breaks session tests" in text for text in retry.acceptance_criteria)
    assert any("patch breaks session tests" in text for text in diagnose.acceptance_criteria)
    assert merged.steps[-1].required_arm == "judge"
    assert set(merged.steps[-1].depends_on) >= {3, retry.step}


def test_rule_based_replan_folds_the_diagnosis_when_steps_run_out() -> None:
    states = {str(n): {"status": "failed", "error": f"e{n}"} for n in (1, 2, 3)}
    scope = scope_of(step_states=states)
    _, merged = rule_based_replan(scope, PlanRules(3, 4, True, RULES.arm_ids), RESOLVER)
    assert len(merged.steps) == 4
    assert all(not step.action.startswith("Diagnose") for step in merged.steps)
    assert merged.steps[0].action.startswith("Find why step 1 failed")


# --- any revision -----------------------------------------------------------------------


STATUSES = st.sampled_from(["completed", "running", "failed", "pending", "skipped", None])


@st.composite
def cases(draw: st.DrawFn) -> tuple[ReplanScope, DraftPlan]:
    previous = previous_plan()
    states: dict[str, Any] = {}
    done: set[int] = set()
    for step in previous.plan:
        status = draw(STATUSES)
        if status in ("completed", "running") and not set(step.depends_on) <= done:
            status = "failed"
        if status in ("completed", "running"):
            done.add(step.step)
        if status is not None:
            states[str(step.step)] = {"status": status, "error": "boom"}
    scope = scope_of(step_states=states, reason="try again")
    actions = [step.action for step in previous.plan] + ["Do a new thing", "Check it all"]
    rows = []
    for _ in range(draw(st.integers(0, 7))):
        rows.append(DraftStep(
            draw(st.sampled_from(actions)), draw(st.sampled_from(["coder", "judge", "retriever"])),
            ["Done and checked"], draw(st.lists(st.integers(0, 12), max_size=3)),
            draw(st.one_of(st.none(), st.integers(1, 12))), draw(st.integers(1, 5)), 30,
        ))  # fmt: skip
    return scope, DraftPlan(rows, rationale="r")


@settings(max_examples=200, deadline=None)
@given(cases())
def test_any_revision_merges_into_a_valid_plan_keeping_finished_steps(case: Any) -> None:
    scope, revision = case
    before = copy.deepcopy(revision)
    try:
        merged = merge_replan(scope, revision, RULES)
    except PlanValidationError as problem:  # only what the model must mend itself
        rejected = problem.code
    else:
        rejected = None
    if rejected is not None:
        assert rejected in {"cycle", "wrong_step_count"}
        return
    assert revision == before
    previous = previous_plan()
    answer_body(merged, previous)
    by_number = {step.step: step for step in merged.steps}
    for number, step in scope.finished.items():
        assert by_number[number] == step
    old = {step.step: step for step in previous.plan}
    for step in merged.steps:
        if step.step in old:
            assert step == old[step.step]  # a number is never reused for something else
            assert step.step not in scope.replaced
    last = merged.steps[-1]
    assert last.required_arm == "judge"
    assert last.step not in scope.finished


def _fields(previous: PlanResponse, number: int) -> dict[str, Any]:
    step = previous.plan[number - 1]
    return {"action": step.action, "required_arm": step.required_arm,
            "acceptance_criteria": list(step.acceptance_criteria),
            "depends_on": list(step.depends_on), "step": step.step,
            "estimated_cost_tier": step.estimated_cost_tier,
            "estimated_duration_seconds": step.estimated_duration_seconds}  # fmt: skip


def test_the_replan_request_takes_the_configured_limits() -> None:
    from planner_arm.config import LimitsSettings
    from planner_arm.plan.schemas import request_model_for

    model = request_model_for(LimitsSettings(max_goal_chars=10), ReplanRequest)
    assert issubclass(model, ReplanRequest)
    with pytest.raises(ValidationError, match="at most 10 characters"):
        model(goal="x" * 11, plan_id="p")
    assert request_model_for(LimitsSettings(), ReplanRequest) is ReplanRequest
