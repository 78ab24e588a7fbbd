"""A frozen Redis (SIGSTOP: it keeps its socket and answers nothing) never holds an answer past
the request's deadline: store operations run within the time the request has left, and after
a failure the store is skipped for `store.down_seconds`, so GET /plan/{id} answers 503 at once
and /health says the store is degraded; a full Redis (noeviction) is a warning on the answer,
never an error. A real redis-server, the app in process, real time."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from support.app import make_settings, running_app
from support.redis_server import RedisServer

pytestmark = pytest.mark.slow

GOAL = {"goal": "Fix authentication bug and add tests", "constraints": ["No schema change"]}
DEADLINE = 2.0
# What the answer may take past its deadline, whatever the store does.
SLACK = 0.5


@pytest.fixture
def frozen_later(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path).start()
    try:
        yield server
    finally:
        server.resume()  # SIGCONT before stopping: a frozen server cannot act on SIGTERM
        server.stop()


async def timed(call: Any) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = await call
    return response, time.monotonic() - started


async def test_a_frozen_store_costs_no_answer_its_deadline(frozen_later: RedisServer) -> None:
    # A socket timeout longer than the deadline: only the deadline bounds the first failure.
    settings = make_settings(
        llm=False,
        planning={"timeout_seconds": DEADLINE},
        store={"url": frozen_later.url, "socket_timeout_seconds": 5.0, "down_seconds": 30},
    )
    async with running_app(settings) as client:
        first = (await client.post("/plan", json=GOAL)).json()
        assert (await client.get("/health")).json()["store"] == "redis"
        frozen_later.pause()
        planned, plan_took = await timed(
            client.post("/plan", json=GOAL, headers={"Idempotency-Key": "k-1"})
        )
        replanned, replan_took = await timed(
            client.post(
                "/replan",
                json={**GOAL, "previous": first, "step_states": {"2": {"status": "failed"}}},
            )
        )
        expanded, expand_took = await timed(
            client.post("/plan/expand", json={**GOAL, "previous": first, "step": 2})
        )
        fetched, get_took = await timed(client.get(f"/plan/{first['plan_id']}"))
        health, health_took = await timed(client.get("/health"))
    assert plan_took < DEADLINE + SLACK, f"/plan took {plan_took:.2f} s"
    assert replan_took < DEADLINE + SLACK, f"/replan took {replan_took:.2f} s"
    assert expand_took < DEADLINE + SLACK, f"/plan/expand took {expand_took:.2f} s"
    assert planned.status_code == replanned.status_code == expanded.status_code == 200
    codes = {note["code"] for note in planned.json()["metadata"]["warnings"]}
    assert {"plan_not_stored", "idempotency_not_kept"} <= codes
    # The store failed moments ago: it is not asked again, the answers come at once.
    assert fetched.status_code == 503
    assert fetched.json()["error"] == "store_unavailable"
    assert get_took < SLACK, f"GET /plan took {get_took:.2f} s"
    assert health.json()["store"] == "degraded"
    assert health_took < SLACK


async def _health_of_a_store_that_answers(client: httpx.AsyncClient) -> dict[str, Any]:
    # /health gives a store 0.25 s to answer; a pause of the test process itself (a
    # collection of its large heap, a busy machine) can take longer once, and then the
    # next probe finds the store back. A store that never answers stays degraded.
    for _ in range(3):
        health: dict[str, Any] = (await client.get("/health")).json()
        if health["store"] != "degraded":
            break
    return health


async def test_health_shows_the_eviction_policy_redis_reports(tmp_path: Path) -> None:
    server = RedisServer(tmp_path, "--maxmemory-policy", "volatile-lru").start()
    refusing = RedisServer(tmp_path, "--rename-command", "CONFIG", "").start()
    try:
        async with running_app(make_settings(llm=False, store={"url": server.url})) as client:
            told = await _health_of_a_store_that_answers(client)
        async with running_app(make_settings(llm=False, store={"url": refusing.url})) as client:
            refused = await _health_of_a_store_that_answers(client)
        async with running_app(make_settings(llm=False)) as client:
            in_memory = (await client.get("/health")).json()
    finally:
        server.stop()
        refusing.stop()
    assert (told["store"], told["store_eviction_policy"]) == ("redis", "volatile-lru")
    assert (refused["store"], refused["store_eviction_policy"]) == ("redis", "unknown")
    assert (in_memory["store"], in_memory["store_eviction_policy"]) == ("memory", None)


async def test_a_full_redis_is_a_warning_on_the_answer_not_an_error(tmp_path: Path) -> None:
    server = RedisServer(tmp_path, "--maxmemory-policy", "noeviction").start()
    try:
        settings = make_settings(llm=False, store={"url": server.url})
        async with running_app(settings) as client:
            kept = (await client.post("/plan", json=GOAL)).json()
            with redis.Redis(port=server.port, socket_timeout=5) as raw:
                used = int(raw.info("memory")["used_memory"])
                raw.config_set("maxmemory", used // 2)  # full: every write is refused
            keyed = await client.post("/plan", json=GOAL, headers={"Idempotency-Key": "k-1"})
            found = await client.get(f"/plan/{kept['plan_id']}")
    finally:
        server.stop()
    assert keyed.status_code == 200
    warnings = {warning["code"] for warning in keyed.json()["metadata"]["warnings"]}
    assert {"plan_not_stored", "idempotency_not_kept"} <= warnings
    assert found.status_code == 200  # reads still work
