"""The attempt loop: ask the models of the chain for a usable answer within the deadline.

Every question the service puts to a model goes through `ModelChain.ask`: a plan, a replan,
the phases and nodes of a hierarchical plan, a sub-plan, a step's input. Per model: calls
bounded by the time each may take (`CallTime`), retries with backoff where the error allows
and the deadline holds them, a repair prompt for an answer that breaks a rule (or one with a
problem only the model can mend), then the next model. Before each call the gate asks
whether the request may spend another call, the seconds and the dollars it needs (the
request's `Usage` carries its cap and whose calls they are).

The loop knows nothing of plans: a `Question` brings its messages, how to read an answer
(raising `PlanParseError` or `PlanValidationError` for one the model must mend), how to send
one back, and what only the model can mend. It never raises for a model's failure: it
answers with the model's answer, or with the `ModelFailure` that says why there is none;
what comes then (the rule-based answer) is the caller's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from enum import Enum
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

import structlog
from anyio import to_thread

from planner_arm.clock import Deadline
from planner_arm.config import Price, RetrySettings
from planner_arm.errors import LLMError, LLMRateLimited, PlanParseError
from planner_arm.errors import PlanValidationError as AnswerInvalid
from planner_arm.llm.client import AnswerSchema, AnswerSink, Completion, Message
from planner_arm.llm.guarded import CallSkipped, FailureSeen, GuardedLLM
from planner_arm.llm.retry import Next, RetryPolicy
from planner_arm.llm.usage import Usage, estimate_call_usd, price_for
from planner_arm.metrics import PlannerMetrics

T = TypeVar("T")

# A call with less time than this left cannot finish; the rule-based answer comes instead.
MIN_CALL_SECONDS = 0.05
# The longest answer a light question's reader takes on the event loop (about a millisecond
# of parsing); a longer one is read in a worker thread like any other.
LIGHT_ANSWER_CHARS = 16_000
# Why an answer came from the rules when no model is configured, in the answer's warning.
NO_MODEL_DETAIL = "no model is configured (set OPENAI_API_KEY or LLM_BASE_URL to use one)"


@dataclass
class ModelFailure:
    """Why the models produced no usable answer: for the fallback metric and the 5xx code."""

    # llm_disabled | llm_unavailable | invalid_plan | deadline | call_budget | circuit_open
    # | saturated | spend_budget
    reason: str
    detail: str
    errors: list[str]


NO_MODEL = ModelFailure("llm_disabled", NO_MODEL_DETAIL, [])


class ModelAnswer(NamedTuple, Generic[T]):
    """A model's usable answer: who wrote it, and what its text was read as. A tuple, built
    once per answer."""

    model: str
    value: T


class Mendable(Protocol):
    """A problem of a usable answer that only the model can mend (a plan's `QualityProblem`):
    its code, and its message, which the repair prompt says."""

    @property
    def code(self) -> str: ...

    @property
    def message(self) -> str: ...


# Raises PlanParseError or PlanValidationError for an answer the model must mend.
AnswerReader = Callable[[Completion], T]
# The messages that send an answer back: (first messages, its text, the problems, usable).
RepairWriter = Callable[[list[Message], str | None, list[str], bool], list[Message]]


@dataclass(frozen=True)
class Question(Generic[T]):
    """What a caller asks the models, and how it reads their answers and sends one back.

    `quality` names what only the model can mend in a usable answer: it earns one repair
    prompt, and whatever ends the loop after it, the answer is kept with `noted` (its problems
    as warnings) rather than lost to the fallback. `answer_schema` is the answer's JSON
    schema, sent where the model takes one (`model.response_format: json_schema`). `light`:
    reading an answer takes about a millisecond whatever came before (a plan of a few steps,
    a step's input), so a short one is read on the event loop, where a hop to a worker thread
    and back would cost more than the read; else (a revision merged onto a plan of any size)
    every answer is read in a worker thread."""

    messages: list[Message]
    read: AnswerReader[T]
    repair: RepairWriter
    answer_schema: AnswerSchema | None = None
    light: bool = False
    quality: Callable[[T], Sequence[Mendable]] | None = None
    noted: Callable[[T, Sequence[Mendable]], T] | None = None


@dataclass(frozen=True)
class CallTime:
    """How long one model call may take: its own timeout, bounded by what the deadline leaves
    once time is kept back for the next model of the chain and for the fallback.

    Without the bound a hanging model would run until the deadline cancelled it: never counted
    as a timeout, its circuit never opening, and no time left for the next model."""

    call_timeout: float
    next_model_reserve: float
    fallback_reserve: float

    def kept_back(self, remaining: float, models_after: int) -> float:
        """Seconds of `remaining` that this model may not use: the fallback's share, and
        the next model's when there is one (never more than half of what is left)."""
        usable = max(0.0, remaining - self.fallback_reserve)
        next_model = min(self.next_model_reserve, usable / 2) if models_after else 0.0
        return self.fallback_reserve + next_model

    def for_call(self, remaining: float, models_after: int) -> float:
        """Seconds the next call of this model may take; 0 when it has no time at all."""
        usable = remaining - self.kept_back(remaining, models_after)
        return max(0.0, min(self.call_timeout, usable))

    def wait_fits(self, wait: float, remaining: float, models_after: int) -> bool:
        """Would a retry after `wait` seconds still leave its call `MIN_CALL_SECONDS`?"""
        return wait + MIN_CALL_SECONDS <= remaining - self.kept_back(remaining, models_after)


@dataclass(frozen=True)
class ModelHealth:
    """The models as /health reports them: each circuit, whether any is not closed, and the
    last failed call of any of them (kept after its circuit opens, so the cause is not lost)."""

    circuits: dict[str, str]
    last_failure: FailureSeen | None = None

    @property
    def degraded(self) -> bool:
        return any(state != "closed" for state in self.circuits.values())


class _KeptAnswer(Generic[T]):
    """A usable answer with quality problems, kept while the model is asked to mend them: the
    one with the fewest problems, as `noted` writes it."""

    def __init__(self) -> None:
        self.answer: ModelAnswer[T] | None = None
        self._problems = 0

    def offer(
        self, question: Question[T], answer: ModelAnswer[T], problems: Sequence[Mendable]
    ) -> None:
        if self.answer is not None and self._problems <= len(problems):
            return
        value = answer.value if question.noted is None else question.noted(answer.value, problems)
        self.answer, self._problems = ModelAnswer(answer.model, value), len(problems)


class _Turn(Enum):
    NEXT_MODEL = "next_model"  # this model is done for this question
    RETRY = "retry"  # the same model again


@dataclass(frozen=True)
class _Go:
    """What the gate lets the next call spend: seconds, and the dollars set aside for it."""

    seconds: float
    reserved: float


@dataclass(frozen=True)
class _SendBack:
    """An answer to send back with its problems: `usable` when it was kept (quality problems
    only), else it broke a rule."""

    problems: list[str]
    usable: bool


@dataclass
class ModelChain:
    """The models of the chain behind their guard (none when no model is configured), and the
    one loop that asks them."""

    llm: GuardedLLM | None
    _: KW_ONLY
    models: list[str]
    retry: RetrySettings
    call_time: CallTime
    policy: RetryPolicy
    pricing: dict[str, Price]
    max_tokens: int
    metrics: PlannerMetrics
    # Bound once: a module-level lazy logger rebuilds itself on every call.
    log: Any = field(
        init=False, default_factory=lambda: structlog.get_logger("planner_arm.llm.chain")
    )

    @property
    def configured(self) -> bool:
        return self.llm is not None

    def health(self) -> ModelHealth:
        """Each model's circuit now; empty when no model is configured."""
        if self.llm is None:
            return ModelHealth({})
        return ModelHealth(self.llm.circuits(), self.llm.last_failure())

    async def ask(
        self,
        question: Question[T],
        deadline: Deadline,
        usage: Usage,
        sink: AnswerSink | None = None,
    ) -> ModelAnswer[T] | ModelFailure:
        """The models' answer to `question` within `deadline`, or why there is none.

        Each call is added to `usage`, whose cap (`limit_usd`) stops calls whose likely cost
        would pass it and whose `owner` takes the call slots; `sink` watches each answer
        being written."""
        if self.llm is None:
            return NO_MODEL
        run = _Run(self, self.llm, question, deadline, usage, sink)
        # The per-call bounds already keep to the deadline; this catches whatever slips past
        # them (a retry wait, a slow slot), so the fallback still answers in time.
        try:
            async with asyncio.timeout(deadline.remaining()):
                return await run.through_the_chain()
        except TimeoutError:
            return run.settle(ModelFailure("deadline", "the request deadline passed", []))

    async def aclose(self) -> None:
        """Stop what the guard runs of its own (the hang checks): the process is closing."""
        if self.llm is not None:
            await self.llm.aclose()

    def models_after(self, index: int) -> int:
        """How many later models of the chain could still be asked (circuit not open)."""
        llm = self.llm
        return sum(
            1 for model in self.models[index + 1 :] if llm is not None and llm.may_call(model)
        )

    def reserve(self, model: str, messages: list[Message], usage: Usage) -> float | None:
        """The dollar gate: the next call's likely cost, set aside in `usage.reserved` until
        it is paid (calls of one request may run side by side); None when it would take the
        dollars, with what the calls in flight set aside, past the cap."""
        if usage.limit_usd is None:
            return 0.0
        prompt_chars = sum(len(message["content"]) for message in messages)
        price = price_for(model, self.pricing)
        estimate = estimate_call_usd(usage, prompt_chars, self.max_tokens, price)
        if not usage.within_limit(estimate):
            return None
        usage.reserved += estimate
        return estimate


class _Run(Generic[T]):
    """One question's way through the chain: the calls left, the last failure, and the answer
    kept while a quality repair is tried."""

    def __init__(
        self,
        chain: ModelChain,
        llm: GuardedLLM,
        question: Question[T],
        deadline: Deadline,
        usage: Usage,
        sink: AnswerSink | None,
    ) -> None:
        self.chain, self.llm, self.question = chain, llm, question
        self.deadline, self.usage, self.sink = deadline, usage, sink
        self.calls_left = chain.retry.max_llm_calls
        self.failure = ModelFailure("call_budget", "no LLM call was made", [])
        self.kept: _KeptAnswer[T] = _KeptAnswer()

    def settle(self, failure: ModelFailure) -> ModelAnswer[T] | ModelFailure:
        """How the loop ends without a clean answer: the kept answer beats the fallback."""
        return failure if self.kept.answer is None else self.kept.answer

    async def through_the_chain(self) -> ModelAnswer[T] | ModelFailure:
        for index, model in enumerate(self.chain.models):
            ended = await self._with_model(index, model)
            if ended is not None:
                return ended
        if self.calls_left <= 0 and self.failure.reason == "call_budget":
            self.failure = ModelFailure("call_budget", "the LLM call budget was spent", [])
        return self.settle(self.failure)

    async def _with_model(self, index: int, model: str) -> ModelAnswer[T] | ModelFailure | None:
        """The end of the loop, or None to go on to the next model."""
        messages = self.question.messages
        repairs_left = self.chain.retry.repairs_per_model
        retries = 0
        while self.calls_left > 0:
            go = self._gate(index, model, messages)
            if not isinstance(go, _Go):
                return None if isinstance(go, _Turn) else go
            left_before = self.deadline.remaining()
            outcome = await self._call(model, messages, go)
            if isinstance(outcome, CallSkipped):
                self.failure = ModelFailure(outcome.reason, self._skipped(model, outcome), [])
                # Every model shares the call slots: moving on is futile.
                return self.settle(self.failure) if outcome.reason == "saturated" else None
            if isinstance(outcome, LLMError):
                retries += 1
                step = await self._after_error(index, model, outcome, retries)
                if step is _Turn.RETRY:
                    continue
                return None if isinstance(step, _Turn) else step
            verdict = await self._read(model, outcome)
            if isinstance(verdict, ModelAnswer):
                return verdict
            if repairs_left <= 0:
                # A kept answer ends the loop; a broken one leaves it to the next model.
                return self.kept.answer if verdict.usable else None
            took = left_before - self.deadline.remaining()
            if verdict.usable and self.deadline.remaining() < took:
                # A usable plan in hand: a quality repair that would take as long as this
                # call did cannot finish in time, so it is not spent.
                return self.kept.answer
            repairs_left -= 1
            messages = self._send_back(outcome, verdict)
        return None

    def _skipped(self, model: str, skipped: CallSkipped) -> str:
        """Why `model` was not called: an open circuit says the failure that opened it."""
        cause = self.llm.last_failure(model) if skipped.reason == "circuit_open" else None
        if cause is None:
            return f"{model}: {skipped.reason}"
        return f"{model}: {cause.code}: {cause.detail}"

    def _gate(
        self, index: int, model: str, messages: list[Message]
    ) -> _Go | _Turn | ModelAnswer[T] | ModelFailure:
        """May the request spend another call on `model`, its seconds and its likely dollars;
        else the next model's turn, or the end of the loop."""
        models_after = self.chain.models_after(index)
        seconds = self.chain.call_time.for_call(self.deadline.remaining(), models_after)
        if seconds < MIN_CALL_SECONDS:
            if models_after:
                return _Turn.NEXT_MODEL  # what is left is kept for the next model
            failure = ModelFailure("deadline", "the request deadline passed", self.failure.errors)
            return self.settle(failure)
        reserved = self.chain.reserve(model, messages, self.usage)
        if reserved is None:
            detail = "the next call would pass budget.max_llm_usd"
            return self.settle(ModelFailure("spend_budget", detail, self.failure.errors))
        return _Go(seconds, reserved)

    async def _call(
        self, model: str, messages: list[Message], go: _Go
    ) -> Completion | LLMError | CallSkipped:
        try:
            completion = await self.llm.call(
                model,
                messages,
                self.deadline,
                self.usage,
                seconds=go.seconds,
                min_call_seconds=MIN_CALL_SECONDS,
                sink=self.sink,
                answer_schema=self.question.answer_schema,
            )
        except CallSkipped as skipped:
            return skipped  # no call was made: none is counted
        except LLMError as error:
            self.calls_left -= 1
            return error
        finally:
            self.usage.reserved -= go.reserved  # paid now (the guard added the cost), or never
        self.calls_left -= 1
        return completion

    async def _after_error(
        self, index: int, model: str, error: LLMError, retries: int
    ) -> _Turn | ModelAnswer[T] | ModelFailure:
        chain = self.chain
        chain.log.warning("llm_call_failed", model=model, error=error.code, detail=error.detail)
        self.failure = ModelFailure("llm_unavailable", f"{model}: {error}", [])
        decision = chain.policy.decide(error, retries)
        if decision.next is Next.NEXT_MODEL or self.calls_left <= 0:
            return _Turn.NEXT_MODEL
        models_after = chain.models_after(index)
        if error.code == "timeout" and models_after:
            return _Turn.NEXT_MODEL  # it used its whole time: the next model's turn
        if not chain.call_time.wait_fits(decision.wait, self.deadline.remaining(), models_after):
            # A long Retry-After, or a backoff the deadline cannot hold: this model is done
            # for this request, the next one may still answer.
            if not isinstance(error, LLMRateLimited):
                self.failure = ModelFailure("deadline", self.failure.detail, [])
            return _Turn.NEXT_MODEL
        chain.metrics.retries.labels(decision.reason).inc()
        if not await chain.policy.wait(decision.wait, self.deadline):
            reason = "llm_unavailable" if isinstance(error, LLMRateLimited) else "deadline"
            return self.settle(ModelFailure(reason, self.failure.detail, []))
        return _Turn.RETRY

    async def _read(self, model: str, completion: Completion) -> ModelAnswer[T] | _SendBack:
        """The answer when it is usable and clean, else what to send back."""
        question, chain = self.question, self.chain
        chain.log.debug(
            "llm_answer", model=model, content=completion.content, finish=completion.finish_reason
        )
        try:
            if question.light and len(completion.content or "") <= LIGHT_ANSWER_CHARS:
                value = question.read(completion)
            else:  # reading a large answer (a merge onto a large plan) is CPU work: off the loop
                value = await to_thread.run_sync(question.read, completion)
            answer = ModelAnswer(model, value)
        except (PlanParseError, AnswerInvalid) as problem:
            errors = list(getattr(problem, "errors", None) or [problem.detail])
            chain.metrics.parse_failures.labels(problem.code).inc()
            chain.log.info("plan_answer_rejected", model=model, error=problem.code, errors=errors)
            # The problems go in `errors` alone, so a 502 lists each of them once.
            self.failure = ModelFailure("invalid_plan", f"{model}: {problem.code}", errors)
            return _SendBack(errors, usable=False)
        # What only the model can mend is judged on the loop: a few words of each step.
        problems = question.quality(answer.value) if question.quality is not None else []
        if not problems:
            return answer
        self.kept.offer(question, answer, problems)
        return _SendBack([problem.message for problem in problems], usable=True)

    def _send_back(self, completion: Completion, verdict: _SendBack) -> list[Message]:
        reason = "quality_repair" if verdict.usable else "repair_prompt"
        self.chain.metrics.retries.labels(reason).inc()
        question = self.question
        return question.repair(
            question.messages, completion.content, verdict.problems, verdict.usable
        )
