"""Each step over a caller's tool says whether its tool writes, on every answer: by its hints
(readOnlyHint true outranks the words; destructiveHint true or readOnlyHint false writes),
else by the verb of its name or description; whatever the model wrote. Built-in arms' steps
say nothing (null)."""

from __future__ import annotations

from typing import Any

import respx

from support.app import answer, make_settings, running_app

TOOLS: list[dict[str, Any]] = [
    {"name": "search_books", "description": "Search the catalogue by title; returns book_ids",
     "inputSchema": {"type": "object"}},
    {"name": "place_hold", "description": "Place a hold on a book for a member",
     "inputSchema": {"type": "object"}},
    {"name": "hold_sweep", "description": "Runs the nightly job over the holds",
     "inputSchema": {"type": "object"}, "annotations": {"destructiveHint": True}},
    {"name": "delete_preview", "description": "Shows what deleting a hold would remove",
     "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
]  # fmt: skip
EXPECTED = {"search_books": False, "place_hold": True, "hold_sweep": True, "delete_preview": False}
# The model says no step writes.
MODEL_STEPS = [
    {"step": number, "tool": tool, "action": f"{tool} for Dune", "depends_on": [], "writes": False}
    for number, tool in enumerate(EXPECTED, 1)
]


def _writes(plan: list[dict[str, Any]]) -> dict[str, Any]:
    return {step["required_arm"]: step["writes"] for step in plan}


async def test_the_model_plan_says_which_steps_write_whatever_the_model_wrote(
    chat_route: respx.Route,
) -> None:
    chat_route.side_effect = [answer({"plan": MODEL_STEPS})]
    async with running_app(make_settings()) as client:
        planned = await client.post("/plan", json={"goal": "Hold Dune", "tools": TOOLS})
    assert planned.status_code == 200, planned.text
    assert _writes(planned.json()["plan"]) == EXPECTED


async def test_a_replan_and_a_validated_plan_say_it_too() -> None:
    steps = [
        {"step": number, "action": f"{tool} for Dune", "required_arm": tool,
         "acceptance_criteria": ["done"], "depends_on": [], "estimated_cost_tier": 1,
         "estimated_duration_seconds": 10, "writes": False}
        for number, tool in enumerate(EXPECTED, 1)
    ]  # fmt: skip
    async with running_app(make_settings(llm=False)) as client:
        checked = await client.post("/plan/validate", json={"plan": steps, "tools": TOOLS})
        plan = checked.json()["plan"]
        replanned = await client.post(
            "/replan",
            json={"previous": plan, "goal": "Hold Dune", "tools": TOOLS,
                  "step_states": {"1": "completed", "2": "failed"}},
        )  # fmt: skip
        agents = await client.post("/plan", json={"goal": "Fix authentication bug"})
    assert checked.json()["valid"], checked.text
    assert _writes(plan["plan"]) == EXPECTED
    assert replanned.status_code == 200, replanned.text
    assert all(
        step["writes"] == EXPECTED[step["required_arm"]] for step in replanned.json()["plan"]
    )
    assert {step["writes"] for step in agents.json()["plan"]} == {None}
