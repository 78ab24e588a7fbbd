"""A model's tool plan most of whose steps are unlike their tools (another plan with the tools'
names put on it) is a failed answer: the model is asked once more with each such step named,
and the rule-based plan answers when it cannot mend it. A plan with a few such steps is kept,
each named, and no plan with most of them scores 0.5 or more."""

from __future__ import annotations

import json
from typing import Any

import respx

from planner_arm.plan.estimation import TOOL_PLAN_CONFIDENCE
from support.app import answer, fixture_text, make_settings, running_app

# A library's tools, as an MCP server of it lists them: no annotations.
TOOLS: list[dict[str, Any]] = [
    {"id": "search_books", "description": "Search the catalogue by title; returns book_ids"},
    {"id": "get_book", "description": "Get the details and summary of a book by its book_id"},
    {"id": "find_member", "description": "Find a library member by e-mail; returns member_id"},
    {"id": "place_hold", "description": "Place a hold on a book for a member_id by book_id"},
    {"id": "list_loans", "description": "List the loans of a member by member_id"},
    {"id": "renew_loan", "description": "Renew a loan by its loan_id"},
]
GOAL = "Find the book Dune and place a hold on it for the member alice@example.com"
# The built-in agents' plan a small model wrote for "Fix authentication bug and add tests",
# each agent put onto one of the library's tools.
AGENT_TO_TOOL = {
    "planner": "find_member",
    "retriever": "search_books",
    "executor": "place_hold",
    "coder": "get_book",
    "judge": "list_loans",
}
GOOD = [
    {"step": 1, "tool": "search_books", "action": "search the book Dune", "depends_on": []},
    {"step": 2, "tool": "find_member", "action": "find alice@example.com", "depends_on": []},
    {"step": 3, "tool": "place_hold", "action": "place a hold on Dune", "depends_on": [1, 2]},
]


def _mismatched() -> list[dict[str, Any]]:
    """The real answer's steps, with the agents' names mapped onto the library's tools."""
    plan = json.loads(fixture_text("qwen2.5-coder-1.5b_json-object-schema.txt"))["plan"]
    return [
        {
            "step": step["step"],
            "tool": AGENT_TO_TOOL[step["required_arm"]],
            "action": step["action"],
            "depends_on": step["depends_on"],
        }
        for step in plan
    ]


async def _plan(chat_route: respx.Route, *answers: list[dict[str, Any]]) -> Any:
    chat_route.side_effect = [answer({"plan": steps}) for steps in answers]
    async with running_app(make_settings()) as client:
        response = await client.post("/plan", json={"goal": GOAL, "tools": TOOLS})
    assert response.status_code == 200, response.text
    return response.json()


def _codes(body: Any, kind: str) -> list[str]:
    return [note["code"] for note in body["metadata"][kind]]


async def test_a_plan_unlike_its_tools_is_asked_again_with_each_step_named(
    chat_route: respx.Route,
) -> None:
    body = await _plan(chat_route, _mismatched(), GOOD)
    assert body["metadata"]["source"] == "llm"
    assert body["metadata"]["attempts"] == 2
    assert [step["required_arm"] for step in body["plan"]] == [
        "search_books",
        "find_member",
        "place_hold",
    ]
    assert "action_unlike_tool" not in _codes(body, "warnings")
    # The follow-up names the problem and each step unlike its tool.
    follow_up = json.loads(chat_route.calls[1].request.content)["messages"][-1]["content"]
    assert "Most steps call a tool that does not do the step's action" in follow_up
    assert "step 2 (search_books): 'Create a test case for the authentication bug'" in follow_up
    assert "names nothing search_books does" in follow_up


async def test_a_plan_unlike_its_tools_twice_falls_back_to_the_rule_based_plan(
    chat_route: respx.Route,
) -> None:
    body = await _plan(chat_route, _mismatched(), _mismatched())
    metadata = body["metadata"]
    assert metadata["source"] == "fallback"
    assert chat_route.call_count == 2  # one retry, then the rules
    [fallback] = [note for note in metadata["warnings"] if note["code"] == "fallback_used"]
    assert fallback["detail"].startswith("invalid_plan: ")
    assert fallback["detail"].endswith("actions_unlike_tools")
    # The rule-based plan of the goal: the book and the member found, then the hold.
    tools = [step["required_arm"] for step in body["plan"]]
    assert "place_hold" in tools
    assert "renew_loan" not in tools


async def test_one_step_of_four_unlike_its_tool_is_kept_and_named(
    chat_route: respx.Route,
) -> None:
    steps = [
        *GOOD,
        {"step": 4, "tool": "get_book", "action": "list the loans of alice", "depends_on": [1]},
    ]
    body = await _plan(chat_route, steps)
    assert body["metadata"]["source"] == "llm"
    assert chat_route.call_count == 1
    [unlike] = [n for n in body["metadata"]["warnings"] if n["code"] == "action_unlike_tool"]
    said = "step 4 (get_book): 'list the loans of alice' reads like list_loans"
    assert unlike["detail"] == said
    assert body["confidence"] == round(TOOL_PLAN_CONFIDENCE * 0.8, 3)


async def test_half_the_steps_naming_nothing_their_tools_do_is_kept_and_named(
    chat_route: respx.Route,
) -> None:
    steps = [
        {"step": 1, "tool": "search_books", "action": "search the book Dune", "depends_on": []},
        {"step": 2, "tool": "find_member", "action": "Generate a code patch", "depends_on": []},
    ]
    body = await _plan(chat_route, steps)
    assert body["metadata"]["source"] == "llm"
    assert chat_route.call_count == 1
    [unlike] = [n for n in body["metadata"]["warnings"] if n["code"] == "action_unlike_tool"]
    said = "step 2 (find_member): 'Generate a code patch' names nothing find_member does"
    assert unlike["detail"] == said
    assert body["confidence"] < TOOL_PLAN_CONFIDENCE
