"""The sessions `run_plan` takes besides an MCP client session: a plain async callable
(its return value is the result as it is), any object with `list_tools` and `call_tool`
(its results read by MCP's 1.x or 2.x field names, as objects or as JSON), and the sync twin
`run_plan_sync` with a blocking session; and how many calls run at once."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from planner_arm.client import RunEvent, run_plan, run_plan_sync
from support.lending_server import (
    ScriptedPlanner,
    assert_nothing_half_known,
    library_session,
    plan_of,
    plan_step,
)

SEARCH = {
    "name": "search_books",
    "description": "Search the catalogue",
    "inputSchema": {
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    },
}
HOLD = {
    "name": "place_hold",
    "description": "Place a hold on a book for a member",
    "inputSchema": {
        "type": "object",
        "properties": {"book_id": {"type": "string"}, "member_id": {"type": "string"}},
        "required": ["book_id", "member_id"],
    },
    "annotations": {"destructiveHint": True},
}
FOUND = {"books": [{"bookId": "B-1", "title": "Dune"}]}
PLAN = plan_of(
    plan_step(1, "search_books", {"query": "Dune"}),
    plan_step(2, "place_hold", {"book_id": "{{steps.1.output}}", "member_id": "M-7"}, [1]),
)


async def test_a_plain_async_callable_is_a_session_and_its_return_is_the_result() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    async def tool(name: str, arguments: dict[str, Any]) -> Any:
        calls.append((name, arguments))
        # A dict that looks like no MCP result stays as it is.
        return FOUND if name == "search_books" else {"hold_id": "H-1", "content": "kept"}

    asked: list[str] = []

    def approve(step: Any) -> bool:
        asked.append(step.required_arm)
        return True

    async with ScriptedPlanner() as planner:
        run = await run_plan(planner, tool, PLAN, tools=[SEARCH, HOLD], approve=approve)
    assert_nothing_half_known(calls)
    # book_id found as bookId inside the books list (case, `_` and `-` aside).
    assert calls == [
        ("search_books", {"query": "Dune"}),
        ("place_hold", {"book_id": "B-1", "member_id": "M-7"}),
    ]
    assert asked == ["place_hold"]
    assert run.result(1) == FOUND
    assert run.result(2) == {"hold_id": "H-1", "content": "kept"}


async def test_a_callable_without_tools_sends_arguments_as_they_resolve() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    async def tool(name: str, arguments: dict[str, Any]) -> Any:
        calls.append((name, arguments))
        if name == "place_hold":
            raise ConnectionResetError("the library is offline")
        return FOUND

    async with ScriptedPlanner() as planner:
        run = await run_plan(planner, tool, PLAN, max_replans=0)
    assert_nothing_half_known(calls)
    # No schema says book_id wants a scalar: the whole output goes as it is.
    assert calls[1] == ("place_hold", {"book_id": FOUND, "member_id": "M-7"})
    assert run.steps[1].status == "failed"
    assert run.steps[1].error == "ConnectionResetError: the library is offline"


class _ObjectSession:
    """Not an MCP session: async list_tools and call_tool, results in several shapes."""

    def __init__(self, results: dict[str, Any]) -> None:
        self.results = results
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def list_tools(self) -> Any:
        return SimpleNamespace(tools=[SEARCH, HOLD])

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        self.calls.append((name, arguments))
        result = self.results[name]
        if isinstance(result, Exception):
            raise result
        return result


def _text(text: str) -> SimpleNamespace:
    return SimpleNamespace(type="text", text=text)


@pytest.mark.parametrize(
    "search_result",
    [
        pytest.param(
            SimpleNamespace(content=[], structured_content=FOUND, is_error=False), id="2.x-names"
        ),
        pytest.param(SimpleNamespace(content=[_text('{"books": [{"bookId": "B-1"}]}')]), id="text"),
        pytest.param(
            {"content": [{"type": "text", "text": '{"bookId": "B-1"}'}], "isError": False},
            id="json",
        ),
    ],
)
async def test_an_object_session_and_its_results_by_mcps_field_names(search_result: Any) -> None:
    hold = SimpleNamespace(content=[_text("hold H-1 placed")], structuredContent=None)
    session = _ObjectSession({"search_books": search_result, "place_hold": hold})
    async with ScriptedPlanner() as planner:
        run = await run_plan(planner, session, PLAN, approve=lambda step: True)
    assert_nothing_half_known(session.calls)
    assert session.calls[1] == ("place_hold", {"book_id": "B-1", "member_id": "M-7"})
    assert run.result(2) == "hold H-1 placed"
    assert run.completed


async def test_an_error_result_or_an_exception_of_an_object_session_fails_the_step() -> None:
    failed = SimpleNamespace(content=[_text("quota exceeded")], is_error=True)
    for result, error in [(failed, "quota exceeded"), (TimeoutError("slow"), "TimeoutError: slow")]:
        session = _ObjectSession({"search_books": result})
        async with ScriptedPlanner() as planner:
            run = await run_plan(planner, session, PLAN, max_replans=0)
        assert_nothing_half_known(session.calls)
        assert [(step.status, step.error) for step in run.steps] == [
            ("failed", error),
            ("skipped", "not run: step 1 failed"),
        ]


class _BlockingSession:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.failed_once = False

    def list_tools(self) -> Any:
        return SimpleNamespace(tools=[SEARCH, HOLD])

    def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        self.calls.append((name, arguments))
        if name == "place_hold" and not self.failed_once:
            self.failed_once = True
            return {
                "content": [{"type": "text", "text": "member M-7 is suspended"}],
                "isError": True,
            }
        return {"content": [], "structuredContent": FOUND if name == "search_books" else {"ok": 1}}


def test_the_sync_twin_runs_replans_and_asks_with_plain_functions() -> None:
    retry = plan_of(
        plan_step(1, "search_books", {"query": "Dune"}),
        plan_step(3, "place_hold", {"book_id": "{{steps.1.output}}", "member_id": "M-7"}, [1]),
        plan_id="p2",
        version=2,
    )
    service = ScriptedPlanner(retry)
    session = _BlockingSession()
    events: list[RunEvent] = []
    with service as planner:
        run = run_plan_sync(
            planner, session, PLAN, approve=lambda step: True, on_progress=events.append
        )
    assert_nothing_half_known(session.calls)
    assert run.completed
    assert run.replans == 1
    assert [name for name, _ in session.calls] == ["search_books", "place_hold", "place_hold"]
    assert service.bodies[0]["step_states"]["2"] == {
        "status": "failed",
        "error": "member M-7 is suspended",
    }
    assert [event.kind for event in events] == [
        "started",
        "completed",
        "started",
        "failed",
        "replanned",
        "started",
        "completed",
    ]


def test_the_sync_twin_refuses_async_callables() -> None:
    async def tool(name: str, arguments: dict[str, Any]) -> Any:
        return FOUND

    with ScriptedPlanner() as planner, pytest.raises(TypeError, match="use run_plan"):
        run_plan_sync(planner, tool, PLAN, tools=[SEARCH, HOLD])
    with pytest.raises(TypeError, match="not int"):
        run_plan_sync(planner, 3, PLAN)


async def test_ready_steps_run_together_at_most_concurrency_at_a_time() -> None:
    plan = plan_of(*(plan_step(n, "search_books", {"query": f"q{n}"}) for n in range(1, 6)))
    running, most = 0, 0

    async def tool(name: str, arguments: dict[str, Any]) -> Any:
        nonlocal running, most
        running += 1
        most = max(most, running)
        for _ in range(3):
            await asyncio.sleep(0)  # hand the loop to the other calls
        running -= 1
        return arguments

    async with ScriptedPlanner() as planner:
        for concurrency, expected in [(2, 2), (4, 4), (1, 1)]:
            most = 0
            run = await run_plan(planner, tool, plan, tools=[SEARCH], concurrency=concurrency)
            assert run.completed
            assert most == expected
        with pytest.raises(ValueError, match="concurrency"):
            await run_plan(planner, tool, plan, concurrency=0)


async def test_calls_already_running_finish_after_a_failure_and_nothing_new_starts() -> None:
    plan = plan_of(*(plan_step(n, "search_books", {"query": f"q{n}"}) for n in (1, 2, 3)))
    failed = asyncio.Event()
    calls: list[str] = []

    async def tool(name: str, arguments: dict[str, Any]) -> Any:
        calls.append(arguments["query"])
        if arguments["query"] == "q2":
            failed.set()
            raise RuntimeError("down")
        await failed.wait()
        return "done"

    async with ScriptedPlanner() as planner:
        run = await run_plan(planner, tool, plan, tools=[SEARCH], concurrency=2, max_replans=0)
    assert calls == ["q1", "q2"]
    assert [step.status for step in run.steps] == ["completed", "failed", "skipped"]
    assert run.result(1) == "done"


async def test_tools_default_to_what_the_mcp_session_lists() -> None:
    # Without tools, nothing says place_hold (annotated nowhere here) writes; with the
    # session's listing, its schema still requires member_id, so the step is blocked.
    plan = plan_of(plan_step(1, "place_hold", {"book_id": "B-1"}))
    async with library_session() as (library, session, calls), ScriptedPlanner() as planner:
        run = await run_plan(planner, session, plan)
    assert calls == []
    assert library.holds == []
    assert (run.steps[0].status, run.steps[0].missing) == ("blocked", ["member_id"])
