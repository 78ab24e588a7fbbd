"""Replanner: a revised plan that keeps the finished work, from the model or by rule.

prompt (what was done, what failed, what was marked) -> the attempt loop (retries, a repair
prompt, the model chain, the deadline) -> the answer reader, which merges the revision onto the
previous plan and checks the budget -> else the rule-based replan. Like /plan: a valid plan
within the deadline whatever the model does, or `PlanningFailed` only when the fallback is off.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from planner_arm.config import PlanningSettings
from planner_arm.errors import BudgetExceeded, PlanValidationError
from planner_arm.llm.chain import Question
from planner_arm.llm.client import Completion
from planner_arm.pipeline.assembly import read_plan_answer
from planner_arm.plan.budget import budget_figures, budget_problems, describe_budget
from planner_arm.plan.dag import closing_stage
from planner_arm.plan.draft import DraftPlan
from planner_arm.plan.endpoint_schemas import ReplanRequest
from planner_arm.plan.replan import ReplanScope, merge_replan, plan_diff, replan_scope
from planner_arm.plan.schemas import PlanResponse
from planner_arm.plan.validation import ValidPlan
from planner_arm.rules.replan import extended, rest_of, rule_based_replan
from planner_arm.strategies.answering import Answers, Sourced
from planner_arm.strategies.flat import PlanAnswer, respond
from planner_arm.strategies.iterative import next_round
from planner_arm.strategies.job import Job
from planner_arm.strategies.prompts.messages import with_repair
from planner_arm.strategies.prompts.replan import REPLAN_PROMPT_VERSION, replan_user_prompt


@dataclass(kw_only=True)
class Replanner:
    answers: Answers
    planning: PlanningSettings

    def scope(
        self, job: Job[ReplanRequest], previous: PlanResponse, replan_count: int | None = None
    ) -> ReplanScope:
        """The request checked against `previous` (raises ReplanLimitReached, ReplanRejected):
        the service calls it first, to refuse a bad request before anything else."""
        return replan_scope(
            previous,
            job.request,
            default_max_replans=self.planning.max_replans,
            replan_count=replan_count,
            arm_ids=job.toolbox.rules.arm_ids,
        )

    async def replan(
        self,
        job: Job[ReplanRequest],
        previous: PlanResponse,
        scope: ReplanScope,
        replan_count: int | None = None,
    ) -> PlanResponse:
        """The revised plan of `previous`, within `scope` (`scope()`). `replan_count` is the
        server's count of replans in the stored chain, when it has the chain; else the
        previous answer's is used."""
        request = job.request
        planning = self.planning
        if request.strategy == "iterative" and previous.version >= planning.iterative_max_rounds:
            # No model call: the round that reaches the limit plans the final check alone,
            # so an iterative plan ends whatever the model keeps proposing.
            answer: Sourced[PlanAnswer] = Sourced(self._closing(scope), None)
        else:
            answer = await self.answers.answer(
                job,
                self._question(job, scope),
                lambda: self._rule_based_revision(job, scope),
            )
        response = respond(answer, job, REPLAN_PROMPT_VERSION)
        count = previous.replan_count if replan_count is None else replan_count
        revised = response.model_copy(
            update={
                "version": previous.version + 1,
                "parent_plan_id": previous.plan_id,
                "replan_count": count + 1 if scope.counted else count,
                "diff": plan_diff(list(previous.plan), response.plan),
            }
        )
        if request.strategy == "iterative":
            revised = next_round(revised, previous, scope, planning.iterative_stage_steps)
        return revised

    def _question(self, job: Job[ReplanRequest], scope: ReplanScope) -> Question[PlanAnswer]:
        request, box = job.request, job.toolbox
        rules, resolver = box.rules, box.resolver
        user = replan_user_prompt(
            request,
            scope,
            max_output_chars=self.planning.replan_output_chars,
            budget_rule=describe_budget(request.budget),
        )

        def read(completion: Completion) -> PlanAnswer:
            """The model's revision merged onto the previous plan; PlanParseError or
            PlanValidationError (over budget too) earn the model one repair prompt."""

            def merged(draft: DraftPlan) -> ValidPlan:
                merge = merge_replan(scope, draft, rules)
                problems = budget_problems(merge.steps, request.budget)
                if problems:
                    raise PlanValidationError(
                        "; ".join(problems), code="over_budget", errors=problems
                    )
                return ValidPlan(steps=merge.steps, repairs=merge.repairs)

            return read_plan_answer(completion.content, completion.truncated, resolver, merged)

        messages = box.opening.messages(user)
        return Question(messages, read, with_repair, answer_schema=box.answer_schema)

    def _closing(self, scope: ReplanScope) -> PlanAnswer:
        finished = [scope.finished[number] for number in sorted(scope.finished)]
        check = self.planning.require_validation_step
        steps = [*finished, *closing_stage(finished, scope.highest + 1, with_check=check)]
        rounds = self.planning.iterative_max_rounds
        rationale = (
            f"The iterative plan reached its {rounds} rounds: the work done is checked "
            "against the goal, and no more work is planned."
        )
        warning = f"iterative_round_limit: {rounds} rounds reached; only the final check is left"
        return DraftPlan([], rationale, warnings=[warning]), ValidPlan(steps=steps, repairs=[])

    def _rule_based_revision(self, job: Job[ReplanRequest], scope: ReplanScope) -> PlanAnswer:
        budget = job.request.budget
        box = job.toolbox
        for candidate in self._scopes_with_rest(job, scope):
            try:
                draft, merged = rule_based_replan(
                    candidate,
                    box.rules,
                    box.resolver,
                    fits=lambda plan: budget is None or not budget_problems(plan.steps, budget),
                )
                break
            except PlanValidationError:
                if candidate.previous == scope.previous:
                    raise
        if budget is not None and budget_problems(merged.steps, budget):
            problems = budget_problems(merged.steps, budget)
            raise BudgetExceeded(
                "no revised plan fits the budget: " + "; ".join(problems),
                figures=budget_figures(merged.steps, budget),
            )
        return draft, ValidPlan(steps=merged.steps, repairs=merged.repairs)

    def _scopes_with_rest(
        self, job: Job[ReplanRequest], scope: ReplanScope
    ) -> Iterator[ReplanScope]:
        """For the rule-based replan of a partial plan (an iterative answer): its scope with
        the rest of the goal's rule-based plan, then with less of it, down to the scope alone
        (a rule-based revision must fit the plan rules)."""
        if not scope.partial:
            yield scope
            return
        rest = rest_of(scope, job.toolbox.rule_based.whole_plan(job.request))
        for size in range(len(rest), -1, -1):
            yield extended(scope, rest[:size])
