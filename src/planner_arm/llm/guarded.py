"""One guarded model call: the model's circuit, a bounded number of calls in flight, the
metrics and the bill. The planner decides what to call and for how long; this decides whether
it may, now, and makes sure a call that runs out of time counts against its model."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import structlog

from planner_arm.clock import Clock, Deadline
from planner_arm.config import Settings
from planner_arm.errors import LLMError, LLMRateLimited, LLMRejected, LLMTransientError
from planner_arm.llm.breaker import CircuitBreakers, CircuitState, ModelCircuit
from planner_arm.llm.client import AnswerSchema, Completion, LLMClient
from planner_arm.llm.prompts import Message
from planner_arm.llm.streamed import AnswerSink
from planner_arm.metrics import PlannerMetrics
from planner_arm.plan.budget import Spend, llm_cost_usd

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


def _gauge_reading(circuit: ModelCircuit) -> Callable[[], float]:
    return lambda: _CIRCUIT_GAUGE[circuit.state]


class GuardedLLM:
    def __init__(
        self, llm: LLMClient, settings: Settings, metrics: PlannerMetrics, clock: Clock
    ) -> None:
        self._llm = llm
        self._settings = settings
        self._metrics = metrics
        self._clock = clock
        self._log = structlog.get_logger("planner_arm.llm.guarded").bind()
        self._breakers = CircuitBreakers(
            settings.model.chain, settings.circuit, clock, self._circuit_changed
        )
        for circuit in self._breakers:
            # Read when scraped, so the gauge shows what /health shows: an open circuit whose
            # cooldown has passed is half-open before any call notices it.
            metrics.circuit_state.labels(circuit.model).set_function(_gauge_reading(circuit))
        self._slots = asyncio.Semaphore(settings.connection.max_in_flight)

    def _circuit_changed(self, model: str, state: CircuitState) -> None:
        # An operator wants to see a model go out of service and come back in the logs, not
        # only in a gauge: opening is a warning, the probe and the recovery are news.
        if state is CircuitState.OPEN:
            self._metrics.circuit_opened.labels(model).inc()
            self._log.warning("circuit_opened", model=model)
        elif state is CircuitState.HALF_OPEN:
            self._log.info("circuit_half_open", model=model)
        else:
            self._log.info("circuit_closed", model=model)

    def circuits(self) -> dict[str, str]:
        """Each model's circuit as a caller would find it now: closed, half_open or open."""
        return self._breakers.states()

    def may_call(self, model: str) -> bool:
        """Would a call to `model` be let through now (its circuit is not open)?"""
        return self._breakers[model].may_allow()

    async def _take_slot(self, deadline: Deadline, min_call_seconds: float, seconds: float) -> bool:
        if not self._slots.locked():
            await self._slots.acquire()  # free: returns at once
            return True
        wait = min(
            self._settings.connection.queue_timeout_seconds,
            deadline.remaining() - min_call_seconds,
            seconds - min_call_seconds,
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
        *,
        seconds: float,
        min_call_seconds: float,
        sink: AnswerSink | None = None,
        answer_schema: AnswerSchema | None = None,
    ) -> Completion:
        """One call of at most `seconds` from now, the wait for a slot included.

        Raises LLMError as the client does, or CallSkipped. A call cut off by the request's
        deadline counts as a timeout of the model, as one that ran out its time does.
        """
        circuit = self._breakers[model]
        if not circuit.allow():
            raise CallSkipped("circuit_open")
        ends_at = self._clock.now() + seconds
        if not await self._take_slot(deadline, min_call_seconds, seconds):
            circuit.release()
            raise CallSkipped("saturated")
        self._metrics.llm_in_flight.inc()
        started = self._clock.now()
        spend.calls += 1
        try:
            timeout = max(0.0, min(ends_at - started, deadline.remaining()))
            completion = await self._llm.complete(
                model, messages, timeout=timeout, sink=sink, answer_schema=answer_schema
            )
        except LLMError as error:
            self._metrics.record_llm_call(model, error.code, self._clock.now() - started)
            if counts_against_model(error):
                retry_after = error.retry_after if isinstance(error, LLMRateLimited) else None
                circuit.record_failure(retry_after)
            else:
                circuit.record_success()  # it answered; this request was the problem
            raise
        except asyncio.CancelledError:
            if deadline.remaining() < min_call_seconds:
                # The request's deadline cut the call: the model did not answer in time.
                self._metrics.record_llm_call(model, "timeout", self._clock.now() - started)
                circuit.record_failure()
            else:
                circuit.release()  # the caller went away: no verdict on the model
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
