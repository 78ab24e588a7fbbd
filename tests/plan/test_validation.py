"""validate_plan: each local fix with its repair entry, each error with its message, and
random drafts that must come out valid or rejected, never anything else."""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner_arm.config import Settings
from planner_arm.errors import PlanValidationError
from planner_arm.plan import validation
from planner_arm.plan.draft import DraftPlan, DraftStep, repair_code, split_note
from planner_arm.plan.estimation import (
    complexity_score,
    critical_path_duration,
    parallel_stages,
    plan_confidence,
    total_duration,
)
from planner_arm.plan.schemas import PlanStep
from planner_arm.plan.validation import (
    ERROR_CODES,
    JUDGE_ACTION,
    REPAIR_CODES,
    PlanRules,
    ValidPlan,
    validate_plan,
)
from support.invariants import DEFAULT_ARMS, assert_valid_plan

RULES = PlanRules(min_steps=3, max_steps=7, require_validation_step=True, arm_ids=DEFAULT_ARMS)
TYPICAL_COST = {"retriever": 1, "coder": 3, "executor": 2, "judge": 2, "guardian": 2, "planner": 2}
TYPICAL_DURATION = {arm: 40 + index for index, arm in enumerate(DEFAULT_ARMS)}


@pytest.fixture(autouse=True)
def typical_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """Known defaults, independent of the arm registry's figures."""
    monkeypatch.setattr(validation, "typical_cost_tier", TYPICAL_COST.__getitem__)
    monkeypatch.setattr(validation, "typical_duration_seconds", TYPICAL_DURATION.__getitem__)


def s(
    number: int | None,
    arm: str = "coder",
    deps: tuple[int, ...] = (),
    *,
    action: str | None = None,
    criteria: tuple[str, ...] = ("It is done",),
    cost: int | None = 2,
    duration: int | None = 30,
) -> DraftStep:
    return DraftStep(
        action=f"Do part {number}" if action is None else action,
        required_arm=arm,
        acceptance_criteria=list(criteria),
        depends_on=list(deps),
        step=number,
        estimated_cost_tier=cost,
        estimated_duration_seconds=duration,
    )


def plan(*steps: DraftStep) -> DraftPlan:
    return DraftPlan(steps=list(steps), repairs=["from_the_parser"])


def shape(valid: ValidPlan) -> list[tuple[int, str, list[int]]]:
    return [(step.step, step.action, step.depends_on) for step in valid.steps]


def codes(valid: ValidPlan) -> list[str]:
    return [repair_code(entry) for entry in valid.repairs]


def rejected(draft: DraftPlan, rules: PlanRules = RULES) -> PlanValidationError:
    with pytest.raises(PlanValidationError) as caught:
        validate_plan(draft, rules)
    return caught.value


def notes(valid: ValidPlan) -> list[dict[str, str]]:
    return [{"code": code, "detail": detail} for code, detail in map(split_note, valid.repairs)]


def response_body(valid: ValidPlan) -> dict[str, Any]:
    """A 200 body as the service builds it from a validated plan."""
    steps = valid.steps
    return {
        "plan": [step.model_dump(mode="json") for step in steps],
        "rationale": "Because.",
        "confidence": plan_confidence(None, repairs=len(valid.repairs), llm_calls=1),
        "total_estimated_duration": total_duration(steps),
        "complexity_score": complexity_score(steps),
        "plan_id": "p1",
        "request_id": "r1",
        "parallel_stages": parallel_stages(steps),
        "critical_path_duration": critical_path_duration(steps),
        "estimated_cost": {"llm_usd": 0.0, "prompt_tokens": 10, "completion_tokens": 5},
        "metadata": {"source": "llm", "model": "m", "attempts": 1, "repairs": notes(valid),
                     "warnings": [], "latency_ms": 1.0, "prompt_version": "v1"},
        "version": 1, "parent_plan_id": None, "replan_count": 0, "diff": None,
    }  # fmt: skip


# --- a plan that keeps every rule -----------------------------------------------------------


def test_valid_plan_is_kept_as_is_without_repairs() -> None:
    draft = plan(s(1, "retriever"), s(2, "coder", (1,)), s(3, "judge", (2,)))
    before = copy.deepcopy(draft)
    valid = validate_plan(draft, RULES)
    assert valid.repairs == []  # the parser's repairs are not repeated here
    assert shape(valid) == [(1, "Do part 1", []), (2, "Do part 2", [1]), (3, "Do part 3", [2])]
    assert [step.required_arm for step in valid.steps] == ["retriever", "coder", "judge"]
    assert draft == before  # the draft is not mutated
    for step in valid.steps:  # model_construct output passes the model's own validation
        assert PlanStep.model_validate(step.model_dump()) == step


