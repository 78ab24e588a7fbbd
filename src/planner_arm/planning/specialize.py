"""InputFiller: one step's arm input, from the model or by rule.

prompt (goal, step, earlier steps, the arm's schema; structured output where the model is
configured for it) -> tolerant parse -> schema and reference check -> on failure ONE repair
prompt -> else the rule-based input (plan/input_rules.py), with the reason. Every call goes
through the planner's GuardedLLM (circuit, call slots, metrics, spend) within the request's
deadline and the caller's `max_llm_usd`; a model error moves on to the next model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import structlog

from planner_arm.clock import Deadline
from planner_arm.errors import LLMError, LLMUnsupportedFormat, PlanParseError
from planner_arm.errors import PlanValidationError as InputInvalid
from planner_arm.llm.client import AnswerSchema, Completion
from planner_arm.llm.guarded import CallSkipped, GuardedLLM
from planner_arm.llm.prompts import Message
from planner_arm.llm.retry import Next
from planner_arm.llm.specialize_prompts import specialize_messages, specialize_repair
from planner_arm.pipeline.parsing import extract_json
from planner_arm.plan.arm_inputs import check_input, input_model, input_schema
from planner_arm.plan.input_rules import rule_input
from planner_arm.plan.schemas import Budget, PlanStep
from planner_arm.plan.spend import Spend
from planner_arm.planning.plan_budget import reserve_call
from planner_arm.planning.planner import PlannerArm

InputSource = Literal["llm", "rule"]
# A call with less time than this left cannot finish; the rule answers instead.
_MIN_CALL_SECONDS = 0.05

log = structlog.get_logger("planner_arm.planning.specialize")


@dataclass(frozen=True)
class FilledInput:
    """A step's input, who wrote it, and (by rule while a model was configured) why."""

    input: dict[str, Any]
    source: InputSource
    model: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class StepToFill:
    """What a filler needs to know about one step: it, the plan's goal and the steps it may
    read (those it depends on, directly or not)."""

    step: PlanStep
    goal: str | None
    earlier: Sequence[PlanStep]

    @property
    def earlier_ids(self) -> frozenset[int]:
        return frozenset(item.step for item in self.earlier)


class InputFiller:
    """Fills step inputs with the planner's guarded model, retry policy and settings."""

    def __init__(self, planner: PlannerArm) -> None:
        self._planner = planner
        self._settings = planner.settings

    @property
    def llm_enabled(self) -> bool:
        return self._planner.llm is not None

    def by_rule(self, step: PlanStep, reason: str | None) -> FilledInput:
        filled = FilledInput(rule_input(step), "rule", None, reason)
        self._count(filled)
        return filled

    def _count(self, filled: FilledInput) -> None:
        metrics = self._planner.metrics
        metrics.child(metrics.specializations, filled.source).inc()

    async def fill(
        self,
        target: StepToFill,
        deadline: Deadline,
        spend: Spend,
        *,
        budget: Budget | None = None,
        slots: asyncio.Semaphore | None = None,
    ) -> FilledInput:
        """The step's input within `deadline`: the model's when it gives a valid one, else the
        rule's. `slots` bounds how many steps of one plan ask the model at once."""
        llm = self._planner.llm
        if llm is None:
            return self.by_rule(target.step, None)
        try:
            async with asyncio.timeout(deadline.remaining()):
                if slots is None:
                    found = await self._ask(llm, target, deadline, spend, budget)
                else:
                    async with slots:
                        found = await self._ask(llm, target, deadline, spend, budget)
        except TimeoutError:
            found = "deadline: the request deadline passed"
        if isinstance(found, FilledInput):
            self._count(found)
            return found
        return self.by_rule(target.step, found)

    async def _ask(
        self,
        llm: GuardedLLM,
        target: StepToFill,
        deadline: Deadline,
        spend: Spend,
        budget: Budget | None,
    ) -> FilledInput | str:
        """The model's valid input, or why there is none."""
        step = target.step
        schema = input_schema(step.required_arm)
        answer_schema = AnswerSchema(f"{step.required_arm}_input", schema)
        first = specialize_messages(step.required_arm, schema, target.goal, step, target.earlier)
        chain = self._settings.model.chain
        reason = "call_budget: no model call was possible"
        calls_left = self._settings.retry.max_llm_calls
        repaired = False
        for index, model in enumerate(chain):
            messages: list[Message] = first
            retries = 0
            while calls_left > 0:
                models_after = sum(1 for later in chain[index + 1 :] if llm.may_call(later))
                call_seconds = self._planner.budget.for_call(deadline.remaining(), models_after)
                if call_seconds < _MIN_CALL_SECONDS:
                    if models_after:
                        break
                    return "deadline: the request deadline passed"
                # Set aside: the plan's other steps ask the model at the same time.
                reserved = reserve_call(model, messages, spend, budget, self._settings)
                if reserved is None:
                    return "spend_budget: the next call would pass budget.max_llm_usd"
                calls_left -= 1
                try:
                    completion = await llm.call(
                        model,
                        messages,
                        deadline,
                        spend,
                        budget=call_seconds,
                        min_call_seconds=_MIN_CALL_SECONDS,
                        answer_schema=answer_schema,
                    )
                except CallSkipped as skip:
                    reason = f"{skip.reason}: {model}"
                    if skip.reason == "saturated":
                        return reason
                    break
                except LLMError as error:
                    log.info("input_call_failed", model=model, error=error.code, step=step.step)
                    reason = f"llm_unavailable: {model}: {error.code}"
                    if isinstance(error, LLMUnsupportedFormat):
                        continue  # the client now asks this model without response_format
                    retries += 1
                    decision = self._planner.policy.decide(error, retries)
                    if decision.next is Next.NEXT_MODEL or retries > 1:
                        break
                    if not await self._planner.policy.wait(decision.wait, deadline):
                        return "deadline: the request deadline passed"
                    continue
                finally:
                    spend.reserved -= reserved  # paid now (GuardedLLM added the cost), or never
                try:
                    value = self._read(completion, step, target.earlier_ids)
                except (PlanParseError, InputInvalid) as problem:
                    errors = list(getattr(problem, "errors", None) or [problem.detail])
                    log.info("input_answer_rejected", model=model, step=step.step, errors=errors)
                    if repaired:
                        return f"invalid_input: {model}: {'; '.join(errors)[:300]}"
                    repaired = True
                    messages = specialize_repair(first, completion.content, errors)
                    continue
                return FilledInput(value, "llm", model)
        return reason

    def _read(self, completion: Completion, step: PlanStep, earlier: frozenset[int]) -> Any:
        data, _ = extract_json(completion.content, truncated=completion.truncated)
        model = input_model(step.required_arm)
        # A model that wraps the object ({"input": {...}}) said the right thing.
        if (
            isinstance(data, dict)
            and set(data) == {"input"}
            and isinstance(data["input"], dict)
            and "input" not in model.model_fields
        ):
            data = data["input"]
        return check_input(step.required_arm, data, earlier)
