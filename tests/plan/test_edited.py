"""check_edited_plan: every error code with the step it names, all of them at once, what `fix`
mends (and what it cannot), and the /plan answer built for a valid edit."""

from __future__ import annotations

import json
from typing import Any

import pytest

from planner_arm.pipeline.assembly import validated_response
from planner_arm.plan.arms import ArmResolver
from planner_arm.plan.edited import EDIT_ERROR_CODES, check_edited_plan
from planner_arm.plan.validation import PlanRules
from support.app import fixture_text, good_plan, make_settings
from support.invariants import assert_valid_plan

SETTINGS = make_settings(llm=False)
RULES = PlanRules.from_settings(SETTINGS)
RESOLVER = ArmResolver(SETTINGS.arms, SETTINGS.arm_aliases)


def steps() -> list[dict[str, Any]]:
    """A valid 4-step plan: 1 retriever, 2 and 3 coders after 1, 4 judge after 2 and 3."""
    return good_plan()["plan"]


def errors_of(raw: list[Any], fix: bool = False) -> list[tuple[str, int | None]]:
    check = check_edited_plan(raw, RULES, RESOLVER, fix=fix)
    assert not check.valid
    assert check.steps is None
    return [(error.code, error.step) for error in check.errors]


def test_a_valid_plan_comes_back_as_sent_and_answers_in_the_plan_shape() -> None:
    check = check_edited_plan(steps(), RULES, RESOLVER)
    assert check.valid
    assert check.errors == []
    # Sent without `parent` and `input`, the steps come back with them null.
    assert [step.model_dump(exclude_none=True) for step in check.steps or []] == steps()
    assert all(step.parent is None and step.input is None for step in check.steps or [])
    body = validated_response(check, request_id="r1", prompt_version="v").model_dump(mode="json")
    assert_valid_plan(body)
    assert body["metadata"]["source"] == "validated"
    assert body["metadata"]["attempts"] == 0
    assert body["estimated_cost"] == {"llm_usd": 0.0, "prompt_tokens": 0, "completion_tokens": 0}
    assert body["parallel_stages"] == [[1], [2, 3], [4]]


@pytest.mark.parametrize("fix", [False, True])
def test_an_edited_step_keeps_its_parent_and_input(fix: bool) -> None:
    edited = steps()
    edited[0].update(parent="1", input={"query": "login token expiry"})
    check = check_edited_plan(edited, RULES, RESOLVER, fix=fix)
    assert check.valid
    assert check.steps is not None
    assert (check.steps[0].parent, check.steps[0].input) == ("1", {"query": "login token expiry"})


def test_a_parent_or_input_of_the_wrong_type_is_named() -> None:
    edited = steps()
    edited[0]["input"] = "search the code"
    edited[1]["parent"] = 2
    assert errors_of(edited) == [("invalid_step", 1), ("invalid_step", 2)]


def test_a_replanned_plan_keeps_its_gapped_numbers() -> None:
    raw = steps()
    for step, number in zip(raw, (1, 5, 6, 9), strict=True):
        step["step"] = number
    raw[1]["depends_on"], raw[2]["depends_on"], raw[3]["depends_on"] = [1], [1], [5, 6]
    check = check_edited_plan(raw, RULES, RESOLVER)
    assert check.valid
    assert [step.step for step in check.steps or []] == [1, 5, 6, 9]


def test_an_empty_plan() -> None:
    assert errors_of([]) == [("empty_plan", None)]


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda p: p[1].update(step=3), [("duplicate_step", 3), ("dangling_dependency", 4)]),
        (lambda p: p[1].update(depends_on=[1, 8]), [("dangling_dependency", 2)]),
        (lambda p: p[1].update(depends_on=[2]), [("self_dependency", 2)]),
        (lambda p: p[0].update(depends_on=[4]), [("cycle", 1)]),
        (lambda p: p[1].update(required_arm="root"), [("unknown_arm", 2)]),
        (lambda p: p[2].update(action="   "), [("empty_action", 3)]),
        (lambda p: p[2].update(acceptance_criteria=[" "]), [("empty_acceptance_criteria", 3)]),
        (lambda p: p[2].update(acceptance_criteria=[]), [("empty_acceptance_criteria", 3)]),
        (lambda p: p[0].update(estimated_cost_tier=6), [("bad_cost_tier", 1)]),
        (lambda p: p[0].update(estimated_duration_seconds=0), [("bad_duration", 1)]),
        (lambda p: p[3].update(required_arm="executor"), [("no_final_check", None)]),
        (lambda p: p[2].update(action=7), [("invalid_step", 3)]),
        (lambda p: p[2].pop("acceptance_criteria"), [("invalid_step", 3)]),
        (lambda p: p[0].update(estimated_cost_tier="low"), [("invalid_step", 1)]),
    ],
)
def test_each_error_names_its_code_and_step(edit: Any, expected: list[Any]) -> None:
    raw = steps()
    edit(raw)
    assert errors_of(raw) == expected


def test_step_count_is_a_whole_plan_error() -> None:
    raw = steps()
    raw[3]["depends_on"] = [2, 3]
    del raw[1:3]
    raw[1]["depends_on"] = [1]
    assert errors_of(raw) == [("step_count", None)]


def test_the_cycle_message_names_the_cycle() -> None:
    raw = steps()
    raw[0]["depends_on"] = [3]
    check = check_edited_plan(raw, RULES, RESOLVER)
    assert [error.message for error in check.errors] == ["dependency cycle: 1 -> 3 -> 1"]


