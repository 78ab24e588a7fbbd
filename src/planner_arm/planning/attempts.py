"""The attempt loop: ask the models of the chain for a usable answer within the deadline.

Per model: calls bounded by the call budget, retries with backoff where the error allows and
the deadline holds them, one repair prompt for an answer that breaks a rule (or one with a
quality problem only the model can mend), then the next model. The loop never raises for a
model's failure: it answers with the plan, or with the `ModelFailure` the fallback needs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import structlog

from planner_arm.clock import Deadline
from planner_arm.config import Settings
from planner_arm.errors import LLMError, LLMRateLimited, PlanParseError
from planner_arm.errors import PlanValidationError as PlanInvalid
from planner_arm.llm.guarded import CallSkipped, GuardedLLM
from planner_arm.llm.prompts import Message, with_repair
from planner_arm.llm.retry import Next, RetryPolicy
from planner_arm.metrics import PlannerMetrics
from planner_arm.plan.plan_quality import QualityProblem
from planner_arm.plan.schemas import Budget
from planner_arm.plan.spend import Spend
from planner_arm.planning.call_budget import CallBudget
from planner_arm.planning.listener import PlanListener
from planner_arm.planning.outcomes import Conversation, ModelFailure, ModelPlan, QualityKept
from planner_arm.planning.plan_budget import spend_allows

# A call with less time than this left cannot finish; the fallback answers instead.
MIN_CALL_SECONDS = 0.05

# What only the model can mend in a usable plan; none: nothing to ask for.
QualityCheck = Callable[[ModelPlan], list[QualityProblem]]


class AttemptLoop:
    def __init__(
        self,
        llm: GuardedLLM,
        settings: Settings,
        metrics: PlannerMetrics,
        policy: RetryPolicy,
        budget: CallBudget,
    ) -> None:
        self.llm = llm
        self.settings = settings
        self.metrics = metrics
        self.policy = policy
        self.budget = budget
        # Bound once: a module-level lazy logger rebuilds itself on every call.
        self.log = structlog.get_logger("planner_arm.planning.attempts").bind()

    async def run(
        self,
        conversation: Conversation,
        deadline: Deadline,
        spend: Spend,
        caller_budget: Budget | None = None,
        *,
        quality: QualityCheck | None = None,
        listener: PlanListener | None = None,
    ) -> ModelPlan | ModelFailure:
        """The model's plan for `conversation` within `deadline`, or why there is none.

        `caller_budget` is the request's (its spend limit stops calls); `quality` names what
        only the model can mend in a usable plan (one repair prompt, then the plan with
        warnings)."""
        # The per-call bounds already keep to the deadline; this catches whatever slips past
        # them (a retry wait, a slow slot), so the fallback still answers in time.
        try:
            async with asyncio.timeout(deadline.remaining()):
                return await self._ask_models(
                    conversation, deadline, spend, caller_budget, quality, listener
                )
        except TimeoutError:
            return ModelFailure("deadline", "the request deadline passed", [])

    def _models_after(self, chain: Sequence[str], index: int) -> int:
        """How many later models of the chain could still be asked (circuit not open)."""
        return sum(1 for model in chain[index + 1 :] if self.llm.may_call(model))

    async def _ask_models(
        self,
        conversation: Conversation,
        deadline: Deadline,
        spend: Spend,
        caller_budget: Budget | None,
        quality: QualityCheck | None,
        listener: PlanListener | None,
    ) -> ModelPlan | ModelFailure:
        first_messages, read_answer = conversation.messages, conversation.read
        llm = self.llm
        max_calls = self.settings.retry.max_llm_calls
        chain = self.settings.model.chain
        failure = ModelFailure("call_budget", "no LLM call was made", [])
        # A usable plan with quality problems, kept while a repair is tried: whatever ends the
        # loop after it, this plan (with its warnings) beats the fallback.
        kept: QualityKept | None = None

        def settle(outcome: ModelFailure) -> ModelPlan | ModelFailure:
            return outcome if kept is None else kept.plan

        for index, model in enumerate(chain):
            messages: list[Message] = first_messages
            repairs_left = self.settings.retry.repairs_per_model
            retries = 0
            while spend.calls < max_calls:
                models_after = self._models_after(chain, index)
                budget = self.budget.for_call(deadline.remaining(), models_after)
                if budget < MIN_CALL_SECONDS:
                    if models_after:
                        break  # what is left is kept for the next model
                    return settle(
                        ModelFailure("deadline", "the request deadline passed", failure.errors)
                    )
                if not spend_allows(model, messages, spend, caller_budget, self.settings):
                    detail = "the next call would pass budget.max_llm_usd"
                    return settle(ModelFailure("spend_budget", detail, failure.errors))
                try:
                    completion = await llm.call(
                        model,
                        messages,
                        deadline,
                        spend,
                        budget=budget,
                        min_call_seconds=MIN_CALL_SECONDS,
                        sink=listener,
                    )
                except CallSkipped as skip:
                    failure = ModelFailure(skip.reason, f"{model}: {skip.reason}", [])
                    if skip.reason == "saturated":
                        return settle(failure)  # every model shares the slots: moving on is futile
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
                    models_after = self._models_after(chain, index)
                    if error.code == "timeout" and models_after:
                        break  # it used its whole budget: the next model's turn
                    fits = self.budget.wait_fits(
                        decision.wait, deadline.remaining(), models_after, MIN_CALL_SECONDS
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
                        return settle(ModelFailure(reason, failure.detail, []))
                    continue

                try:
                    answer = ModelPlan(model, *read_answer(completion))
                    problems = quality(answer) if quality is not None else []
                    if not problems:
                        return answer
                    kept = QualityKept.better(kept, answer, problems)
                    if repairs_left <= 0:
                        return kept.plan
                    repairs_left -= 1
                    self.metrics.retries.labels("quality_repair").inc()
                    messages = with_repair(
                        first_messages,
                        completion.content,
                        [problem.message for problem in problems],
                        usable=True,
                    )
                    continue
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
        return settle(failure)
