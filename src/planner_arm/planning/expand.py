"""POST /plan/expand: one step of a plan replaced by its sub-plan, as a new version.

The sub-plan comes from the model (asked with the goal, the step and what comes before and
after it), else from the rule-based planner; it is spliced in (plan/expand_merge.py) and the
whole plan checked against the caller's budget. Like /plan: a valid plan within the deadline
whatever the model does. An expansion is not a replan: `replan_count` stays as it was.
"""

from __future__ import annotations

from planner_arm.clock import Deadline
from planner_arm.errors import (
    BudgetExceeded,
    ExpandRejected,
    PlanningFailed,
    PlanValidationError,
)
from planner_arm.llm.expand_prompts import EXPAND_PROMPT_VERSION
from planner_arm.pipeline.assembly import assemble_response
from planner_arm.plan.budget import budget_figures, budget_problems
from planner_arm.plan.draft import DraftPlan
from planner_arm.plan.expand_merge import expandable_step, splice, surroundings
from planner_arm.plan.expand_schemas import ExpandRequest
from planner_arm.plan.hierarchy import expanded_tree, leaf_id
from planner_arm.plan.replan_merge import plan_diff
from planner_arm.plan.schemas import PlanResponse, PlanStep
from planner_arm.plan.spend import Spend
from planner_arm.plan.validation import PlanRules, ValidPlan
from planner_arm.planning.planner import ModelFailure, PlannerArm
from planner_arm.planning.subplans import SubPlan, SubPlanner, SubPlanTask


class Expander:
    def __init__(self, planner: PlannerArm) -> None:
        self.planner = planner
        self.subplans = SubPlanner(planner)

    def check(self, request: ExpandRequest, previous: PlanResponse) -> PlanRules:
        """The sub-plan's rules; raises ExpandRejected or BudgetExceeded before any model call."""
        expandable_step(previous.plan, request.step, self.planner.rules)
        if not previous.complete:
            # An iterative answer holds the steps that can start now; a sub-plan would add a
            # chain of steps that cannot, and the next round plans the rest anyway.
            raise ExpandRejected(
                "an iterative plan holds only its next stage: to plan a step of it in more "
                "detail, /replan with the step in replan_steps and strategy iterative",
                code="step_not_expandable",
            )
        rules = self.planner.rules
        others = len(previous.plan) - 1
        cap = self.planner.settings.expansion.max_plan_steps
        if others + rules.min_steps > cap:
            raise ExpandRejected(
                f"the plan has {len(previous.plan)} steps; with a sub-plan of at least "
                f"{rules.min_steps} it would pass expansion.max_plan_steps ({cap})",
                code="plan_too_large",
            )
        room = cap - others
        budget = request.budget
        if budget is not None and budget.max_steps is not None:
            if others + rules.min_steps > budget.max_steps:
                raise BudgetExceeded(
                    f"no expansion fits the budget: it allows {budget.max_steps} steps, and "
                    f"the plan would have at least {others + rules.min_steps}",
                    figures={"max_steps": budget.max_steps, "steps": others + rules.min_steps},
                )
            room = min(room, budget.max_steps - others)
        return self.subplans.rules(room)

    async def expand(
        self, request: ExpandRequest, previous: PlanResponse, request_id: str
    ) -> PlanResponse:
        planner = self.planner
        rules = self.check(request, previous)
        clock = planner.clock
        started = clock.now()
        deadline = Deadline(planner.settings.planning.timeout_seconds, clock)
        spend = Spend()
        target = expandable_step(previous.plan, request.step, planner.rules)
        before, after = surroundings(previous.plan, request.step)
        parent = leaf_id(previous.tree or [], request.step) or str(request.step)

        def spliced(sub: list[PlanStep]) -> list[PlanStep]:
            return splice(previous.plan, request.step, sub, parent=parent, rules=planner.rules)

        def check(sub: list[PlanStep]) -> None:
            problems = budget_problems(spliced(sub), request.budget)
            if problems:
                raise PlanValidationError("; ".join(problems), code="over_budget", errors=problems)

        task = SubPlanTask(target, before, after)
        outcome: SubPlan | ModelFailure
        outcome = await self.subplans.ask(request, task, deadline, spend, rules, check)
        if isinstance(outcome, ModelFailure):
            try:
                self.subplans.after_failure(outcome, spend)
            except PlanningFailed:
                planner.recorder.failed((clock.now() - started) * 1000)
                raise
            outcome, fitted = self.subplans.rule_based(
                request, task, rules, lambda sub: not budget_problems(spliced(sub), request.budget)
            )
            if not fitted:
                steps = spliced(outcome.valid.steps)
                assert request.budget is not None  # without a budget every sub-plan fits
                raise BudgetExceeded(
                    "no expansion fits the budget: "
                    + "; ".join(budget_problems(steps, request.budget)),
                    figures=budget_figures(steps, request.budget),
                )
        sub = outcome
        steps = spliced(sub.valid.steps)
        added = [step for step in steps if step.step > max(s.step for s in previous.plan)]
        rationale = (
            f"{previous.rationale} Step {request.step} detailed in steps "
            f"{', '.join(str(step.step) for step in added)}."
        )
        response = assemble_response(
            draft=DraftPlan(
                steps=[],
                rationale=rationale,
                confidence=sub.draft.confidence,
                repairs=sub.draft.repairs,
                warnings=sub.draft.warnings,
            ),
            valid=ValidPlan(steps=steps, repairs=sub.valid.repairs),
            goal=request.goal,
            source="llm" if sub.source == "llm" else "fallback",
            model=sub.model,
            spend=spend,
            request_id=request_id,
            latency_ms=(clock.now() - started) * 1000,
            prompt_version=EXPAND_PROMPT_VERSION,
            fixed_confidence=None
            if sub.source == "llm"
            else min(previous.confidence, planner.settings.fallback.confidence),
        )
        tree = expanded_tree(previous.tree, request.step, added) if previous.tree else None
        expanded = response.model_copy(
            update={
                "version": previous.version + 1,
                "parent_plan_id": previous.plan_id,
                "replan_count": previous.replan_count,
                "diff": plan_diff(list(previous.plan), steps),
                "strategy": previous.strategy,
                "complete": previous.complete,
                "tree": tree,
            }
        )
        planner.metrics.child(planner.metrics.expansions, sub.source).inc()
        planner.recorder.planned(expanded, request, repeat=False)
        return expanded
