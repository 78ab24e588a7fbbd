"""One guarded model call: the model's circuit, the call slots shared fairly among principals
(`FairSlots`), the metrics and the bill. The attempt loop decides what to call and for how
long; this decides whether it may, now, and what a failed call says of its model: a call that
ran out its own time budget counts against it, one the request's deadline cut short does not,
however many callers' calls are cut (the deadline is the caller's, and callers' slow requests
must not close the model for all). A model that hangs for everyone is found by the hang check:
when a cut call waited on a model that answered nobody meanwhile, the guard asks the model a
one-line question of its own, with the model's own budget, and no answer opens its circuit.

A circuit breaker per model (`planner_arm.circuit`): after repeated failures the model is
skipped for a cooldown, so requests go straight to the next model or the fallback rather than
each waiting out its timeouts.

The call slots of the process: at most `capacity` calls are under way at once. Free slots
beyond the last `reserved` go to whoever asks; those last ones go to a principal with no call
under way, or to one below its fair share (the slots divided among the principals with calls
under way or waiting, while others want slots too) that holds no more calls than slots are
free. So a principal alone may use all but the reserve; principals that filled the idle slots,
however many, never take the reserve; one that comes along finds a free slot at once. When a
slot frees, the waiter whose principal has the fewest calls under way gets it (the first to
come among equals). An owner is any hashable id (the principal's); llm/ knows nothing of
principals beyond it.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import urlsplit

import structlog

from planner_arm.circuit import Circuit, CircuitState, StateListener
from planner_arm.clock import Clock, Deadline
from planner_arm.config import CircuitSettings, Price, Settings
from planner_arm.errors import LLMError, LLMRateLimited, LLMRejected, LLMTransientError
from planner_arm.llm.client import AnswerSchema, AnswerSink, Completion, LLMClient, Message
from planner_arm.llm.usage import NO_PRICE, USAGE_NOT_REPORTED, Usage, cost_usd, price_for
from planner_arm.metrics import PlannerMetrics


@dataclass(eq=False)
class _Waiter:
    owner: Hashable
    granted: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class FairSlots:
    """`capacity` call slots, each principal's share kept for it while it wants it."""

    def __init__(self, capacity: int, reserved: int = 0) -> None:
        """`reserved`: slots no principal takes past its share (at most capacity - 1)."""
        self.capacity = capacity
        self.reserved = max(0, min(reserved, capacity - 1))
        self._held: dict[Hashable, int] = {}
        self._in_use = 0
        self._waiting: list[_Waiter] = []

    @property
    def in_use(self) -> int:
        return self._in_use

    def held(self, owner: Hashable) -> int:
        """The calls `owner` has under way now."""
        return self._held.get(owner, 0)

    async def acquire(self, owner: Hashable, wait: float) -> bool:
        """Take a slot for `owner`, waiting at most `wait` seconds; False when none came."""
        if self._may_take(owner):
            self._take(owner)
            return True
        if wait <= 0:
            return False
        waiter = _Waiter(owner)
        self._waiting.append(waiter)
        try:
            async with asyncio.timeout(wait):
                await asyncio.shield(waiter.granted)
        except BaseException as ended:
            self._leave(waiter)
            if isinstance(ended, TimeoutError):
                return False
            raise
        return True

    def release(self, owner: Hashable) -> None:
        """Give back one of `owner`'s slots; the waiter with the fewest calls gets it."""
        left = self._held[owner] - 1
        if left:
            self._held[owner] = left
        else:
            del self._held[owner]
        self._in_use -= 1
        self._grant()

    def _may_take(self, owner: Hashable) -> bool:
        free = self.capacity - self._in_use
        if free <= 0:
            return False
        if free > self.reserved:
            return True  # idle capacity: whoever asks (waiters with the fewest calls first)
        held = self.held(owner)
        if held == 0:
            return True  # the reserve is for a principal with no call under way
        if held > free:
            # It would take more than half of what is left: a principal that filled the idle
            # slots never gets here, and however many such principals there are, the reserve
            # lasts for the ones that come along.
            return False
        # Else only a principal below its fair share, while others want slots too.
        active = set(self._held) | {waiter.owner for waiter in self._waiting} | {owner}
        return len(active) > 1 and held < self.capacity // len(active)

    def _take(self, owner: Hashable) -> None:
        self._held[owner] = self.held(owner) + 1
        self._in_use += 1

    def _grant(self) -> None:
        while True:
            ready = [waiter for waiter in self._waiting if self._may_take(waiter.owner)]
            if not ready:
                return
            first = min(ready, key=lambda waiter: self.held(waiter.owner))  # stable: FIFO
            self._waiting.remove(first)
            self._take(first.owner)
            first.granted.set_result(None)

    def _leave(self, waiter: _Waiter) -> None:
        """A waiter that gave up or was cancelled: out of the queue, and a slot granted to it
        meanwhile goes back."""
        if waiter in self._waiting:
            self._waiting.remove(waiter)
            self._grant()  # its leaving may let another (over its share) through
        elif waiter.granted.done():
            self.release(waiter.owner)


