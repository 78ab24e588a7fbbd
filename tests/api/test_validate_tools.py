"""POST /plan/validate over the caller's tools: an edited tool plan is checked against the
tools it is over (not the configured arms), its inputs against their input schemas and its
references against the earlier steps' output schemas; the valid plan says which steps write
and carries its goal, stores nothing, and is replanned as `previous` with the same tools."""

from __future__ import annotations

import copy
from typing import Any

from support.app import make_settings, running_app
from support.library_server import listed_tools

TOOLS = listed_tools()  # read once, outside any event loop
GOAL = "Place a hold on Dune for alice@example.com"


def step(number: int, tool: str, depends_on: list[int], input: dict[str, Any]) -> dict[str, Any]:
    return {
        "step": number,
        "action": f"Call {tool}",
        "required_arm": tool,
        "acceptance_criteria": [f"{tool} answered"],
        "depends_on": depends_on,
        "estimated_cost_tier": 1,
        "estimated_duration_seconds": 5,
        "input": input,
    }


STEPS = [
    step(1, "search_books", [], {"query": "Dune"}),
    step(2, "find_member", [], {"email": "alice@example.com"}),
    step(
        3,
        "place_hold",
        [1, 2],
        {
            "book_id": "{{steps.1.output.books[0].book_id}}",
            "member_id": "{{steps.2.output.member_id}}",
        },
    ),
]


async def test_a_tool_plan_is_checked_against_the_tools_sent_and_replanned_as_previous() -> None:
    async with running_app(make_settings(llm=False)) as client:
        over_arms = (await client.post("/plan/validate", json={"plan": STEPS})).json()
        checked = await client.post(
            "/plan/validate", json={"plan": STEPS, "tools": TOOLS, "goal": GOAL}
        )
        assert checked.status_code == 200, checked.text
        plan = checked.json()["plan"]
        stored = await client.get(f"/plan/{plan['plan_id']}")
        replanned = await client.post(
            "/replan",
            json={
                "previous": plan,
                "tools": TOOLS,
                "step_states": {"1": "completed", "2": "completed", "3": "failed"},
            },
        )
    # Over the configured arms, a tool is no arm (and the agents' final check is missing).
    assert {error["code"] for error in over_arms["errors"]} == {"unknown_arm", "no_final_check"}
    answer = checked.json()
    assert (answer["valid"], answer["errors"]) == (True, [])
    assert [item["writes"] for item in plan["plan"]] == [False, False, True]
    assert [item["input"] for item in plan["plan"]] == [item["input"] for item in STEPS]
    assert (plan["goal"], plan["metadata"]["source"]) == (GOAL, "validated")
    assert stored.status_code == 404  # validating stores nothing
    assert replanned.status_code == 200, replanned.text
    revised = replanned.json()
    tool_ids = {tool["name"] for tool in TOOLS}
    assert {item["required_arm"] for item in revised["plan"]} <= tool_ids
    assert revised["plan"][:2] == plan["plan"][:2]  # the finished steps, as they were
    assert any(item["required_arm"] == "place_hold" for item in revised["plan"][2:])
    assert revised["goal"] == GOAL
    assert revised["parent_plan_id"] == plan["plan_id"]


async def test_inputs_the_tools_refuse_are_invalid_inputs() -> None:
    steps = copy.deepcopy(STEPS)
    steps[1]["input"] = {"email": 5}
    steps[2]["input"]["book_id"] = "{{steps.1.output.books[0].isbn}}"
    steps[0]["input"] = {"query": "{{steps.3.output}}"}
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post("/plan/validate", json={"plan": steps, "tools": TOOLS})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert (answer["valid"], answer["plan"]) == (False, None)
    assert [(error["code"], error["step"], error["message"]) for error in answer["errors"]] == [
        (
            "invalid_input",
            1,
            "step 1: {{steps.3.output}} names step 3, which this step does not depend on",
        ),
        ("invalid_input", 2, "step 2: email: 5 is not of type 'string'"),
        (
            "invalid_input",
            3,
            "step 3: steps.1.output.books[0] has no field 'isbn' (it has book_id, title, author)",
        ),
    ]


async def test_an_input_that_says_what_it_needs_is_a_valid_input() -> None:
    steps = copy.deepcopy(STEPS)
    steps[1]["input"] = {
        "needs": "human_or_model",
        "missing": ["email"],
        "arguments": {},
        "instruction": "Find the member",
    }
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post(
            "/plan/validate", json={"plan": steps, "tools": TOOLS, "fix": True}
        )
    answer = response.json()
    assert answer["valid"] is True, answer
    assert answer["plan"]["plan"][1]["input"] == steps[1]["input"]
