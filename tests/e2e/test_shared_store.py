"""Replicas sharing one real Redis, over real HTTP: what a caller of a load-balanced service sees.

Each test starts real service processes (uvicorn, the openai SDK, redis-py) against the stub
model of tests/support/stub_model.py and a real `redis-server`, sends requests to one replica or the
other, and counts the model calls at the stub. The plan cache is off, so every model call
the service would make reaches the stub. No sleeps: the tests wait on events, on what Redis
reports (MONITOR) and on HTTP answers, each with a bound.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from planner_arm.store.redis_backend import key_id
from support.invariants import assert_error_body, assert_valid_plan
from support.redis_server import RedisServer
from support.service import free_port, start_service, stop_services
from support.stub_model import Held, StubLLM

pytestmark = pytest.mark.slow  # each test starts service processes and waits for real time

TIMEOUT = 10.0  # TIMEOUT_SECONDS: the planning deadline, far above anything a test holds
STORE_TIMEOUT = 0.5  # each Redis command and connect, as configured below
# A Redis command that gets no answer costs its timeout once (a timeout is not tried again).
STORE_OPERATION = STORE_TIMEOUT
# What a loaded 2-core machine may add to a request's time (as in test_faults.py).
MARGIN = 1.0
KEY_PREFIX = "planner-arm"
GOAL: dict[str, Any] = {
    "goal": "Fix authentication bug and add tests",
    "constraints": ["Do not modify the database schema"],
}

Replicas = Callable[[str, int], list[str]]


@pytest.fixture
def replicas(stub: StubLLM) -> Iterator[Replicas]:
    """`start(store_url, n)`: n service processes sharing the store at `store_url`, each warmed
    up with one plan; the stub then forgets those calls. Every process is stopped after."""
    processes: list[subprocess.Popen[str]] = []

    def start_one(store_url: str) -> str:
        port = free_port()
        env = {
            "OPENAI_BASE_URL": stub.base_url,
            "OPENAI_API_KEY": "sk-test",
            "LOG_FORMAT": "json",
            "TIMEOUT_SECONDS": str(TIMEOUT),
            "DRAIN_SECONDS": "0",
            "CACHE_ENABLED": "false",
            "PLANNER_STORE_URL": store_url,
            "PLANNER_STORE__SOCKET_TIMEOUT_SECONDS": str(STORE_TIMEOUT),
        }
        process, _lines, _reader = start_service(port, env)
        processes.append(process)
        return f"http://127.0.0.1:{port}"

    def start(store_url: str, count: int) -> list[str]:
        with ThreadPoolExecutor(count) as pool:
            urls = list(pool.map(start_one, [store_url] * count))
        for url in urls:
            # The first plan's one-off costs stay out of the scenario (see test_faults.py).
            with httpx.Client(base_url=url, timeout=TIMEOUT + MARGIN) as client:
                warm = client.post("/plan", json={"goal": "Warm up the service"})
            assert warm.status_code == 200, warm.text
        stub.reset()
        return urls

    try:
        yield start
    finally:
        stop_services(processes)


def post(url: str, path: str, body: dict[str, Any], key: str | None = None) -> httpx.Response:
    headers = {"Idempotency-Key": key} if key else {}
    return httpx.post(url + path, json=body, headers=headers, timeout=TIMEOUT + MARGIN)


def planned(response: httpx.Response, *, consecutive: bool = True) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert_valid_plan(body, consecutive=consecutive)
    return body


def metric(url: str, name: str, **labels: str) -> float:
    """One sample of the replica's /metrics (0 when it has none yet)."""
    text = httpx.get(url + "/metrics", timeout=5).text
    for line in text.splitlines():
        if line.startswith(name) and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def without_request_id(body: dict[str, Any]) -> dict[str, Any]:
    """An answer but for its request id: a replayed answer carries the repeat's own."""
    return {**body, "request_id": None}


def warning_codes(body: dict[str, Any]) -> list[str]:
    """The codes of `metadata.warnings`, each a {"code", "detail"} object."""
    codes = []
    for warning in body["metadata"]["warnings"]:
        assert set(warning) == {"code", "detail"}, warning
        codes.append(warning["code"])
    return codes


