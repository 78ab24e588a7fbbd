"""The attempt loop: ask the models of the chain for a usable answer within the deadline.

Every question the service puts to a model goes through `ModelChain.ask`: a plan, a replan,
the phases and nodes of a hierarchical plan, a sub-plan, a step's input. Per model: calls
bounded by the time each may take (`CallTime`), retries with backoff where the error allows
and the deadline holds them, a repair prompt for an answer that breaks a rule (or one with a
quality problem only the model can mend), then the next model. Before each call the gate asks
whether the request may spend another call, the seconds and the dollars it needs.

The loop never raises for a model's failure: it answers with the model's answer, or with the
`ModelFailure` that says why there is none. `ModelChain.answer` puts the fallback after it:
the rule-based answer when the model gave none, or `PlanningFailed` when the fallback is off.
The rule-based answer is made inside a `rule_based_fallback` span that names the reason.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import KW_ONLY, dataclass, field, fields, replace
from enum import Enum
from typing import Any, Generic, Literal, Protocol, Self, TypeVar

import structlog
from anyio import to_thread
from opentelemetry import trace

from planner_arm.clock import Deadline
from planner_arm.config import Price, RetrySettings, WorkedExample
from planner_arm.errors import LLMError, LLMRateLimited, PlanningFailed, PlanParseError
from planner_arm.errors import PlanValidationError as AnswerInvalid
from planner_arm.llm.client import AnswerSchema, AnswerSink, Completion
from planner_arm.llm.guarded import CallSkipped, GuardedLLM
from planner_arm.llm.prompts import Message, with_repair
from planner_arm.llm.retry import Next, RetryPolicy
from planner_arm.metrics import PlannerMetrics
from planner_arm.plan.arms import ArmResolver
from planner_arm.plan.budget import Spend, estimate_call_usd, price_for
from planner_arm.plan.quality import QualityProblem
from planner_arm.plan.schemas import Budget, PlanRequest
from planner_arm.plan.validation import PlanRules
from planner_arm.principal import ANONYMOUS, Principal
from planner_arm.strategies.toolbox import Toolboxes

T = TypeVar("T")

# A call with less time than this left cannot finish; the rule-based answer comes instead.
MIN_CALL_SECONDS = 0.05
# Why an answer came from the rules when no model is configured, in the answer's warning.
NO_MODEL_DETAIL = "no model is configured (set OPENAI_API_KEY or OPENAI_BASE_URL to use one)"
# The failure reasons after which the fallback being off answers with this error code.
_FAILED_CODES = {"deadline": "deadline_exceeded", "invalid_plan": "invalid_plan"}


class PlanListener(AnswerSink, Protocol):
    """Who watches one request's planning as it happens (a streamed answer): the model's text
    as it is written, and the plan_id its answer will carry, announced before it exists."""

    @property
    def plan_id(self) -> str:
        """The id the plan made for this request takes (a repeated answer keeps its own)."""

    def check_with(self, resolver: ArmResolver, rules: PlanRules) -> None:
        """The arms and rules each step is checked with as it is written (the request's
        own tools'), told before the first model call."""


@dataclass(frozen=True)
class PlanJob:
    """One /plan request on its way through a strategy: what was asked, the id of the request,
    the deadline built once for it, who watches it being written (a streamed answer), and who
    asked: the principal, whose share of tool-set builds and of the model's call slots it
    takes."""

    request: PlanRequest
    request_id: str
    deadline: Deadline
    listener: PlanListener | None = None
    principal: Principal = ANONYMOUS

    @property
    def owner(self) -> str:
        """The principal's id: whose share of the model's call slots a call takes."""
        return self.principal.id


@dataclass
class ModelFailure:
    """Why the models produced no usable answer: for the fallback metric and the 5xx code."""

    # llm_disabled | llm_unavailable | invalid_plan | deadline | call_budget | circuit_open
    # | saturated | spend_budget
    reason: str
    detail: str
    errors: list[str]


NO_MODEL = ModelFailure("llm_disabled", NO_MODEL_DETAIL, [])


@dataclass(frozen=True)
class ModelAnswer(Generic[T]):
    model: str
    value: T


# Raises PlanParseError or PlanValidationError for an answer the model must mend.
AnswerReader = Callable[[Completion], T]
# The messages that send an answer back: (first messages, its text, the problems, usable).
RepairWriter = Callable[[list[Message], str | None, list[str], bool], list[Message]]


def _plain_repair(
    first: list[Message], answer: str | None, problems: list[str], usable: bool
) -> list[Message]:
    return with_repair(first, answer, problems, usable=usable)


@dataclass(frozen=True)
class Question(Generic[T]):
    """What a caller asks the models, and how it reads their answers.

    `quality` names what only the model can mend in a usable answer: it earns one repair
    prompt, and whatever ends the loop after it, the answer is kept with `noted` (its problems
    as warnings) rather than lost to the fallback."""

    messages: list[Message]
    read: AnswerReader[T]
    repair: RepairWriter = _plain_repair
    answer_schema: AnswerSchema | None = None
    quality: Callable[[T], list[QualityProblem]] | None = None
    noted: Callable[[T, list[QualityProblem]], T] | None = None


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
    """The models as /health reports them: each circuit, and whether any is not closed."""

    circuits: dict[str, str]

    @property
    def degraded(self) -> bool:
        return any(state != "closed" for state in self.circuits.values())


class _Kept(Generic[T]):
    """A usable answer with quality problems, kept while the model is asked to mend them: the
    one with the fewest problems, as `noted` writes it."""

    def __init__(self) -> None:
        self.answer: ModelAnswer[T] | None = None
        self._problems = 0

    def offer(
        self, question: Question[T], answer: ModelAnswer[T], problems: list[QualityProblem]
    ) -> None:
        if self.answer is not None and self._problems <= len(problems):
            return
        value = answer.value if question.noted is None else question.noted(answer.value, problems)
        self.answer, self._problems = ModelAnswer(answer.model, value), len(problems)


class _Step(Enum):
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
    """The models of the chain behind their guard (none when no model is configured), the one
    loop that asks them, and the fallback gate after it: ask -> read -> fall back, the one
    path of every strategy from a question to an answer."""

    llm: GuardedLLM | None
    gate: FallbackGate
    _: KW_ONLY
    models: list[str]
    retry: RetrySettings
    call_time: CallTime
    policy: RetryPolicy
    pricing: dict[str, Price]
    max_tokens: int
    metrics: PlannerMetrics
    tracer: trace.Tracer = field(default_factory=trace.NoOpTracer)
    # Bound once: a module-level lazy logger rebuilds itself on every call.
    log: Any = field(
        init=False, default_factory=lambda: structlog.get_logger("planner_arm.strategies.attempts")
    )

    @property
    def configured(self) -> bool:
        return self.llm is not None

    def health(self) -> ModelHealth:
        """Each model's circuit now; empty when no model is configured."""
        return ModelHealth(self.llm.circuits() if self.llm is not None else {})

    async def ask(
        self,
        question: Question[T],
        deadline: Deadline,
        spend: Spend,
        *,
        owner: str,
        budget: Budget | None = None,
        listener: AnswerSink | None = None,
    ) -> ModelAnswer[T] | ModelFailure:
        """The models' answer to `question` within `deadline`, or why there is none.

        `owner`: the principal whose request it is (its calls take its share of the slots);
        the caller's `budget` (its max_llm_usd) stops calls whose likely cost would pass it;
        `listener` watches each answer being written."""
        if self.llm is None:
            return NO_MODEL
        max_llm_usd = budget.max_llm_usd if budget is not None else None
        run = _Run(self, self.llm, question, deadline, spend, max_llm_usd, listener, owner)
        # The per-call bounds already keep to the deadline; this catches whatever slips past
        # them (a retry wait, a slow slot), so the fallback still answers in time.
        try:
            async with asyncio.timeout(deadline.remaining()):
                return await run.through_the_chain()
        except TimeoutError:
            return run.settle(ModelFailure("deadline", "the request deadline passed", []))

    def models_after(self, index: int) -> int:
        """How many later models of the chain could still be asked (circuit not open)."""
        llm = self.llm
        return sum(
            1 for model in self.models[index + 1 :] if llm is not None and llm.may_call(model)
        )

    async def answer(
        self,
        question: Question[T],
        by_rule: Callable[[], T],
        deadline: Deadline,
        spend: Spend,
        *,
        owner: str,
        budget: Budget | None = None,
        listener: AnswerSink | None = None,
    ) -> Sourced[T]:
        """The models' answer, or through the fallback gate the rule-based one."""
        outcome = await self.ask(
            question, deadline, spend, owner=owner, budget=budget, listener=listener
        )
        if isinstance(outcome, ModelAnswer):
            return Sourced(outcome.value, outcome.model)
        with self.falling_back(outcome, spend):
            # CPU work that grows with the plan (a replan of hundreds of steps): in a worker
            # thread, so the event loop keeps answering every other request meanwhile.
            return Sourced(await to_thread.run_sync(by_rule), None)

    @contextmanager
    def falling_back(self, failure: ModelFailure, spend: Spend) -> Iterator[None]:
        """Through the gate (which may raise `PlanningFailed`), then the `rule_based_fallback`
        span the rule-based answer is made in."""
        self.gate.fall_back(failure, spend)
        attributes = {"planner.fallback.reason": failure.reason}
        with self.tracer.start_as_current_span("rule_based_fallback", attributes=attributes):
            yield

    def reserve(
        self, model: str, messages: list[Message], spend: Spend, max_llm_usd: float | None
    ) -> float | None:
        """The dollar gate: the next call's likely cost, set aside in `spend.reserved` until
        it is paid (calls of one request may run side by side); None when it would take the
        spend, with what the calls in flight set aside, past `max_llm_usd`."""
        if max_llm_usd is None:
            return 0.0
        prompt_chars = sum(len(message["content"]) for message in messages)
        price = price_for(model, self.pricing)
        estimate = estimate_call_usd(spend, prompt_chars, self.max_tokens, price)
        if spend.usd + spend.reserved + estimate > max_llm_usd:
            return None
        spend.reserved += estimate
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
        spend: Spend,
        max_llm_usd: float | None,
        listener: AnswerSink | None,
        owner: str,
    ) -> None:
        self.chain, self.llm, self.question = chain, llm, question
        self.deadline, self.spend, self.owner = deadline, spend, owner
        self.max_llm_usd, self.listener = max_llm_usd, listener
        self.calls_left = chain.retry.max_llm_calls
        self.failure = ModelFailure("call_budget", "no LLM call was made", [])
        self.kept: _Kept[T] = _Kept()

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
                return None if isinstance(go, _Step) else go
            left_before = self.deadline.remaining()
            outcome = await self._call(model, messages, go)
            if isinstance(outcome, CallSkipped):
                self.failure = ModelFailure(outcome.reason, f"{model}: {outcome.reason}", [])
                # Every model shares the call slots: moving on is futile.
                return self.settle(self.failure) if outcome.reason == "saturated" else None
            if isinstance(outcome, LLMError):
                retries += 1
                step = await self._after_error(index, model, outcome, retries)
                if step is _Step.RETRY:
                    continue
                return None if isinstance(step, _Step) else step
            # Reading a large answer (a merge onto a large plan) is CPU work: off the loop.
            verdict = await to_thread.run_sync(self._read, model, outcome)
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

    def _gate(
        self, index: int, model: str, messages: list[Message]
    ) -> _Go | _Step | ModelAnswer[T] | ModelFailure:
        """May the request spend another call on `model`, its seconds and its likely dollars;
        else the next model's turn, or the end of the loop."""
        models_after = self.chain.models_after(index)
        seconds = self.chain.call_time.for_call(self.deadline.remaining(), models_after)
        if seconds < MIN_CALL_SECONDS:
            if models_after:
                return _Step.NEXT_MODEL  # what is left is kept for the next model
            failure = ModelFailure("deadline", "the request deadline passed", self.failure.errors)
            return self.settle(failure)
        reserved = self.chain.reserve(model, messages, self.spend, self.max_llm_usd)
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
                self.spend,
                owner=self.owner,
                seconds=go.seconds,
                min_call_seconds=MIN_CALL_SECONDS,
                sink=self.listener,
                answer_schema=self.question.answer_schema,
            )
        except CallSkipped as skipped:
            return skipped  # no call was made: none is counted
        except LLMError as error:
            self.calls_left -= 1
            return error
        finally:
            self.spend.reserved -= go.reserved  # paid now (the guard added the cost), or never
        self.calls_left -= 1
        return completion

    async def _after_error(
        self, index: int, model: str, error: LLMError, retries: int
    ) -> _Step | ModelAnswer[T] | ModelFailure:
        chain = self.chain
        chain.log.warning("llm_call_failed", model=model, error=error.code, detail=error.detail)
        self.failure = ModelFailure("llm_unavailable", f"{model}: {error}", [])
        decision = chain.policy.decide(error, retries)
        if decision.next is Next.NEXT_MODEL or self.calls_left <= 0:
            return _Step.NEXT_MODEL
        models_after = chain.models_after(index)
        if error.code == "timeout" and models_after:
            return _Step.NEXT_MODEL  # it used its whole time: the next model's turn
        if not chain.call_time.wait_fits(decision.wait, self.deadline.remaining(), models_after):
            # A long Retry-After, or a backoff the deadline cannot hold: this model is done
            # for this request, the next one may still answer.
            if not isinstance(error, LLMRateLimited):
                self.failure = ModelFailure("deadline", self.failure.detail, [])
            return _Step.NEXT_MODEL
        chain.metrics.retries.labels(decision.reason).inc()
        if not await chain.policy.wait(decision.wait, self.deadline):
            reason = "llm_unavailable" if isinstance(error, LLMRateLimited) else "deadline"
            return self.settle(ModelFailure(reason, self.failure.detail, []))
        return _Step.RETRY

    def _read(self, model: str, completion: Completion) -> ModelAnswer[T] | _SendBack:
        """The answer when it is usable and clean, else what to send back."""
        question, chain = self.question, self.chain
        chain.log.debug(
            "llm_answer", model=model, content=completion.content, finish=completion.finish_reason
        )
        try:
            answer = ModelAnswer(model, question.read(completion))
        except (PlanParseError, AnswerInvalid) as problem:
            errors = list(getattr(problem, "errors", None) or [problem.detail])
            chain.metrics.parse_failures.labels(problem.code).inc()
            chain.log.info("plan_answer_rejected", model=model, error=problem.code, errors=errors)
            # The problems go in `errors` alone, so a 502 lists each of them once.
            self.failure = ModelFailure("invalid_plan", f"{model}: {problem.code}", errors)
            return _SendBack(errors, usable=False)
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


