"""One guarded model call: the model's circuit, a bounded number of calls in flight, the
metrics and the bill. The planner decides what to call; this decides whether it may, now."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from planner_arm.clock import Clock, Deadline
from planner_arm.config import Settings
from planner_arm.errors import LLMError, LLMRateLimited, LLMRejected, LLMTransientError
from planner_arm.llm.breaker import CircuitBreakers, CircuitState
from planner_arm.llm.client import Completion, LLMClient
from planner_arm.llm.prompts import Message
from planner_arm.metrics import PlannerMetrics
from planner_arm.plan.spend import Spend, llm_cost_usd

# Rejections that say the model (or our key for it) is unusable, not that this request is bad.
_MODEL_DOWN_CODES = frozenset({"auth_failed", "forbidden", "model_not_found"})
_CIRCUIT_GAUGE = {CircuitState.CLOSED: 0, CircuitState.HALF_OPEN: 1, CircuitState.OPEN: 2}


class CallSkipped(Exception):
    """No call was made: `reason` is circuit_open or saturated."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def counts_against_model(error: LLMError) -> bool:
    if isinstance(error, LLMTransientError | LLMRateLimited):
        return True
    return isinstance(error, LLMRejected) and error.code in _MODEL_DOWN_CODES


class GuardedLLM:
    def __init__(
        self, llm: LLMClient, settings: Settings, metrics: PlannerMetrics, clock: Clock
    ) -> None:
        self._llm = llm
        self._settings = settings
        self._metrics = metrics
        self._clock = clock
        self.breakers = CircuitBreakers(
            settings.model.chain, settings.circuit, clock, self._circuit_changed
        )
        for model in settings.model.chain:
            metrics.circuit_state.labels(model).set(0)
        self._slots = asyncio.Semaphore(settings.connection.max_in_flight)

    def _circuit_changed(self, model: str, state: CircuitState) -> None:
        self._metrics.circuit_state.labels(model).set(_CIRCUIT_GAUGE[state])
        if state is CircuitState.OPEN:
            self._metrics.circuit_opened.labels(model).inc()

    async def _take_slot(self, deadline: Deadline, min_call_seconds: float) -> bool:
        if not self._slots.locked():
            await self._slots.acquire()  # free: returns at once
            return True
        wait = min(
            self._settings.connection.queue_timeout_seconds,
            deadline.remaining() - min_call_seconds,
        )
        if wait <= 0:
            return False
        try:
            async with asyncio.timeout(wait):
                await self._slots.acquire()
        except TimeoutError:
            return False
        return True

    async def call(
        self,
        model: str,
        messages: Sequence[Message],
        deadline: Deadline,
        spend: Spend,
        min_call_seconds: float,
    ) -> Completion:
        """One call within the deadline; raises LLMError as the client does, or CallSkipped."""
        circuit = self.breakers[model]
        if not circuit.allow():
            raise CallSkipped("circuit_open")
        if not await self._take_slot(deadline, min_call_seconds):
            circuit.release()
            raise CallSkipped("saturated")
        self._metrics.llm_in_flight.inc()
        started = self._clock.now()
        spend.calls += 1
        try:
            completion = await self._llm.complete(model, messages, timeout=deadline.remaining())
        except LLMError as error:
            self._metrics.record_llm_call(model, error.code, self._clock.now() - started)
            if counts_against_model(error):
                retry_after = error.retry_after if isinstance(error, LLMRateLimited) else None
                circuit.record_failure(retry_after)
            else:
                circuit.record_success()  # it answered; this request was the problem
            raise
        except BaseException:
            circuit.release()
            raise
        finally:
            self._slots.release()
            self._metrics.llm_in_flight.dec()
        circuit.record_success()
        self._account(model, completion, spend)
        return completion

    def _account(self, model: str, completion: Completion, spend: Spend) -> None:
        usd = llm_cost_usd(
            model, completion.prompt_tokens, completion.completion_tokens, self._settings.pricing
        )
        spend.prompt_tokens += completion.prompt_tokens
        spend.completion_tokens += completion.completion_tokens
        spend.usd += usd
        if not completion.usage_reported:
            spend.warn_once(f"usage_not_reported: {model}")
        elif usd == 0.0 and completion.prompt_tokens:
            spend.warn_once(f"no_price_for_model: {model}")
        self._metrics.record_llm_call(
            model,
            "ok",
            completion.latency_seconds,
            completion.prompt_tokens,
            completion.completion_tokens,
            usd,
        )
