"""A plan's run over a caller's tools, without I/O: which steps start, with which arguments,
which are blocked or skipped and why, what each produced, and what to ask /replan when one
fails. `Run.loop()` is the whole run as a generator of the I/O it needs (`Notify`, `Ask`,
`CallTools`, `Replan`); `run_plan` and `run_plan_sync` (`drivers.py`) only do that I/O.

    Run.loop() ── yields ──> Notify(event)      tell the caller's on_progress
                             Ask(call)          a write: approve(step) -> bool
                             CallTools(calls)   call them: Run.start(call), the call,
                                                Run.finish(call, result or error)
                             Replan(request)    planner.replan(**request) -> plan or error
               ── returns ─> PlanRun
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from planner_arm.client.errors import PlannerError, PlanNotFound
from planner_arm.client.step_values import (
    Blocked,
    Output,
    call_arguments,
    compact_json,
    error_text,
    is_tool_error,
    read_output,
    read_tools,
)
from planner_arm.plan.endpoint_schemas import MAX_STEP_TEXT_CHARS
from planner_arm.plan.inputs import references_in
from planner_arm.plan.schemas import PlanResponse, PlanStep

RunStatus = Literal["completed", "failed", "blocked", "skipped"]
EventKind = Literal["started", "completed", "failed", "blocked", "skipped", "replanned"]
# The two stable errors of a write that was not called.
NEEDS_APPROVAL = "needs approval"
NOT_APPROVED = "not approved"
MAX_REASON_CHARS = 1_000
# An iterative plan's stages one run follows, at most (each is one /replan).
MAX_STAGES = 50


class StepRun(BaseModel):
    """What became of one step of a run."""

    step: int
    tool: str = Field(description="The tool called (the step's required_arm)")
    action: str
    status: RunStatus
    arguments: dict[str, Any] | None = Field(
        None, description="The arguments as sent; None when the tool was not called"
    )
    result: Any = Field(None, description="What the call produced (completed steps)")
    missing: list[str] = Field(
        default_factory=list, description="Blocked: the arguments that could not be given"
    )
    error: str | None = Field(None, description="Why it failed, is blocked or was skipped")
    plan_version: int = Field(description="The version of the plan the step belonged to then")


class PlanRun(BaseModel):
    """A plan's run: the last plan's steps, each with what became of it."""

    plan_id: str = Field(description="The last plan's id (a replan's answer, if any)")
    replans: int = Field(description="Replans made because a call failed")
    steps: list[StepRun] = Field(description="The last plan's steps, in plan order")
    plan: PlanResponse = Field(description="The last plan")
    history: list[StepRun] = Field(
        default_factory=list,
        description="The steps of the plans a replan replaced that did not complete there "
        "(the failed calls among them), in the order they ended",
    )
    error: str | None = Field(
        None, description="Why the run stopped at a failure: the replans ran out or /replan failed"
    )

    @property
    def completed(self) -> bool:
        """Every step of the last plan completed."""
        return all(step.status == "completed" for step in self.steps)

    def result(self, step: int) -> Any:
        """The result of step `step` of the last plan (None when it did not complete)."""
        return next((run.result for run in self.steps if run.step == step), None)


class RunEvent(BaseModel):
    """One moment of a run, for `on_progress`: a step started (`arguments`) or ended
    (`outcome`), or the plan was replanned (`plan_id` is then the new plan's)."""

    kind: EventKind
    plan_id: str
    replans: int
    step: int | None = None
    tool: str | None = None
    arguments: dict[str, Any] | None = None
    outcome: StepRun | None = None


@dataclass(frozen=True)
class ToolCall:
    """A call the run is ready to make; `step` is the plan's step with `input` set to the
    arguments as they will be sent (what `approve` is shown)."""

    step: PlanStep
    arguments: dict[str, Any]
    writes: bool

    @property
    def tool(self) -> str:
        return self.step.required_arm


@dataclass(frozen=True)
class Notify:
    event: RunEvent


@dataclass(frozen=True)
class Ask:
    call: ToolCall


@dataclass(frozen=True)
class CallTools:
    calls: list[ToolCall]


@dataclass(frozen=True)
class Replan:
    request: dict[str, Any]


Effect = Notify | Ask | CallTools | Replan
# What the driver sends back: None (Notify, CallTools), a bool (Ask), a plan or the
# PlannerError /replan raised (Replan).
Answer = None | bool | PlanResponse | PlannerError


class Run:
    """One run's state. `tools`: the tools the plan was made over (any shape `tool_json`
    takes); `plain`: the session is a plain callable, whose return value is the result as it
    is; `asks`: an `approve` was given."""

    def __init__(
        self,
        plan: PlanResponse,
        tools: Sequence[object] = (),
        *,
        max_replans: int = 2,
        plain: bool = False,
        asks: bool = False,
    ) -> None:
        self.plan = plan
        self._tools_sent = list(tools)
        self._tools = read_tools(self._tools_sent)
        self._max_replans = max_replans
        self.plain = plain
        self._asks = asks
        self.replans = 0
        self.history: list[StepRun] = []
        self.error: str | None = None
        self._ended: dict[int, StepRun] = {}
        self._outputs: dict[int, Output] = {}
        self._running: set[int] = set()
        self._failure: StepRun | None = None
        self._stages = 0

    # -- the loop ---------------------------------------------------------------------------

    def loop(self) -> Generator[Effect, Answer, PlanRun]:
        """The run, as the I/O it needs; returns what became of every step."""
        while True:
            yield from self._run_plan()
            request = self._next_request()
            if request is None or not (yield from self._replanned(request)):
                break
        for event in self._close():
            yield Notify(event)
        return self.result()

    def _next_request(self) -> dict[str, Any] | None:
        """What to ask /replan now: after a failure, a revised plan (while replans are left);
        after an iterative plan's stage all completed, its next stage; else nothing."""
        if self._failure is not None:
            if self.replans < self._max_replans:
                return self.replan_request()
            self.error = f"{self._failure_text()}; no replan left (max_replans {self._max_replans})"
            return None
        done = all(self._completed(step.step) for step in self.plan.plan)
        if self.plan.complete or not done:
            return None
        if self._stages >= MAX_STAGES:
            self.error = f"the plan was still not complete after {MAX_STAGES} stages"
            return None
        return self.replan_request()

    def _replanned(self, request: dict[str, Any]) -> Generator[Effect, Answer, bool]:
        """Ask for the replan and take its answer; False when there is none to go on with."""
        answer = yield Replan(request)
        if isinstance(answer, PlanNotFound) and request["plan_id"] is not None:
            # The stored plan is gone (its TTL passed): send it whole instead.
            request = {**request, "plan_id": None, "previous": self.plan}
            answer = yield Replan(request)
        failed = self._failure is not None
        why = self._failure_text() if failed else "the next stage"
        if not isinstance(answer, PlanResponse):
            self.error = f"{why}; the replan failed: {answer}"
            return False
        self.take(answer)
        yield Notify(self._event("replanned"))
        if not failed and not answer.complete and not self._ready():
            self.error = "the next stage brought no new step"
            return False
        return True

    def _run_plan(self) -> Generator[Effect, Answer, None]:
        """Rounds of: the steps whose prerequisites have all completed are blocked or called
        (writes only after a yes), until none is ready or a call failed."""
        while self._failure is None:
            calls: list[ToolCall] = []
            ready = self._ready()
            for step in ready:
                decided = self.prepare(step)
                if isinstance(decided, ToolCall):
                    calls.append(decided)
                else:
                    for event in self._block(step, decided):
                        yield Notify(event)
            approved = []
            for call in calls:
                if not call.writes:
                    approved.append(call)
                    continue
                answer = (yield Ask(call)) if self._asks else None
                if answer is True:
                    approved.append(call)
                    continue
                why = NOT_APPROVED if self._asks else NEEDS_APPROVAL
                for event in self._block(call.step, Blocked([], f"{why}: {call.tool} writes")):
                    yield Notify(event)
            if not ready:
                return
            if approved:
                yield CallTools(approved)

    # -- the steps --------------------------------------------------------------------------

    def _ready(self) -> list[PlanStep]:
        """The steps not yet ended nor running whose prerequisites (the steps they depend on
        or refer to) have all completed."""
        # A reference to a step the plan does not have waits for nothing: it blocks its step.
        numbers = {step.step for step in self.plan.plan}
        return [
            step
            for step in self.plan.plan
            if step.step not in self._ended
            and step.step not in self._running
            and all(self._completed(number) for number in _prerequisites(step) & numbers)
        ]

    def _completed(self, number: int) -> bool:
        ended = self._ended.get(number)
        return ended is not None and ended.status == "completed"

    def prepare(self, step: PlanStep) -> ToolCall | Blocked:
        """`step`'s call with its arguments resolved, or why it cannot be made."""
        tool = self._tools.get(step.required_arm)
        arguments = call_arguments(step, tool, self._outputs)
        if isinstance(arguments, Blocked):
            return arguments
        writes = step.writes is True or (tool is not None and tool.writes)
        return ToolCall(step.model_copy(update={"input": arguments}), arguments, writes)

    def start(self, call: ToolCall) -> RunEvent | None:
        """The call is about to be made: its `started` event; None when it must not start
        (a call of this plan failed meanwhile: nothing new starts)."""
        if self._failure is not None:
            return None
        self._running.add(call.step.step)
        return self._event("started", call.step, arguments=call.arguments)

    def finish(
        self, call: ToolCall, result: object = None, error: BaseException | None = None
    ) -> RunEvent:
        """Record what the call gave (its result, or the exception it raised); its event."""
        step = call.step
        self._running.discard(step.step)
        if error is not None:
            failure = f"{type(error).__name__}: {error}"
        elif not self.plain and is_tool_error(result):
            failure = error_text(result)
        else:
            output = (
                Output(result) if self.plain else read_output(result, self._tools.get(call.tool))
            )
            self._outputs[step.step] = output
            return self._end(self._step_run(step, "completed", call.arguments, result=output.value))
        ended = self._step_run(step, "failed", call.arguments, error=failure)
        self._failure = self._failure or ended
        return self._end(ended)

    def _block(self, step: PlanStep, blocked: Blocked) -> list[RunEvent]:
        """`step` is blocked, and every step that depends on it, directly or not, skipped."""
        events = [
            self._end(self._step_run(step, "blocked", missing=blocked.missing, error=blocked.error))
        ]
        waiting = {step.step}
        for later in self.plan.plan:
            if later.step in self._ended or not (_prerequisites(later) & waiting):
                continue
            waiting.add(later.step)
            why = f"not run: it depends on step {step.step}, which is blocked"
            events.append(self._end(self._step_run(later, "skipped", error=why)))
        return events

    def _close(self) -> list[RunEvent]:
        """The steps that never ran, skipped with the reason."""
        events = []
        for step in self.plan.plan:
            if step.step in self._ended:
                continue
            if self._failure is not None:
                why = f"not run: step {self._failure.step} failed"
            else:
                waits = sorted(n for n in _prerequisites(step) if not self._completed(n))
                why = f"not run: it waits for step {', '.join(map(str, waits))}"
            events.append(self._end(self._step_run(step, "skipped", error=why)))
        return events

    def _end(self, ended: StepRun) -> RunEvent:
        self._ended[ended.step] = ended
        return self._event(ended.status, outcome=ended)

    def _step_run(
        self,
        step: PlanStep,
        status: RunStatus,
        arguments: dict[str, Any] | None = None,
        **more: Any,
    ) -> StepRun:
        return StepRun(
            step=step.step,
            tool=step.required_arm,
            action=step.action,
            status=status,
            arguments=arguments,
            plan_version=self.plan.version,
            **more,
        )

    def _event(
        self,
        kind: EventKind,
        step: PlanStep | None = None,
        *,
        arguments: dict[str, Any] | None = None,
        outcome: StepRun | None = None,
    ) -> RunEvent:
        number = outcome.step if outcome else step.step if step else None
        tool = outcome.tool if outcome else step.required_arm if step else None
        return RunEvent(
            kind=kind,
            plan_id=self.plan.plan_id,
            replans=self.replans,
            step=number,
            tool=tool,
            arguments=arguments,
            outcome=outcome,
        )

    # -- replans ----------------------------------------------------------------------------

    def _failure_text(self) -> str:
        failure = self._failure
        assert failure is not None
        return f"step {failure.step} ({failure.tool}) failed: {failure.error}"

    def replan_request(self) -> dict[str, Any]:
        """The keyword arguments of `planner.replan`: the plan (by its id; whole when it was
        made by /plan/validate, which stores nothing), each ended step's state, the tools,
        `specialize` so new steps come with their arguments, an iterative plan's strategy,
        and the failure, if one is why."""
        states: dict[int, dict[str, Any]] = {}
        for number, ended in self._ended.items():
            if ended.status == "completed":
                output = compact_json(ended.result)[:MAX_STEP_TEXT_CHARS]
                states[number] = {"status": "completed", "output": output}
            elif ended.status == "failed":
                states[number] = {
                    "status": "failed",
                    "error": (ended.error or "")[:MAX_STEP_TEXT_CHARS],
                }
        stored = self.plan.metadata.source != "validated"
        request: dict[str, Any] = {
            "plan_id": self.plan.plan_id if stored else None,
            "previous": None if stored else self.plan,
            "step_states": states,
            "tools": self._tools_sent or None,
            "specialize": True,
        }
        if self.plan.strategy == "iterative":
            request["strategy"] = "iterative"
        if self._failure is not None:
            request["reason"] = self._failure_text()[:MAX_REASON_CHARS]
        return request

    def take(self, plan: PlanResponse) -> None:
        """Go on with the replan's answer: the completed steps it kept (same number, same
        tool) stay completed with their results; every other step runs. A replan after a
        failure counts toward `max_replans`; an iterative plan's next stage does not."""
        self.history += [ended for ended in self._ended.values() if ended.status != "completed"]
        kept = {
            step.step
            for step in plan.plan
            if self._completed(step.step) and self._ended[step.step].tool == step.required_arm
        }
        self._ended = {number: self._ended[number] for number in kept}
        self._outputs = {number: self._outputs[number] for number in kept}
        if self._failure is None:
            self._stages += 1
        else:
            self.replans += 1
        self._failure = None
        self.plan = plan

    def result(self) -> PlanRun:
        """What became of every step of the plan now being run."""
        return PlanRun(
            plan_id=self.plan.plan_id,
            replans=self.replans,
            steps=[self._ended[step.step] for step in self.plan.plan if step.step in self._ended],
            plan=self.plan,
            history=self.history,
            error=self.error,
        )


def _prerequisites(step: PlanStep) -> set[int]:
    """The steps `step` needs completed: those it depends on and those its input refers to."""
    needed = set(step.depends_on)
    stack: list[Any] = [step.input or {}]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            needed.update(ref.step for _, ref in references_in(value) if ref is not None)
        elif isinstance(value, Mapping):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return needed
