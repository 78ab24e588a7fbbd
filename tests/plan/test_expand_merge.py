"""Splicing a sub-plan in place of a step: numbers, parents, dependencies, a valid DAG."""

from __future__ import annotations

from typing import Any

import pytest

from planner_arm.errors import ExpandRejected, InvalidPrevious
from planner_arm.plan.estimation import critical_path_duration, parallel_stages
from planner_arm.plan.hierarchy import expandable_step, splice, surroundings
from planner_arm.plan.schemas import PlanStep
from planner_arm.plan.validation import PlanRules
from support.app import good_plan, make_settings

RULES = PlanRules.from_settings(make_settings(llm=False))


def plan() -> list[PlanStep]:
    return [PlanStep(**step) for step in good_plan()["plan"]]  # 1 -> (2, 3) -> 4 (judge)


def sub(
    *deps: list[int], arms: tuple[str, ...] = ("retriever", "coder", "judge")
) -> list[PlanStep]:
    given = deps or ([], [1], [2])
    return [
        PlanStep(step=index, action=f"Sub-task {index} of the patch", required_arm=arm,
                 acceptance_criteria=[f"Sub-task {index} done"], depends_on=after)
        for index, (arm, after) in enumerate(zip(arms, given, strict=True), 1)
    ]  # fmt: skip


def by_number(steps: list[PlanStep]) -> dict[int, PlanStep]:
    return {step.step: step for step in steps}


def test_other_steps_keep_their_numbers_and_the_new_ones_come_above_the_highest() -> None:
    before = plan()
    merged = splice(before, 2, sub(), parent="2", rules=RULES)
    steps = by_number(merged)
    assert sorted(steps) == [1, 3, 4, 5, 6, 7]
    for kept in (1, 3):
        assert steps[kept] == before[kept - 1]
    assert [steps[n].parent for n in (5, 6, 7)] == ["2", "2", "2"]
    assert [steps[n].action for n in (5, 6, 7)] == [f"Sub-task {i} of the patch" for i in (1, 2, 3)]


def test_the_sub_plan_starts_from_the_step_s_inputs_and_its_dependents_wait_for_its_end() -> None:
    steps = by_number(splice(plan(), 2, sub(), parent="2", rules=RULES))
    assert steps[5].depends_on == [1]  # what step 2 waited for
    assert steps[6].depends_on == [5]
    assert steps[7].depends_on == [6]
    assert steps[4].depends_on == [3, 7]  # the final check waited for 2: now for its last step


def test_several_first_and_last_sub_steps_are_all_wired() -> None:
    wide = sub([], [], [1, 2], arms=("retriever", "retriever", "coder"))
    steps = by_number(splice(plan(), 2, wide, parent="2", rules=RULES))
    assert steps[5].depends_on == steps[6].depends_on == [1]
    assert steps[4].depends_on == [3, 7]


def test_the_result_is_listed_in_dependency_order_with_the_final_check_last() -> None:
    merged = splice(plan(), 2, sub(), parent="2", rules=RULES)
    assert [step.step for step in merged] == [1, 5, 6, 7, 3, 4]
    seen: set[int] = set()
    for step in merged:
        assert set(step.depends_on) <= seen
        seen.add(step.step)
    assert merged[-1].required_arm == "judge"
    assert parallel_stages(merged) == [[1], [3, 5], [6], [7], [4]]
    assert critical_path_duration(merged) > 0


def test_expanding_the_first_step_gives_its_sub_plan_no_inputs() -> None:
    steps = by_number(splice(plan(), 1, sub(), parent="1", rules=RULES))
    assert steps[5].depends_on == []
    assert steps[2].depends_on == steps[3].depends_on == [7]


def test_surroundings_are_what_the_step_waits_for_and_what_waits_for_it() -> None:
    before, after = surroundings(plan(), 2)
    assert [step.step for step in before] == [1]
    assert [step.step for step in after] == [4]


@pytest.mark.parametrize(("number", "code"), [(9, "unknown_step"), (4, "step_not_expandable")])
def test_an_unknown_step_or_the_final_check_is_refused(number: int, code: str) -> None:
    with pytest.raises(ExpandRejected) as caught:
        expandable_step(plan(), number, RULES)
    assert caught.value.code == code
    assert caught.value.errors[0]["step"] == number


@pytest.mark.parametrize(
    "edit",
    [{"depends_on": [8]}, {"depends_on": [3]}, {"step": 1}],
    ids=["dangling", "cycle", "repeat"],
)
def test_a_plan_that_is_no_dag_is_refused_before_anything_is_planned(edit: dict[str, Any]) -> None:
    steps = good_plan()["plan"]
    steps[1].update(edit)
    if edit.get("depends_on") == [3]:
        steps[2]["depends_on"] = [2]
    with pytest.raises(InvalidPrevious) as caught:
        expandable_step([PlanStep(**step) for step in steps], 2, RULES)
    assert caught.value.code == "invalid_previous"
    assert caught.value.errors[0]["code"] in {"dangling_dependency", "cycle", "duplicate_step"}