def test_action_and_criteria_are_stripped() -> None:
    valid = validate_plan(
        plan(s(1, action="  Search docs \n", criteria=(" found ",)), s(2), s(3, "judge", (1, 2))),
        RULES,
    )
    assert valid.steps[0].action == "Search docs"
    assert valid.steps[0].acceptance_criteria == ["found"]
    assert valid.repairs == []


# --- numbering and dependencies -------------------------------------------------------------
# Each case: the draft's steps, the result as (the draft's number in the action, depends_on)
# in the final order, and the repairs recorded.
MENDED = [
    pytest.param((s(0), s(1, deps=(0,)), s(2, "judge", (0, 1))),
                 [("0", []), ("1", [1]), ("2", [1, 2])],
                 ["renumbered: step numbers [0, 1, 2] became [1, 2, 3]"], id="zero_based"),
    pytest.param((s(10), s(20, deps=(10,)), s(30, "judge", (20,))),
                 [("10", []), ("20", [1]), ("30", [2])],
                 ["renumbered: step numbers [10, 20, 30] became [1, 2, 3]"], id="gapped"),
    pytest.param((s(None), s(None, deps=(1,)), s(None, "judge", (2,))),
                 [("None", []), ("None", [1]), ("None", [2])],
                 ["renumbered: step numbers [None, None, None] became [1, 2, 3]"],
                 id="missing_numbers_take_their_position"),
    # Position 1 is taken by the second step's number, so "1" means that step.
    pytest.param((s(None), s(1), s(3, "judge", (1,))), [("None", []), ("1", []), ("3", [1, 2])],
                 ["renumbered: step numbers [None, 1, 3] became [1, 2, 3]",
                  "final_check_dependencies: step 3 now depends on 1"],
                 id="unnumbered_step_whose_position_is_taken"),
    pytest.param((s(1), s(2, deps=(1,)), s(2, deps=(2,)), s(3, "judge", (3,))),
                 [("1", []), ("2", [1]), ("2", [2]), ("3", [3])],
                 ["duplicate_step_number: step numbers [1, 2, 2, 3] repeat; "
                  "steps numbered by position"], id="duplicate_numbers_mean_positions"),
    pytest.param((s(1), s(2, deps=(2, 1)), s(3, "judge", (2,))),
                 [("1", []), ("2", [1]), ("3", [2])],
                 ["self_dependency: step 2: dropped its dependency on itself"],
                 id="self_dependency"),
    pytest.param((s(1, deps=(0,)), s(2, deps=(9, 1)), s(3, "judge", (2,))),
                 [("1", []), ("2", [1]), ("3", [2])],
                 ["unknown_dependency: step 1: no step 0 to depend on",
                  "unknown_dependency: step 2: no step 9 to depend on"], id="unknown_dependency"),
    pytest.param((s(1), s(2), s(3, "judge", (2, 1, 2))), [("1", []), ("2", []), ("3", [1, 2])],
                 ["duplicate_dependency: step 3: step 2 listed twice"],
                 id="duplicate_dependency"),
    pytest.param((s(1, deps=(3,)), s(2), s(3, deps=(2,)), s(4, "judge", (1,))),
                 [("2", []), ("3", [1]), ("1", [2]), ("4", [3])],
                 ["reordered: steps put in dependency order 2, 3, 1, 4"],
                 id="out_of_dependency_order"),
    # 1 waits for 2; then 1, listed first, goes before 3 and 4.
    pytest.param((s(1, deps=(2,)), s(2), s(3), s(4), s(5, "judge", (1, 3, 4))),
                 [("2", []), ("1", [1]), ("3", []), ("4", []), ("5", [2, 3, 4])],
                 ["reordered: steps put in dependency order 2, 1, 3, 4, 5"],
                 id="reorder_keeps_listed_order_among_ready_steps"),
    pytest.param((s(3, "judge", (2,)), s(2, deps=(1,)), s(1)),
                 [("1", []), ("2", [1]), ("3", [2])],
                 ["reordered: steps put in dependency order 1, 2, 3"],
                 id="listed_backwards_keeps_numbers"),
    pytest.param((s(0, deps=(1,)), s(1), s(2, "judge", (0,))),
                 [("1", []), ("0", [1]), ("2", [2])],
                 ["renumbered: step numbers [0, 1, 2] became [2, 1, 3]",
                  "reordered: steps put in dependency order 1, 0, 2"],
                 id="renumbered_and_reordered"),
]  # fmt: skip