def test_invalid_step_names_the_field_and_what_it_got() -> None:
    raw = steps()
    raw[1]["depends_on"] = "1"
    del raw[2]["required_arm"]
    raw.append("not a step")
    check = check_edited_plan(raw, RULES, RESOLVER)
    messages = [error.message for error in check.errors if error.code == "invalid_step"]
    assert "step 2: depends_on must be a list of step numbers, got a JSON string" in messages
    assert "step 3: required_arm must be a string, got missing" in messages
    assert "plan[4]: a step is an object, not a JSON string" in messages
    assert check.errors[-1].as_dict()["loc"] == ["plan", 4]


def test_every_error_is_reported_at_once() -> None:
    raw = steps()
    raw[0]["estimated_cost_tier"] = 0
    raw[1]["required_arm"] = "root"
    raw[2]["action"] = ""
    raw[2]["depends_on"] = [99]
    codes = {code for code, _ in errors_of(raw)}
    assert codes == {"bad_cost_tier", "unknown_arm", "empty_action", "dangling_dependency"}
    assert codes <= EDIT_ERROR_CODES


def test_fix_mends_what_the_plan_pipeline_mends_and_lists_it() -> None:
    raw = steps()
    raw[1]["required_arm"] = "researcher"  # an alias of retriever
    raw[0]["estimated_cost_tier"] = 9
    raw[2]["depends_on"] = [1, 42]
    raw.pop()  # no final check
    check = check_edited_plan(raw, RULES, RESOLVER, fix=True)
    assert check.valid, check.errors
    fixed = check.steps or []
    assert fixed[1].required_arm == "retriever"
    assert fixed[0].estimated_cost_tier == 5
    assert fixed[2].depends_on == [1]
    assert fixed[-1].required_arm == "judge"
    codes = {entry.split(":")[0] for entry in check.warnings}
    assert {"arm_alias", "cost_tier_clamped", "unknown_dependency", "judge_step_appended"} <= codes
    body = validated_response(check, request_id="r", prompt_version="v").model_dump(mode="json")
    assert_valid_plan(body)
    assert "judge_step_appended" in {entry["code"] for entry in body["metadata"]["repairs"]}


def test_fix_puts_steps_in_order_and_numbers_them() -> None:
    raw = steps()
    raw.reverse()
    for step in raw:
        step["step"] += 10
        step["depends_on"] = [dep + 10 for dep in step["depends_on"]]
    plain = check_edited_plan(raw, RULES, RESOLVER)
    assert plain.valid
    # Dependency order, the earliest listed first among the steps that are ready.
    assert [step.step for step in plain.steps or []] == [11, 13, 12, 14]
    assert any(entry.startswith("reordered") for entry in plain.warnings)
    fixed = check_edited_plan(raw, RULES, RESOLVER, fix=True)
    assert [step.step for step in fixed.steps or []] == [1, 2, 3, 4]
    assert_valid_plan(
        validated_response(fixed, request_id="r", prompt_version="v").model_dump(mode="json")
    )


def test_fix_cannot_mend_a_cycle_or_a_wrong_type() -> None:
    raw = steps()
    raw[0]["depends_on"] = [4]
    raw[1]["required_arm"] = "root"  # chosen again by rule, as /plan does
    raw[2]["estimated_duration_seconds"] = "1 minute"
    raw[3]["estimated_cost_tier"] = 0  # mended, so not reported
    codes = errors_of(raw, fix=True)
    assert sorted(codes, key=str) == sorted([("cycle", 1), ("invalid_step", 3)], key=str)


def test_fix_chooses_an_unknown_arm_again_as_plan_does() -> None:
    raw = steps()
    raw[1]["required_arm"] = "root"
    assert ("unknown_arm", 2) in errors_of(raw)
    fixed = check_edited_plan(raw, RULES, RESOLVER, fix=True)
    assert fixed.valid
    assert fixed.steps is not None
    assert fixed.steps[1].required_arm in RESOLVER.arm_ids
    assert any(entry.startswith("arm_selected") for entry in fixed.warnings)


def test_fix_on_a_plan_that_stays_invalid_still_reports_the_dependency_it_drops() -> None:
    raw = steps()
    raw[1]["depends_on"] = [1, 9]  # dropped by fix
    raw[2]["estimated_duration_seconds"] = "1 minute"  # keeps the plan invalid
    check = check_edited_plan(raw, RULES, RESOLVER, fix=True)
    assert [error.code for error in check.errors] == ["invalid_step"]
    dropped = [entry for entry in check.warnings if entry.startswith("dangling_dependency")]
    assert len(dropped) == 1
    assert "9" in dropped[0]


def test_fix_counts_the_appended_final_check() -> None:
    raw = steps()
    for step in raw[1:]:
        step["required_arm"] = "coder"
    raw += [dict(raw[1], step=n, depends_on=[1]) for n in (5, 6, 7)]
    assert errors_of(raw, fix=True) == [("step_count", None)]


@pytest.mark.parametrize(
    "name",
    [
        "qwen2.5-coder-1.5b_json-object-schema.txt",
        "qwen2.5-coder-0.5b_json-object-schema_nonsense-values.txt",
    ],
)
def test_real_model_answers_are_rejected_field_by_field(name: str) -> None:
    text = fixture_text(name).strip()
    raw = json.loads(text[text.index("{") : text.rindex("}") + 1])["plan"]
    check = check_edited_plan(raw, RULES, RESOLVER, fix=True)
    assert not check.valid
    invalid = [error for error in check.errors if error.code == "invalid_step"]
    assert invalid
    assert all(error.step is not None and " must be " in error.message for error in invalid)
