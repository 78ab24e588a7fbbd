"""Estimation on hand-computed plans: a diamond, a chain, fully parallel steps; the confidence
formula."""

from __future__ import annotations

import math
from graphlib import CycleError

import pytest

from planner_arm.plan.estimation import (
    complexity_score,
    critical_path_duration,
    parallel_stages,
    plan_confidence,
    tool_plan_confidence,
    total_duration,
)
from planner_arm.plan.schemas import PlanStep


def step(
    number: int, deps: tuple[int, ...] = (), duration: int = 30, arm: str = "coder", cost: int = 1
) -> PlanStep:
    return PlanStep(
        step=number,
        action=f"Do part {number}",
        required_arm=arm,
        acceptance_criteria=["Done"],
        depends_on=list(deps),
        estimated_cost_tier=cost,
        estimated_duration_seconds=duration,
    )


# 1 -> {2, 3} -> 4; the path through 3 is the longer one: 10 + 40 + 5.
DIAMOND = [
    step(1, duration=10, arm="retriever", cost=1),
    step(2, (1,), duration=20, arm="coder", cost=3),
    step(3, (1,), duration=40, arm="coder", cost=3),
    step(4, (2, 3), duration=5, arm="judge", cost=2),
]
CHAIN = [step(1, duration=5), step(2, (1,), duration=7), step(3, (2,), duration=11)]
PARALLEL = [step(1, duration=3), step(2, duration=9), step(3, duration=4), step(4, duration=1)]


def test_diamond() -> None:
    assert parallel_stages(DIAMOND) == [[1], [2, 3], [4]]
    assert critical_path_duration(DIAMOND) == 55
    assert total_duration(DIAMOND) == 75


def test_chain() -> None:
    assert parallel_stages(CHAIN) == [[1], [2], [3]]
    assert critical_path_duration(CHAIN) == total_duration(CHAIN) == 23


def test_fully_parallel() -> None:
    assert parallel_stages(PARALLEL) == [[1, 2, 3, 4]]
    assert critical_path_duration(PARALLEL) == 9
    assert total_duration(PARALLEL) == 17


def test_stage_follows_the_longest_chain_not_the_nearest_dependency() -> None:
    # 3 depends on the root 1 directly and on 2, so it comes after 2, not beside it.
    steps = [step(1, duration=1), step(2, (1,), duration=100), step(3, (1, 2), duration=1)]
    assert parallel_stages(steps) == [[1], [2], [3]]
    assert critical_path_duration(steps) == 102


def test_steps_listed_out_of_dependency_order() -> None:
    steps = [step(3, (2,), duration=11), step(1, duration=5), step(2, (1,), duration=7)]
    assert parallel_stages(steps) == [[1], [2], [3]]
    assert critical_path_duration(steps) == 23


def test_empty_plan() -> None:
    assert parallel_stages([]) == []
    assert critical_path_duration([]) == total_duration([]) == 0
    assert complexity_score([]) == 0.0


def test_dependency_outside_the_plan_or_a_cycle_is_refused() -> None:
    with pytest.raises(ValueError, match=r"step 2 depends on unknown step\(s\) \[7\]"):
        parallel_stages([step(2, (7,)), step(1)])
    with pytest.raises(CycleError):
        critical_path_duration([step(1, (2,)), step(2, (1,))])


# --- complexity -----------------------------------------------------------------------------


def test_complexity_of_the_diamond_by_hand() -> None:
    # size 3/9 * .25 + arms 2/4 * .2 + depth 2/6 * .2 + width 1/4 * .1 + cost 1.25/4 * .25
    # = 0.0833 + 0.1 + 0.0667 + 0.025 + 0.0781 = 0.353
    assert complexity_score(DIAMOND) == 0.35


def test_complexity_bounds() -> None:
    assert complexity_score([step(1, cost=1)]) == 0.0
    arms = ["planner", "retriever", "coder", "executor", "judge"]
    chain = [step(n, (n - 1,) if n > 1 else (), arm=arms[n % 5], cost=5) for n in range(1, 8)]
    wide = [step(n, cost=5) for n in range(8, 14)]
    assert complexity_score(chain + wide) == 1.0


def test_complexity_grows_with_the_plan() -> None:
    small = complexity_score(CHAIN)
    longer = complexity_score([*CHAIN, step(4, (3,), arm="judge", cost=3)])
    assert 0.0 < small < longer < 1.0


