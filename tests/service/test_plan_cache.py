"""The plan cache and single flight, in process: respx on the model, a fake clock for TTLs."""

from __future__ import annotations

import asyncio
import gc
import json
import tracemalloc

import httpx
import pytest
import respx

from planner_arm.config import load_settings
from planner_arm.plan.schemas import PlanRequest, PlanResponse
from planner_arm.service.cache import (
    PlanCache,
    request_key,
    settings_fingerprint,
)
from planner_arm.store.memory import held_size
from support.app import FakeClock, answer, good_plan, make_settings, running_app
from support.factories import make_service
from support.invariants import assert_valid_plan

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


async def test_entries_expire_and_the_least_recent_goes_first(fake_clock: FakeClock) -> None:
    service = make_service(fake_clock, llm=False)
    plan = await service.plans.plan(PlanRequest(**GOAL), "r-1", use_cache=False)
    cache = PlanCache(ttl=300, max_entries=2, clock=fake_clock.as_clock())
    cache.keep("owner", "a", plan)
    cache.keep("owner", "b", plan)
    assert cache.found("owner", "a") == plan  # a is now the most recent
    cache.keep("owner", "c", plan)
    assert cache.found("owner", "b") is None
    assert cache.found("owner", "a") == plan
    fake_clock.time += 300
    assert cache.found("owner", "a") is None
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


