"""The iterative strategy's cut (the next stage of a plan, and whether it finishes it) and a
partial plan extended with the rest of a whole plan for the rule-based replan."""

from __future__ import annotations

from planner_arm.plan.dag import closing_stage, first_stage_steps, next_stage
from planner_arm.plan.endpoint_schemas import StepState
from planner_arm.plan.replan import ReplanScope
from planner_arm.plan.schemas import PlanStep
from planner_arm.rules.replan import extended, rest_of


def step(number: int, deps: list[int], arm: str = "coder", action: str = "") -> PlanStep:
    return PlanStep(
        step=number,
        action=action or f"Do part {number} of the work",
        required_arm=arm,
        acceptance_criteria=[f"Part {number} is done"],
        depends_on=deps,
    )


# 1..5 start at once, 6 after 1 and 2, the judge after all.
WIDE = [*(step(n, []) for n in range(1, 6)), step(6, [1, 2]), step(7, [3, 4, 5, 6], "judge")]


def test_a_stage_holds_at_most_the_limit_of_steps_that_can_start_now() -> None:
    stage = next_stage(WIDE, (), 3)
    assert [s.step for s in stage.steps] == [1, 2, 3]
    assert (stage.complete, stage.left) == (False, 4)


def test_a_step_waits_until_every_dependency_is_done() -> None:
    stage = next_stage(WIDE, {1, 3}, 3)
    assert [s.step for s in stage.steps] == [2, 4, 5]  # 6 still waits for 2
    stage = next_stage(WIDE, {1, 2, 3}, 3)
    assert [s.step for s in stage.steps] == [4, 5, 6]


def test_the_plan_is_complete_when_the_stage_holds_the_final_check() -> None:
    stage = next_stage(WIDE, {1, 2, 3, 4, 5, 6}, 3)
    assert [s.step for s in stage.steps] == [7]
    assert (stage.complete, stage.left) == (True, 0)
    assert next_stage(WIDE, {s.step for s in WIDE}, 3).complete  # nothing left to do


def test_a_first_stage_is_numbered_from_one() -> None:
    stage = next_stage([step(1, []), step(2, [1]), step(3, []), step(4, [2, 3], "judge")], (), 3)
    assert [(s.step, s.action) for s in first_stage_steps(stage.steps)] == [
        (1, "Do part 1 of the work"),
        (2, "Do part 3 of the work"),
    ]


def test_the_closing_stage_checks_what_was_done() -> None:
    done = [step(1, []), step(2, [1]), step(4, [1])]
    (check,) = closing_stage(done, 6, with_check=True)
    assert (check.step, check.required_arm, check.depends_on) == (6, "judge", [2, 4])
    assert closing_stage(done, 6, with_check=False) == []


def scope_of(previous: list[PlanStep], completed: list[int]) -> ReplanScope:
    states = {n: StepState(status="completed") for n in completed}
    return ReplanScope(tuple(previous), states, frozenset(), None, partial=True)


def test_a_partial_plan_goes_on_with_the_steps_it_lacks() -> None:
    whole = [
        step(1, [], action="Search the code"),
        step(2, [1], action="Patch the bug"),
        step(3, [], action="Read the docs"),
        step(4, [2, 3], "judge", "Check it all"),
    ]
    # The first round ran "Search the code" and "Read the docs", numbered 1 and 2.
    previous = [step(1, [], action="Search the code"), step(2, [], action="Read the docs")]
    scope = scope_of(previous, [1, 2])
    rest = rest_of(scope, whole)
    assert [(s.step, s.action, s.depends_on) for s in rest] == [
        (3, "Patch the bug", [1]),
        (4, "Check it all", [2, 3]),  # "Read the docs" is step 2 of the partial plan
    ]
    assert [s.step for s in extended(scope, rest).previous] == [1, 2, 3, 4]
    assert extended(scope, rest).finished == scope.finished
