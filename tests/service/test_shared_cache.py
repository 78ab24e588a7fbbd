"""The plan cache on a shared Redis: what one replica planned, another answers from the cache;
a Redis that is gone is a cache miss, never an error. A real redis-server, respx on the model."""

from __future__ import annotations

from pathlib import Path

import respx

from support.app import answer, good_plan, make_settings, running_app
from support.invariants import assert_valid_plan, sample
from support.redis_server import RedisServer

GOAL = {"goal": "Fix authentication bug and add tests", "constraints": ["No schema change"]}


async def test_a_plan_cached_by_one_replica_is_answered_by_another(
    chat_route: respx.Route, redis_url: str
) -> None:
    chat_route.side_effect = lambda request: answer(good_plan())
    settings = make_settings(store={"url": redis_url})
    async with running_app(settings) as replica_a, running_app(settings) as replica_b:
        planned = (await replica_a.post("/plan", json=GOAL)).json()
        repeated = (await replica_b.post("/plan", json=GOAL)).json()
    assert chat_route.call_count == 1
    assert planned["metadata"]["source"] == "llm"
    assert repeated["metadata"]["source"] == "cache"
    assert repeated["metadata"]["cached_plan_id"] == planned["plan_id"]
    assert repeated["plan"] == planned["plan"]
    assert_valid_plan(repeated)


async def test_a_redis_that_is_gone_is_a_cache_miss(
    chat_route: respx.Route, tmp_path: Path
) -> None:
    chat_route.side_effect = lambda request: answer(good_plan())
    server = RedisServer(tmp_path).start()
    settings = make_settings(store={"url": server.url, "socket_timeout_seconds": 0.2})
    try:
        async with running_app(settings) as client:
            server.stop()
            first = await client.post("/plan", json=GOAL)
            second = await client.post("/plan", json=GOAL)
            metrics = (await client.get("/metrics")).text
    finally:
        server.stop()
    assert first.status_code == second.status_code == 200
    assert second.json()["metadata"]["source"] == "llm"  # no cache: planned again
    assert chat_route.call_count == 2
    assert sample(metrics, "planner_store_errors_total", operation="cache_get") == 2
    assert sample(metrics, "planner_store_errors_total", operation="cache_put") == 2
    codes = {note["code"] for note in second.json()["metadata"]["warnings"]}
    assert "plan_not_stored" in codes
