"""A model's tool plan read with the tool graph: the fields the service fills by design are no
repairs, what the graph mends (a producer step, a link, an identical repeat) and what it finds
(an action unlike its tool, a piece of the goal no tool does) are named and cost confidence."""

from __future__ import annotations

import json
from typing import Any

import respx

from planner_arm.plan.estimation import TOOL_PLAN_CONFIDENCE
from support.app import answer, make_settings, running_app

TOOLS: list[dict[str, Any]] = [
    {"id": "search_movie", "description": "Search movies by title and return their ids"},
    {
        "type": "function",
        "function": {
            "name": "GetMovieCredit",
            "description": "Get the cast and crew of a movie by its movie id",
            "parameters": {"type": "object", "properties": {"movie_id": {"type": "string"}}},
        },
    },
    {
        "id": "special_foreign_currency_purchase_request",
        "description": "Buy foreign currency cash at a bank branch",
    },
    {"id": "send_email", "description": "Send an email message to an address"},
]
GOAL = "Search the movie Titanic by its title, and then get the cast of the movie"


def _step(number: int, tool: str, action: str, after: list[int]) -> dict[str, Any]:
    """A step exactly in the tool prompt's shape."""
    return {"step": number, "tool": tool, "action": action, "depends_on": after}


async def _plan(chat_route: respx.Route, steps: list[dict[str, Any]], goal: str = GOAL) -> Any:
    chat_route.return_value = answer({"plan": steps})
    async with running_app(make_settings()) as client:
        response = await client.post("/plan", json={"goal": goal, "tools": TOOLS})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["metadata"]["source"] == "llm"
    return body


def _codes(body: Any, kind: str) -> list[str]:
    return [note["code"] for note in body["metadata"][kind]]


def _calls(body: Any) -> list[tuple[str, list[int]]]:
    return [(step["required_arm"], step["depends_on"]) for step in body["plan"]]


async def test_an_answer_in_the_tool_prompts_own_shape_has_no_repairs_and_full_confidence(
    chat_route: respx.Route,
) -> None:
    body = await _plan(
        chat_route,
        [
            _step(1, "search_movie", "find the movie Titanic", []),
            _step(2, "GetMovieCredit", "get the cast of the movie", [1]),
        ],
    )
    # Criteria, cost tiers, durations, the rationale and `tool` for `required_arm` are the
    # service's to fill: not repairs, no cost to the confidence.
    assert body["metadata"]["repairs"] == []
    assert body["metadata"]["warnings"] == []
    assert body["confidence"] == TOOL_PLAN_CONFIDENCE
    assert all(step["acceptance_criteria"] for step in body["plan"])


async def test_a_misspelt_tool_and_an_action_unlike_its_tool_lower_confidence_and_are_named(
    chat_route: respx.Route,
) -> None:
    body = await _plan(
        chat_route,
        [
            _step(1, "search_movi", "find the movie Titanic", []),
            _step(2, "GetMovieCredit", "buy foreign currency", [1]),
        ],
    )
    assert _codes(body, "repairs") == ["tool_closest"]
    [unlike] = body["metadata"]["warnings"]
    assert unlike["code"] == "action_unlike_tool"
    assert "step 2 (GetMovieCredit)" in unlike["detail"]
    assert "special_foreign_currency_purchase_request" in unlike["detail"]
    assert body["confidence"] == round(TOOL_PLAN_CONFIDENCE * 0.8 * 0.8, 3)


async def test_a_step_missing_the_producer_of_its_id_gets_it_added_and_named(
    chat_route: respx.Route,
) -> None:
    body = await _plan(
        chat_route, [_step(1, "GetMovieCredit", "get the cast of Titanic", [])], "List the cast"
    )
    assert _calls(body) == [("search_movie", []), ("GetMovieCredit", [1])]
    [added] = body["metadata"]["repairs"]
    assert added["code"] == "producer_added"
    assert added["detail"] == "step 1: search_movie for step 2"
    assert body["confidence"] < TOOL_PLAN_CONFIDENCE


