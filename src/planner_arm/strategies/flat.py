"""The flat strategy: the goal as one list of 3-7 steps, from the model or by rule.

prompt -> the attempt loop (retries, repair prompts, the model chain) -> the answer reader
(parse, normalise, validate, the caller's budget, prohibitions checked by the last step) ->
else the rule-based plan. The contract: a valid plan within the request deadline whatever the
model does, or, only when the fallback is switched off, `PlanningFailed`; a caller's budget
that no plan fits is `BudgetExceeded`. An answer over budget earns a repair prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from planner_arm.clock import Deadline
from planner_arm.llm.client import Completion
from planner_arm.llm.prompts import (
    PROMPT_VERSION,
    examples_prompt,
    initial_messages,
    user_prompt,
)
from planner_arm.pipeline.assembly import assemble_response, read_plan_answer
from planner_arm.plan.budget import Spend, check_answer_budget, describe_budget
from planner_arm.plan.draft import DraftPlan
from planner_arm.plan.quality import QualityProblem, checked_prohibitions, quality_problems
from planner_arm.plan.schemas import PlanRequest, PlanResponse
from planner_arm.plan.validation import ValidPlan, validate_plan
from planner_arm.rules.planner import RuleBasedPlanner
from planner_arm.strategies.attempts import ModelPlanner, PlanJob, Question, Sourced

PlanAnswer = tuple[DraftPlan, ValidPlan]


async def first_answer(
    planner: ModelPlanner,
    rule_based: RuleBasedPlanner,
    question: Question[PlanAnswer],
    job: PlanJob,
    spend: Spend,
) -> Sourced[PlanAnswer]:
    """A whole plan for `job`: the model's answer to `question`, else the rule-based plan. A
    budget that no plan fits is refused before any call."""
    request = job.request
    rule_based.refuse_impossible(request.budget)
    return await planner.models.answer(
        question,
        lambda: rule_based.plan(request, request.budget),
        job.deadline,
        spend,
        owner=job.owner,
        budget=request.budget,
        listener=job.listener,
    )


@dataclass(kw_only=True)
class FlatPlanner(ModelPlanner):
    rule_based: RuleBasedPlanner
    example_texts: Sequence[str]

    async def plan(self, job: PlanJob) -> PlanResponse:
        """A plan for `request`; `listener` watches the model's answers being written, and
        names the plan (a streamed answer announced its plan_id before the plan existed)."""
        planner = await self.prepared(job.request)
        spend = Spend()
        question = planner.question(job.request)
        answer = await first_answer(planner, planner.rule_based, question, job, spend)
        confidence = planner.rule_based.confidence
        request = job.request
        return respond(
            answer, request, job.request_id, spend, job.deadline, PROMPT_VERSION, confidence
        )

    def question(self, request: PlanRequest) -> Question[PlanAnswer]:
        """The /plan request as the model is asked it, and how its answer is read."""
        user = examples_prompt(self.worked) + user_prompt(
            request.goal, request.constraints, request.context, describe_budget(request.budget)
        )

        def read(completion: Completion) -> PlanAnswer:
            draft, valid = read_plan_answer(
                completion.content,
                completion.truncated,
                self.resolver,
                lambda draft: validate_plan(draft, self.rules),
            )
            check_answer_budget(valid.steps, request.budget)  # over budget: a repair prompt
            # A prohibition no step mentions is checked by the last step: mended here, free.
            steps, checked = checked_prohibitions(valid.steps, request.constraints)
            return draft, ValidPlan(steps=steps, repairs=[*valid.repairs, *checked])

        def quality(answer: PlanAnswer) -> list[QualityProblem]:
            return quality_problems(answer[1].steps, request.constraints, self.example_texts)

        # A tool plan is judged by its tools and links; the constraint checks are the agents'.
        checks = quality if self.rules.profile == "agents" else None
        return Question(
            initial_messages(self.system_prompt, user),
            read,
            answer_schema=self.answer_schema,
            quality=checks,
            noted=_noted,
        )


def _noted(answer: PlanAnswer, problems: list[QualityProblem]) -> PlanAnswer:
    """A usable plan kept with its quality problems as warnings."""
    draft, valid = answer
    warnings = [*draft.warnings, *(f"{p.code}: {p.message}" for p in problems)]
    return replace(draft, warnings=warnings), valid


def respond(
    answer: Sourced[PlanAnswer],
    request: PlanRequest,
    request_id: str,
    spend: Spend,
    deadline: Deadline,
    prompt_version: str,
    fallback_confidence: float,
) -> PlanResponse:
    """The answer of a strategy: the plan, who wrote it, what it cost and took."""
    draft, valid = answer.value
    return assemble_response(
        draft=draft,
        valid=valid,
        goal=request.goal,
        source=answer.source,
        model=answer.model,
        spend=spend,
        request_id=request_id,
        latency_ms=deadline.elapsed_ms(),
        prompt_version=prompt_version,
        fixed_confidence=None if answer.model is not None else fallback_confidence,
    )