@pytest.mark.parametrize(("steps", "outline", "repairs"), MENDED)
def test_numbering_and_dependencies_are_mended(
    steps: tuple[DraftStep, ...], outline: list[tuple[str, list[int]]], repairs: list[str]
) -> None:
    valid = validate_plan(plan(*steps), RULES)
    assert [step.step for step in valid.steps] == list(range(1, len(steps) + 1))
    assert [(step.action.removeprefix("Do part "), step.depends_on) for step in valid.steps] == (
        outline
    )
    assert valid.repairs == repairs


def test_cycle_is_an_error_naming_its_steps_by_their_numbers() -> None:
    error = rejected(plan(s(1, deps=(3,)), s(2), s(3, deps=(1,)), s(4, "judge", (3,))))
    assert error.code == "cycle"
    assert error.detail == "dependency cycle: 1 -> 3 -> 1"
    assert error.errors == ["dependency cycle: 1 -> 3 -> 1"]


def test_longer_cycle_reads_in_dependency_direction() -> None:
    # 1 needs 3, 3 needs 2, 2 needs 1; named with the model's (0-based) numbers.
    error = rejected(plan(s(0, deps=(2,)), s(1, deps=(0,)), s(2, deps=(1,)), s(3, "judge")))
    assert error.detail == "dependency cycle: 0 -> 2 -> 1 -> 0"


# --- cost tier and duration -----------------------------------------------------------------


VALUE_FIXES = [
    pytest.param({"arm": "retriever", "cost": None}, "estimated_cost_tier", 1,
                 "default_cost_tier: step 2: none given, used 1 (retriever)",
                 id="default_cost_tier"),
    *(pytest.param({"cost": given}, "estimated_cost_tier", clamped,
                   f"cost_tier_clamped: step 2: {given} -> {clamped}", id=f"cost_tier_{given}")
      for given, clamped in [(0, 1), (-3, 1), (6, 5), (42, 5)]),
    pytest.param({"arm": "executor", "duration": None}, "estimated_duration_seconds", 43,
                 "default_duration: step 2: none given, used 43 s (executor)",
                 id="default_duration"),
    *(pytest.param({"duration": given}, "estimated_duration_seconds", 1,
                   f"duration_floored: step 2: {given} -> 1", id=f"duration_{given}")
      for given in (0, -20)),
    pytest.param({"duration": 10**9}, "estimated_duration_seconds", 86_400,
                 "duration_capped: step 2: 1000000000 -> 86400", id="duration_over_a_day"),
    pytest.param({"criteria": ("", "Found it", "  ")}, "acceptance_criteria", ["Found it"],
                 "empty_criteria_dropped: step 2: dropped 2 empty", id="empty_criteria"),
]  # fmt: skip


@pytest.mark.parametrize(("fields", "name", "expected", "entry"), VALUE_FIXES)
def test_step_values_are_mended(
    fields: dict[str, Any], name: str, expected: Any, entry: str
) -> None:
    valid = validate_plan(plan(s(1), s(2, **fields), s(3, "judge", (1, 2))), RULES)
    assert getattr(valid.steps[1], name) == expected
    assert valid.repairs == [entry]


# --- errors ---------------------------------------------------------------------------------


NOT_ONE_OF = "is not one of planner, retriever, coder, executor, judge, guardian"
REJECTED = [
    pytest.param((s(1), s(2, "wizard"), s(3, "judge")), "unknown_arm",
                 [f"step 2: required_arm 'wizard' {NOT_ONE_OF}"], id="unknown_arm"),
    pytest.param((s(1), s(2), s(3, action="  \n"), s(4, "judge")), "empty_action",
                 ["step 3: action is empty"], id="empty_action"),
    pytest.param((s(1, criteria=()), s(2, criteria=("",)), s(3, "judge", criteria=(" ", "\t"))),
                 "missing_criteria",
                 [f"step {n}: no non-empty acceptance criterion" for n in (1, 2, 3)],
                 id="missing_criteria"),
    pytest.param((s(1), s(2, "judge")), "wrong_step_count",
                 ["plan has 2 steps; at least 3 are required"], id="too_few_steps"),
    # Nine independent steps: none needs only the one before it, so none can be merged.
    pytest.param((*(s(n) for n in range(1, 9)), s(9, "judge")), "wrong_step_count",
                 ["plan has 8 steps besides the final check; at most 7 are allowed"],
                 id="too_many_steps"),
    pytest.param((), "wrong_step_count",
                 ["plan has 0 steps and lacks a final judge step (1 with one appended); "
                  "at least 3 are required"], id="empty_plan"),
]  # fmt: skip


