"""Sub-plans: one step of a plan detailed into steps of its own, by the model or by rule; and
POST /plan/expand, which replaces a step by its sub-plan as a new version of the plan.

A sub-plan is asked through the one attempt loop (retries, the repair prompt, the model chain,
circuits, the deadline), read with the one answer reader, or made by the rule-based planner;
the hierarchical strategy uses the same sub-plans for its nodes. A sub-plan keeps every rule
of a plan (3-7 steps, the last a judge step): its judge checks the detailed step's acceptance
criteria, so the detail is verified where it is done. The expanded plan is checked against
the caller's budget as a whole. Like /plan: a valid plan within the deadline whatever the
model does. An expansion is not a replan: `replan_count` stays as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field, replace

from anyio import to_thread

from planner_arm.errors import BudgetExceeded, ExpandRejected, PlanValidationError
from planner_arm.llm.chain import ModelFailure, Question
from planner_arm.llm.client import Completion
from planner_arm.metrics import PlannerMetrics
from planner_arm.pipeline.assembly import assemble_response, read_plan_answer
from planner_arm.plan.budget import budget_figures, budget_problems, describe_budget
from planner_arm.plan.dag import JUDGE_ARM
from planner_arm.plan.draft import DraftPlan
from planner_arm.plan.endpoint_schemas import ExpandRequest
from planner_arm.plan.hierarchy import expandable_step, expanded_tree, leaf_id, splice, surroundings
from planner_arm.plan.replan import plan_diff
from planner_arm.plan.schemas import PlanRequest, PlanResponse, PlanStep
from planner_arm.plan.validation import PlanRules, ValidPlan, validate_plan
from planner_arm.rules.planner import step_detail
from planner_arm.strategies.answering import Answers
from planner_arm.strategies.job import Job
from planner_arm.strategies.prompts.expand import EXPAND_PROMPT_VERSION, subplan_user_prompt
from planner_arm.strategies.prompts.messages import with_repair

# Checks a sub-plan's steps in their place (the budget of the whole plan); raises
# PlanValidationError, which earns the model a repair prompt.
SubPlanCheck = Callable[[list[PlanStep]], None]


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


def rules_within(rules: PlanRules, room: int) -> PlanRules:
    """`rules` with at most `room` steps (never below min_steps: callers check)."""
    return replace(rules, max_steps=max(rules.min_steps, min(rules.max_steps, room)))


@dataclass
class SubPlanner:
    """Sub-plans of a job's request: one step detailed, by the model or by rule."""

    answers: Answers

    async def ask(
        self,
        job: Job[PlanRequest],
        task: SubPlanTask,
        rules: PlanRules,
        check: SubPlanCheck | None = None,
    ) -> SubPlan | ModelFailure:
        """The model's sub-plan, or why there is none."""
        request, box = job.request, job.toolbox
        resolver = box.resolver
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

        def checked(draft: DraftPlan) -> ValidPlan:
            valid = validate_plan(draft, rules)
            if check is not None:
                check(valid.steps)
            return valid

        def read(completion: Completion) -> tuple[DraftPlan, ValidPlan]:
            return read_plan_answer(completion.content, completion.truncated, resolver, checked)

        messages = box.opening.messages(user)
        # Checked in its place (spliced into the plan, which may be large): read off the loop.
        light = check is None
        question = Question(
            messages, read, with_repair, answer_schema=box.answer_schema, light=light
        )
        outcome = await self.answers.ask(job, question)
        if isinstance(outcome, ModelFailure):
            return outcome
        draft, valid = outcome.value
        compound = _compound(draft, valid) if task.allow_compound else set()
        return SubPlan(draft, valid, "llm", outcome.model, compound)

    def rule_based(
        self,
        job: Job[PlanRequest],
        task: SubPlanTask,
        rules: PlanRules,
        fits: Callable[[list[PlanStep]], bool] = lambda steps: True,
    ) -> tuple[SubPlan, bool]:
        """The rule-based sub-plan with the most steps that `fits`, or the smallest one;
        and whether it fits. Its final check carries the step's criteria and the constraints."""
        # The step's own detail, not a plan of the whole goal again: gather, one part of the
        # work per criterion, the check; fewer parts to fit.
        wanted = 2 + len(task.step.acceptance_criteria)
        natural = max(rules.min_steps, min(rules.max_steps, wanted))
        arm_ids = job.toolbox.resolver.arm_ids
        constraints = job.request.constraints
        best: SubPlan | None = None
        for size in range(natural, rules.min_steps - 1, -1):
            draft = step_detail(task.step, constraints, arm_ids=arm_ids, size=size)
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