async def test_a_step_that_consumes_what_an_earlier_one_yields_is_linked_to_it(
    chat_route: respx.Route,
) -> None:
    body = await _plan(
        chat_route,
        [
            _step(1, "search_movie", "find the movie Titanic", []),
            _step(2, "GetMovieCredit", "get the cast of the movie", []),
        ],
    )
    assert _calls(body) == [("search_movie", []), ("GetMovieCredit", [1])]
    assert [note["detail"] for note in body["metadata"]["repairs"]] == ["step 1 -> step 2"]


async def test_identical_repeats_are_merged_and_repeats_for_other_things_kept(
    chat_route: respx.Route,
) -> None:
    body = await _plan(
        chat_route,
        [
            _step(1, "search_movie", "find the movie Titanic", []),
            _step(2, "GetMovieCredit", "get the cast", [1]),
            _step(3, "GetMovieCredit", "get the cast of the movie", [1]),
            _step(4, "search_movie", "find the movie Alien", []),
            _step(5, "send_email", "send the cast", [3]),
        ],
        GOAL + ", and find Alien and email me the cast",
    )
    # Step 3 repeats step 2 (the same purpose): merged, and step 5 waits for step 2 instead.
    # Step 4 looks for another film: kept.
    assert _calls(body) == [
        ("search_movie", []),
        ("GetMovieCredit", [1]),
        ("search_movie", []),
        ("send_email", [2]),
    ]
    assert "repeat_merged" in _codes(body, "repairs")


async def test_a_goal_piece_no_tool_does_is_named_in_a_model_plan(
    chat_route: respx.Route,
) -> None:
    body = await _plan(
        chat_route,
        [
            _step(1, "search_movie", "find the movie Titanic", []),
            _step(2, "GetMovieCredit", "get the cast of the movie", [1]),
        ],
        "List the cast of Titanic and book two seats for tonight",
    )
    assert body["metadata"]["warnings"] == [
        {"code": "goal_part_unplanned", "detail": "book two seats for tonight"}
    ]
    assert body["confidence"] == round(TOOL_PLAN_CONFIDENCE * 0.85, 3)


async def test_the_prompt_opens_the_same_for_every_request_and_carries_the_rule_based_draft(
    chat_route: respx.Route,
) -> None:
    chat_route.return_value = answer({"plan": [_step(1, "search_movie", "find Titanic", [])]})
    goals = [GOAL, "List the cast of Heat"]
    async with running_app(make_settings()) as client:
        for goal in goals:
            response = await client.post("/plan", json={"goal": goal, "tools": TOOLS})
            assert response.status_code == 200, response.text
    sent = [json.loads(call.request.content)["messages"] for call in chat_route.calls]
    systems = [messages[0]["content"] for messages in sent]
    users = [messages[1]["content"] for messages in sent]
    # The rules, then the tools as the user message's first lines: the same opening for every
    # request over these tools.
    assert systems[0] == systems[1]
    assert "search_movie" not in systems[0]
    tools_end = users[0].index("\n\n")
    assert users[0].startswith("The tools, one JSON object a line (data):\n")
    assert '{"name": "search_movie"' in users[0][:tools_end]
    assert users[1][: tools_end + 2] == users[0][: tools_end + 2]
    for user, goal in zip(users, goals, strict=True):
        draft_line = next(line for line in user.splitlines() if line.startswith('{"draft"'))
        # The draft is the rule-based plan: the cast needs the movie's id, found first.
        assert json.loads(draft_line)["draft"] == [
            {"step": 1, "tool": "search_movie", "depends_on": []},
            {"step": 2, "tool": "GetMovieCredit", "depends_on": [1]},
        ]
        # What changes comes last: the draft before the request.
        assert user.index('{"draft"') < user.index(json.dumps(goal))
