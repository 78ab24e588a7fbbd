"""`run_plan` over a FastMCP server in process (pydantic models with an enum and nested
models, so the schemas hold `$defs`): data flowing between steps by path and by whole output,
steps that cannot be called blocked and their dependents skipped, writes called only with a
yes, a failed call replanned, progress as it runs. No tool is ever called with a string
holding `{{` or a `needs` object (`library_session` checks every call on the way out)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from planner_arm.client import (
    AsyncPlannerClient,
    PlanResponse,
    PlanStep,
    RunEvent,
    run_plan,
)
from support.app import app_transport, make_settings
from support.lending_server import ScriptedPlanner, library_session, plan_of, plan_step

BASE = "http://localhost"


def _statuses(run: Any) -> dict[int, str]:
    return {step.step: step.status for step in run.steps}


def _yes(asked: list[PlanStep]) -> Any:
    def approve(step: PlanStep) -> bool:
        asked.append(step)
        return True

    return approve


async def test_data_flows_by_path_by_whole_output_and_inside_text() -> None:
    plan = plan_of(
        plan_step(1, "search_books", {"query": "Emma", "format": "audio"}),
        plan_step(2, "find_member", {"email": "alice@example.com"}),
        plan_step(
            3,
            "place_hold",
            {
                "book_id": "{{steps.1.output.books[0].book_id}}",
                "member_id": "{{steps.2.output}}",
                "pickup": {"name": "Central", "city": "{{steps.2.output.name}}'s city"},
            },
            [1, 2],
            writes=True,
        ),
        plan_step(4, "count_books", {"query": "Emma {{steps.1.output.books[0].author}}"}, [1]),
    )
    asked: list[PlanStep] = []
    async with library_session() as (library, session, calls), ScriptedPlanner() as planner:
        run = await run_plan(planner, session, plan, approve=_yes(asked))
    assert run.completed
    assert run.replans == 0
    assert dict(calls)["place_hold"] == {
        "book_id": "B-4",
        "member_id": "M-7",
        "pickup": {"name": "Central", "city": "Alice's city"},
    }
    # FastMCP sends a bare int as {"result": 1}; the result is the int.
    assert dict(calls)["count_books"] == {"query": "Emma Jane Austen"}
    assert run.result(4) == 1
    assert run.result(3)["hold_id"] == "H-1"
    assert [hold.book_id for hold in library.holds] == ["B-4"]
    # approve saw the step with the arguments it would send.
    assert [step.input for step in asked] == [dict(calls)["place_hold"]]


async def test_a_whole_output_with_several_values_of_the_field_blocks_and_skips() -> None:
    plan = plan_of(
        plan_step(1, "search_books", {"query": "Herbert"}),
        plan_step(2, "place_hold", {"book_id": "{{steps.1.output}}", "member_id": "M-7"}, [1]),
        plan_step(3, "cancel_hold", {"hold_id": "{{steps.2.output.hold_id}}"}, [2]),
        plan_step(4, "list_branches", {}),
    )
    asked: list[PlanStep] = []
    async with library_session() as (library, session, calls), ScriptedPlanner() as planner:
        run = await run_plan(planner, session, plan, approve=_yes(asked))
    assert _statuses(run) == {1: "completed", 2: "blocked", 3: "skipped", 4: "completed"}
    blocked = run.steps[1]
    assert blocked.missing == ["book_id"]
    assert blocked.error == "steps.1.output has 3 values named book_id"
    assert blocked.arguments is None
    assert run.steps[2].error == "not run: it depends on step 2, which is blocked"
    assert [name for name, _ in calls] == ["search_books", "list_branches"]
    assert asked == []
    assert library.holds == []
    assert not run.completed


async def test_a_whole_output_without_the_field_blocks() -> None:
    plan = plan_of(
        plan_step(1, "list_branches", None),
        plan_step(2, "check_availability", {"book_id": "{{steps.1.output}}"}, [1]),
    )
    async with library_session() as (_, session, calls), ScriptedPlanner() as planner:
        run = await run_plan(planner, session, plan)
    # A tool without required arguments is called with {} when its step has no input.
    assert calls == [("list_branches", {})]
    assert run.steps[1].status == "blocked"
    assert run.steps[1].missing == ["book_id"]
    assert run.steps[1].error == "steps.1.output has no field named book_id"


async def test_a_step_that_needs_a_person_is_blocked_and_its_dependents_skipped() -> None:
    needs = {
        "needs": "human_or_model",
        "missing": ["email"],
        "arguments": {},
        "instruction": "Find the member by e-mail",
    }
    plan = plan_of(
        plan_step(1, "find_member", needs),
        plan_step(2, "search_books", {"query": "Emma"}),
        plan_step(3, "place_hold", {"book_id": "B-4", "member_id": "{{steps.1.output}}"}, [1, 2]),
        plan_step(4, "cancel_hold", {"hold_id": "{{steps.3.output.hold_id}}"}, [3]),
    )
    events: list[RunEvent] = []
    async with library_session() as (_, session, calls), ScriptedPlanner() as planner:
        run = await run_plan(
            planner, session, plan, approve=lambda step: True, on_progress=events.append
        )
    assert _statuses(run) == {1: "blocked", 2: "completed", 3: "skipped", 4: "skipped"}
    assert run.steps[0].missing == ["email"]
    assert run.steps[0].error == "needs human_or_model: Find the member by e-mail"
    assert calls == [("search_books", {"query": "Emma"})]
    assert [(event.kind, event.step) for event in events if event.kind != "started"] == [
        ("blocked", 1),
        ("skipped", 3),
        ("skipped", 4),
        ("completed", 2),
    ]


async def test_a_required_argument_left_out_or_no_input_at_all_blocks_the_step() -> None:
    plan = plan_of(
        plan_step(1, "place_hold", {"book_id": "B-1"}, writes=True),
        plan_step(2, "find_member", None),
        plan_step(3, "search_books", {"query": "{{steps.9.output}}"}),
        plan_step(4, "search_books", {"query": "{{ step 1 }}"}),
    )
    asked: list[PlanStep] = []
    async with library_session() as (library, session, calls), ScriptedPlanner() as planner:
        run = await run_plan(planner, session, plan, approve=_yes(asked))
    assert [(step.status, step.missing) for step in run.steps] == [
        ("blocked", ["member_id"]),
        ("blocked", ["email"]),
        ("blocked", ["query"]),
        ("blocked", ["query"]),
    ]
    assert run.steps[0].error == "required argument not given"
    assert run.steps[2].error == "steps.9.output is not available: step 9 has not completed"
    assert run.steps[3].error == "'{{ step 1 }}' is not a reference"
    assert calls == []
    assert asked == []
    assert library.holds == []


async def _never_asked(step: PlanStep) -> bool:
    raise AssertionError(f"asked about {step.required_arm}, which only reads")


async def _async_yes(step: PlanStep) -> bool:
    return True


@pytest.mark.parametrize(
    ("approve", "called", "error"),
    [
        pytest.param(lambda step: True, True, None, id="yes"),
        pytest.param(_async_yes, True, None, id="async-yes"),
        pytest.param(lambda step: False, False, "not approved: place_hold writes", id="no"),
        pytest.param(lambda step: "yes", False, "not approved: place_hold writes", id="not-True"),
        pytest.param(None, False, "needs approval: place_hold writes", id="none"),
    ],
)
async def test_a_write_is_called_only_with_a_yes(approve: Any, called: bool, error: str) -> None:
    plan = plan_of(
        plan_step(1, "search_books", {"query": "Emma"}),
        plan_step(2, "place_hold", {"book_id": "B-4", "member_id": "M-7"}, [1], writes=True),
        plan_step(3, "cancel_hold", {"hold_id": "{{steps.2.output.hold_id}}"}, [2]),
    )
    async with library_session() as (library, session, calls), ScriptedPlanner() as planner:
        run = await run_plan(planner, session, plan, approve=approve)
    assert ("place_hold" in dict(calls)) is called
    assert len(library.holds) == int(called)
    assert run.steps[1].status == ("completed" if called else "blocked")
    assert run.steps[1].error == error
    # cancel_hold is annotated destructive: asked too, and skipped when its input is missing.
    assert run.steps[2].status == ("completed" if called else "skipped")


async def test_a_tool_annotated_destructive_asks_even_when_the_plan_says_nothing() -> None:
    plan = plan_of(
        plan_step(1, "cancel_hold", {"hold_id": "H-9"}),
        plan_step(2, "count_books", {"query": "Dune"}),
    )
    asked: list[PlanStep] = []
    async with library_session() as (_, session, calls), ScriptedPlanner() as planner:
        run = await run_plan(planner, session, plan, approve=_yes(asked))
    assert [step.required_arm for step in asked] == ["cancel_hold"]
    # A bare string result, unwrapped from FastMCP's {"result": ...}.
    assert run.result(1) == "hold H-9 cancelled"
    assert run.result(2) == 3
    assert len(calls) == 2


async def test_steps_that_only_read_never_ask() -> None:
    plan = plan_of(
        plan_step(1, "search_books", {"query": "Dune", "format": "ebook"}, writes=False),
        plan_step(2, "count_books", {"query": "Austen"}),
        plan_step(3, "list_branches", {}),
    )
    async with library_session() as (_, session, calls), ScriptedPlanner() as planner:
        run = await run_plan(planner, session, plan, approve=_never_asked)
    assert run.completed
    assert run.result(1) == {
        "books": [
            {
                "book_id": "B-3",
                "title": "Children of Dune",
                "author": "Frank Herbert",
                "format": "ebook",
            }
        ]
    }
    # A list result arrives wrapped as {"result": [...]}: the list.
    assert run.result(3) == [{"name": "Central", "city": "Paris"}]
    assert len(calls) == 3


def _retry_plan(version: int = 2) -> PlanResponse:
    return plan_of(
        plan_step(1, "search_books", {"query": "Emma"}),
        plan_step(3, "check_availability", {"book_id": "{{steps.1.output.books[0].book_id}}"}, [1]),
        plan_step(
            4, "place_hold", {"book_id": "{{steps.3.output}}", "member_id": "M-7"}, [3], writes=True
        ),
        plan_id="plan-2",
        version=version,
    )


async def test_a_failed_call_is_replanned_and_the_run_goes_on_with_the_new_plan() -> None:
    plan = plan_of(
        plan_step(1, "search_books", {"query": "Emma"}),
        plan_step(2, "check_availability", {"book_id": "{{steps.1.output}}"}, [1]),
        plan_step(3, "place_hold", {"book_id": "{{steps.2.output}}", "member_id": "M-7"}, [2]),
    )
    service = ScriptedPlanner(_retry_plan())
    events: list[RunEvent] = []
    async with library_session() as (library, session, calls), service as planner:
        tools = (await session.list_tools()).tools
        run = await run_plan(
            planner, session, plan, approve=lambda step: True, on_progress=events.append
        )
    assert run.completed
    assert run.replans == 1
    assert run.plan_id == "plan-2"
    assert [(step.step, step.plan_version) for step in run.steps] == [(1, 1), (3, 2), (4, 2)]
    assert [name for name, _ in calls] == [
        "search_books",
        "check_availability",
        "check_availability",
        "place_hold",
    ]
    assert [hold.book_id for hold in library.holds] == ["B-4"]
    # The failed attempt is kept in history.
    [failed] = run.history
    assert (failed.step, failed.status, failed.plan_version) == (2, "failed", 1)
    assert "the shelf index is being rebuilt" in (failed.error or "")
    [body] = service.bodies
    assert body["plan_id"] == "plan-1"
    assert "previous" not in body
    assert body["specialize"] is True
    assert [tool["name"] for tool in body["tools"]] == [tool.name for tool in tools]
    assert body["step_states"] == {
        "1": {"status": "completed", "output": json.dumps(run.result(1), separators=(",", ":"))},
        "2": {"status": "failed", "error": failed.error},
    }
    assert body["reason"].startswith("step 2 (check_availability) failed: ")
    assert [event.kind for event in events].count("replanned") == 1
    replanned = next(event for event in events if event.kind == "replanned")
    assert (replanned.plan_id, replanned.replans) == ("plan-2", 1)


async def test_nothing_new_starts_after_a_failure() -> None:
    plan = plan_of(
        plan_step(1, "check_availability", {"book_id": "B-1"}),
        plan_step(2, "search_books", {"query": "Emma"}),
        plan_step(3, "count_books", {"query": "Dune"}),
        plan_step(4, "list_branches", {}, [2]),
    )
    async with library_session() as (_, session, calls), ScriptedPlanner() as planner:
        run = await run_plan(planner, session, plan, max_replans=0, concurrency=1)
    # 1, 2 and 3 were ready together; one at a time, and 1 failed: none of the others started.
    assert [name for name, _ in calls] == ["check_availability"]
    assert _statuses(run) == {1: "failed", 2: "skipped", 3: "skipped", 4: "skipped"}
    assert run.steps[2].error == "not run: step 1 failed"
    assert run.error == (
        f"step 1 (check_availability) failed: {run.steps[0].error}; no replan left (max_replans 0)"
    )


async def test_replans_stop_at_max_replans() -> None:
    always_failing = plan_step(1, "find_member", {"email": "bob@example.com"})
    service = ScriptedPlanner(
        plan_of(plan_step(2, "find_member", {"email": "bob@example.com"}), plan_id="p2", version=2)
    )
    async with library_session() as (_, session, calls), service as planner:
        run = await run_plan(planner, session, plan_of(always_failing), max_replans=1)
    assert run.replans == 1
    assert len(service.bodies) == 1
    assert calls == [("find_member", {"email": "bob@example.com"})] * 2
    assert [step.status for step in run.steps] == ["failed"]
    assert "no member has the e-mail address bob@example.com" in (run.steps[0].error or "")
    assert (run.error or "").endswith("no replan left (max_replans 1)")
    assert not run.completed


async def test_a_replan_the_service_refuses_stops_the_run() -> None:
    service = ScriptedPlanner(409)
    plan = plan_of(plan_step(1, "find_member", {"email": "bob@example.com"}))
    async with library_session() as (_, session, calls), service as planner:
        run = await run_plan(planner, session, plan)
    assert run.replans == 0
    assert len(calls) == 1
    assert "the replan failed: 409 replan_limit: no" in (run.error or "")


async def test_a_validated_plan_and_a_plan_the_store_lost_are_replanned_sent_whole() -> None:
    validated = plan_of(plan_step(1, "check_availability", {"book_id": "B-1"}))
    validated.metadata.source = "validated"
    stored = plan_of(plan_step(1, "check_availability", {"book_id": "B-2"}))
    retry = plan_of(plan_step(2, "list_branches", {}), plan_id="p2", version=2)
    service = ScriptedPlanner(retry, 404, retry)
    async with library_session() as (_, session, _calls), service as planner:
        first = await run_plan(planner, session, validated)
        second = await run_plan(planner, session, stored)
    assert first.completed
    assert second.completed
    assert [
        sorted(key for key in ("plan_id", "previous") if key in body) for body in service.bodies
    ] == [
        ["previous"],
        ["plan_id"],
        ["previous"],
    ]
    assert service.bodies[0]["previous"]["plan"][0]["input"] == {"book_id": "B-1"}


async def test_progress_tells_each_start_end_and_replan_and_its_errors_propagate() -> None:
    plan = plan_of(
        plan_step(1, "search_books", {"query": "Emma"}),
        plan_step(2, "check_availability", {"book_id": "{{steps.1.output}}"}, [1]),
    )
    seen: list[tuple[str, int | None]] = []

    async def on_progress(event: RunEvent) -> None:
        seen.append((event.kind, event.step))

    async with library_session() as (_, session, _calls), ScriptedPlanner(_retry_plan()) as planner:
        run = await run_plan(planner, session, plan, on_progress=on_progress)
    # Step 4 of the new plan is a write nobody may approve.
    assert seen == [
        ("started", 1),
        ("completed", 1),
        ("started", 2),
        ("failed", 2),
        ("replanned", None),
        ("started", 3),
        ("completed", 3),
        ("blocked", 4),
    ]
    assert run.steps[-1].error == "needs approval: place_hold writes"

    def broken(event: RunEvent) -> None:
        raise LookupError("the UI is gone")

    async with library_session() as (_, session, calls), ScriptedPlanner() as planner:
        with pytest.raises(LookupError, match="the UI is gone"):
            await run_plan(planner, session, plan, on_progress=broken)
        with pytest.raises(KeyError, match="nobody"):
            await run_plan(
                planner,
                session,
                plan_of(plan_step(1, "cancel_hold", {"hold_id": "H-1"})),
                approve=lambda step: {}["nobody"],
            )
    assert calls == []


async def test_a_plan_the_service_made_over_the_servers_tools_runs_to_the_end() -> None:
    goal = "Find the book 'Emma', check its availability and place a hold on it for member M-7"
    async with (
        library_session() as (library, session, calls),
        app_transport(make_settings(llm=False)) as transport,
        AsyncPlannerClient(BASE, transport=transport) as planner,
    ):
        tools = (await session.list_tools()).tools
        plan = await planner.plan(goal, tools=tools, specialize=True)
        run = await run_plan(planner, session, plan, approve=lambda step: True)
    # check_availability fails once: the service replans and the run finishes the work.
    assert run.completed
    assert run.replans == 1
    assert run.history[0].tool == "check_availability"
    assert [(hold.book_id, hold.member_id) for hold in library.holds] == [("B-4", "M-7")]
    assert calls[0] == ("search_books", {"query": "Emma"})
    assert [name for name, _ in calls].count("search_books") == 1


async def test_an_iterative_plan_is_run_stage_after_stage() -> None:
    goal = "Find the book 'Emma', then count the books by Jane Austen, then list the branches"
    events: list[RunEvent] = []
    async with (
        library_session() as (_, session, calls),
        app_transport(make_settings(llm=False)) as transport,
        AsyncPlannerClient(BASE, transport=transport) as planner,
    ):
        tools = (await session.list_tools()).tools
        plan = await planner.plan(goal, tools=tools, specialize=True, strategy="iterative")
        run = await run_plan(planner, session, plan, on_progress=events.append)
    assert not plan.complete
    assert len(plan.plan) == 1
    # Each stage's report is a replan that does not count: none failed.
    assert run.completed
    assert run.replans == 0
    assert run.plan.complete
    assert [name for name, _ in calls] == ["search_books", "count_books", "list_branches"]
    assert [event.kind for event in events].count("replanned") >= 2
