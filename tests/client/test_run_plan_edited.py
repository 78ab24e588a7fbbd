"""Approve or edit, then run: a plan the caller edited goes through `validate` with the
request's tools and goal (its steps name those tools, its inputs are checked against their
schemas, each step says whether it writes), and `run_plan` runs what `validate` answered;
a failure in it is replanned with the plan sent whole as `previous`, since the service
stores no validated plan. Also: the service writes `writes` and field paths on /plan."""

from __future__ import annotations

from typing import Any

from planner_arm.client import AsyncPlannerClient, PlanStep, run_plan
from support.app import app_transport, make_settings
from support.lending_server import library_session

BASE = "http://localhost"
GOAL = "Place a hold on Dune for alice@example.com"


def _tools(listed: Any) -> list[dict[str, Any]]:
    return [tool.model_dump(by_alias=True, exclude_none=True) for tool in listed.tools]


async def test_the_plan_says_which_steps_write_and_which_field_each_argument_wants() -> None:
    async with (
        library_session() as (_, session, _calls),
        app_transport(make_settings(llm=False)) as transport,
        AsyncPlannerClient(BASE, transport=transport) as planner,
    ):
        tools = _tools(await session.list_tools())
        plan = await planner.plan(GOAL, tools=tools, specialize=True)
    by_tool = {step.required_arm: step for step in plan.plan}
    assert {tool: step.writes for tool, step in by_tool.items()} == {
        "search_books": False,
        "find_member": False,
        "place_hold": True,
    }
    search, member = by_tool["search_books"].step, by_tool["find_member"].step
    assert by_tool["place_hold"].input == {
        "book_id": f"{{{{steps.{search}.output.books[0].book_id}}}}",
        "member_id": f"{{{{steps.{member}.output.member_id}}}}",
    }


async def test_an_edited_plan_validated_with_the_tools_runs_and_replans_as_previous() -> None:
    asked: list[PlanStep] = []

    def approve(step: PlanStep) -> bool:
        asked.append(step)
        return True

    async with (
        library_session() as (library, session, calls),
        app_transport(make_settings(llm=False)) as transport,
        AsyncPlannerClient(BASE, transport=transport) as planner,
    ):
        tools = _tools(await session.list_tools())
        plan = await planner.plan(GOAL, tools=tools, specialize=True)
        # The person adds a check of the shelves before the hold (it fails once).
        search = next(step.step for step in plan.plan if step.required_arm == "search_books")
        check = PlanStep(
            step=9,
            action="Check that the book is not on the shelves",
            required_arm="check_availability",
            acceptance_criteria=["The copies on the shelves are known"],
            depends_on=[search],
            input={"book_id": f"{{{{steps.{search}.output.books[0].book_id}}}}"},
            writes=False,
        )
        # A model or a person saying a write does not write changes nothing.
        edited = [step.model_copy(update={"writes": False}) for step in plan.plan] + [check]
        checked = await planner.validate(edited, tools=tools, goal=GOAL)
        assert checked.valid, checked.errors
        assert checked.plan is not None
        assert checked.plan.goal == GOAL
        assert [s.writes for s in checked.plan.plan if s.required_arm == "place_hold"] == [True]
        run = await run_plan(planner, session, checked.plan, approve=approve)
    assert run.completed, run
    assert run.replans == 1
    assert run.plan.parent_plan_id == checked.plan.plan_id
    assert [hold.book_id for hold in library.holds] == ["B-1"]
    assert [step.required_arm for step in asked] == ["place_hold"]
    # The failed check was called once before the replan and once after.
    assert [name for name, _ in calls].count("check_availability") == 2


async def test_validate_checks_the_inputs_against_the_tools_schemas() -> None:
    async with (
        library_session() as (_, session, _calls),
        app_transport(make_settings(llm=False)) as transport,
        AsyncPlannerClient(BASE, transport=transport) as planner,
    ):
        tools = _tools(await session.list_tools())
        step = PlanStep(
            step=1,
            action="Find the member",
            required_arm="find_member",
            acceptance_criteria=["The member is found"],
            input={"email": 42},
        )
        without_tools = await planner.validate([step])
        checked = await planner.validate([step], tools=tools)
    assert "unknown_arm" in {error.code for error in without_tools.errors}
    assert not checked.valid
    assert [(error.code, error.step) for error in checked.errors] == [("invalid_input", 1)]
    assert "email" in checked.errors[0].message
