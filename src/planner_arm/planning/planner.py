"""PlannerArm: prompt -> LLM -> parse -> validate -> estimate, with repair, retry and fallback.

The contract: `plan()` returns a valid plan within the request deadline whatever the model
does, or, only when the fallback is switched off, raises `PlanningFailed`; a caller's budget
that no plan fits is `BudgetExceeded`. An answer over budget earns a repair prompt.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from functools import partial

import structlog

from planner_arm.clock import Clock, Deadline
from planner_arm.config import Settings
from planner_arm.errors import PlanningFailed
from planner_arm.llm.client import Completion, LLMClient
from planner_arm.llm.guarded import GuardedLLM
from planner_arm.llm.prompts import (
    PROMPT_VERSION,
    example_texts,
    initial_messages,
    system_prompt,
    user_prompt,
)
from planner_arm.llm.retry import RetryPolicy
from planner_arm.metrics import PlannerMetrics
from planner_arm.pipeline.assembly import assemble_response
from planner_arm.pipeline.normalise import normalise_plan
from planner_arm.pipeline.parsing import extract_json
from planner_arm.plan.arms import ArmResolver
from planner_arm.plan.budget import describe_budget
from planner_arm.plan.draft import DraftPlan
from planner_arm.plan.plan_quality import checked_prohibitions, quality_problems
from planner_arm.plan.schemas import Budget, PlanRequest, PlanResponse
from planner_arm.plan.spend import Spend
from planner_arm.plan.validation import PlanRules, ValidPlan, validate_plan
from planner_arm.planning.attempts import AttemptLoop, QualityCheck
from planner_arm.planning.budget_fit import budgeted_fallback
from planner_arm.planning.call_budget import CallBudget
from planner_arm.planning.listener import PlanListener
from planner_arm.planning.outcomes import (
    NO_MODEL_DETAIL,
    Conversation,
    ModelFailure,
    ModelHealth,
    ModelPlan,
)
from planner_arm.planning.plan_budget import (
    check_answer_budget,
    refuse_impossible_budget,
)
from planner_arm.planning.recorder import PlanRecorder

__all__ = ["Conversation", "ModelFailure", "ModelHealth", "ModelPlan", "PlannerArm"]


class PlannerArm:
    def __init__(
        self,
        settings: Settings,
        llm: LLMClient | None,
        metrics: PlannerMetrics,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        *,
        recorder: PlanRecorder | None = None,
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self.recorder = recorder if recorder is not None else PlanRecorder(metrics)
        # Bound once: a module-level lazy logger rebuilds itself on every call.
        self.log = structlog.get_logger("planner_arm.planning.planner").bind()
        self.clock = clock or Clock()
        self.llm = GuardedLLM(llm, settings, metrics, self.clock) if llm else None
        jitter_source = rng or random.Random()  # noqa: S311 - backoff jitter, not a secret
        # Shared with the other model callers (stage 2's input filler).
        self.policy = RetryPolicy(settings.retry, self.clock, jitter_source)
        self.budget = CallBudget.from_settings(settings)
        self.attempts = (
            AttemptLoop(self.llm, settings, metrics, self.policy, self.budget)
            if self.llm is not None
            else None
        )
        self.rules = PlanRules.from_settings(settings)
        self.resolver = ArmResolver(settings.arms, settings.arm_aliases)
        self.system_prompt = system_prompt(settings.arms, settings.planning)
        self.example_texts = example_texts()

    def model_health(self) -> ModelHealth:
        """Each model's circuit now; empty when no model is configured."""
        return ModelHealth(self.llm.circuits() if self.llm is not None else {})

    async def plan(
        self, request: PlanRequest, request_id: str, listener: PlanListener | None = None
    ) -> PlanResponse:
        """A plan for `request`, recorded; raises PlanningFailed only with the fallback off,
        BudgetExceeded when no plan fits the request's budget. `listener` watches the model's
        answers being written, and names the plan."""
        started = self.clock.now()
        try:
            response = await self._plan(request, request_id, started, listener)
        except PlanningFailed:
            self.recorder.failed((self.clock.now() - started) * 1000)
            raise
        self.recorder.planned(response, request, repeat=False)
        return response

    async def _plan(
        self, request: PlanRequest, request_id: str, started: float, listener: PlanListener | None
    ) -> PlanResponse:
        refuse_impossible_budget(request.budget, self.settings.planning)
        deadline = Deadline(self.settings.planning.timeout_seconds, self.clock)
        spend = Spend()
        if self.attempts is None:
            outcome: ModelPlan | ModelFailure = ModelFailure("llm_disabled", NO_MODEL_DETAIL, [])
        else:
            outcome = await self.attempts.run(
                self._plan_conversation(request),
                deadline,
                spend,
                request.budget,
                quality=self._quality(request),
                listener=listener,
            )

        if isinstance(outcome, ModelPlan):
            response = assemble_response(
                draft=outcome.draft,
                valid=outcome.valid,
                goal=request.goal,
                source="llm",
                model=outcome.model,
                spend=spend,
                request_id=request_id,
                latency_ms=(self.clock.now() - started) * 1000,
                prompt_version=PROMPT_VERSION,
            )
        else:
            response = self._fallback(request, request_id, outcome, spend, started)
        # A streamed answer announced its plan_id before the plan existed.
        return (
            response
            if listener is None
            else response.model_copy(update={"plan_id": listener.plan_id})
        )

    def _fallback(
        self,
        request: PlanRequest,
        request_id: str,
        failure: ModelFailure,
        spend: Spend,
        started: float,
    ) -> PlanResponse:
        if failure.reason != "llm_disabled" and not self.settings.fallback.enabled:
            code = {
                "deadline": "deadline_exceeded",
                "invalid_plan": "invalid_plan",
            }.get(failure.reason, "llm_unavailable")
            raise PlanningFailed(failure.detail, code=code, errors=failure.errors)
        self.metrics.fallbacks.labels(failure.reason).inc()
        # With no model at all the answer says so too: a caller should not have to guess.
        spend.warn_once(f"fallback_used: {failure.reason}: {failure.detail}")
        # Raises BudgetExceeded (422) when not even the smallest rule-based plan fits.
        draft, valid = budgeted_fallback(
            request.goal,
            request.constraints,
            request.context,
            planning=self.settings.planning,
            resolver=self.resolver,
            rules=self.rules,
            budget=request.budget,
        )
        return assemble_response(
            draft=draft,
            valid=valid,
            goal=request.goal,
            source="fallback",
            model=None,
            spend=spend,
            request_id=request_id,
            latency_ms=(self.clock.now() - started) * 1000,
            prompt_version=PROMPT_VERSION,
            fixed_confidence=self.settings.fallback.confidence,
        )

    def _plan_conversation(self, request: PlanRequest) -> Conversation:
        """The /plan request as the model is asked it, and how its answer is read."""
        budget_rule = describe_budget(request.budget)
        user = user_prompt(request.goal, request.constraints, request.context, budget_rule)
        reader = partial(self._read_answer, budget=request.budget, constraints=request.constraints)
        return Conversation(initial_messages(self.system_prompt, user), reader)

    def _quality(self, request: PlanRequest) -> QualityCheck:
        """What only the model can mend in a usable /plan answer."""
        return lambda answer: quality_problems(
            answer.valid.steps, request.constraints, self.example_texts
        )

    def _read_answer(
        self, completion: Completion, budget: Budget | None, constraints: Sequence[str]
    ) -> tuple[DraftPlan, ValidPlan]:
        self.log.debug("llm_answer", content=completion.content, finish=completion.finish_reason)
        data, parse_repairs = extract_json(completion.content, truncated=completion.truncated)
        draft = normalise_plan(data, self.resolver)
        draft.repairs[:0] = parse_repairs
        valid = validate_plan(draft, self.rules)
        check_answer_budget(valid.steps, budget)  # over budget: a repair prompt, like a bad plan
        # A prohibition no step mentions is checked by the last step: mended here, for free.
        steps, checked = checked_prohibitions(valid.steps, constraints)
        return draft, ValidPlan(steps=steps, repairs=[*valid.repairs, *checked])

    async def ask_models(
        self, request: PlanRequest, deadline: Deadline, spend: Spend, conversation: Conversation
    ) -> ModelPlan | ModelFailure:
        """The attempt loop (retries, a repair prompt, the model chain) for another kind of
        request, within `deadline`; a ModelFailure when no usable answer came."""
        if self.attempts is None:
            return ModelFailure("llm_disabled", NO_MODEL_DETAIL, [])
        return await self.attempts.run(conversation, deadline, spend, request.budget)
