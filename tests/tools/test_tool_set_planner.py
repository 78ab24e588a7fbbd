"""A tool set's rule-based planner as a toolbox has it: the plan over the tools fitted to the
caller's budget X."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner_arm.config import ArmSpec, PlanningSettings
from planner_arm.errors import BudgetExceeded
from planner_arm.plan.schemas import Budget, PlanRequest
from planner_arm.plan.validation import PlanRules
from planner_arm.tools.index import tool_resolver
from planner_arm.tools.planner import ToolSetPlanner

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"
GOAL = "Find the customer jane.doe@example.com, list her orders and refund the most recent one"


def desk() -> ToolSetPlanner:
    nodes = json.loads((DATA / "support-desk" / "tools.json").read_text(encoding="utf-8"))
    specs = [ArmSpec(id=node["id"], description=node["desc"]) for node in nodes["nodes"]]
    planning = PlanningSettings(min_steps=1, max_steps=10, require_validation_step=False)
    rules = PlanRules.for_arms(planning, [spec.id for spec in specs])
    return ToolSetPlanner(planning, rules, 0.3, tool_resolver(specs))


def test_the_tool_plan_is_cut_to_the_steps_the_budget_allows() -> None:
    planner = desk()
    _, whole = planner.plan(PlanRequest(goal=GOAL), None)
    assert [step.required_arm for step in whole.steps] == [
        "lookup_customer",
        "list_orders",
        "refund_order",
    ]
    _, fitted = planner.plan(PlanRequest(goal=GOAL), Budget(max_steps=2))
    assert 1 <= len(fitted.steps) <= 2


def test_a_budget_no_tool_plan_fits_is_refused_and_the_whole_plan_still_comes() -> None:
    planner = desk()
    request = PlanRequest(goal=GOAL, budget=Budget(max_duration_seconds=1))
    with pytest.raises(BudgetExceeded, match="no plan fits the budget"):
        planner.plan(request, request.budget)
    assert len(planner.whole_plan(request)) == 3
