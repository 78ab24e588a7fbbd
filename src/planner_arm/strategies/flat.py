"""The flat strategy: the goal as one list of 3-7 steps, from the model or by rule.

prompt -> the attempt loop (retries, repair prompts, the model chain) -> the answer reader
(parse, normalise, validate, the caller's budget, prohibitions checked by the last step) ->
else the rule-based plan. The contract: a valid plan within the request deadline whatever the
model does, or, only when the fallback is switched off, `PlanningFailed`; a caller's budget
that no plan fits is `BudgetExceeded`. An answer over budget earns a repair prompt.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, replace

from anyio import to_thread

from planner_arm.errors import PlanValidationError
from planner_arm.llm.chain import Mendable, Question
from planner_arm.llm.client import Completion
from planner_arm.pipeline.assembly import assemble_response, read_plan_answer
from planner_arm.plan.budget import (
    check_answer_budget,
    describe_budget,
    refuse_impossible_budget,
)
from planner_arm.plan.draft import DraftPlan, split_note
from planner_arm.plan.quality import QualityProblem, checked_prohibitions, quality_problems
from planner_arm.plan.schemas import PlanRequest, PlanResponse
from planner_arm.plan.validation import PlanRules, ValidPlan, validate_plan
from planner_arm.strategies.answering import Answers, Sourced
from planner_arm.strategies.job import Job
from planner_arm.strategies.prompts.messages import with_repair
from planner_arm.strategies.prompts.plans import PROMPT_VERSION, user_prompt
from planner_arm.strategies.prompts.tools import draft_prompt, examples_prompt
from planner_arm.tools.planner import ToolPlanner
from planner_arm.tools.review import review_tool_plan

PlanAnswer = tuple[DraftPlan, ValidPlan]

# What the model is told of a plan most of whose steps are unlike their tools.
_UNLIKE_PROBLEM = (
    "Most steps call a tool that does not do the step's action. Give each step the listed "
    "tool that does its action, with an action saying what that tool does for the request; "
    "leave out what no listed tool does."
)


async def first_answer(
    answers: Answers, question: Question[PlanAnswer], job: Job[PlanRequest]
) -> Sourced[PlanAnswer]:
    """A whole plan for `job`: the model's answer to `question`, else the rule-based plan. A
    budget that no plan fits is refused before any call."""
    request, rule_based = job.request, job.toolbox.rule_based
    refuse_impossible_budget(request.budget, job.toolbox.rules.min_steps)
    return await answers.answer(job, question, lambda: rule_based.plan(request, request.budget))


@dataclass(kw_only=True)
class FlatPlanner:
    """The models (the fallback gate after them) and the texts of the answer's example, which
    no plan should repeat."""

    answers: Answers
    example_texts: Sequence[str]

    async def plan(self, job: Job[PlanRequest]) -> PlanResponse:
        """A plan for the job's request; its listener watches the model's answers being
        written."""
        # A tool set's question holds its rule-based draft, CPU work that grows with the set:
        # off the event loop.
        tool_set = job.toolbox.tool_set is not None
        question = await to_thread.run_sync(self.question, job) if tool_set else self.question(job)
        answer = await first_answer(self.answers, question, job)
        return respond(answer, job, PROMPT_VERSION)

    def question(self, job: Job[PlanRequest]) -> Question[PlanAnswer]:
        """The /plan request as the model is asked it, and how its answer is read."""
        request, box = job.request, job.toolbox
        rules, resolver = box.rules, box.resolver
        tools = box.tool_set.tools if box.tool_set is not None else None
        draft = tools.plan(request.goal, rules.max_steps, request.examples or ()) if tools else None
        # What is the same for every request over these tools opens the prompt (the tools,
        # when all are listed, and the examples, when all are shown), what is this request's
        # closes it: a model server computes a shared opening once.
        fixed = examples_prompt(box.worked, chosen=False) if box.worked_fixed else ""
        user = (
            ("" if box.worked_fixed else examples_prompt(box.worked))
            + draft_prompt(draft.steps if draft is not None else [])
            + user_prompt(
                request.goal, request.constraints, request.context, describe_budget(request.budget)
            )
        )

        def read(completion: Completion) -> PlanAnswer:
            draft, valid = read_plan_answer(
                completion.content,
                completion.truncated,
                resolver,
                functools.partial(validate_plan, rules=rules),
            )
            if tools is not None:
                draft, valid = reviewed(draft, valid, request, tools, rules)
            check_answer_budget(valid.steps, request.budget)  # over budget: a repair prompt
            # A prohibition no step mentions is checked by the last step: mended here, free.
            steps, checked = checked_prohibitions(valid.steps, request.constraints)
            return draft, ValidPlan(steps=steps, repairs=[*valid.repairs, *checked])

        def quality(answer: PlanAnswer) -> list[QualityProblem]:
            return quality_problems(answer[1].steps, request.constraints, self.example_texts)

        # A tool plan is judged by its tools and links; the constraint checks are the agents'.
        checks = quality if rules.profile == "agents" else None
        return Question(
            box.opening.messages(user, fixed),
            read,
            with_repair,
            answer_schema=box.answer_schema,
            light=True,
            quality=checks,
            noted=_noted,
        )


def reviewed(
    draft: DraftPlan, valid: ValidPlan, request: PlanRequest, tools: ToolPlanner, rules: PlanRules
) -> PlanAnswer:
    """A model's tool plan reviewed with the tool graph (tools/review.py) and checked
    again: what the review mended joins the repairs, what it found the warnings.

    Raises PlanValidationError (`actions_unlike_tools`) when most of its steps are unlike
    their tools: the model is asked again with each such step named, like any answer that
    breaks a rule, and the rule-based plan answers when it cannot mend it."""
    graph = tools.graph.with_examples(request.examples or ())
    review = review_tool_plan(valid.steps, request.goal, tools, graph, rules.max_steps)
    if review.mostly_unlike:
        raise PlanValidationError(
            f"{len(review.unlike)} of {review.model_steps} steps are unlike their tools",
            code="actions_unlike_tools",
            errors=[_UNLIKE_PROBLEM, *(split_note(entry)[1] for entry in review.unlike)],
        )
    mended = replace(
        draft,
        repairs=[*draft.repairs, *valid.repairs, *review.repairs],
        warnings=[*draft.warnings, *review.warnings],
    )
    return mended, validate_plan(DraftPlan(review.steps), rules)


def _noted(answer: PlanAnswer, problems: Sequence[Mendable]) -> PlanAnswer:
    """A usable plan kept with its quality problems as warnings."""
    draft, valid = answer
    warnings = [*draft.warnings, *(f"{p.code}: {p.message}" for p in problems)]
    return replace(draft, warnings=warnings), valid


def respond(
    answer: Sourced[PlanAnswer], job: Job[PlanRequest], prompt_version: str
) -> PlanResponse:
    """The answer of a strategy: the plan, who wrote it, what it cost and took, and what it
    says besides; a rule-based plan has the fallback's confidence."""
    draft, valid = answer.value
    fallback_confidence = job.toolbox.rule_based.confidence
    return assemble_response(
        draft=draft,
        valid=valid,
        goal=job.request.goal,
        source=answer.source,
        model=answer.model,
        usage=job.usage,
        request_id=job.request_id,
        latency_ms=job.deadline.elapsed_ms(),
        prompt_version=prompt_version,
        fixed_confidence=None if answer.model is not None else fallback_confidence,
        warnings=job.warnings(),
        tools=job.toolbox.rules.profile == "tools",
    )
