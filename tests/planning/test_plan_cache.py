"""The plan cache and single flight, in process: respx on the model, a fake clock for TTLs."""

from __future__ import annotations

import asyncio

import httpx
import respx

from conftest import FakeClock, answer, good_plan, make_settings, running_app
from invariants import assert_valid_plan
from planner_arm.config import load_settings
from planner_arm.plan.schemas import PlanRequest
from planner_arm.planning.cache import PlanCache, request_key, settings_fingerprint

GOAL = {"goal": "Fix authentication bug and add tests", "constraints": ["No schema change"]}


def key(settings_overrides: dict[str, object] | None = None, **request: object) -> str:
    settings = load_settings(**(settings_overrides or {}))
    return request_key(PlanRequest(**{**GOAL, **request}), settings_fingerprint(settings))


def test_key_folds_white_space_only() -> None:
    assert key(goal="  Fix   authentication bug\nand add tests ") == key()
    assert key(constraints=["No  schema\tchange"]) == key()
    assert key(goal="Fix authentication bug and add docs") != key()
    assert key(constraints=[]) != key()
    assert key(context={"a": 1, "b": 2}) == key(context={"b": 2, "a": 1})
    assert key(context={"a": 1}) != key(context={"a": 2})


def test_key_depends_on_model_and_configuration() -> None:
    assert key({"model": {"name": "gpt-4o"}}) != key()
    assert key({"planning": {"max_steps": 5}}) != key()
    assert key({"server": {"port": 9999}}) == key()  # where it listens changes no plan


def test_entries_expire_and_the_least_recent_goes_first(fake_clock: FakeClock) -> None:
    from planner_arm.plan.schemas import PlanResponse

    cache = PlanCache(ttl=300, max_entries=2, clock=fake_clock.as_clock())
    plan = PlanResponse.model_construct()
    cache.put("a", plan)
    cache.put("b", plan)
    assert cache.get("a") is plan  # a is now the most recent
    cache.put("c", plan)
    assert cache.get("b") is None
    assert cache.get("a") is plan
    fake_clock.time += 300
    assert cache.get("a") is None
    assert len(cache) == 1


async def test_identical_request_is_answered_from_the_cache(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = answer(good_plan())
    async with running_app(make_settings(), fake_clock) as client:
        first = (await client.post("/plan", json=GOAL)).json()
        second = (await client.post("/plan", json={**GOAL, "goal": GOAL["goal"] + "  "})).json()
        fake_clock.time += 301
        third = (await client.post("/plan", json=GOAL)).json()
        metrics = (await client.get("/metrics")).text
    assert chat_route.call_count == 2
    assert_valid_plan(second)
    assert second["metadata"]["source"] == "cache"
    assert second["metadata"]["cached_plan_id"] == first["plan_id"]
    assert second["plan_id"] != first["plan_id"]
    assert second["request_id"] != first["request_id"]
    assert second["metadata"]["attempts"] == 0
    assert second["estimated_cost"]["llm_usd"] == 0
    assert second["plan"] == first["plan"]
    assert third["metadata"]["source"] == "llm"  # the entry expired
    assert 'planner_cache_requests_total{result="hit"} 1.0' in metrics
    assert 'planner_plans_total{source="cache"} 1.0' in metrics


async def test_callers_can_opt_out(chat_route: respx.Route) -> None:
    chat_route.return_value = answer(good_plan())
    async with running_app(make_settings()) as client:
        await client.post("/plan", json=GOAL)
        by_option = await client.post("/plan", json={**GOAL, "options": {"use_cache": False}})
        by_header = await client.post("/plan", json=GOAL, headers={"Cache-Control": "no-cache"})
    assert by_option.json()["metadata"]["source"] == "llm"
    assert by_header.json()["metadata"]["source"] == "llm"
    assert chat_route.call_count == 3


async def test_fallback_plans_are_never_cached(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.side_effect = [httpx.Response(401, json={}), answer(good_plan())]
    async with running_app(make_settings(), fake_clock) as client:
        first = (await client.post("/plan", json=GOAL)).json()
        second = (await client.post("/plan", json=GOAL)).json()
    assert first["metadata"]["source"] == "fallback"
    assert second["metadata"]["source"] == "llm"


async def test_cache_can_be_switched_off(chat_route: respx.Route) -> None:
    chat_route.return_value = answer(good_plan())
    async with running_app(make_settings(cache={"enabled": False})) as client:
        for _ in range(2):
            assert (await client.post("/plan", json=GOAL)).json()["metadata"]["source"] == "llm"
    assert chat_route.call_count == 2


async def wait_until_coalesced(client: httpx.AsyncClient, count: int) -> None:
    """Lets the event loop run until `count` requests have joined the one in flight."""
    for _ in range(500):
        await asyncio.sleep(0)  # a turn for the requests in flight; an in-process GET may not yield
        text = (await client.get("/metrics")).text
        line = 'planner_cache_requests_total{result="coalesced"} '
        if f"{line}{float(count)}" in text:
            return
    raise AssertionError(f"fewer than {count} requests joined the one in flight")


async def test_ten_identical_requests_at_once_make_one_call(chat_route: respx.Route) -> None:
    release = asyncio.Event()
    arrived = asyncio.Event()

    async def slow_answer(request: httpx.Request) -> httpx.Response:
        arrived.set()
        await release.wait()
        return answer(good_plan())

    chat_route.side_effect = slow_answer
    async with running_app(make_settings()) as client:
        tasks = [asyncio.create_task(client.post("/plan", json=GOAL)) for _ in range(10)]
        await arrived.wait()
        await wait_until_coalesced(client, 9)
        release.set()
        responses = await asyncio.gather(*tasks)
    bodies = [r.json() for r in responses]
    assert chat_route.call_count == 1
    for body in bodies:
        assert_valid_plan(body)
    sources = sorted(b["metadata"]["source"] for b in bodies)
    assert sources == ["cache"] * 9 + ["llm"]
    leader = next(b for b in bodies if b["metadata"]["source"] == "llm")
    assert {b["metadata"]["cached_plan_id"] for b in bodies if b is not leader} == {
        leader["plan_id"]
    }
    assert len({b["request_id"] for b in bodies}) == 10


async def test_a_shared_failure_reaches_every_caller(chat_route: respx.Route) -> None:
    release = asyncio.Event()

    async def failing(request: httpx.Request) -> httpx.Response:
        await release.wait()
        return httpx.Response(401, json={})

    chat_route.side_effect = failing
    async with running_app(make_settings(fallback={"enabled": False})) as client:
        tasks = [asyncio.create_task(client.post("/plan", json=GOAL)) for _ in range(3)]
        await wait_until_coalesced(client, 2)
        release.set()
        responses = await asyncio.gather(*tasks)
    assert [r.status_code for r in responses] == [503, 503, 503]
    assert chat_route.call_count == 1
