"""The sub-plan of one step: asked of the model through the planner's attempt loop (retries,
the repair prompt, the model chain, circuits, the deadline), read with the normal pipeline,
or made by the rule-based planner. Used by POST /plan/expand and the hierarchical strategy.

A sub-plan keeps every rule of a plan (3-7 steps, the last a judge step): its judge checks
the detailed step's acceptance criteria, so the detail is verified where it is done.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from planner_arm.clock import Deadline
from planner_arm.errors import PlanningFailed
from planner_arm.llm.client import Completion
from planner_arm.llm.expand_prompts import subplan_user_prompt
from planner_arm.llm.prompts import initial_messages
from planner_arm.pipeline.normalise import normalise_plan
from planner_arm.pipeline.parsing import extract_json
from planner_arm.plan.budget import describe_budget
from planner_arm.plan.draft import DraftPlan
from planner_arm.plan.final_check import JUDGE_ARM
from planner_arm.plan.schemas import PlanRequest, PlanStep
from planner_arm.plan.spend import Spend
from planner_arm.plan.step_detail import step_detail
from planner_arm.plan.validation import PlanRules, ValidPlan, validate_plan
from planner_arm.planning.planner import Conversation, ModelFailure, PlannerArm

# Checks a sub-plan's steps in their place (the budget of the whole plan); raises
# PlanValidationError, which earns the model a repair prompt.
SubPlanCheck = Callable[[list[PlanStep]], None]
_FAILURE_CODES = {"deadline": "deadline_exceeded", "invalid_plan": "invalid_plan"}


@dataclass(frozen=True)
class SubPlanTask:
    """The step to detail and where it stands."""

    step: PlanStep
    before: Sequence[PlanStep] = ()
    after: Sequence[PlanStep] = ()
    allow_compound: bool = False


@dataclass
class SubPlan:
    draft: DraftPlan
    valid: ValidPlan
    source: str  # llm | fallback
    model: str | None
    compound: set[int] = field(default_factory=set)  # steps marked to be broken down again


class SubPlanner:
    def __init__(self, planner: PlannerArm) -> None:
        self.planner = planner

    def rules(self, room: int) -> PlanRules:
        """The plan rules with at most `room` steps (never below min_steps: callers check)."""
        rules = self.planner.rules
        return replace(rules, max_steps=max(rules.min_steps, min(rules.max_steps, room)))

    async def ask(
        self,
        request: PlanRequest,
        task: SubPlanTask,
        deadline: Deadline,
        spend: Spend,
        rules: PlanRules,
        check: SubPlanCheck | None = None,
    ) -> SubPlan | ModelFailure:
        """The model's sub-plan, or why there is none."""
        user = subplan_user_prompt(
            request.goal,
            request.constraints,
            request.context,
            step=task.step,
            before=task.before,
            after=task.after,
            max_steps=rules.max_steps,
            allow_compound=task.allow_compound,
            budget_rule=describe_budget(request.budget),
        )

        def read(completion: Completion) -> tuple[DraftPlan, ValidPlan]:
            data, parse_repairs = extract_json(completion.content, truncated=completion.truncated)
            draft = normalise_plan(data, self.planner.resolver)
            draft.repairs[:0] = parse_repairs
            valid = validate_plan(draft, rules)
            if check is not None:
                check(valid.steps)
            return draft, valid

        conversation = Conversation(initial_messages(self.planner.system_prompt, user), read)
        outcome = await self.planner.ask_models(request, deadline, spend, conversation)
        if isinstance(outcome, ModelFailure):
            return outcome
        compound = _compound(outcome.draft, outcome.valid) if task.allow_compound else set()
        return SubPlan(outcome.draft, outcome.valid, "llm", outcome.model, compound)

    def after_failure(self, failure: ModelFailure, spend: Spend) -> None:
        """Raise PlanningFailed when the fallback is off; else count and note the fallback."""
        settings = self.planner.settings
        if failure.reason != "llm_disabled" and not settings.fallback.enabled:
            code = _FAILURE_CODES.get(failure.reason, "llm_unavailable")
            raise PlanningFailed(failure.detail, code=code, errors=failure.errors)
        self.planner.metrics.fallbacks.labels(failure.reason).inc()
        # With no model at all the answer says so too: a caller should not have to guess.
        spend.warn_once(f"fallback_used: {failure.reason}: {failure.detail}")

    def rule_based(
        self,
        request: PlanRequest,
        task: SubPlanTask,
        rules: PlanRules,
        fits: Callable[[list[PlanStep]], bool] = lambda steps: True,
    ) -> tuple[SubPlan, bool]:
        """The rule-based sub-plan with the most steps that `fits`, or the smallest one;
        and whether it fits. Its final check carries the step's criteria and the constraints."""
        # The step's own detail (plan/step_detail.py), not a plan of the whole goal again:
        # gather, one part of the work per criterion, the check; fewer parts to fit.
        wanted = 2 + len(task.step.acceptance_criteria)
        natural = max(rules.min_steps, min(rules.max_steps, wanted))
        arm_ids = self.planner.resolver.arm_ids
        best: SubPlan | None = None
        for size in range(natural, rules.min_steps - 1, -1):
            draft = step_detail(task.step, request.constraints, arm_ids=arm_ids, size=size)
            best = SubPlan(draft, validate_plan(draft, rules), "fallback", None)
            if fits(best.valid.steps):
                return best, True
        assert best is not None  # rules keep min_steps <= max_steps
        return best, False


def _compound(draft: DraftPlan, valid: ValidPlan) -> set[int]:
    """The validated steps the model marked compound (a judge step is never broken down)."""
    marked = {step.action.strip() for step in draft.steps if step.compound}
    return {
        step.step
        for step in valid.steps
        if step.action in marked and step.required_arm != JUDGE_ARM
    }