@dataclass
class Expander:
    subplans: SubPlanner
    _: KW_ONLY
    max_plan_steps: int
    fallback_confidence: float
    metrics: PlannerMetrics

    def check(self, job: Job[ExpandRequest], previous: PlanResponse) -> PlanRules:
        """The sub-plan's rules; raises ExpandRejected or BudgetExceeded before any model call."""
        request, rules = job.request, job.toolbox.rules
        expandable_step(previous.plan, request.step, rules)
        if not previous.complete:
            # An iterative answer holds the steps that can start now; a sub-plan would add a
            # chain of steps that cannot, and the next round plans the rest anyway.
            raise ExpandRejected(
                "an iterative plan holds only its next stage: to plan a step of it in more "
                "detail, /replan with the step in replan_steps and strategy iterative",
                code="step_not_expandable",
            )
        others = len(previous.plan) - 1
        cap = self.max_plan_steps
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
        return rules_within(rules, room)

    async def expand(self, job: Job[ExpandRequest], previous: PlanResponse) -> PlanResponse:
        """`previous` with the job's step replaced by its sub-plan."""
        rules = self.check(job, previous)
        request, plan_rules = job.request, job.toolbox.rules
        target = expandable_step(previous.plan, request.step, plan_rules)
        before, after = surroundings(previous.plan, request.step)
        parent = leaf_id(previous.tree or [], request.step) or str(request.step)

        def spliced(sub: list[PlanStep]) -> list[PlanStep]:
            return splice(previous.plan, request.step, sub, parent=parent, rules=plan_rules)

        def check(sub: list[PlanStep]) -> None:
            problems = budget_problems(spliced(sub), request.budget)
            if problems:
                raise PlanValidationError("; ".join(problems), code="over_budget", errors=problems)

        task = SubPlanTask(target, before, after)
        sub = await self.subplans.ask(job, task, rules, check)
        if isinstance(sub, ModelFailure):
            with self.subplans.answers.falling_back(sub, job.notes):
                sub = await to_thread.run_sync(self._rule_based, job, task, rules, spliced)
        done = sub

        def answer() -> PlanResponse:
            return self._answer(job, previous, done, spliced(done.valid.steps))

        # Splicing into a large plan and estimating it is CPU work: off the event loop.
        expanded = await to_thread.run_sync(answer)
        self.metrics.child(self.metrics.expansions, sub.source).inc()
        return expanded

    def _rule_based(
        self,
        job: Job[ExpandRequest],
        task: SubPlanTask,
        rules: PlanRules,
        spliced: Callable[[list[PlanStep]], list[PlanStep]],
    ) -> SubPlan:
        budget = job.request.budget
        sub, fitted = self.subplans.rule_based(
            job, task, rules, lambda steps: not budget_problems(spliced(steps), budget)
        )
        if not fitted:
            steps = spliced(sub.valid.steps)
            assert budget is not None  # without a budget every sub-plan fits
            raise BudgetExceeded(
                "no expansion fits the budget: " + "; ".join(budget_problems(steps, budget)),
                figures=budget_figures(steps, budget),
            )
        return sub

    def _answer(
        self,
        job: Job[ExpandRequest],
        previous: PlanResponse,
        sub: SubPlan,
        steps: list[PlanStep],
    ) -> PlanResponse:
        request = job.request
        added = [step for step in steps if step.step > max(s.step for s in previous.plan)]
        rationale = (
            f"{previous.rationale} Step {request.step} detailed in steps "
            f"{', '.join(str(step.step) for step in added)}."
        )
        by_model = sub.source == "llm"
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
            source="llm" if by_model else "fallback",
            model=sub.model,
            usage=job.usage,
            request_id=job.request_id,
            latency_ms=job.deadline.elapsed_ms(),
            prompt_version=EXPAND_PROMPT_VERSION,
            fixed_confidence=None
            if by_model
            else min(previous.confidence, self.fallback_confidence),
            warnings=job.warnings(),
        )
        tree = expanded_tree(previous.tree, request.step, added) if previous.tree else None
        return response.model_copy(
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