class CircuitBreakers:
    """One circuit per model of the chain."""

    def __init__(
        self,
        models: Iterable[str],
        settings: CircuitSettings,
        clock: Clock,
        on_change: StateListener | None = None,
    ) -> None:
        self._circuits = {m: Circuit(m, settings, clock, on_change) for m in models}

    def __getitem__(self, model: str) -> Circuit:
        return self._circuits[model]

    def __iter__(self) -> Iterator[Circuit]:
        return iter(self._circuits.values())

    def states(self) -> dict[str, str]:
        return {model: c.state.value for model, c in self._circuits.items()}

    @property
    def degraded(self) -> bool:
        return any(c.state is not CircuitState.CLOSED for c in self._circuits.values())


# Rejections that say the model (or our key for it) is unusable, not that this request is bad.
_MODEL_DOWN_CODES = frozenset({"auth_failed", "forbidden", "model_not_found"})
_CIRCUIT_GAUGE = {CircuitState.CLOSED: 0, CircuitState.HALF_OPEN: 1, CircuitState.OPEN: 2}


@dataclass(frozen=True)
class FailureSeen:
    """A failed call of a model, as /health and the answers it falls back on tell it: the
    model, the error's code and detail (the key redacted), and when (UTC, ISO 8601)."""

    model: str
    code: str
    detail: str
    at: str


