"""References to a field of an earlier step's result over an MCP server's tools (FastMCP,
pydantic results: every tool has an `outputSchema`): the model is shown each earlier step's
output fields, its paths are checked against them, and one that names a field the result
does not have is replaced by the rule-based input, which names the field the argument takes."""

from __future__ import annotations

import json
from typing import Any

import httpx
import respx

from support.app import answer, make_settings, running_app
from support.library_server import listed_tools
from support.model_requests import request_data, system_of

TOOLS = listed_tools()  # read once, outside any event loop
GOAL = "Find the book Dune, find the member alice@example.com, then place a hold on it for her"
PLAN = {
    "plan": [
        {"step": 1, "tool": "search_books", "action": "Search for Dune", "depends_on": []},
        {"step": 2, "tool": "find_member", "action": "Find alice@example.com", "depends_on": []},
        {"step": 3, "tool": "place_hold", "action": "Place the hold", "depends_on": [1, 2]},
    ]
}


class Model:
    """The plan, then each step's input from `inputs` (by tool, in turn); what each input
    call was shown, by tool."""

    def __init__(self, inputs: dict[str, list[Any]]) -> None:
        self.inputs = inputs
        self.shown: dict[str, dict[str, Any]] = {}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if not system_of(request).startswith("You prepare the input"):
            return answer(PLAN)
        data = request_data(request)
        self.shown[data["arm"]] = data
        return answer(self.inputs[data["arm"]].pop(0))


async def plan(model: Model) -> dict[str, Any]:
    body = {"goal": GOAL, "tools": TOOLS, "specialize": True}
    async with running_app(make_settings()) as client:
        response = await client.post("/plan", json=body)
    assert response.status_code == 200, response.text
    planned: dict[str, Any] = response.json()
    return planned


def inputs(planned: dict[str, Any]) -> dict[str, Any]:
    return {step["required_arm"]: step["input"] for step in planned["plan"]}


async def test_the_models_field_references_are_kept_and_it_was_shown_the_fields(
    chat_route: respx.Route,
) -> None:
    hold = {
        "book_id": "{{steps.1.output.books[0].book_id}}",
        "member_id": "{{ steps.2.output.member_id }}",
    }
    model = Model(
        {
            "search_books": [{"query": "Dune"}],
            "find_member": [{"email": "alice@example.com"}],
            "place_hold": [hold],
        }
    )
    chat_route.side_effect = model
    planned = await plan(model)
    assert inputs(planned)["place_hold"] == hold
    warnings = [note["code"] for note in planned["metadata"]["warnings"]]
    assert "input_by_rule" not in warnings
    earlier = model.shown["place_hold"]["available_earlier_steps"]
    assert earlier == [
        {
            "step": 1,
            "action": "Search for Dune",
            "required_arm": "search_books",
            "output_fields": "books[].book_id, books[].title, books[].author",
        },
        {
            "step": 2,
            "action": "Find alice@example.com",
            "required_arm": "find_member",
            "output_fields": "member_id, name, email",
        },
    ]
    system = json.loads(chat_route.calls[-1].request.content)["messages"][0]["content"]
    assert "{{steps.N.output.items[0].name}}" in system


async def test_a_path_to_a_field_the_result_lacks_is_replaced_by_the_rules_path(
    chat_route: respx.Route,
) -> None:
    wrong = {"book_id": "{{steps.1.output.isbn}}", "member_id": "{{steps.2.output.member_id}}"}
    model = Model(
        {
            "search_books": [{"query": "Dune"}],
            "find_member": [{"email": "alice@example.com"}],
            "place_hold": [wrong, wrong],  # the answer, and the answer to the repair prompt
        }
    )
    chat_route.side_effect = model
    planned = await plan(model)
    assert inputs(planned)["place_hold"] == {
        "book_id": "{{steps.1.output.books[0].book_id}}",
        "member_id": "{{steps.2.output.member_id}}",
    }
    notes = {note["code"]: note["detail"] for note in planned["metadata"]["warnings"]}
    assert "steps.1.output has no field 'isbn' (it has books)" in notes["input_by_rule"]
    repair = json.loads(chat_route.calls[-1].request.content)["messages"][-1]["content"]
    assert "steps.1.output has no field 'isbn' (it has books)" in repair


async def test_a_plan_sent_back_with_a_wrong_path_gets_a_new_input() -> None:
    """/plan/expand keeps the inputs of the steps it keeps when they are valid: one whose
    path names nothing is made again (`input_replaced`)."""
    goal = f"{GOAL}, and notify her by e-mail"
    async with running_app(make_settings(llm=False)) as client:
        planned = (
            await client.post("/plan", json={"goal": goal, "tools": TOOLS, "specialize": True})
        ).json()
        steps = {step["required_arm"]: step for step in planned["plan"]}
        hold, search = steps["place_hold"], steps["search_books"]
        path = f"{{{{steps.{search['step']}.output.books[0].book_id}}}}"
        assert hold["input"]["book_id"] == path
        hold["input"]["book_id"] = path.replace("book_id", "isbn")
        expanded = await client.post(
            "/plan/expand",
            json={
                "goal": goal,
                "previous": planned,
                "tools": TOOLS,
                "step": steps["notify_member"]["step"],
            },
        )
    assert expanded.status_code == 200, expanded.text
    body = expanded.json()
    notes = {note["code"]: note["detail"] for note in body["metadata"]["warnings"]}
    wrong = "steps.1.output.books[0] has no field 'isbn' (it has book_id, title, author)"
    assert wrong in notes["input_replaced"]
    again = next(step for step in body["plan"] if step["required_arm"] == "place_hold")
    assert again["input"]["book_id"] == path
