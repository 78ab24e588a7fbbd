"""Retries of both clients against a scripted transport: Retry-After honoured, the same
Idempotency-Key on every try, a total time bound, and what is never retried. The sleep and
the clock are injected, so no test waits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import pytest

from planner_arm.client import (
    AsyncPlannerClient,
    InvalidRequest,
    PlannerClient,
    ServerError,
    TransportError,
    Unavailable,
)
from planner_arm.client.retry import parse_retry_after
from support.stub_model import PLAN

BASE = "http://localhost"
HEALTH = {
    "status": "healthy",
    "version": "0.1.0",
    "model": None,
    "timestamp": "2026-01-01T00:00:00+00:00",
    "uptime_seconds": 1.0,
    "llm": "disabled",
    "circuits": {},
    "store": "memory",
}
Reply = httpx.Response | type[Exception]


def plan_answer() -> dict[str, Any]:
    steps = PLAN["plan"]
    return {
        **PLAN,
        "total_estimated_duration": 60,
        "plan_id": "p-1",
        "request_id": "r-1",
        "parallel_stages": [[step["step"]] for step in steps],
        "critical_path_duration": 60,
        "estimated_cost": {"llm_usd": 0, "prompt_tokens": 0, "completion_tokens": 0},
        "metadata": {
            "source": "fallback",
            "model": None,
            "attempts": 0,
            "repairs": [],
            "warnings": [],
            "latency_ms": 1.0,
            "prompt_version": "v1",
        },
    }


def busy(status: int = 503, retry_after: str | None = "1", code: str = "not_ready") -> Reply:
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    body = {"error": code, "detail": "busy", "request_id": "r-busy"}
    return httpx.Response(status, json=body, headers=headers)


class Script:
    """A transport answering each request with the next reply; it records what was sent."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        reply = self.replies.pop(0)
        if isinstance(reply, type):
            raise reply("scripted failure", request=request)  # type: ignore[call-arg]
        return reply

    @property
    def keys(self) -> list[str | None]:
        return [request.headers.get("idempotency-key") for request in self.requests]


class Time:
    """A clock that moves only when the client sleeps."""

    def __init__(self) -> None:
        self.now = 100.0
        self.waits: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds

    async def async_sleep(self, seconds: float) -> None:
        self.sleep(seconds)


def sync_client(script: Script, time: Time, **kwargs: Any) -> PlannerClient:
    transport = httpx.MockTransport(script)
    return PlannerClient(BASE, transport=transport, sleep=time.sleep, clock=time.clock, **kwargs)


def test_a_503_is_retried_after_its_retry_after_with_the_same_idempotency_key() -> None:
    script, time = Script(busy(retry_after="3"), httpx.Response(200, json=plan_answer())), Time()
    with sync_client(script, time) as client:
        plan = client.plan("Fix authentication bug and add tests")
    assert plan.plan_id == "p-1"
    assert time.waits == [3.0]
    assert len(script.keys) == 2
    assert script.keys[0] is not None
    assert script.keys[0] == script.keys[1]


async def test_the_async_client_retries_the_same_way_with_the_callers_key() -> None:
    script, time = Script(busy(429, "2"), httpx.Response(200, json=plan_answer())), Time()
    transport = httpx.MockTransport(script)
    async with AsyncPlannerClient(
        BASE, transport=transport, sleep=time.async_sleep, clock=time.clock
    ) as client:
        plan = await client.plan("goal", idempotency_key="my-key")
    assert plan.plan_id == "p-1"
    assert time.waits == [2.0]
    assert script.keys == ["my-key", "my-key"]


def test_each_call_gets_its_own_generated_key() -> None:
    answers = [httpx.Response(200, json=plan_answer()) for _ in range(2)]
    script, time = Script(*answers), Time()
    with sync_client(script, time) as client:
        client.plan("one")
        client.plan("two")
    assert script.keys[0] != script.keys[1]


def test_a_retry_after_date_is_waited_for() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after(format_datetime(now + timedelta(seconds=7), usegmt=True), now) == 7
    assert parse_retry_after("2.5") == 2.5
    assert parse_retry_after(format_datetime(now - timedelta(seconds=7), usegmt=True), now) == 0
    assert parse_retry_after("soon") is None


