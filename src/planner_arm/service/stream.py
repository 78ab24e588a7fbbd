"""One streamed plan answer: the events a caller sees while the plan is being made.

`PlanStream` listens to the request's own model calls (it is the planner's `PlanListener`):
each step the model finishes writing is checked on its own (`checked_step`) and sent at once,
in order; a step that cannot be checked alone holds back every step after it. When a new
answer begins (a retry, the repair prompt, the next model) the steps already sent are
withdrawn with `plan.reset`. The final plan, made by the very pipeline the JSON answer uses,
is the authority: the steps it adds are sent before it, and when it changed a sent step they
are all withdrawn and sent again, so the steps after the last `plan.reset` are the plan's.

Events, in order: `plan.started` {plan_id, request_id, model}, `step`* with `plan.reset`
{reason} between, then one `plan` (the whole answer) or one `error` (the exception, for the
API to shape as its JSON error body).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog

from planner_arm.clock import Clock
from planner_arm.errors import PlannerError
from planner_arm.metrics import PlannerMetrics
from planner_arm.pipeline.stream_cut import StepCutter, checked_step
from planner_arm.plan.arms import ArmResolver
from planner_arm.plan.schemas import PlanResponse, PlanStep
from planner_arm.plan.validation import PlanRules

log = structlog.get_logger("planner_arm.service.stream")

STARTED, STEP, RESET, PLAN, ERROR, PING = (
    "plan.started",
    "step",
    "plan.reset",
    "plan",
    "error",
    "ping",
)


@dataclass(frozen=True)
class StreamEvent:
    name: str
    data: dict[str, Any]
    error: PlannerError | None = None  # on `error` events: the API writes its body


class PlanStream:
    def __init__(
        self,
        *,
        plan_id: str,
        request_id: str,
        arms: ArmResolver,
        rules: PlanRules,
        metrics: PlannerMetrics,
        clock: Clock,
    ) -> None:
        self._plan_id = plan_id
        self._request_id = request_id
        self._arms = arms
        self._rules = rules
        self._metrics = metrics
        self._clock = clock
        self._opened_at = clock.now()
        self._queue: asyncio.Queue[StreamEvent] = asyncio.Queue()
        self._cutter = StepCutter()
        self._sent: list[PlanStep] = []
        self._held = False  # a step could not be sent: neither can any after it
        self._started = False
        self._model_began = False  # a model's answer was streamed: a fallback replaces it
        self._first_step_seen = False

    @property
    def plan_id(self) -> str:
        return self._plan_id

    # -- the planner's listener ----------------------------------------------------------

    def check_with(self, resolver: ArmResolver, rules: PlanRules) -> None:
        self._arms = resolver
        self._rules = rules

    def begin(self, model: str) -> None:
        if not self._started:
            self._start(self._plan_id, model)
        elif self._sent:
            # A whole answer that failed the checks is repaired; one cut short is retried.
            reason = "repair" if self._cutter.done else "stream_broken"
            self._reset(reason)
        self._model_began = True
        self._cutter = StepCutter()
        self._held = False

    def text(self, delta: str) -> None:
        raws = self._cutter.feed(delta)  # fed even when held, so it knows when the answer ends
        if self._held:
            return
        for raw in raws:
            sent_numbers = frozenset(step.step for step in self._sent)
            step = checked_step(raw, len(self._sent) + 1, sent_numbers, self._arms, self._rules)
            if step is None:
                self._held = True
                return
            self._send_step(step)

    # -- the end -------------------------------------------------------------------------

    def finish(self, response: PlanResponse) -> None:
        if not self._started:  # a repeated answer (cache, idempotency) keeps its own id
            self._start(response.plan_id, response.metadata.model)
        final = response.plan
        fallback = response.metadata.source == "fallback"
        if fallback and self._model_began:
            # The model's answer is not the plan, whatever of it was sent or withdrawn.
            self._reset("fallback")
        elif self._sent != final[: len(self._sent)]:
            self._reset("final_checks")
        for step in final[len(self._sent) :]:
            self._send_step(step)
        self._put(StreamEvent(PLAN, response.model_dump(mode="json")))

    def fail(self, error: PlannerError) -> None:
        self._put(StreamEvent(ERROR, {"error": error.code, "detail": error.detail}, error))

    async def events(
        self,
        work: Callable[[PlanStream], Awaitable[PlanResponse]],
        ping_seconds: float,
    ) -> AsyncGenerator[StreamEvent, None]:
        """Runs `work(self)` and yields its events until `plan` or `error`, with a `ping`
        after each `ping_seconds` of quiet. A caller that stops reading cancels the work."""
        task = asyncio.create_task(self._run(work))
        outcome = "disconnected"
        try:
            while True:
                try:
                    event = await asyncio.wait_for(self._queue.get(), ping_seconds)
                except TimeoutError:
                    yield StreamEvent(PING, {})
                    continue
                if event.name in (PLAN, ERROR):
                    outcome = event.name
                yield event
                if outcome != "disconnected":
                    return
        finally:
            self._metrics.child(self._metrics.streams, outcome).inc()
            if not task.done():
                log.info("plan_stream_abandoned", plan_id=self._plan_id)
                task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self, work: Callable[[PlanStream], Awaitable[PlanResponse]]) -> None:
        try:
            response = await work(self)
        except PlannerError as error:
            self.fail(error)
            return
        except Exception as error:  # the JSON endpoint's 500: logged, shaped by the API
            log.exception("plan_stream_failed", error_type=type(error).__name__)
            self.fail(PlannerError("an unexpected error occurred", code="internal_error"))
            return
        self.finish(response)

    def _start(self, plan_id: str, model: str | None) -> None:
        self._started = True
        data = {"plan_id": plan_id, "request_id": self._request_id, "model": model}
        self._put(StreamEvent(STARTED, data))

    def _send_step(self, step: PlanStep) -> None:
        if not self._first_step_seen:
            self._first_step_seen = True
            self._metrics.stream_first_step.observe(self._clock.now() - self._opened_at)
        self._sent.append(step)
        self._put(StreamEvent(STEP, step.model_dump(mode="json")))

    def _reset(self, reason: str) -> None:
        self._sent = []
        self._put(StreamEvent(RESET, {"reason": reason}))

    def _put(self, event: StreamEvent) -> None:
        self._queue.put_nowait(event)