@pytest.mark.parametrize(("steps", "code", "errors"), REJECTED)
def test_rule_only_the_model_can_mend_is_an_error(
    steps: tuple[DraftStep, ...], code: str, errors: list[str]
) -> None:
    error = rejected(plan(*steps))
    assert (error.code, error.errors) == (code, errors)
    assert error.detail == "; ".join(errors)


def test_every_error_is_collected_and_the_first_gives_the_code() -> None:
    error = rejected(plan(s(1, action=""), s(2, "wizard", criteria=("",)), s(3, "judge")))
    assert error.code == "empty_action"
    assert error.errors == [
        "step 1: action is empty",
        f"step 2: required_arm 'wizard' {NOT_ONE_OF}",
        "step 2: no non-empty acceptance criterion",
    ]
    assert error.detail == "; ".join(error.errors)


def test_cycle_comes_first_among_collected_errors() -> None:
    rules = PlanRules(min_steps=4, max_steps=7, require_validation_step=True, arm_ids=DEFAULT_ARMS)
    error = rejected(plan(s(1, deps=(2,), action=""), s(2, deps=(1,))), rules)
    assert error.code == "cycle"
    assert error.errors == [
        "dependency cycle: 1 -> 2 -> 1",
        "step 1: action is empty",
        "plan has 2 steps and lacks a final judge step (3 with one appended); "
        "at least 4 are required",
    ]


# --- the final judge step -------------------------------------------------------------------


def test_judge_step_is_appended_depending_on_every_sink() -> None:
    valid = validate_plan(plan(s(1, "retriever"), s(2, deps=(1,)), s(3, deps=(1,))), RULES)
    judge = valid.steps[-1]
    assert (judge.step, judge.required_arm, judge.action) == (4, "judge", JUDGE_ACTION)
    assert judge.depends_on == [2, 3]
    assert (judge.estimated_cost_tier, judge.estimated_duration_seconds) == (2, 30)
    assert judge.acceptance_criteria
    assert valid.repairs == ["judge_step_appended: step 4 validates the results of steps 2, 3"]


def test_appended_judge_step_can_bring_a_short_plan_up_to_the_minimum() -> None:
    valid = validate_plan(plan(s(1), s(2, deps=(1,))), RULES)
    assert [(step.step, step.required_arm) for step in valid.steps] == [
        (1, "coder"), (2, "coder"), (3, "judge")
    ]  # fmt: skip
    assert codes(valid) == ["judge_step_appended"]


def test_judge_listed_early_but_last_in_dependency_order_is_kept() -> None:
    valid = validate_plan(plan(s(1), s(2, "judge", (3,)), s(3, deps=(1,))), RULES)
    assert [step.required_arm for step in valid.steps] == ["coder", "coder", "judge"]
    assert codes(valid) == ["reordered"]


def test_judge_not_last_gets_a_final_judge_step_after_it() -> None:
    valid = validate_plan(plan(s(1), s(2, "judge", (1,)), s(3, deps=(1,))), RULES)
    assert [step.required_arm for step in valid.steps] == ["coder", "judge", "coder", "judge"]
    assert valid.steps[-1].depends_on == [2, 3]
    assert codes(valid) == ["judge_step_appended"]


# --- the final check runs last --------------------------------------------------------------


def test_a_final_judge_that_depends_on_nothing_is_made_to_wait_for_every_step() -> None:
    valid = validate_plan(plan(s(1, "retriever"), s(2, "coder", (1,)), s(3, "judge")), RULES)
    assert shape(valid)[-1] == (3, "Do part 3", [2])
    assert valid.repairs == ["final_check_dependencies: step 3 now depends on 2"]
    assert parallel_stages(valid.steps) == [[1], [2], [3]]  # not in the first stage
    assert_valid_plan(response_body(valid))


