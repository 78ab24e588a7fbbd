"""The model-or-rule answer: the models' answer to a job's question, else the rule-based one.

`Answers.answer` asks the model chain (llm/chain.py) within the job's deadline and bill; when
the models give no usable answer, the fallback gate lets the rule-based planner answer (it
counts the fallback and notes it in the answer), or, with the fallback switched off, raises
`PlanningFailed`. The rule-based answer is made in a worker thread, inside a
`rule_based_fallback` span that names the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from anyio import to_thread
from opentelemetry import trace

from planner_arm.errors import PlanningFailed
from planner_arm.llm.chain import ModelAnswer, ModelChain, ModelFailure, Question
from planner_arm.metrics import PlannerMetrics
from planner_arm.strategies.job import Job, Notes

T = TypeVar("T")

# The failure reasons after which the fallback being off answers with this error code.
_FAILED_CODES = {"deadline": "deadline_exceeded", "invalid_plan": "invalid_plan"}


class FallbackGate:
    """The one place that lets the rule-based planner answer for a model that gave none: it
    counts the fallback and says so in the answer, or, with the fallback switched off (and a
    model configured), raises `PlanningFailed`."""

    def __init__(self, enabled: bool, metrics: PlannerMetrics) -> None:
        self._enabled = enabled
        self._metrics = metrics

    def fall_back(self, failure: ModelFailure, notes: Notes) -> None:
        if failure.reason != "llm_disabled" and not self._enabled:
            code = _FAILED_CODES.get(failure.reason, "llm_unavailable")
            raise PlanningFailed(failure.detail, code=code, errors=failure.errors)
        self._metrics.fallbacks.labels(failure.reason).inc()
        # With no model at all the answer says so too: a caller should not have to guess.
        notes.warn_once(f"fallback_used: {failure.reason}: {failure.detail}")


@dataclass(frozen=True)
class Sourced(Generic[T]):
    """An answer and who wrote it: a model (`model`), or the rule-based planner (None)."""

    value: T
    model: str | None

    @property
    def source(self) -> Literal["llm", "fallback"]:
        return "llm" if self.model is not None else "fallback"


@dataclass
class Answers:
    """The models (with the fallback gate after them): ask -> read -> fall back, the one path
    of every strategy from a question to an answer."""

    models: ModelChain
    gate: FallbackGate
    tracer: trace.Tracer = field(default_factory=trace.NoOpTracer)

    @property
    def configured(self) -> bool:
        return self.models.configured

    async def ask(self, job: Job[Any], question: Question[T]) -> ModelAnswer[T] | ModelFailure:
        """The models' answer for `job` (its deadline, its bill, its listener), or why there
        is none."""
        return await self.models.ask(question, job.deadline, job.usage, job.listener)

    async def answer(
        self, job: Job[Any], question: Question[T], by_rule: Callable[[], T]
    ) -> Sourced[T]:
        """The models' answer, or through the fallback gate the rule-based one."""
        outcome = await self.ask(job, question)
        if isinstance(outcome, ModelAnswer):
            return Sourced(outcome.value, outcome.model)
        with self.falling_back(outcome, job.notes):
            # CPU work that grows with the plan (a replan of hundreds of steps): in a worker
            # thread, so the event loop keeps answering every other request meanwhile.
            return Sourced(await to_thread.run_sync(by_rule), None)

    @contextmanager
    def falling_back(self, failure: ModelFailure, notes: Notes) -> Iterator[None]:
        """Through the gate (which may raise `PlanningFailed`), then the `rule_based_fallback`
        span the rule-based answer is made in."""
        self.gate.fall_back(failure, notes)
        attributes = {"planner.fallback.reason": failure.reason}
        with self.tracer.start_as_current_span("rule_based_fallback", attributes=attributes):
            yield