def await_second_claim(monitor: Any, key: str, within: float) -> None:
    """Reads the commands Redis runs until a second caller tries to claim `key`.

    The first claim is a SET NX that succeeds; any later claimer's SET NX fails and it then
    GETs the key to see who holds it: that GET means the second request is in."""
    # No API keys: the one anonymous caller; the key filed under its digest.
    name = f"{KEY_PREFIX}:idempotency:anonymous:{key_id(key)}"
    give_up_at = time.monotonic() + within
    while time.monotonic() < give_up_at:
        command = monitor.next_command()["command"]
        if command == f"GET {name}":
            return
    raise AssertionError(f"no second claim of {key!r} reached Redis within {within} s")


def test_a_plan_made_on_one_replica_is_fetched_from_the_other(
    stub: StubLLM, replicas: Replicas, redis_url: str
) -> None:
    a, b = replicas(redis_url, 2)
    made = planned(post(a, "/plan", GOAL))
    from_b = httpx.get(f"{b}/plan/{made['plan_id']}", timeout=5)
    from_a = httpx.get(f"{a}/plan/{made['plan_id']}", timeout=5)
    health = httpx.get(f"{b}/health", timeout=5).json()
    assert from_b.status_code == 200, from_b.text
    assert from_b.json() == made
    assert from_a.json() == made
    assert stub.calls == 1  # fetching never plans
    assert health["store"] == "redis"


def test_one_key_sent_to_both_replicas_at_once_costs_one_model_call(
    stub: StubLLM, replicas: Replicas, redis_server: RedisServer, redis_url: str
) -> None:
    a, b = replicas(redis_url, 2)
    release = threading.Event()
    stub.script(Held(release))  # the first call waits; any other would be answered at once
    key = "order-42"
    answers: dict[str, httpx.Response] = {}

    def send(url: str) -> None:
        answers[url] = post(url, "/plan", GOAL, key)

    senders = [threading.Thread(target=send, args=(url,)) for url in (a, b)]
    watcher = redis.Redis(port=redis_server.port, socket_timeout=TIMEOUT)
    try:
        with watcher.monitor() as monitor:
            for sender in senders:
                sender.start()
            assert stub.arrived.wait(timeout=TIMEOUT), "no request reached the model"
            # One replica holds the key and waits on the model; the other must be in too,
            # waiting on the key, before the model answers.
            await_second_claim(monitor, key, within=TIMEOUT)
        assert stub.calls == 1
        release.set()
        for sender in senders:
            sender.join(timeout=TIMEOUT + MARGIN)
    finally:
        release.set()
        watcher.close()
    assert set(answers) == {a, b}, "a request got no answer"
    first, second = planned(answers[a]), planned(answers[b])
    assert first["plan_id"] == second["plan_id"]
    assert without_request_id(first) == without_request_id(second)  # each keeps its own id
    assert first["metadata"]["source"] == "llm"
    assert stub.calls == 1

    later = planned(post(b, "/plan", GOAL, key))
    assert without_request_id(later) == without_request_id(first)
    assert stub.calls == 1
    replays = metric(a, "planner_idempotent_replays_total")
    replays += metric(b, "planner_idempotent_replays_total")
    assert replays == 2  # the waiting request and the later repeat


def test_a_key_reused_with_another_body_on_the_other_replica_is_refused(
    stub: StubLLM, replicas: Replicas, redis_url: str
) -> None:
    a, b = replicas(redis_url, 2)
    planned(post(a, "/plan", GOAL, "job-7"))
    other = post(b, "/plan", {**GOAL, "goal": "Write the release notes"}, "job-7")
    assert_error_body(other, 422, "idempotency_key_reused")
    assert stub.calls == 1


def failed_step_two(plan_id: str) -> dict[str, Any]:
    return {
        **GOAL,
        "plan_id": plan_id,
        "max_replans": 1,
        "step_states": {
            "1": {"status": "completed", "output": "auth/login.py:42"},
            "2": {"status": "failed", "error": "the patch breaks the session tests"},
        },
    }