def test_a_final_judge_that_waits_for_one_branch_waits_for_the_other_too() -> None:
    # 1 -> 2 and 3 -> 4 are two branches; the judge named only the first.
    draft = plan(s(1), s(2, deps=(1,)), s(3), s(4, deps=(3,)), s(5, "judge", (2,)))
    valid = validate_plan(draft, RULES)
    assert valid.steps[-1].depends_on == [2, 4]  # 3 is reached through 4
    assert codes(valid) == ["final_check_dependencies"]


def test_the_final_check_may_be_left_alone_when_configured() -> None:
    rules = PlanRules(min_steps=3, max_steps=7, require_validation_step=True,
                      arm_ids=DEFAULT_ARMS, require_dependency_check=False)  # fmt: skip
    valid = validate_plan(plan(s(1), s(2, deps=(1,)), s(3, "judge")), rules)
    assert valid.steps[-1].depends_on == []
    assert valid.repairs == []


def test_no_judge_step_when_not_required() -> None:
    rules = PlanRules(min_steps=3, max_steps=7, require_validation_step=False, arm_ids=("coder",))
    valid = validate_plan(plan(s(1), s(2), s(3)), rules)
    assert [step.required_arm for step in valid.steps] == ["coder"] * 3
    assert valid.repairs == []


# --- rules ----------------------------------------------------------------------------------


def test_rules_from_settings() -> None:
    settings = Settings(planning={"min_steps": 2, "max_steps": 5})
    assert PlanRules.from_settings(settings) == PlanRules(
        min_steps=2, max_steps=5, require_validation_step=True, arm_ids=DEFAULT_ARMS
    )


@pytest.mark.parametrize(
    ("minimum", "maximum", "require", "arms"),
    [(0, 7, False, ("coder",)), (5, 4, False, ("coder",)), (3, 7, True, ("coder",))],
)
def test_inconsistent_rules_are_refused(
    minimum: int, maximum: int, require: bool, arms: tuple[str, ...]
) -> None:
    with pytest.raises(ValueError, match=r"min_steps|judge"):
        PlanRules(min_steps=minimum, max_steps=maximum, require_validation_step=require,
                  arm_ids=arms)  # fmt: skip


# --- the invariants helper rejects broken bodies --------------------------------------------


def good_body() -> dict[str, Any]:
    return response_body(validate_plan(plan(s(1), s(2, deps=(1,)), s(3, deps=(1,))), RULES))


def test_helper_accepts_a_valid_body() -> None:
    assert_valid_plan(good_body())


def _forward_dependency(body: dict[str, Any]) -> None:
    body["plan"][1]["depends_on"] = [3]


def _judge_dropped(body: dict[str, Any]) -> None:
    body["plan"].pop()
    body["total_estimated_duration"] -= 30
    body["parallel_stages"] = [[1], [2, 3]]


def _final_check_first(body: dict[str, Any]) -> None:
    body["plan"][3]["depends_on"] = []
    body["parallel_stages"] = [[1, 4], [2, 3]]
    body["critical_path_duration"] = 60


def _stage_before_dependency(body: dict[str, Any]) -> None:
    body["parallel_stages"] = [[1, 2], [3], [4]]


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        (_forward_dependency, "step 2: depends on a non-earlier step"),
        (_judge_dropped, "last step's arm is 'coder'"),
        (_final_check_first, r"the final check \(step 4\) does not depend on steps \[1, 2, 3\]"),
        (_stage_before_dependency, "step 2 is in stage 0"),
        (lambda body: body["plan"][0].update(step=0), "step at 1 is numbered 0"),
        (lambda body: body["plan"][0].update(estimated_cost_tier=6), "cost tier 6"),
        (lambda body: body["plan"][2].update(acceptance_criteria=[" "]), "no non-empty"),
        (lambda body: body.update(total_estimated_duration=1), "total_estimated_duration"),
        (lambda body: body.update(critical_path_duration=10**6), "critical_path_duration"),
        (lambda body: body["metadata"].update(source="magic"), "metadata.source"),
        (lambda body: body.update(request_id=""), "request_id"),
        (lambda body: body.update(version=2), "replan_count 0, version 2"),
        (lambda body: body.update(parent_plan_id="p0"), "parent_plan_id 'p0' on a first plan"),
    ],
)
def test_helper_rejects_a_broken_body(breakage: Any, message: str) -> None:
    body = good_body()
    breakage(body)
    with pytest.raises(AssertionError, match=message):
        assert_valid_plan(body)


# --- random drafts --------------------------------------------------------------------------