def test_no_answer_is_retried_with_a_growing_wait() -> None:
    replies: list[Reply] = [httpx.ConnectError, httpx.ReadTimeout]
    script = Script(*replies, httpx.Response(200, json=HEALTH))
    time = Time()
    with sync_client(script, time) as client:
        health = client.health()
    assert health.status == "healthy"
    assert time.waits == [0.5, 1.0]
    assert script.keys == [None, None, None]  # a GET needs no key


def test_when_the_retries_run_out_the_last_error_is_raised() -> None:
    script, time = Script(busy(), busy(), busy()), Time()
    with sync_client(script, time, retries=2) as client, pytest.raises(Unavailable) as failed:
        client.plan("goal")
    assert len(script.requests) == 3
    assert (failed.value.status, failed.value.code) == (503, "not_ready")
    assert failed.value.retry_after == 1
    assert failed.value.request_id == "r-busy"


def test_no_wait_passes_the_total_bound() -> None:
    script, time = Script(*(busy(retry_after="2") for _ in range(10))), Time()
    with (
        sync_client(script, time, retries=9, total_timeout=5) as client,
        pytest.raises(Unavailable),
    ):
        client.plan("goal")
    assert time.waits == [2.0, 2.0]  # a third wait would end past 5 s
    assert len(script.requests) == 3


def test_a_retry_after_longer_than_the_bound_is_not_waited_for() -> None:
    script, time = Script(busy(retry_after="600")), Time()
    with sync_client(script, time) as client, pytest.raises(Unavailable) as failed:
        client.plan("goal")
    assert time.waits == []
    assert failed.value.retry_after == 600


@pytest.mark.parametrize(
    ("reply", "error_class", "code"),
    [
        (httpx.Response(422, json={"error": "invalid_request", "detail": "x",
                                   "request_id": "r"}), InvalidRequest, "invalid_request"),
        (httpx.Response(500, json={"error": "internal_error", "detail": "x",
                                   "request_id": "r"}), ServerError, "internal_error"),
        (httpx.Response(502, text="<html>Bad Gateway</html>"), ServerError, "http_error"),
        (httpx.Response(400, json={"error": "invalid_idempotency_key", "detail": "x",
                                   "request_id": "r"}), InvalidRequest, "invalid_idempotency_key"),
    ],
)  # fmt: skip
def test_an_answer_that_another_try_would_not_change_is_raised_at_once(
    reply: httpx.Response, error_class: type[Exception], code: str
) -> None:
    script, time = Script(reply), Time()
    with sync_client(script, time) as client, pytest.raises(error_class) as failed:
        client.plan("goal")
    assert len(script.requests) == 1
    assert getattr(failed.value, "code", None) == code
    assert time.waits == []


def test_a_transport_failure_without_retries_is_raised() -> None:
    script, time = Script(httpx.ConnectError), Time()
    with sync_client(script, time, retries=0) as client, pytest.raises(TransportError) as failed:
        client.get("p-1")
    assert failed.value.status is None
    assert isinstance(failed.value.__cause__, httpx.ConnectError)


def test_a_plan_answered_in_json_to_a_stream_request_is_one_plan_event() -> None:
    script, time = Script(httpx.Response(200, json=plan_answer())), Time()
    with sync_client(script, time) as client:
        events = list(client.stream("goal"))
    assert [event.event for event in events] == ["plan"]
    assert events[0].plan is not None
    assert script.requests[0].headers["accept"] == "text/event-stream"


SSE_ERROR = (
    b'event: plan.started\ndata: {"plan_id": "p", "request_id": "r", "model": null}\n\n'
    b": ping\n\n"
    b'event: error\ndata: {"error": "llm_unavailable", "detail": "no model", '
    b'"request_id": "r"}\n\n'
)


def test_an_error_event_ends_the_stream_as_its_error_class() -> None:
    reply = httpx.Response(200, content=SSE_ERROR, headers={"content-type": "text/event-stream"})
    script, time = Script(reply), Time()
    seen: list[str] = []
    with sync_client(script, time) as client, pytest.raises(Unavailable) as failed:
        seen.extend(event.event for event in client.stream("goal"))
    assert seen == ["plan.started"]
    assert (failed.value.status, failed.value.code, failed.value.request_id) == (
        503, "llm_unavailable", "r"
    )  # fmt: skip
