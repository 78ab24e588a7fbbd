"""`run_plan` and `run_plan_sync`: a plan run over an agent's tools, the I/O around the one
run (`runner.Run.loop`): calling the tools, asking `approve`, telling `on_progress`, asking
the planner to replan. The client never imports `mcp`: a session is whatever has
`call_tool(name, arguments)` (and `list_tools()`), or a plain callable."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any

from planner_arm.client.async_client import AsyncPlannerClient
from planner_arm.client.errors import PlannerError
from planner_arm.client.runner import (
    Answer,
    Ask,
    CallTools,
    Effect,
    Notify,
    PlanRun,
    Run,
    RunEvent,
    ToolCall,
)
from planner_arm.client.sync_client import PlannerClient
from planner_arm.plan.schemas import PlanResponse, PlanStep

Approve = Callable[[PlanStep], Any]
OnProgress = Callable[[RunEvent], Any]


async def run_plan(
    planner: AsyncPlannerClient,
    session: Any,
    plan: PlanResponse,
    *,
    approve: Approve | None = None,
    max_replans: int = 2,
    tools: Sequence[object] | None = None,
    on_progress: OnProgress | None = None,
    concurrency: int = 4,
) -> PlanRun:
    """Run `plan` over an agent's tools and return what became of every step.

    ```python
    async with AsyncPlannerClient(url) as planner:
        tools = (await session.list_tools()).tools
        plan = await planner.plan(goal, tools=tools, specialize=True)
        run = await run_plan(planner, session, plan, approve=ask_a_person)
    for step in run.steps:
        print(step.step, step.tool, step.status, step.result, step.missing, step.error)
    ```

    `session` is an initialized `mcp.ClientSession` (1.x or 2.x), any object with async
    `call_tool(name, arguments)` (and `list_tools()`), or an async callable
    `(tool, arguments) -> result` for an orchestrator that is not MCP. `tools` are the tools
    the plan was made over, in any shape `plan` takes; left out, `session.list_tools()`
    gives them (its first page). They say each tool's arguments (required ones, scalar or
    object), its hints, and they go with a replan.

    **Order.** A step starts when every step it depends on (or whose output it names) has
    completed; the steps ready together start together, at most `concurrency` at a time.

    **Data between steps.** Every string of a step's input is resolved before the call: one
    that is exactly `{{steps.N.output}}` or `{{steps.N.output.books[0].book_id}}` becomes
    the value it names, with its type; a reference inside longer text becomes the value as
    text (a string as it is, anything else as compact JSON). Step N's result is its MCP
    `structuredContent` (2.x: `structured_content`; FastMCP's `{"result": value}` of a bare
    return unwrapped), else the JSON of its text content (several items: a list), else the
    text; a plain callable's return value is the result as it is. A whole-output reference
    given to an argument whose schema wants a scalar, when the result is an object or a
    list, takes the field named like the argument (exactly, then ignoring case, `_` and
    `-`; at the result's top first, then inside its objects and lists) when it has exactly
    one value there.

    **Nothing half-known is called.** A step whose input has `needs`, a reference that
    cannot be resolved (the step it names did not complete, the path is not in its result,
    no field or several values fit), a required argument of the tool's `inputSchema` not
    given, or no input at all for a tool that requires arguments, is `blocked` with
    `missing` (the arguments) and `error` (why); every step depending on it, directly or
    not, is `skipped`. No tool is called with a string holding `{{` or with a `needs` object.

    **Writes need a yes.** A step writes when the plan says so (`step.writes`, which the
    service sets from the tool's hints, name and description) or its tool is annotated
    `destructiveHint: true` or `readOnlyHint: false`. It is called only when
    `approve(step)` (sync or async; `step.input` holds the arguments as they will be sent)
    returns `True`; without `approve` it is blocked with the error `"needs approval: ..."`,
    on any other answer with `"not approved: ..."`, and its dependents are skipped. Steps
    that only read are never asked about. A platform that knows better for its own tools
    annotates them before planning (`readOnlyHint: true` for one that only reads,
    `destructiveHint: true` for one that writes; the hints outrank the words), or decides in
    `approve` (a yes at once for the writes it trusts).

    **Failures replan.** A call that raises, or whose result says `isError` (2.x:
    `is_error`), makes the step `failed` with the error's text. The calls already running
    finish, nothing new starts, and `planner.replan` is asked with the plan's `plan_id` (the
    whole plan as `previous` when it is one `validate` answered, which the service does not
    store, or when the stored one is gone), every completed step's output (compact JSON, at
    most 8,000 characters) and every failed step's error, the `tools`, `specialize=True` and
    the failure as `reason`. The new plan's completed steps (a replan keeps their numbers)
    keep their results; its other steps run. After `max_replans` replans, or when the
    replan raises a `PlannerError`, the run stops: `PlanRun.error` says why, the steps not
    run are `skipped`. An iterative plan (`complete` false) goes on the same way once its
    stage has all completed: `planner.replan` with the steps' states and `strategy
    "iterative"` gives the next stage (such a report is not a replan: it does not count).

    **The result**: `PlanRun` with the last plan, its `plan_id`, the number of `replans`
    made after failures, for every step of the last plan a `StepRun` (`status`: completed,
    failed, blocked or skipped; `arguments` as sent or None; `result`; `missing`; `error`;
    the `plan_version` it ran under), and in `history` the steps of replaced plans that did
    not complete there. `run.completed` is true when every step completed.

    **Progress**: `on_progress(event)` (sync or async) gets a `RunEvent` when a step starts
    (with its arguments), ends (completed, failed, blocked, skipped: `outcome`) and when the
    plan is replanned. Exceptions raised by `approve` or `on_progress` propagate (the calls
    already running finish first).
    """
    if concurrency < 1:
        raise ValueError("concurrency is at least 1")
    plain = _plain(session)
    if tools is None:
        listed = not plain and hasattr(session, "list_tools")
        tools = _tools(await session.list_tools()) if listed else []
    run = Run(plan, tools, max_replans=max_replans, plain=plain, asks=approve is not None)
    driver = _AsyncDriver(run, planner, session, approve, on_progress, concurrency)
    loop = run.loop()
    answer: Answer = None
    while True:
        try:
            effect = loop.send(answer)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        answer = await driver.perform(effect)


class _AsyncDriver:
    """The I/O of one `run_plan`."""

    def __init__(
        self,
        run: Run,
        planner: AsyncPlannerClient,
        session: Any,
        approve: Approve | None,
        on_progress: OnProgress | None,
        concurrency: int,
    ) -> None:
        self._run = run
        self._planner = planner
        self._session = session
        self._approve = approve
        self._on_progress = on_progress
        self._limit = asyncio.Semaphore(concurrency)

    async def perform(self, effect: Effect) -> Answer:
        if isinstance(effect, Notify):
            await self._notify(effect.event)
        elif isinstance(effect, Ask):
            assert self._approve is not None
            return (await _awaited(self._approve(effect.call.step))) is True
        elif isinstance(effect, CallTools):
            await _all(self._call(call) for call in effect.calls)
        else:
            try:
                return await self._planner.replan(**effect.request)
            except PlannerError as error:
                return error
        return None

    async def _notify(self, event: RunEvent | None) -> None:
        if event is not None and self._on_progress is not None:
            await _awaited(self._on_progress(event))

    async def _call(self, call: ToolCall) -> None:
        async with self._limit:
            started = self._run.start(call)
            if started is None:
                return
            await self._notify(started)
            try:
                result = await _awaited(_invoke(self._session, self._run.plain, call))
            except Exception as error:
                await self._notify(self._run.finish(call, error=error))
            else:
                await self._notify(self._run.finish(call, result))


def run_plan_sync(
    planner: PlannerClient,
    session: Any,
    plan: PlanResponse,
    *,
    approve: Approve | None = None,
    max_replans: int = 2,
    tools: Sequence[object] | None = None,
    on_progress: OnProgress | None = None,
) -> PlanRun:
    """`run_plan` for the blocking client: the same run, one call at a time. `session` has
    a blocking `call_tool(name, arguments)` (and `list_tools()`), or is a callable
    `(tool, arguments) -> result`; `approve` and `on_progress` are plain functions. A
    session, `approve` or `on_progress` that answers with an awaitable is a TypeError: use
    `run_plan`."""
    plain = _plain(session)
    if inspect.iscoroutinefunction(session if plain else session.call_tool):
        raise TypeError("run_plan_sync got an async session: use run_plan")
    if tools is None:
        listed = not plain and hasattr(session, "list_tools")
        tools = _tools(_now(session.list_tools())) if listed else []
    run = Run(plan, tools, max_replans=max_replans, plain=plain, asks=approve is not None)
    driver = _SyncDriver(run, planner, session, approve, on_progress)
    loop = run.loop()
    answer: Answer = None
    while True:
        try:
            effect = loop.send(answer)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        answer = driver.perform(effect)


class _SyncDriver:
    """The I/O of one `run_plan_sync`: the calls one after another."""

    def __init__(
        self,
        run: Run,
        planner: PlannerClient,
        session: Any,
        approve: Approve | None,
        on_progress: OnProgress | None,
    ) -> None:
        self._run = run
        self._planner = planner
        self._session = session
        self._approve = approve
        self._on_progress = on_progress

    def perform(self, effect: Effect) -> Answer:
        if isinstance(effect, Notify):
            self._notify(effect.event)
        elif isinstance(effect, Ask):
            assert self._approve is not None
            return _now(self._approve(effect.call.step)) is True
        elif isinstance(effect, CallTools):
            for call in effect.calls:
                self._call(call)
        else:
            try:
                return self._planner.replan(**effect.request)
            except PlannerError as error:
                return error
        return None

    def _notify(self, event: RunEvent | None) -> None:
        if event is not None and self._on_progress is not None:
            _now(self._on_progress(event))

    def _call(self, call: ToolCall) -> None:
        started = self._run.start(call)
        if started is None:
            return
        self._notify(started)
        try:
            result = _invoke(self._session, self._run.plain, call)
        except Exception as error:
            self._notify(self._run.finish(call, error=error))
        else:
            self._notify(self._run.finish(call, _now(result)))


def _plain(session: Any) -> bool:
    """A plain callable `(tool, arguments) -> result`, not a session with `call_tool`."""
    if hasattr(session, "call_tool"):
        return False
    if callable(session):
        return True
    raise TypeError(
        f"session is an MCP client session, an object with call_tool(name, arguments) or a "
        f"callable (tool, arguments), not {type(session).__name__}"
    )


def _invoke(session: Any, plain: bool, call: ToolCall) -> Any:
    if plain:
        return session(call.tool, call.arguments)
    return session.call_tool(call.tool, call.arguments)


def _tools(listed: Any) -> list[object]:
    """The tools of a `tools/list` answer (`ListToolsResult.tools`, or the list itself)."""
    tools = getattr(listed, "tools", listed)
    if isinstance(listed, dict):
        tools = listed.get("tools", [])
    return list(tools)


async def _awaited(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _now(value: Any) -> Any:
    """A blocking callback's answer; an awaitable one is a mistake the caller must hear of."""
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()
        raise TypeError("run_plan_sync got an awaitable: use run_plan for async callables")
    return value


async def _all(calls: Iterable[Coroutine[Any, Any, None]]) -> None:
    """Run the coroutines together, each to its end; then the first exception one raised (a
    caller's callback's) propagates as it is."""
    for outcome in await asyncio.gather(*calls, return_exceptions=True):
        if isinstance(outcome, BaseException):
            raise outcome
