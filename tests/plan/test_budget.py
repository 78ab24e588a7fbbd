"""Budgets: the problems of a plan over budget, the prompt rule, and the rule-based plan fitted
to the budget or refused with the figures."""

from __future__ import annotations

import pytest

from planner_arm.errors import BudgetExceeded
from planner_arm.llm.usage import Usage
from planner_arm.pipeline.assembly import assemble_response
from planner_arm.plan.arms import ArmResolver
from planner_arm.plan.budget import budget_problems, describe_budget
from planner_arm.plan.schemas import Budget, PlanStep
from planner_arm.plan.validation import PlanRules
from planner_arm.rules.planner import plan_within_budget
from support.app import make_settings
from support.invariants import assert_valid_plan

SETTINGS = make_settings(llm=False)
RULES = PlanRules.from_settings(SETTINGS)
RESOLVER = ArmResolver(SETTINGS.arms, SETTINGS.arm_aliases)
GOAL = "Implement CSV export for the reports page"


def chain(*durations: int) -> list[PlanStep]:
    return [
        PlanStep(step=n, action="Do it", required_arm="coder", acceptance_criteria=["Done"],
                 depends_on=[n - 1] if n > 1 else [], estimated_duration_seconds=d)
        for n, d in enumerate(durations, 1)
    ]  # fmt: skip


def test_a_plan_within_budget_has_no_problems() -> None:
    assert budget_problems(chain(10, 20), Budget(max_steps=2, max_duration_seconds=30)) == []
    assert budget_problems(chain(10, 20), None) == []


def test_each_limit_passed_is_named_with_both_figures() -> None:
    problems = budget_problems(chain(10, 20, 30), Budget(max_steps=2, max_duration_seconds=45))
    assert problems == [
        "the plan has 3 steps; the budget allows 2",
        "the critical path takes 60 s; the budget allows 45 s",
    ]


def test_the_duration_limit_bounds_the_critical_path_not_the_sum() -> None:
    parallel = chain(30, 30)
    parallel[1] = parallel[1].model_copy(update={"depends_on": []})
    assert budget_problems(parallel, Budget(max_duration_seconds=30)) == []


def test_the_model_is_told_the_budget() -> None:
    text = describe_budget(Budget(max_steps=4, max_duration_seconds=120, max_llm_usd=0.01))
    assert "at most 4 steps" in text
    assert "at most 120 seconds" in text
    assert describe_budget(Budget(max_llm_usd=0.01)) == ""
    assert describe_budget(None) == ""


def test_the_rule_based_plan_is_fitted_to_the_budget() -> None:
    _, free = plan_within_budget(GOAL, [], {}, planning=SETTINGS.planning,
                                resolver=RESOLVER, rules=RULES, budget=None)  # fmt: skip
    assert len(free.steps) > 4
    budget = Budget(max_steps=4, max_duration_seconds=200)
    draft, valid = plan_within_budget(GOAL, [], {}, planning=SETTINGS.planning,
                                     resolver=RESOLVER, rules=RULES, budget=budget)  # fmt: skip
    assert budget_problems(valid.steps, budget) == []
    assert valid.steps[-1].required_arm == "judge"
    response = assemble_response(draft=draft, valid=valid, goal=GOAL, source="fallback",
                                 model=None, usage=Usage(), request_id="r", latency_ms=0.0,
                                 prompt_version="v")  # fmt: skip
    assert_valid_plan(response.model_dump(mode="json"))


@pytest.mark.parametrize(
    ("budget", "figure"),
    [
        (Budget(max_steps=2), "max_steps"),
        (Budget(max_duration_seconds=20), "critical_path_duration"),
    ],
)
def test_no_plan_fits_and_the_error_has_the_figures(budget: Budget, figure: str) -> None:
    with pytest.raises(BudgetExceeded, match="no plan fits the budget") as caught:
        plan_within_budget(GOAL, [], {}, planning=SETTINGS.planning, resolver=RESOLVER,
                          rules=RULES, budget=budget)  # fmt: skip
    assert caught.value.code == "budget_exceeded"
    assert figure in caught.value.figures
