"""Replanner: a revised plan that keeps the finished work, from the model or by rule.

prompt (what was done, what failed, what was marked) -> the planner's attempt loop (retries,
one repair prompt, the model chain, the deadline) -> parse, normalise, merge onto the previous
plan, check the budget -> else the rule-based replan. Like /plan: a valid plan within the
deadline whatever the model does, or `PlanningFailed` only when the fallback is off.
"""

from __future__ import annotations

from planner_arm.clock import Deadline
from planner_arm.errors import BudgetExceeded, PlanningFailed, PlanValidationError
from planner_arm.llm.client import Completion
from planner_arm.llm.prompts import initial_messages
from planner_arm.llm.replan_prompts import REPLAN_PROMPT_VERSION, replan_user_prompt
from planner_arm.pipeline.assembly import assemble_response
from planner_arm.pipeline.normalise import normalise_plan
from planner_arm.pipeline.parsing import extract_json
from planner_arm.plan.budget import budget_figures, budget_problems, describe_budget
from planner_arm.plan.draft import DraftPlan
from planner_arm.plan.iterative_stage import closing_stage
from planner_arm.plan.replan_merge import merge_replan, plan_diff
from planner_arm.plan.replan_rules import rule_based_replan
from planner_arm.plan.replan_schemas import ReplanRequest
from planner_arm.plan.replan_scope import ReplanScope, replan_scope
from planner_arm.plan.schemas import PlanResponse
from planner_arm.plan.spend import Spend
from planner_arm.plan.validation import ValidPlan
from planner_arm.planning.iterative import next_round, scopes_with_rest
from planner_arm.planning.planner import Conversation, ModelFailure, PlannerArm

_FAILURE_CODES = {"deadline": "deadline_exceeded", "invalid_plan": "invalid_plan"}


class Replanner:
    """Replans with the planner's collaborators: its guarded model, settings, rules, clock."""

    def __init__(self, planner: PlannerArm) -> None:
        self.planner = planner
        self.settings = planner.settings

    def scope(
        self, request: ReplanRequest, previous: PlanResponse, replan_count: int | None = None
    ) -> ReplanScope:
        """The request checked against `previous` (raises ReplanLimitReached, ReplanRejected);
        the endpoint may call it first to refuse a bad request before anything else."""
        return replan_scope(
            previous,
            request,
            default_max_replans=self.settings.planning.max_replans,
            replan_count=replan_count,
        )

    async def replan(
        self,
        request: ReplanRequest,
        previous: PlanResponse,
        request_id: str,
        *,
        replan_count: int | None = None,
    ) -> PlanResponse:
        """The revised plan of `previous`. `replan_count` is the server's count of replans in
        the stored chain, when it has the chain; else the previous answer's is used."""
        scope = self.scope(request, previous, replan_count)
        clock = self.planner.clock
        started = clock.now()
        deadline = Deadline(self.settings.planning.timeout_seconds, clock)
        spend = Spend()
        planning = self.settings.planning
        if request.strategy == "iterative" and previous.version >= planning.iterative_max_rounds:
            # No model call: the round that reaches the limit plans the final check alone,
            # so an iterative plan ends whatever the model keeps proposing.
            draft, valid = self._closing(scope)
            source, model, confidence = "fallback", None, self.settings.fallback.confidence
        else:
            outcome = await self.planner.ask_models(
                request, deadline, spend, self._conversation(request, scope)
            )
            if isinstance(outcome, ModelFailure):
                try:
                    draft, valid = self._rule_based(scope, request, outcome, spend)
                except PlanningFailed:
                    self.planner.recorder.failed((clock.now() - started) * 1000)
                    raise
                source, model, confidence = "fallback", None, self.settings.fallback.confidence
            else:
                draft, valid = outcome.draft, outcome.valid
                source, model, confidence = "llm", outcome.model, None
        response = assemble_response(
            draft=draft,
            valid=valid,
            goal=request.goal,
            source=source,  # type: ignore[arg-type]  # one of the two literals above
            model=model,
            spend=spend,
            request_id=request_id,
            latency_ms=(clock.now() - started) * 1000,
            prompt_version=REPLAN_PROMPT_VERSION,
            fixed_confidence=confidence,
        )
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
        self.planner.recorder.planned(revised, request, repeat=False)
        return revised

    def _conversation(self, request: ReplanRequest, scope: ReplanScope) -> Conversation:
        user = replan_user_prompt(
            request,
            scope,
            max_output_chars=self.settings.planning.replan_output_chars,
            budget_rule=describe_budget(request.budget),
        )
        return Conversation(
            initial_messages(self.planner.system_prompt, user),
            lambda completion: self._read_answer(completion, scope, request),
        )

    def _closing(self, scope: ReplanScope) -> tuple[DraftPlan, ValidPlan]:
        finished = [scope.finished[number] for number in sorted(scope.finished)]
        check = self.settings.planning.require_validation_step
        steps = [*finished, *closing_stage(finished, scope.highest + 1, with_check=check)]
        rounds = self.settings.planning.iterative_max_rounds
        rationale = (
            f"The iterative plan reached its {rounds} rounds: the work done is checked "
            "against the goal, and no more work is planned."
        )
        warning = f"iterative_round_limit: {rounds} rounds reached; only the final check is left"
        return DraftPlan([], rationale, warnings=[warning]), ValidPlan(steps=steps, repairs=[])

    def _read_answer(
        self, completion: Completion, scope: ReplanScope, request: ReplanRequest
    ) -> tuple[DraftPlan, ValidPlan]:
        """The model's revision merged onto the previous plan; PlanParseError or
        PlanValidationError (over budget too) earn the model one repair prompt."""
        data, parse_repairs = extract_json(completion.content, truncated=completion.truncated)
        draft = normalise_plan(data, self.planner.resolver)
        draft.repairs[:0] = parse_repairs
        merged = merge_replan(scope, draft, self.planner.rules)
        problems = budget_problems(merged.steps, request.budget)
        if problems:
            raise PlanValidationError("; ".join(problems), code="over_budget", errors=problems)
        return draft, ValidPlan(steps=merged.steps, repairs=merged.repairs)

    def _rule_based(
        self, scope: ReplanScope, request: ReplanRequest, failure: ModelFailure, spend: Spend
    ) -> tuple[DraftPlan, ValidPlan]:
        if failure.reason != "llm_disabled" and not self.settings.fallback.enabled:
            code = _FAILURE_CODES.get(failure.reason, "llm_unavailable")
            raise PlanningFailed(failure.detail, code=code, errors=failure.errors)
        self.planner.metrics.fallbacks.labels(failure.reason).inc()
        # With no model at all the answer says so too: a caller should not have to guess.
        spend.warn_once(f"fallback_used: {failure.reason}: {failure.detail}")
        budget = request.budget
        for candidate in scopes_with_rest(self.planner, request, scope):
            try:
                draft, merged = rule_based_replan(
                    candidate,
                    self.planner.rules,
                    self.planner.resolver,
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