# --- confidence -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "repairs", "calls", "expected"),
    [
        (0.9, 0, 1, 0.9),
        (None, 0, 1, 0.7),
        (0.9, 2, 1, 0.847),  # 0.9 * 0.97**2
        (0.9, 0, 2, 0.765),  # 0.9 * 0.85
        (0.8, 1, 3, 0.561),  # 0.8 * 0.97 * 0.85**2
        (0.9, 0, 0, 0.9),  # no call at all (cache, fallback) is no penalty
        (1.0, 0, 1, 0.99),
        (0.0, 0, 1, 0.05),
        (1.5, 0, 1, 0.7),  # out of range: treated as not given
        (-0.1, 0, 1, 0.7),
        (math.nan, 0, 1, 0.7),
    ],
)
def test_confidence_formula(model: float | None, repairs: int, calls: int, expected: float) -> None:
    assert plan_confidence(model, repairs=repairs, llm_calls=calls) == expected


def test_confidence_never_rises_with_repairs_or_calls_and_calls_cost_more() -> None:
    for model in (None, 0.2, 0.6, 0.95):
        by_repairs = [plan_confidence(model, repairs=r, llm_calls=1) for r in range(40)]
        by_calls = [plan_confidence(model, repairs=0, llm_calls=c) for c in range(1, 12)]
        assert by_repairs == sorted(by_repairs, reverse=True)
        assert by_calls == sorted(by_calls, reverse=True)
        assert all(0.05 <= value <= 0.99 for value in by_repairs + by_calls)
    one_repair = plan_confidence(0.9, repairs=1, llm_calls=1)
    one_extra_call = plan_confidence(0.9, repairs=0, llm_calls=2)
    assert one_extra_call < one_repair < 0.9


@pytest.mark.parametrize(
    ("repairs", "warnings", "calls", "expected"),
    [
        ([], [], 1, 0.8),  # the tool prompt asks for no confidence: a clean plan starts at 0.8
        (["tool_closest: 'search_movi' -> search_movie"], [], 1, 0.64),  # 0.8 * 0.8
        ([], ["action_unlike_tool: step 2 (x): 'buy' reads like y"], 1, 0.64),
        ([], ["goal_part_unplanned: book two seats"], 1, 0.68),  # 0.8 * 0.85
        (["producer_added: step 1: a for step 2"], [], 1, 0.72),  # 0.8 * 0.9
        (["link_added: step 1 -> step 2"], [], 1, 0.776),  # any other repair: 0.97
        ([], ["ignored_step_fields: note"], 1, 0.8),  # any other warning: nothing
        ([], [], 2, 0.68),  # an extra call: 0.85
        (["tool_closest", "tool_closest"], ["action_unlike_tool"], 1, 0.41),  # 0.8 * 0.8**3
    ],
)
def test_tool_plan_confidence_formula(
    repairs: list[str], warnings: list[str], calls: int, expected: float
) -> None:
    assert tool_plan_confidence(None, repairs=repairs, warnings=warnings, llm_calls=calls) == (
        expected
    )


def test_a_tool_plans_own_confidence_is_its_base() -> None:
    assert tool_plan_confidence(0.5, repairs=[], warnings=[], llm_calls=1) == 0.5
    assert tool_plan_confidence(math.nan, repairs=[], warnings=[], llm_calls=1) == 0.8


@pytest.mark.parametrize(
    ("model", "unlike", "steps", "expected"),
    [
        (0.99, 3, 4, 0.45),  # most steps unlike their tools: at most 0.45, however sure
        (None, 2, 3, 0.45),  # 0.8 * 0.8 ** 2 = 0.512 would pass 0.5
        (0.99, 2, 4, 0.634),  # half is not most: the factors alone
        (None, 1, 4, 0.64),
        (None, 1, None, 0.64),  # steps not counted: no ceiling
    ],
)
def test_a_tool_plan_mostly_unlike_its_tools_scores_under_one_half(
    model: float | None, unlike: int, steps: int | None, expected: float
) -> None:
    warnings = [f"action_unlike_tool: step {n} (x): 'buy' reads like y" for n in range(unlike)]
    confidence = tool_plan_confidence(
        model, repairs=[], warnings=warnings, llm_calls=1, steps=steps
    )
    assert confidence == expected
