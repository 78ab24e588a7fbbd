"""The quality checks of a valid plan: constraints addressed, no step copied from the example."""

from __future__ import annotations

import pytest

from planner_arm.plan.quality import (
    checked_prohibitions,
    is_prohibition,
    quality_problems,
)
from planner_arm.plan.schemas import PlanStep
from planner_arm.strategies.prompts.plans import example_texts
from support.app import good_plan

STEPS = [PlanStep(**step) for step in good_plan()["plan"]]  # search, patch, test, validate


def codes(constraints: list[str], steps: list[PlanStep] = STEPS) -> list[str]:
    return [problem.code for problem in quality_problems(steps, constraints, example_texts())]


@pytest.mark.parametrize(
    ("constraint", "addressed"),
    [
        ("Deploy to Kubernetes", False),  # nothing is deployed
        ("Write a regression test", True),
        ("Patch the token expiry check", True),
        ("Publish the release notes", False),
    ],
)
def test_a_constraint_that_asks_for_work_must_be_addressed(
    constraint: str, addressed: bool
) -> None:
    assert codes([constraint]) == ([] if addressed else ["constraint_not_addressed"])


def test_the_problem_names_the_constraint_for_the_repair_prompt() -> None:
    [problem] = quality_problems(STEPS, ["Deploy to Kubernetes"], [])
    assert "'Deploy to Kubernetes'" in problem.message


@pytest.mark.parametrize(
    ("constraint", "prohibition"),
    [
        ("No schema change", True),
        ("Don't modify the database schema", True),
        ("Never restart production", True),
        ("Finish without downtime", True),
        ("Deploy to Kubernetes", False),
        ("Use Python 3.12", False),
    ],
)
def test_prohibitions_are_told_apart(constraint: str, prohibition: bool) -> None:
    assert is_prohibition(constraint) is prohibition


def test_a_prohibition_no_step_mentions_is_checked_by_the_last_step() -> None:
    steps, repairs = checked_prohibitions(STEPS, ["Don't modify the database schema"])
    assert steps[:-1] == STEPS[:-1]
    assert steps[-1].acceptance_criteria[-1] == (
        "Constraint respected: Don't modify the database schema"
    )
    assert [entry.split(":")[0] for entry in repairs] == ["constraint_check_added"]
    # Prohibitions are mended locally, never sent back to the model.
    assert codes(["Don't modify the database schema"]) == []


def test_a_prohibition_a_step_already_checks_is_left_alone() -> None:
    constraint = "No API change"  # the fixture's patch step has the criterion "No API change"
    steps = [*STEPS[:-1], STEPS[-1].model_copy(update={"acceptance_criteria": ["No API change"]})]
    assert checked_prohibitions(steps, [constraint]) == (steps, [])


def test_a_step_copied_from_the_prompts_example_is_caught() -> None:
    copied = STEPS[0].model_copy(update={"action": example_texts()[0]})
    assert codes([], [copied, *STEPS[1:]]) == ["example_copied"]
    assert codes([]) == []
