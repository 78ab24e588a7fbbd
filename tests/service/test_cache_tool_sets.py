"""The plan cache and single flight key on everything that changes a plan: one goal over
several tool sets, or with other worked examples, is planned once per tool set and example set,
never answered with a plan over other tools. In process and on a real Redis; respx on the model,
which answers over whichever tools its prompt lists."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
import respx

from planner_arm.config import load_settings
from planner_arm.plan.schemas import PlanRequest
from planner_arm.service.cache import request_key, settings_fingerprint
from support.app import answer, good_plan, make_settings, running_app
from support.model_requests import listed_tools

GOAL = "Find the record, then report on it"
SET_A = [
    {"id": "lookup_record", "description": "Look a record up by its name and return its id"},
    {"id": "write_report", "description": "Write a report about a record given its id"},
]
SET_B = [
    {"id": "search_archive", "description": "Search the archive for a record by name"},
    {"id": "summarise_record", "description": "Summarise an archived record by its id"},
    {"id": "email_summary", "description": "Email a summary to a person"},
]
EXAMPLE = {
    "request": "Find the Smith record and report on it",
    "steps": [{"tool": "lookup_record"}, {"tool": "write_report", "depends_on": [1]}],
}
OTHER_EXAMPLE = {"request": "Report on the Jones record", "steps": [{"tool": "write_report"}]}


def _listed_tools(request: httpx.Request) -> list[str]:
    return [tool["name"] for tool in listed_tools(request)]


def _over_listed_tools(request: httpx.Request) -> httpx.Response:
    """A plan over the first two tools the prompt lists; the agents' plan when it lists none."""
    tools = _listed_tools(request)
    if not tools:
        return answer(good_plan())
    steps = [
        {"step": 1, "tool": tools[0], "action": f"Call {tools[0]}", "depends_on": []},
        {"step": 2, "tool": tools[1], "action": f"Call {tools[1]}", "depends_on": [1]},
    ]
    return answer({"plan": steps})


def _tool_ids(tools: list[dict[str, Any]] | None) -> set[str] | None:
    return None if tools is None else {tool["id"] for tool in tools}


def _assert_over(body: dict[str, Any], tools: list[dict[str, Any]] | None) -> None:
    arms = {step["required_arm"] for step in body["plan"]}
    ids = _tool_ids(tools)
    if ids is None:
        assert "judge" in arms, body  # the configured agents' plan, closed by the judge
        assert not arms & {t["id"] for t in SET_A + SET_B}
    else:
        assert arms <= ids, (arms, ids)


def _body(tools: list[dict[str, Any]] | None, **more: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"goal": GOAL, **more}
    if tools is not None:
        body["tools"] = tools
    return body


def test_the_key_changes_with_the_tools_and_the_examples() -> None:
    fingerprint = settings_fingerprint(load_settings())

    def key(**fields: Any) -> str:
        return request_key(PlanRequest(goal=GOAL, **fields), fingerprint)

    keys = {key(), key(tools=SET_A), key(tools=SET_B), key(tools=SET_A, examples=[EXAMPLE])}
    keys.add(key(tools=SET_A, examples=[OTHER_EXAMPLE]))
    assert len(keys) == 5
    # The same tools, however they are written in the body, are the same tool set.
    reordered = [dict(reversed(list(tool.items()))) for tool in SET_A]
    assert key(tools=reordered) == key(tools=SET_A)


def test_the_configured_examples_and_profile_change_the_fingerprint() -> None:
    base = settings_fingerprint(load_settings())
    with_examples = settings_fingerprint(load_settings(examples=[EXAMPLE]))
    tools_profile = settings_fingerprint(load_settings(planning={"profile": "tools"}))
    assert len({base, with_examples, tools_profile}) == 3


@pytest.mark.parametrize("store", ["memory", "redis"])
async def test_one_goal_over_three_tool_sets_is_planned_over_each(
    chat_route: respx.Route, store: str, request: pytest.FixtureRequest
) -> None:
    chat_route.side_effect = _over_listed_tools
    overrides: dict[str, Any] = {}
    if store == "redis":
        overrides["store"] = {"url": request.getfixturevalue("redis_url")}
    async with running_app(make_settings(**overrides)) as client:
        answers = []
        for tools in (None, SET_A, SET_B, SET_A):
            response = await client.post("/plan", json=_body(tools))
            assert response.status_code == 200, response.text
            answers.append(response.json())
    for body, tools in zip(answers, (None, SET_A, SET_B, SET_A), strict=True):
        _assert_over(body, tools)
    assert [body["metadata"]["source"] for body in answers] == ["llm", "llm", "llm", "cache"]
    assert answers[3]["metadata"]["cached_plan_id"] == answers[1]["plan_id"]
    assert chat_route.call_count == 3


async def test_other_worked_examples_are_planned_again(chat_route: respx.Route) -> None:
    chat_route.side_effect = _over_listed_tools
    async with running_app(make_settings()) as client:
        sources = []
        for examples in ([EXAMPLE], [OTHER_EXAMPLE], [EXAMPLE]):
            response = await client.post("/plan", json=_body(SET_A, examples=examples))
            sources.append(response.json()["metadata"]["source"])
    assert sources == ["llm", "llm", "cache"]
    assert chat_route.call_count == 2


async def test_identical_goals_in_flight_over_other_tools_do_not_share_a_plan(
    chat_route: respx.Route,
) -> None:
    release = asyncio.Event()
    arrived: list[str] = []

    async def slow(request: httpx.Request) -> httpx.Response:
        arrived.append(request.url.path)
        await release.wait()
        return _over_listed_tools(request)

    chat_route.side_effect = slow
    sets = [None, SET_A, SET_B, SET_A, SET_B, None]
    async with running_app(make_settings()) as client:
        tasks = [asyncio.create_task(client.post("/plan", json=_body(t))) for t in sets]
        for _ in range(1000):  # until the three distinct requests reached the model
            await asyncio.sleep(0)
            if len(arrived) >= 3:
                break
        release.set()
        responses = await asyncio.gather(*tasks)
    for response, tools in zip(responses, sets, strict=True):
        assert response.status_code == 200, response.text
        _assert_over(response.json(), tools)
    assert chat_route.call_count == 3  # one planning per distinct tool set, the rest joined