async def test_a_plan_partly_made_by_rule_after_model_failures_is_not_cached(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    """The phases came from the model but a node's calls failed: the next request asks the
    model again instead of getting the degraded plan for the cache's TTL."""
    calls = 0

    def reply(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return answer(good_plan()) if calls in (1, 5) else httpx.Response(401, json={})

    chat_route.side_effect = reply
    body = {**GOAL, "strategy": "hierarchical"}
    async with running_app(make_settings(), fake_clock) as client:
        first = (await client.post("/plan", json=body)).json()
        called = chat_route.call_count
        second = (await client.post("/plan", json=body)).json()
    assert first["metadata"]["source"] == "llm"
    assert "fallback_used" in {w["code"] for w in first["metadata"]["warnings"]}
    assert second["metadata"]["source"] == "llm"  # planned again, not "cache"
    assert chat_route.call_count > called


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


def plans_recorded(metrics_text: str, source: str) -> float:
    line = f'planner_plans_total{{source="{source}"}} '
    found = [row for row in metrics_text.splitlines() if row.startswith(line)]
    return float(found[0].removeprefix(line)) if found else 0.0


async def test_callers_sharing_a_fallback_each_get_their_own_answer(
    chat_route: respx.Route,
) -> None:
    release = asyncio.Event()

    async def unusable(request: httpx.Request) -> httpx.Response:
        await release.wait()
        return answer("no plan here, sorry")  # billed (usage reported), then the fallback

    chat_route.side_effect = unusable
    settings = make_settings(retry={"max_llm_calls": 1})
    async with running_app(settings) as client:
        tasks = [
            asyncio.create_task(client.post("/plan", json=GOAL, headers={"X-Request-ID": f"r{n}"}))
            for n in range(3)
        ]
        await wait_until_coalesced(client, 2)
        release.set()
        bodies = [response.json() for response in await asyncio.gather(*tasks)]
        metrics = (await client.get("/metrics")).text
        capabilities = (await client.get("/capabilities")).json()
    assert chat_route.call_count == 1
    for body in bodies:
        assert_valid_plan(body)
        assert body["metadata"]["source"] == "fallback"
    leader = next(b for b in bodies if b["metadata"]["cached_plan_id"] is None)
    followers = [b for b in bodies if b is not leader]
    assert len(followers) == 2
    assert len({b["plan_id"] for b in bodies}) == 3
    assert {b["metadata"]["cached_plan_id"] for b in followers} == {leader["plan_id"]}
    assert [b["request_id"] for b in bodies] == ["r0", "r1", "r2"]
    assert leader["estimated_cost"]["prompt_tokens"] > 0
    for body in followers:
        assert body["estimated_cost"] == {
            "llm_usd": 0.0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
        }
        assert body["metadata"]["attempts"] == 0
    # Every answer counts, once: three plans served, one fallback planned.
    assert plans_recorded(metrics, "fallback") == 3
    assert 'planner_fallbacks_total{reason="invalid_plan"} 1.0' in metrics
    assert capabilities["plans_by_source"] == {"fallback": 3}


async def test_repairs_are_counted_once_and_cache_hits_do_not_lower_the_latency(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    def fenced_after_two_seconds(request: httpx.Request) -> httpx.Response:
        fake_clock.time += 2.0  # the model takes 2 s
        return answer("```json\n" + json.dumps(good_plan()) + "\n```")

    chat_route.side_effect = fenced_after_two_seconds
    async with running_app(make_settings(), fake_clock) as client:
        first = (await client.post("/plan", json=GOAL)).json()
        repeats = [(await client.post("/plan", json=GOAL)).json() for _ in range(3)]
        metrics = (await client.get("/metrics")).text
        capabilities = (await client.get("/capabilities")).json()
    assert chat_route.call_count == 1
    assert [r["code"] for r in first["metadata"]["repairs"]] == ["code_fence"]
    assert all(r["metadata"]["source"] == "cache" for r in repeats)
    assert all(r["metadata"]["repairs"] == first["metadata"]["repairs"] for r in repeats)
    assert 'planner_repairs_total{reason="code_fence"} 1.0' in metrics
    # Four answers, one of them planned in 2 s: the latency is the planning's, not 500 ms.
    assert capabilities["plans_by_source"] == {"llm": 1, "cache": 3}
    assert capabilities["average_latency_ms"] == 2000.0
    assert capabilities["model_latency_ms"] == 2000.0
    assert capabilities["timeout_seconds"] == 10.0


async def test_a_first_caller_that_goes_away_still_fills_the_cache(
    chat_route: respx.Route,
) -> None:
    release = asyncio.Event()
    arrived = asyncio.Event()

    async def held(request: httpx.Request) -> httpx.Response:
        arrived.set()
        await release.wait()
        return answer(good_plan())

    chat_route.side_effect = held
    plans = make_service().plans
    request = PlanRequest(**GOAL)
    first = asyncio.create_task(plans.plan(request, "gone", use_cache=True))
    await arrived.wait()
    first.cancel()  # the caller hung up while the model was still thinking
    with pytest.raises(asyncio.CancelledError):
        await first
    release.set()
    for _ in range(50):  # the shared planning run finishes on its own
        await asyncio.sleep(0)
    second = await plans.plan(request, "later", use_cache=True)
    assert chat_route.call_count == 1
    assert second.metadata.source == "cache"


async def test_a_plan_weighs_its_utf8_bytes_in_the_cache(fake_clock: FakeClock) -> None:
    service = make_service(fake_clock, llm=False)
    planned = await service.plans.plan(PlanRequest(**GOAL), "r-1", use_cache=False)
    response = planned.model_copy(update={"rationale": "Launch \N{ROCKET}" * 50})
    text = response.model_dump_json()
    assert "\N{ROCKET}" in text
    cache = PlanCache(ttl=300, max_entries=10, clock=fake_clock.as_clock(), max_bytes=1 << 20)
    cache.keep("owner", "k", response)
    assert cache.held_bytes("owner") == held_size("k", text.encode()) > len(text.encode())
    assert cache.found("owner", "k") == response


async def test_a_cached_plan_weighs_what_the_cache_holds(fake_clock: FakeClock) -> None:
    """The cache kept the response object, about four times its JSON, and counted the JSON."""
    service = make_service(fake_clock, llm=False)
    texts = []
    for n in range(50):
        request = PlanRequest(goal=f"Migrate billing service {n} to the new ledger and report")
        planned = await service.plans.plan(request, f"r-{n}", use_cache=False)
        texts.append(planned.model_dump_json())
    cache = PlanCache(ttl=300, max_entries=100, clock=fake_clock.as_clock(), max_bytes=1 << 30)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n, text in enumerate(texts):  # each plan made here, as planning makes it
            cache.keep("owner", f"{n:064x}", PlanResponse.model_validate_json(text))
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert cache.bytes / 1.25 <= held <= cache.bytes * 1.25, (held, cache.bytes)


async def test_the_cache_keeps_its_bytes_right_past_its_count_so_it_never_fails(
    fake_clock: FakeClock,
) -> None:
    """One caller's plans past the count bound push out its oldest; the bytes the cache counts
    stay those of the plans it holds, so filling it past its byte bound later drops the oldest
    too, rather than failing every request from then on (an error answered to all)."""
    service = make_service(fake_clock, llm=False)
    planned = await service.plans.plan(PlanRequest(**GOAL), "r-1", use_cache=False)
    one = held_size("k00", planned.model_dump_json().encode())
    cache = PlanCache(ttl=300, max_entries=4, clock=fake_clock.as_clock(), max_bytes=10 * one)
    for number in range(40):
        cache.keep("owner", f"k{number:02d}", planned)
        assert cache.bytes == cache.held_bytes("owner") == len(cache) * one
    assert len(cache) == 4
    assert cache.get("owner", "k39") is not None
