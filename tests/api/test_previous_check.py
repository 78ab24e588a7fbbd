"""The one check of a plan sent back: /replan, /plan/expand and /plan/specialize refuse the same
broken `previous` with the same 422 `invalid_previous`, each problem named with its step, and
never answer it with a 5xx. The example in docs/api.md is this check's own answer."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from support.app import make_settings, running_app
from support.invariants import assert_error_body

GOAL = "Fix authentication bug and add tests"
API_DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"
Edit = Callable[[list[dict[str, Any]]], None]


def _set(number: int, **fields: Any) -> Edit:
    def edit(steps: list[dict[str, Any]]) -> None:
        steps[number - 1].update(fields)

    return edit


def _cycle(steps: list[dict[str, Any]]) -> None:
    steps[1]["depends_on"] = [3]


# The edit, then the problem's code and the step it names.
BROKEN: dict[str, tuple[Edit, str, int | None]] = {
    "empty criterion": (_set(1, acceptance_criteria=[""]), "empty_acceptance_criteria", 1),
    "blank criterion beside one": (
        _set(3, acceptance_criteria=["Tests pass", "  "]), "empty_acceptance_criteria", 3,
    ),
    "blank action": (_set(2, action=" \t "), "empty_action", 2),
    "repeated number": (_set(2, step=1), "duplicate_step", 1),
    "dangling dependency": (_set(3, depends_on=[42]), "dangling_dependency", 3),
    "self dependency": (_set(3, depends_on=[3]), "self_dependency", 3),
    "cycle": (_cycle, "cycle", 2),
    "a day and more": (_set(2, estimated_duration_seconds=90_000), "bad_duration", 2),
}  # fmt: skip
ENDPOINTS = {
    "/replan": {"goal": GOAL, "step_states": {"1": "completed", "2": "failed"}},
    "/plan/expand": {"goal": GOAL, "step": 2},
    "/plan/specialize": {"step": 2},
}


async def _a_plan() -> dict[str, Any]:
    async with running_app(make_settings(llm=False)) as client:
        plan: dict[str, Any] = (await client.post("/plan", json={"goal": GOAL})).json()
    return plan


@pytest.mark.parametrize("problem", BROKEN)
async def test_every_endpoint_refuses_the_same_broken_plan_the_same_way(problem: str) -> None:
    edit, code, step = BROKEN[problem]
    async with running_app(make_settings(llm=False)) as client:
        plan = (await client.post("/plan", json={"goal": GOAL})).json()
        broken = json.loads(json.dumps(plan))
        edit(broken["plan"])
        answers = {
            path: await client.post(path, json={**body, "previous": broken})
            for path, body in ENDPOINTS.items()
        }
        # Unbroken, the same requests are answered.
        sound = await client.post("/plan/specialize", json={"step": 2, "previous": plan})
    assert sound.status_code == 200, sound.text
    details = set()
    for path, response in answers.items():
        body = assert_error_body(response, 422, "invalid_previous")
        assert (code, step) in [(item["code"], item["step"]) for item in body["errors"]], path
        assert body["errors"][0]["message"] in body["detail"]
        details.add(body["detail"])
    assert len(details) == 1  # one check, one answer


async def test_every_problem_is_listed_and_the_detail_names_the_first_three() -> None:
    plan = await _a_plan()
    for step in plan["plan"]:
        step["action"] = " "
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post("/plan/specialize", json={"step": 1, "previous": plan})
    body = assert_error_body(response, 422, "invalid_previous")
    numbers = [step["step"] for step in plan["plan"]]
    assert [item["step"] for item in body["errors"]] == numbers
    assert body["detail"].count("action is empty") == 3
    assert body["detail"].endswith(f"(and {len(numbers) - 3} more, listed in errors)")


async def test_an_arm_the_request_cannot_use_is_refused_by_every_endpoint() -> None:
    plan = await _a_plan()
    plan["plan"][1]["required_arm"] = "search_movie"  # neither configured nor a tool sent
    tools = [{"name": "search_movie", "description": "Find a movie by its title"}]
    tool_plan = json.loads(json.dumps(plan))
    async with running_app(make_settings(llm=False)) as client:
        answers = [
            await client.post("/replan", json={**ENDPOINTS["/replan"], "previous": plan}),
            await client.post("/plan/expand", json={"goal": GOAL, "step": 3, "previous": plan}),
            await client.post("/plan/specialize", json={"step": 2, "previous": plan}),
        ]
        # A plan over the request's own tools is one to work on.
        for step in tool_plan["plan"]:
            step["required_arm"] = "search_movie"
        over_tools = await client.post(
            "/plan/specialize", json={"step": 2, "previous": tool_plan, "tools": tools}
        )
    for response in answers:
        body = assert_error_body(response, 422, "invalid_previous")
        assert [(item["code"], item["step"]) for item in body["errors"]] == [("unknown_arm", 2)]
    assert len({response.json()["detail"] for response in answers}) == 1
    assert over_tools.status_code == 200, over_tools.text
    assert over_tools.json()["required_arm"] == "search_movie"


async def test_the_rules_of_a_new_plan_are_not_asked_of_a_plan_sent_back() -> None:
    # One step, no final check: shorter than min_steps, and not what /plan would answer.
    plan = await _a_plan()
    plan["plan"] = [plan["plan"][0]]
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post("/plan/specialize", json={"step": 1, "previous": plan})
    assert response.status_code == 200, response.text


async def test_the_example_in_the_api_docs_is_the_checks_own_answer() -> None:
    plan = await _a_plan()
    plan["plan"][2]["acceptance_criteria"] = ["Tests pass", ""]
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post("/replan", json={**ENDPOINTS["/replan"], "previous": plan})
    body = assert_error_body(response, 422, "invalid_previous")
    section = API_DOC.read_text().split("## Plans sent back (`previous`)")[1]
    example = section.split("```")[1]
    shown = re.sub(r"\s+", " ", example.replace(", ...}", "}"))
    documented = json.loads(shown)
    assert documented.pop("request_id")  # each answer's own
    assert documented == {key: body[key] for key in ("error", "detail", "errors")}
