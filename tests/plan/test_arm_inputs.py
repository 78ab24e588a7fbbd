"""The arms' input schemas, the check of an input (schema and references), and the rule-based
filler: valid for every arm, built-in or configured, whatever the step says."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner_arm.errors import PlanValidationError
from planner_arm.plan.dag import ancestors, ancestors_of_each
from planner_arm.plan.inputs import (
    INPUT_MODELS,
    check_input,
    input_schema,
)
from planner_arm.plan.schemas import PlanStep
from planner_arm.rules.inputs import command_in, rule_input

REQUIRED = {
    "retriever": ["query"],
    "coder": ["instruction"],
    "executor": [],  # a command, or `needs` when none could be written
    "judge": ["criteria"],
    "guardian": ["checks"],
    "planner": ["goal"],
    "translator": ["instruction"],  # a configured arm without a model of its own
}
FIELDS = {
    "retriever": {"query", "sources", "top_k"},
    "coder": {"instruction", "language", "files"},
    "executor": {
        "command",
        "needs",
        "instruction",
        "working_dir",
        "timeout_seconds",
        "expect_exit_code",
    },
    "judge": {"criteria", "inputs_from"},
    "guardian": {"checks", "target"},
    "planner": {"goal"},
    "translator": {"instruction", "inputs_from"},
}


def step(
    number: int, arm: str, action: str, deps: list[int] | None = None, **extra: Any
) -> PlanStep:
    return PlanStep(step=number, action=action, required_arm=arm,
                    acceptance_criteria=extra.pop("criteria", ["Done well"]),
                    depends_on=deps or [], **extra)  # fmt: skip


@pytest.mark.parametrize("arm", sorted(REQUIRED))
def test_each_arm_publishes_its_fields_and_required_ones(arm: str) -> None:
    schema = input_schema(arm)
    assert set(schema["properties"]) == FIELDS[arm]
    assert schema.get("required", []) == REQUIRED[arm]
    assert schema["additionalProperties"] is False


def test_bounds_are_in_the_schema_and_enforced() -> None:
    top_k = input_schema("retriever")["properties"]["top_k"]
    assert (top_k["minimum"], top_k["maximum"], top_k["default"]) == (1, 50, 5)
    with pytest.raises(PlanValidationError) as caught:
        check_input("retriever", {"query": "auth", "top_k": 51}, frozenset())
    assert caught.value.code == "invalid_input"
    assert "top_k" in caught.value.detail
    with pytest.raises(PlanValidationError):
        check_input("executor", {"command": "make", "timeout_seconds": 0}, frozenset())


def test_a_valid_input_gets_its_defaults_and_loses_unknown_fields() -> None:
    value = check_input("executor", {"command": "pytest -q", "colour": "red"}, frozenset())
    assert value == {"command": "pytest -q", "needs": None, "instruction": None,
                     "working_dir": ".", "timeout_seconds": 300, "expect_exit_code": 0}  # fmt: skip


def test_a_null_for_a_field_with_a_default_is_the_default() -> None:
    value = check_input("retriever", {"query": "auth", "sources": None, "top_k": None},
                        frozenset())  # fmt: skip
    assert value == {"query": "auth", "sources": [], "top_k": 5}
    assert check_input("coder", {"instruction": "x", "language": None, "files": None},
                       frozenset())["files"] == []  # fmt: skip
    with pytest.raises(PlanValidationError):  # a required field stays required
        check_input("retriever", {"query": None}, frozenset())


def test_an_executor_input_has_a_command_or_says_one_is_needed() -> None:
    with pytest.raises(PlanValidationError):
        check_input("executor", {}, frozenset())
    with pytest.raises(PlanValidationError):
        check_input("executor", {"command": "make", "needs": "human_or_model"}, frozenset())
    needed = check_input("executor", {"needs": "human_or_model", "instruction": "Deploy"},
                         frozenset())  # fmt: skip
    assert needed["command"] is None


@pytest.mark.parametrize("data", [[], "pytest", None, {"query": ""}, {"top_k": 3}])
def test_a_missing_or_wrong_shaped_input_is_refused(data: object) -> None:
    with pytest.raises(PlanValidationError) as caught:
        check_input("retriever", data, frozenset())
    assert caught.value.errors


def test_references_reach_only_the_steps_depended_on() -> None:
    steps = [step(1, "retriever", "Find"), step(2, "coder", "Fix", [1]),
             step(3, "retriever", "Look"), step(4, "judge", "Judge", [2])]  # fmt: skip
    earlier = ancestors_of_each(steps)
    assert earlier[4] == {1, 2}  # transitive
    ok = {"instruction": "Patch what {{steps.1.output}} found", "files": []}
    assert check_input("coder", ok, earlier[2])["instruction"] == ok["instruction"]
    check_input("judge", {"criteria": ["ok"], "inputs_from": [1, 2]}, earlier[4])
    for bad, arm in [
        ({"criteria": ["ok"], "inputs_from": [3]}, "judge"),  # not depended on
        ({"checks": ["safe"], "target": "{{steps.3.output}}"}, "guardian"),
        ({"checks": ["safe"], "target": "{{ steps.9.output }}"}, "guardian"),  # no such step
        ({"checks": ["safe"], "target": "{{steps.1}}"}, "guardian"),  # malformed
    ]:
        with pytest.raises(PlanValidationError) as caught:
            check_input(arm, bad, earlier[4])
        assert "depend" in caught.value.detail or "not a reference" in caught.value.detail


def test_earlier_steps_survive_a_cycle_and_a_missing_step() -> None:
    steps = [step(1, "coder", "A", [2]), step(2, "coder", "B", [1, 7])]
    assert ancestors_of_each(steps)[1] == {2}


def test_rule_inputs_follow_the_step() -> None:
    judge = rule_input(step(5, "judge", "Validate it", [3, 4], criteria=["Tests pass", "No leak"]))
    assert judge == {"criteria": ["Tests pass", "No leak"], "inputs_from": [3, 4]}
    search = rule_input(step(1, "retriever", "Search the codebase for the login handler"))
    assert search["query"] == "Search the codebase for the login handler"
    coder = rule_input(step(2, "coder", "Patch auth/login.py to fix expiry", [1]))
    assert coder["files"] == ["auth/login.py"]
    assert coder["language"] == "python"
    assert "{{steps.1.output}}" in coder["instruction"]
    guardian = rule_input(step(3, "guardian", "Check for secrets", [2], criteria=["No keys"]))
    assert guardian == {"checks": ["No keys"], "target": "{{steps.2.output}}"}
    assert rule_input(step(1, "planner", "Plan the migration")) == {"goal": "Plan the migration"}


def test_the_executor_runs_a_spelled_out_command_or_says_one_is_needed() -> None:
    assert rule_input(step(1, "executor", "Run `pytest -q tests/auth`"))["command"] == (
        "pytest -q tests/auth"
    )
    assert command_in("Then run npm test --coverage, and report") == "npm test --coverage"
    # No command spelled out: no stand-in that exits 0 either, but a marked input.
    unknown = rule_input(step(1, "executor", "Deploy it; rm -rf / if needed"))
    assert unknown["command"] is None
    assert unknown["needs"] == "human_or_model"
    assert unknown["instruction"] == "Deploy it; rm -rf / if needed"


def test_rule_inputs_keep_to_the_schema_for_any_number_of_dependencies() -> None:
    for arm in ("judge", "guardian", "coder", "translator"):
        many = step(400, arm, "Check everything", list(range(1, 400)))
        value = rule_input(many)  # checked against the schema inside
        assert value
    judge = rule_input(step(60, "judge", "Check everything", list(range(1, 60))))
    assert judge["inputs_from"] == list(range(1, 60))


def test_text_that_looks_like_a_reference_is_not_passed_on_as_one() -> None:
    sneaky = step(2, "planner", "Plan {{steps.9.output}} now", [1])
    assert "{{" not in rule_input(sneaky)["goal"]


ARMS = [*INPUT_MODELS, "translator", "ops-bot"]


# derandomize: the same cases every run, so CI does not depend on luck; the case that once
# found a blank guardian target is pinned below.
@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    arm=st.sampled_from(ARMS),
    action=st.text(min_size=1, max_size=6000),
    criteria=st.lists(st.text(max_size=900), min_size=1, max_size=60),
    deps=st.lists(st.integers(1, 40), max_size=60, unique=True),
    seconds=st.integers(1, 10**9),
)
def test_the_rule_input_is_valid_for_any_step_of_any_arm(
    arm: str, action: str, criteria: list[str], deps: list[int], seconds: int
) -> None:
    the_step = PlanStep(step=50, action=action, required_arm=arm, acceptance_criteria=criteria,
                        depends_on=deps, estimated_duration_seconds=seconds)  # fmt: skip
    value = rule_input(the_step)
    assert check_input(arm, value, frozenset(deps)) == value


@pytest.mark.parametrize("arm", ARMS)
def test_an_action_of_blanks_still_gets_a_valid_input(arm: str) -> None:
    blank = PlanStep(step=1, action=" \u3000 ", required_arm=arm, acceptance_criteria=[" "])
    value = rule_input(blank)
    assert check_input(arm, value, frozenset()) == value


def test_a_long_chain_is_walked_without_recursion() -> None:
    chain = [step(1, "coder", "A")] + [step(n, "coder", "A", [n - 1]) for n in range(2, 2001)]
    assert len(ancestors(chain, 2000)) == 1999
