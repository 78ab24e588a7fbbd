"""PlannerArm: prompt -> LLM -> parse -> validate -> estimate, with repair, retry and fallback.

The contract: `plan()` returns a valid plan within the request deadline whatever the model
does, or, only when the fallback is switched off, raises `PlanningFailed`; a caller's budget
that no plan fits is `BudgetExceeded`. An answer over budget earns a repair prompt.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from functools import partial

import structlog

from planner_arm.clock import Clock, Deadline
from planner_arm.config import Settings
from planner_arm.errors import LLMError, LLMRateLimited, PlanningFailed, PlanParseError
from planner_arm.errors import PlanValidationError as PlanInvalid
from planner_arm.llm.client import Completion, LLMClient
from planner_arm.llm.guarded import CallSkipped, GuardedLLM
from planner_arm.llm.prompts import (
    PROMPT_VERSION,
    Message,
    initial_messages,
    system_prompt,
    user_prompt,
    with_repair,
)
from planner_arm.llm.retry import Next, RetryPolicy
from planner_arm.metrics import PlannerMetrics
from planner_arm.pipeline.assembly import assemble_response
from planner_arm.pipeline.normalise import normalise_plan
from planner_arm.pipeline.parsing import extract_json
from planner_arm.plan.arms import ArmResolver
from planner_arm.plan.budget import describe_budget
from planner_arm.plan.draft import DraftPlan
from planner_arm.plan.schemas import Budget, PlanRequest, PlanResponse
from planner_arm.plan.spend import Spend
from planner_arm.plan.validation import PlanRules, ValidPlan, validate_plan
from planner_arm.planning.budget_fit import budgeted_fallback
from planner_arm.planning.call_budget import CallBudget
from planner_arm.planning.listener import PlanListener
from planner_arm.planning.outcomes import (
    NO_MODEL_DETAIL,
    AnswerReader,
    Conversation,
    ModelFailure,
    ModelHealth,
    ModelPlan,
)
from planner_arm.planning.plan_budget import (
    check_answer_budget,
    refuse_impossible_budget,
    spend_allows,
)
from planner_arm.planning.recorder import PlanRecorder

__all__ = ["Conversation", "ModelFailure", "ModelHealth", "ModelPlan", "PlannerArm"]

# A call with less time than this left cannot finish; the fallback answers instead.
_MIN_CALL_SECONDS = 0.05


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
        self.policy = RetryPolicy(settings.retry, self.clock, jitter_source)
        self.budget = CallBudget.from_settings(settings)
        self.rules = PlanRules.from_settings(settings)
        self.resolver = ArmResolver(settings.arms, settings.arm_aliases)
        self.system_prompt = system_prompt(settings.arms, settings.planning)

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
        if self.llm is None:
            outcome: ModelPlan | ModelFailure = ModelFailure("llm_disabled", NO_MODEL_DETAIL, [])
        else:
            outcome = await self._plan_with_llm(self.llm, request, deadline, spend, None, listener)

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

    async def _plan_with_llm(
        self,
        llm: GuardedLLM,
        request: PlanRequest,
        deadline: Deadline,
        spend: Spend,
        conversation: Conversation | None = None,
        listener: PlanListener | None = None,
    ) -> ModelPlan | ModelFailure:
        # The per-call bounds already keep to the deadline; this catches whatever slips past
        # them (a retry wait, a slow slot), so the fallback still answers in time.
        try:
            async with asyncio.timeout(deadline.remaining()):
                return await self._ask_models(llm, request, deadline, spend, conversation, listener)
        except TimeoutError:
            return ModelFailure("deadline", "the request deadline passed", [])

    def _models_after(self, llm: GuardedLLM, chain: Sequence[str], index: int) -> int:
        """How many later models of the chain could still be asked (circuit not open)."""
        return sum(1 for model in chain[index + 1 :] if llm.may_call(model))

    async def _ask_models(
        self,
        llm: GuardedLLM,
        request: PlanRequest,
        deadline: Deadline,
        spend: Spend,
        conversation: Conversation | None = None,
        listener: PlanListener | None = None,
    ) -> ModelPlan | ModelFailure:
        if conversation is None:
            budget_rule = describe_budget(request.budget)
            user = user_prompt(request.goal, request.constraints, request.context, budget_rule)
            first_messages = initial_messages(self.system_prompt, user)
            read_answer: AnswerReader = partial(self._read_answer, budget=request.budget)
        else:
            first_messages, read_answer = conversation.messages, conversation.read
        max_calls = self.settings.retry.max_llm_calls
        chain = self.settings.model.chain
        failure = ModelFailure("call_budget", "no LLM call was made", [])
        for index, model in enumerate(chain):
            messages: list[Message] = first_messages
            repairs_left = self.settings.retry.repairs_per_model
            retries = 0
            while spend.calls < max_calls:
                models_after = self._models_after(llm, chain, index)
                budget = self.budget.for_call(deadline.remaining(), models_after)
                if budget < _MIN_CALL_SECONDS:
                    if models_after:
                        break  # what is left is kept for the next model
                    return ModelFailure("deadline", "the request deadline passed", failure.errors)
                if not spend_allows(model, messages, spend, request.budget, self.settings):
                    detail = "the next call would pass budget.max_llm_usd"
                    return ModelFailure("spend_budget", detail, failure.errors)
                try:
                    completion = await llm.call(
                        model,
                        messages,
                        deadline,
                        spend,
                        budget=budget,
                        min_call_seconds=_MIN_CALL_SECONDS,
                        sink=listener,
                    )
                except CallSkipped as skip:
                    failure = ModelFailure(skip.reason, f"{model}: {skip.reason}", [])
                    if skip.reason == "saturated":
                        return failure  # every model shares the slots: no point moving on
                    break
                except LLMError as error:
                    self.log.warning(
                        "llm_call_failed", model=model, error=error.code, detail=error.detail
                    )
                    failure = ModelFailure("llm_unavailable", f"{model}: {error}", [])
                    retries += 1
                    decision = self.policy.decide(error, retries)
                    if decision.next is Next.NEXT_MODEL or spend.calls >= max_calls:
                        break
                    models_after = self._models_after(llm, chain, index)
                    if error.code == "timeout" and models_after:
                        break  # it used its whole budget: the next model's turn
                    fits = self.budget.wait_fits(
                        decision.wait, deadline.remaining(), models_after, _MIN_CALL_SECONDS
                    )
                    if not fits:
                        # A long Retry-After, or a backoff the deadline cannot hold: this
                        # model is done for this request, the next one may still answer.
                        if not isinstance(error, LLMRateLimited):
                            failure = ModelFailure("deadline", failure.detail, [])
                        break
                    self.metrics.retries.labels(decision.reason).inc()
                    if not await self.policy.wait(decision.wait, deadline):
                        reason = (
                            "llm_unavailable" if isinstance(error, LLMRateLimited) else "deadline"
                        )
                        return ModelFailure(reason, failure.detail, [])
                    continue

                try:
                    return ModelPlan(model, *read_answer(completion))
                except (PlanParseError, PlanInvalid) as problem:
                    errors = getattr(problem, "errors", [problem.detail])
                    self.metrics.parse_failures.labels(problem.code).inc()
                    self.log.info(
                        "plan_answer_rejected", model=model, error=problem.code, errors=errors
                    )
                    # The problems go in `errors` alone, so a 502 lists each of them once.
                    failure = ModelFailure("invalid_plan", f"{model}: {problem.code}", errors)
                    if repairs_left <= 0:
                        break
                    repairs_left -= 1
                    self.metrics.retries.labels("repair_prompt").inc()
                    messages = with_repair(first_messages, completion.content, errors)
        if spend.calls >= max_calls and failure.reason == "call_budget":
            failure = ModelFailure("call_budget", "the LLM call budget was spent", [])
        return failure

    def _read_answer(
        self, completion: Completion, budget: Budget | None
    ) -> tuple[DraftPlan, ValidPlan]:
        self.log.debug("llm_answer", content=completion.content, finish=completion.finish_reason)
        data, parse_repairs = extract_json(completion.content, truncated=completion.truncated)
        draft = normalise_plan(data, self.resolver)
        draft.repairs[:0] = parse_repairs
        valid = validate_plan(draft, self.rules)
        check_answer_budget(valid.steps, budget)  # over budget: a repair prompt, like a bad plan
        return draft, valid

    async def ask_models(
        self, request: PlanRequest, deadline: Deadline, spend: Spend, conversation: Conversation
    ) -> ModelPlan | ModelFailure:
        """The attempt loop (retries, a repair prompt, the model chain) for another kind of
        request, within `deadline`; a ModelFailure when no usable answer came."""
        if self.llm is None:
            return ModelFailure("llm_disabled", NO_MODEL_DETAIL, [])
        return await self._plan_with_llm(self.llm, request, deadline, spend, conversation)