def test_a_replan_on_the_other_replica_continues_the_chain_and_its_limit(
    stub: StubLLM, replicas: Replicas, redis_url: str
) -> None:
    a, b = replicas(redis_url, 2)
    first = planned(post(a, "/plan", GOAL))
    replan = planned(post(b, "/replan", failed_step_two(first["plan_id"])), consecutive=False)
    assert replan["version"] == 2
    assert replan["replan_count"] == 1
    assert replan["parent_plan_id"] == first["plan_id"]
    assert replan["plan"][0] == first["plan"][0]  # the completed step, as it was
    assert httpx.get(f"{a}/plan/{replan['plan_id']}", timeout=5).json() == replan
    assert stub.calls == 2

    # Replica A never saw the replan but counts it from the store: the limit is reached...
    by_id = post(a, "/replan", failed_step_two(replan["plan_id"]))
    assert_error_body(by_id, 409, "replan_limit")
    # ...even when the caller sends the plan back with its count edited.
    edited = {**replan, "replan_count": 0}
    sent_back = {**failed_step_two(replan["plan_id"]), "previous": edited}
    del sent_back["plan_id"]
    assert_error_body(post(a, "/replan", sent_back), 409, "replan_limit")
    assert stub.calls == 2  # refused before any model call


def timed(request: Callable[[], httpx.Response]) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = request()
    return response, time.monotonic() - started


@pytest.mark.parametrize("outage", ["stopped", "paused"])
def test_a_redis_outage_costs_stored_plans_not_answers(
    stub: StubLLM, replicas: Replicas, tmp_path: Path, outage: str
) -> None:
    own_redis = RedisServer(tmp_path).start()  # this test stops it: not the session's
    try:
        (url,) = replicas(own_redis.url, 1)
        before = planned(post(url, "/plan", GOAL))
        assert httpx.get(f"{url}/health", timeout=5).json()["store"] == "redis"
        if outage == "stopped":
            own_redis.stop()  # refuses connections
        else:
            own_redis.pause()  # takes connections and never answers

        # Each answer needs one store command, which fails within its bound; the last one
        # needs two (the key's claim, then the plan).
        bound = STORE_OPERATION + MARGIN
        plan_answer, plan_took = timed(lambda: post(url, "/plan", {"goal": "Add rate limits"}))
        lost, get_took = timed(lambda: httpx.get(f"{url}/plan/{before['plan_id']}", timeout=9))
        health, health_took = timed(lambda: httpx.get(f"{url}/health", timeout=9))
        keyed, keyed_took = timed(lambda: post(url, "/plan", {"goal": "Rotate keys"}, "k-1"))

        during = planned(plan_answer)
        assert during["metadata"]["source"] == "llm"
        assert "plan_not_stored" in warning_codes(during)
        assert "plan_not_stored" not in warning_codes(before)
        assert plan_took < bound
        assert_error_body(lost, 503, "store_unavailable")
        assert get_took < bound
        assert health.status_code == 200
        assert health.json()["store"] == "degraded"
        assert health_took < bound
        assert {"idempotency_not_kept", "plan_not_stored"} <= set(warning_codes(planned(keyed)))
        assert keyed_took < 2 * STORE_OPERATION + MARGIN
        assert metric(url, "planner_store_errors_total", operation="put_plan") == 2
        assert metric(url, "planner_store_errors_total", operation="get_plan") == 1
        assert metric(url, "planner_store_errors_total", operation="claim") == 1
        assert stub.calls == 3  # before the outage, and the two during it

        if outage == "paused":
            # Once Redis answers again, so does the store: nothing stays broken.
            own_redis.resume()
            assert httpx.get(f"{url}/health", timeout=5).json()["store"] == "redis"
            after = planned(post(url, "/plan", {"goal": "Archive the old logs"}))
            assert "plan_not_stored" not in warning_codes(after)
            assert httpx.get(f"{url}/plan/{after['plan_id']}", timeout=5).json() == after
    finally:
        own_redis.stop()
