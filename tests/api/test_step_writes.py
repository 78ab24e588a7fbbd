"""Which steps write: every answer over a caller's tools says, on each step, whether its tool
changes something (`writes`), read from the tool's hints, else its name and description; a
built-in arm's step says null. What a model or a caller wrote there is not kept."""

from __future__ import annotations

import json
from typing import Any

import httpx
import respx

from support.app import answer, good_plan, make_settings, running_app
from support.model_requests import system_of
from support.sse import parse_sse, pieces_of, streamed

TOOLS: list[dict[str, Any]] = [
    {
        "name": "search_books",
        "description": "Search the catalogue by title, author or keyword",
        "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}},
    },
    {
        # Words that say write, a hint that says read: the hint wins.
        "name": "delete_preview",
        "description": "Show which holds a deletion would remove, without removing any",
        "inputSchema": {"type": "object", "properties": {"member_id": {"type": "string"}}},
        "annotations": {"readOnlyHint": True},
    },
    {
        # No hint: its verb says it writes.
        "name": "place_hold",
        "description": "Place a hold on a book for a member",
        "inputSchema": {
            "type": "object",
            "properties": {"book_id": {"type": "string"}, "member_id": {"type": "string"}},
        },
    },
    {
        # Words that say nothing of writing, a hint that says it may destroy.
        "name": "catalogue_sync",
        "description": "Bring the catalogue in line with the branch records",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"destructiveHint": True},
    },
]
WRITES = {
    "search_books": False,
    "delete_preview": False,
    "place_hold": True,
    "catalogue_sync": True,
}
GOAL = "Find Dune, preview what a deletion would remove, place a hold, then sync the catalogue"
# The model says the opposite of the truth in `writes`: the service does not keep it.
PLAN = {
    "plan": [
        {"step": 1, "tool": "search_books", "action": "Find Dune", "depends_on": [],
         "writes": True},
        {"step": 2, "tool": "delete_preview", "action": "Preview the deletion",
         "depends_on": [], "writes": True},
        {"step": 3, "tool": "place_hold", "action": "Place a hold on Dune", "depends_on": [1],
         "writes": False},
        {"step": 4, "tool": "catalogue_sync", "action": "Sync the catalogue", "depends_on": [3],
         "writes": False},
    ]
}  # fmt: skip


def model(request: httpx.Request) -> httpx.Response:
    """The plan for any plan prompt (phases and sub-plans too); `{}` for a step's input."""
    if system_of(request).startswith("You prepare the input"):
        return answer({})
    if json.loads(request.content).get("stream"):
        return streamed(pieces_of(json.dumps(PLAN)))
    return answer(PLAN)


def assert_marked(plan: dict[str, Any], *, both: bool = True) -> None:
    """Each step says what its tool does; `both`: the plan holds a write and a read."""
    steps = plan["plan"]
    assert steps
    for step in steps:
        assert step["writes"] is WRITES[step["required_arm"]], step
    assert {step["writes"] for step in steps} == ({True, False} if both else {False})


def forged(plan: dict[str, Any]) -> dict[str, Any]:
    """`plan` as a caller might send it back: every step's `writes` the wrong way round."""
    steps = [{**step, "writes": not WRITES[step["required_arm"]]} for step in plan["plan"]]
    return {**plan, "plan": steps}


async def test_every_answer_over_a_callers_tools_says_which_steps_write(
    chat_route: respx.Route,
) -> None:
    chat_route.side_effect = model
    body = {"goal": GOAL, "tools": TOOLS, "options": {"use_cache": False}}
    async with running_app(make_settings()) as client:
        answers = {}
        for name, extra in {
            "flat": {},
            "specialized": {"specialize": True},
            "hierarchical": {"strategy": "hierarchical"},
            "iterative": {"strategy": "iterative"},
        }.items():
            response = await client.post("/plan", json={**body, **extra})
            assert response.status_code == 200, (name, response.text)
            answers[name] = response.json()
        streamed_events = await client.post(
            "/plan", json=body, headers={"accept": "text/event-stream"}
        )
        events = parse_sse(streamed_events.text)
        plan = answers["flat"]
        replanned = await client.post(
            "/replan",
            json={
                "previous": forged(plan),
                "tools": TOOLS,
                "step_states": {"1": "completed", "3": "failed"},
            },
        )
        expanded = await client.post(
            "/plan/expand",
            json={"goal": GOAL, "previous": forged(plan), "step": 4, "tools": TOOLS},
        )
    for name, planned in answers.items():
        # An iterative answer holds the first stage only: the two steps that read.
        assert_marked(planned, both=name != "iterative")
    assert events[-1][0] == "plan"
    assert_marked(events[-1][1])
    for step in (data for kind, data in events if kind == "step"):
        assert step["writes"] is WRITES[step["required_arm"]]
    assert replanned.status_code == 200, replanned.text
    assert_marked(replanned.json())
    assert expanded.status_code == 200, expanded.text
    assert_marked(expanded.json())


async def test_a_plan_of_the_built_in_arms_says_nothing_of_writing(
    chat_route: respx.Route,
) -> None:
    chat_route.return_value = answer(good_plan())
    async with running_app(make_settings()) as client:
        planned = (await client.post("/plan", json={"goal": "Fix the login bug"})).json()
        sent_back = {**planned, "plan": [{**step, "writes": True} for step in planned["plan"]]}
        replanned = await client.post(
            "/replan",
            json={"previous": sent_back, "step_states": {"1": "completed", "2": "failed"}},
        )
    assert [step["writes"] for step in planned["plan"]] == [None] * 4
    assert replanned.status_code == 200, replanned.text
    revised = replanned.json()["plan"]
    assert revised[0]["step"] == 1  # the finished step, kept
    assert [step["writes"] for step in revised] == [None] * len(revised)