class CallSkipped(Exception):
    """No call was made: `reason` is circuit_open or saturated."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def counts_against_model(error: LLMError) -> bool:
    if isinstance(error, LLMTransientError | LLMRateLimited):
        return True
    return isinstance(error, LLMRejected) and error.code in _MODEL_DOWN_CODES


def _gauge_reading(circuit: Circuit) -> Callable[[], float]:
    return lambda: _CIRCUIT_GAUGE[circuit.state]


# The hang check's question: a one-line answer, as JSON for a server that is asked for JSON.
HANG_CHECK: list[Message] = [
    {"role": "user", "content": 'Answer with the JSON object {"ok": true} and nothing else.'}
]


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
            metrics.circuit_state.labels(circuit.name).set_function(_gauge_reading(circuit))
        connection = settings.connection
        # Without API keys there is one principal and nobody to keep a slot for.
        reserved = connection.reserved_slots if settings.auth.enabled else 0
        self._slots = FairSlots(connection.max_in_flight, reserved)
        # A timeout counts against the model only when the call had all of this: a call
        # the request's deadline left less time is cut off by the caller, not failed.
        self._own_budget = settings.model.call_timeout_seconds
        self._prices: dict[str, Price | None] = {}
        # The last failure of each model: why its circuit opened, once it has.
        self._failures: dict[str, FailureSeen] = {}
        self._last_failure: FailureSeen | None = None
        # Without API keys every caller is the one principal, and a call its deadline cut
        # counts against the model: there is nobody else to protect.
        self._cuts_count = not settings.auth.enabled
        # When each model last answered a call (any answer: it is up), and its hang check
        # under way, if any. The check gets the model's own budget, at most a request's
        # deadline: a one-line answer that takes longer serves no request.
        self._answered_at: dict[str, float] = {}
        self._checks: dict[str, asyncio.Task[None]] = {}
        self._check_seconds = min(
            settings.model.call_timeout_seconds, settings.planning.timeout_seconds
        )

    def _circuit_changed(self, model: str, state: CircuitState) -> None:
        # An operator wants to see a model go out of service and come back in the logs, not
        # only in a gauge: opening is a warning, the probe and the recovery are news.
        if state is CircuitState.OPEN:
            self._metrics.circuit_opened.labels(model).inc()
            cause = self._failures.get(model)
            self._log.warning(
                "circuit_opened",
                model=model,
                error=cause.code if cause else None,
                detail=cause.detail if cause else None,
            )
        elif state is CircuitState.HALF_OPEN:
            self._log.info("circuit_half_open", model=model)
        else:
            self._log.info("circuit_closed", model=model)

    def circuits(self) -> dict[str, str]:
        """Each model's circuit as a caller would find it now: closed, half_open or open."""
        return self._breakers.states()

    def last_failure(self, model: str | None = None) -> FailureSeen | None:
        """The last failure counted against `model` (not a request the model refused as bad,
        nor a call the caller's deadline cut), or against any model of the chain when None."""
        return self._last_failure if model is None else self._failures.get(model)

    def _failed(self, model: str, code: str, detail: str) -> None:
        # Kept before the circuit hears of it, so the circuit_opened line can say why.
        seen = FailureSeen(model, code, detail, datetime.now(UTC).isoformat(timespec="seconds"))
        self._failures[model] = self._last_failure = seen

    def may_call(self, model: str) -> bool:
        """Would a call to `model` be let through now (its circuit is not open)?"""
        return self._breakers[model].may_allow()

    async def _take_slot(
        self, owner: Hashable, deadline: Deadline, min_call_seconds: float, seconds: float
    ) -> bool:
        wait = min(
            self._settings.connection.queue_timeout_seconds,
            deadline.remaining() - min_call_seconds,
            seconds - min_call_seconds,
        )
        return await self._slots.acquire(owner, wait)

    async def call(
        self,
        model: str,
        messages: Sequence[Message],
        deadline: Deadline,
        usage: Usage,
        *,
        seconds: float,
        min_call_seconds: float,
        sink: AnswerSink | None = None,
        answer_schema: AnswerSchema | None = None,
    ) -> Completion:
        """One call of at most `seconds` from now, the wait for a slot included, added to
        `usage`, whose owner (the principal whose request it is) takes the call slot.

        Raises LLMError as the client does, or CallSkipped. A timeout counts against the
        model only when the call had its whole own budget (`model.call_timeout_seconds`); a
        call the request's deadline cut short, or whose caller went away, is no verdict on it.
        """
        circuit = self._breakers[model]
        owner = usage.owner
        if not circuit.allow():
            raise CallSkipped("circuit_open")
        probing = circuit.state is not CircuitState.CLOSED  # this call is the circuit's probe
        ends_at = self._clock.now() + seconds
        if not await self._take_slot(owner, deadline, min_call_seconds, seconds):
            circuit.release()
            raise CallSkipped("saturated")
        self._metrics.llm_in_flight.inc()
        started = self._clock.now()
        usage.calls += 1
        remaining = deadline.remaining()
        timeout = max(0.0, min(ends_at - started, remaining))
        # The model's own budget, not the request's deadline, set how long this call may take.
        own_budget = seconds >= self._own_budget and ends_at - started <= remaining
        try:
            completion = await self._llm.complete(
                model, messages, timeout=timeout, sink=sink, answer_schema=answer_schema
            )
        except LLMError as error:
            if error.code == "timeout" and not own_budget:
                self._cut(circuit, started, error.detail, probing=probing)
            else:
                self._judge(circuit, error, started)
            raise
        except asyncio.CancelledError:
            took = self._clock.now() - started
            if deadline.remaining() < min_call_seconds:
                self._cut(circuit, started, f"no answer within {took:.2f}s", probing=probing)
            else:
                circuit.release()  # its caller went away: no verdict
            raise
        except BaseException:
            circuit.release()
            raise
        finally:
            self._slots.release(owner)
            self._metrics.llm_in_flight.dec()
        self._answered(circuit)
        self._account(model, completion, usage)
        return completion

    def _answered(self, circuit: Circuit) -> None:
        """The model answered a call (whether or not the answer was of use): it is up."""
        self._answered_at[circuit.name] = self._clock.now()
        circuit.record_success()

    def _judge(self, circuit: Circuit, error: LLMError, started: float) -> None:
        """What a failed call, which the request's deadline did not cut, says of its model."""
        self._metrics.record_llm_call(circuit.name, error.code, self._clock.now() - started)
        if counts_against_model(error):
            self._failed(circuit.name, error.code, error.detail)
            retry_after = error.retry_after if isinstance(error, LLMRateLimited) else None
            circuit.record_failure(retry_after)
        else:
            self._answered(circuit)  # it answered; this request was the problem

    def _cut(self, circuit: Circuit, started: float, detail: str, *, probing: bool) -> None:
        """A call the request's deadline cut short. The deadline is the caller's, and a caller
        can make its requests as slow as it likes (a long goal, a large tool set, a
        hierarchical plan's many calls), whoever and however many the callers are: the cut is
        no verdict on the model. But when the model answered nobody while the call waited, it
        may hang for everyone: the hang check asks it (`_check`), and holds the circuit's
        probe while it does when the cut call held it. Without API keys every cut counts."""
        model = circuit.name
        took = self._clock.now() - started
        if self._cuts_count:
            self._metrics.record_llm_call(model, "timeout", took)
            self._failed(model, "timeout", detail)
            circuit.record_failure()
            return
        self._metrics.record_llm_call(model, "deadline", took)
        silent = self._answered_at.get(model, -math.inf) < started
        if not (silent and self._start_check(circuit, probing=probing)):
            circuit.release()

    def _start_check(self, circuit: Circuit, *, probing: bool) -> bool:
        """Start the hang check of `circuit`'s model; False when one is under way already."""
        if circuit.name in self._checks or not self._settings.circuit.enabled:
            return False
        check = asyncio.create_task(self._check(circuit, probing=probing))
        self._checks[circuit.name] = check
        check.add_done_callback(lambda _: self._checks.pop(circuit.name, None))
        return True

    async def _check(self, circuit: Circuit, *, probing: bool) -> None:
        """Ask the model the hang check's question: a one-line answer that no caller's request
        shaped, with the model's own budget. No answer (or an error of the model's) opens its
        circuit, as a failed probe after the cooldown does; an answer says it is up, and that
        the cut calls were their callers' affair."""
        model = circuit.name
        try:
            await self._llm.complete(model, HANG_CHECK, timeout=self._check_seconds)
        except LLMError as error:
            self._metrics.hang_checks.labels(model, error.code).inc()
            if counts_against_model(error):
                self._failed(model, error.code, f"hang check: {error.detail}")
                if probing or circuit.state is not CircuitState.OPEN:
                    retry_after = error.retry_after if isinstance(error, LLMRateLimited) else None
                    circuit.trip(retry_after)
                return
        except asyncio.CancelledError:
            if probing:
                circuit.release()
            raise
        else:
            self._metrics.hang_checks.labels(model, "answered").inc()
        self._answered_at[model] = self._clock.now()
        # An open circuit, opened meanwhile by failed calls, waits for its own probe.
        if probing or circuit.state is CircuitState.CLOSED:
            circuit.record_success()

    async def checks_ended(self) -> None:
        """Wait until no hang check is under way (each ends within its budget)."""
        while self._checks:
            await asyncio.gather(*self._checks.values(), return_exceptions=True)

    async def aclose(self) -> None:
        """Stop the hang checks under way: the process is closing."""
        checks = list(self._checks.values())
        for check in checks:
            check.cancel()
        await asyncio.gather(*checks, return_exceptions=True)

    def _price(self, model: str) -> Price | None:
        """The model's price where it is served, looked up once per model of the chain."""
        if model not in self._prices:
            self._prices[model] = price_for(model, self._settings.prices_that_apply)
        return self._prices[model]

    def _why_unpriced(self, model: str) -> str:
        """Why `model`'s calls cost 0 in the bill: what the answer's warning says."""
        served = self._settings.model
        if price_for(model, self._settings.pricing) is None or served.provider_prices_apply:
            return f"{model}: no price in `pricing`, so its calls count as $0"
        host = urlsplit(served.base_url or "").hostname
        return (
            f"{model}: served at {host}, where the built-in prices (OpenAI's) do not apply, so "
            "its calls count as $0; give it a price of your own in `pricing`, or set "
            "model.priced_by_provider for a gateway to OpenAI"
        )

    def _account(self, model: str, completion: Completion, usage: Usage) -> None:
        usd = cost_usd(self._price(model), completion.prompt_tokens, completion.completion_tokens)
        usage.prompt_tokens += completion.prompt_tokens
        usage.completion_tokens += completion.completion_tokens
        usage.usd += usd
        if not completion.usage_reported:
            usage.not_counted(USAGE_NOT_REPORTED, model)
        elif completion.prompt_tokens and self._price(model) is None:
            usage.not_counted(NO_PRICE, self._why_unpriced(model))
        self._metrics.record_llm_call(
            model,
            "ok",
            completion.latency_seconds,
            completion.prompt_tokens,
            completion.completion_tokens,
            usd,
        )