class FallbackGate:
    """The one place that lets the rule-based planner answer for a model that gave none: it
    counts the fallback and says so in the answer, or, with the fallback switched off (and a
    model configured), raises `PlanningFailed`."""

    def __init__(self, enabled: bool, metrics: PlannerMetrics) -> None:
        self._enabled = enabled
        self._metrics = metrics

    def fall_back(self, failure: ModelFailure, spend: Spend) -> None:
        if failure.reason != "llm_disabled" and not self._enabled:
            code = _FAILED_CODES.get(failure.reason, "llm_unavailable")
            raise PlanningFailed(failure.detail, code=code, errors=failure.errors)
        self._metrics.fallbacks.labels(failure.reason).inc()
        # With no model at all the answer says so too: a caller should not have to guess.
        spend.warn_once(f"fallback_used: {failure.reason}: {failure.detail}")


@dataclass(frozen=True)
class Sourced(Generic[T]):
    """An answer and who wrote it: a model (`model`), or the rule-based planner (None)."""

    value: T
    model: str | None

    @property
    def source(self) -> Literal["llm", "fallback"]:
        return "llm" if self.model is not None else "fallback"


@dataclass(kw_only=True)
class ModelPlanner:
    """What every planner that asks the models for plans uses: the models (with the fallback
    gate after them), the plan rules its answers must keep, the arm resolver that reads them,
    and the system prompt."""

    models: ModelChain
    rules: PlanRules
    resolver: ArmResolver
    system_prompt: str
    # The toolbox of each request's tool set (the configured arms when it brings none).
    toolboxes: Toolboxes | None = None
    # The worked examples shown with this request (a tool plan's), most similar first.
    worked: tuple[WorkedExample, ...] = ()
    # The answer's schema where the server takes one (a tool plan's: its listed tools).
    answer_schema: AnswerSchema | None = None

    def for_request(self, request: PlanRequest) -> Self:
        """This planner for `request`'s own tools, or for its shortlist of a large tool set;
        itself when the request plans over the configured arms as they are."""
        if self.toolboxes is None:
            return self
        box = self.toolboxes.for_request(request)
        worked = tuple(box.examples_for(request))
        tools = box.resolver.index is not None
        if box is self.toolboxes.configured and not tools and not worked:
            return self
        listed = box.listed(request)
        changes: dict[str, Any] = {
            "rules": box.rules,
            "resolver": box.resolver,
            "system_prompt": box.prompt_for(listed),
            "worked": worked,
            "answer_schema": box.answer_schema(listed),
        }
        if "rule_based" in {item.name for item in fields(self)}:
            changes["rule_based"] = box.rule_based
        return replace(self, **changes)

    async def prepared(self, request: PlanRequest) -> Self:
        """`for_request`, in a worker thread for a tool plan: choosing its shortlist and its
        worked examples is CPU work that grows with the tool set, done in the lane of tool-set
        work. The request holds its tool set (`Toolboxes.held`), whose index is built by
        then."""
        toolboxes = self.toolboxes
        if toolboxes is None or toolboxes.for_request(request).resolver.index is None:
            return self.for_request(request)
        return await to_thread.run_sync(toolboxes.shared.lane.run, self.for_request, request)