ACTIONS = ["Search the docs", " Fix it ", "Run the tests\n"]
ARMS = [*DEFAULT_ARMS, "judge", "judge"]


@st.composite
def random_cases(draw: st.DrawFn) -> tuple[DraftPlan, PlanRules]:
    minimum = draw(st.integers(1, 4))
    rules = PlanRules(
        min_steps=minimum,
        max_steps=draw(st.integers(minimum, 8)),
        require_validation_step=draw(st.booleans()),
        arm_ids=DEFAULT_ARMS,
    )
    n = draw(st.integers(0, 9))
    schemes: dict[str, list[int | None]] = {
        "one": list(range(1, n + 1)),
        "zero": list(range(n)),
        "gapped": list(range(2, 3 * n + 2, 3)),
        "none": [None] * n,
        "random": draw(st.lists(st.none() | st.integers(-1, 10), min_size=n, max_size=n)),
    }
    numbers = schemes[draw(st.sampled_from(sorted(schemes)))]
    references = st.integers(-1, 3 * n + 2)
    # Most steps are sound, so that whole plans often are; a few carry one fault.
    faults = st.sampled_from(["none"] * 20 + ["empty_action", "no_criteria", "unknown_arm"])
    steps = []
    for pos in range(n):
        fault = draw(faults)
        criteria = draw(st.lists(st.sampled_from(["ok", "", " "]), max_size=3))
        steps.append(
            DraftStep(
                action="  " if fault == "empty_action" else draw(st.sampled_from(ACTIONS)),
                required_arm="wizard" if fault == "unknown_arm" else draw(st.sampled_from(ARMS)),
                acceptance_criteria=[c for c in criteria if not c.strip()]
                if fault == "no_criteria"
                else [*criteria, "Done"],
                depends_on=draw(st.lists(references, max_size=3)),
                step=numbers[pos],
                estimated_cost_tier=draw(st.none() | st.integers(-2, 8)),
                estimated_duration_seconds=draw(st.none() | st.integers(-5, 100_000)),
            )
        )
    return DraftPlan(steps=steps), rules


def _well_formed(error: PlanValidationError) -> str:
    assert error.code in ERROR_CODES
    assert error.errors
    assert error.detail == "; ".join(error.errors)
    return error.code


def test_random_drafts_come_out_valid_or_rejected() -> None:
    outcomes: Counter[str] = Counter()

    @settings(max_examples=400, derandomize=True, deadline=None)
    @given(random_cases())
    def check(case: tuple[DraftPlan, PlanRules]) -> None:
        draft, rules = case
        try:
            valid = validate_plan(draft, rules)
        except PlanValidationError as error:
            outcomes[_well_formed(error)] += 1
            return
        outcomes["valid"] += 1
        assert_valid_plan(
            response_body(valid),
            min_steps=rules.min_steps,
            max_steps=rules.max_steps,
            require_validation_step=rules.require_validation_step,
        )
        assert all(repair_code(entry) in REPAIR_CODES for entry in valid.repairs)
        # A valid plan validates again to itself, with nothing left to mend.
        redraft = DraftPlan(
            steps=[DraftStep(**step.model_dump(exclude={"writes"})) for step in valid.steps]
        )
        again = validate_plan(redraft, rules)
        assert (again.steps, again.repairs) == (valid.steps, [])

    check()
    # The generator must reach both outcomes, or this test proves little.
    assert outcomes["valid"] >= 40, outcomes
    assert sum(outcomes.values()) - outcomes["valid"] >= 40, outcomes


def test_the_appended_final_check_is_outside_the_step_bound() -> None:
    valid = validate_plan(plan(*(s(n) for n in range(1, 8))), RULES)
    assert len(valid.steps) == 8
    assert valid.steps[-1].required_arm == "judge"


def test_a_chain_over_the_bound_is_merged_to_fit() -> None:
    chain = [
        s(n, "coder" if n % 2 else "executor", (n - 1,) if n > 1 else ()) for n in range(1, 10)
    ]
    valid = validate_plan(plan(*chain, s(10, "judge", tuple(range(1, 10)))), RULES)
    merged = [entry for entry in valid.repairs if entry.startswith("steps_merged")]
    assert len(merged) == 2
    assert len(valid.steps) == 8  # seven of the work, then the final check
    assert "; then " in valid.steps[0].action
    assert valid.steps[-1].required_arm == "judge"
    # The final check still waits for every other step, directly or through the chain.
    assert valid.steps[-1].depends_on
