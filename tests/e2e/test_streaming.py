"""Streamed plans over real HTTP: the service process in front of the stub model, which
streams its answer in small delayed chunks. The tests read the events as they arrive."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from support.invariants import assert_valid_plan
from support.service import MARGIN, TIMEOUT, Serve
from support.sse import check_reset_rule
from support.stub_model import PLAN_JSON, Hang, Streamed, StubLLM

pytestmark = pytest.mark.slow
GOAL = {"goal": "Fix authentication bug and add tests", "options": {"use_cache": False}}
SSE = {"accept": "text/event-stream"}


def read_stream(
    url: str, body: dict[str, Any] = GOAL, *, stop_after_step: bool = False
) -> list[tuple[str, Any, float]]:
    """(event, data, seconds since the request) of each SSE event, as it arrived."""
    events: list[tuple[str, Any, float]] = []
    started = time.monotonic()
    with (
        httpx.Client(base_url=url, timeout=30) as client,
        client.stream("POST", "/plan", json=body, headers=SSE) as response,
    ):
        assert response.status_code == 200, response.read()
        name = None
        for line in response.iter_lines():
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                events.append((str(name), json.loads(line[6:]), time.monotonic() - started))
                if stop_after_step and name == "step":
                    break  # leaves with the rest unread: the client disconnects
    return events


def final_plan(events: list[tuple[str, Any, float]]) -> dict[str, Any]:
    plan = check_reset_rule([(name, data) for name, data, _ in events])
    assert_valid_plan(plan)
    return plan


def test_the_first_step_arrives_long_before_the_model_finishes(stub: StubLLM, serve: Serve) -> None:
    url = serve(TIMEOUT_SECONDS="20")
    chunks = len(PLAN_JSON) // 16 + 1
    stub.default = Streamed(chunk_chars=16, interval=0.03)  # about 2 s for the answer
    events = read_stream(url)
    plan = final_plan(events)
    assert plan["metadata"]["source"] == "llm"
    first_step = next(at for name, _, at in events if name == "step")
    finished = events[-1][2]
    assert finished >= chunks * 0.03 * 0.9
    assert first_step < finished / 3
    assert [name for name, _, _ in events] == ["plan.started", *["step"] * 4, "plan"]
    steps_at = [at for name, _, at in events if name == "step"]
    assert steps_at[2] < finished * 0.8  # the steps came one by one, not at the end


def test_a_stream_that_breaks_mid_answer_is_withdrawn_and_retried(
    stub: StubLLM, serve: Serve
) -> None:
    url = serve()
    stub.script(Streamed(chunk_chars=16, break_after=30))  # past the first step, not the end
    stub.default = Streamed(chunk_chars=64)
    events = read_stream(url)
    names = [name for name, _, _ in events]
    reset = names.index("plan.reset")
    assert "step" in names[:reset]
    assert events[reset][1] == {"reason": "stream_broken"}
    plan = final_plan(events)
    assert plan["metadata"]["source"] == "llm"
    assert plan["metadata"]["attempts"] == 2
    assert stub.calls == 2


def test_a_provider_without_streaming_still_gives_a_stream(stub: StubLLM, serve: Serve) -> None:
    url = serve()
    stub.streaming = False
    first = final_plan(read_stream(url))
    second = final_plan(read_stream(url, {**GOAL, "goal": "Add rate limiting to the API"}))
    assert first["metadata"]["source"] == second["metadata"]["source"] == "llm"
    asked = [bool(request.get("stream")) for request in stub.requests]
    assert asked == [True, False, False]  # refused once, remembered after


def test_an_unusable_answer_streams_the_rule_based_plan(stub: StubLLM, serve: Serve) -> None:
    url = serve()
    stub.default = Streamed("I am sorry, I cannot produce a plan for that.", chunk_chars=8)
    events = read_stream(url)
    plan = final_plan(events)
    assert plan["metadata"]["source"] == "fallback"
    assert stub.calls == 2  # the answer and the repair prompt's


@pytest.mark.parametrize(
    "fault",
    [Hang(), Streamed(chunk_chars=32, interval=0.1)],  # 0.8 s to the first step, 3.5 s in all
    ids=["hang", "too_slow_after_some_steps"],
)
def test_a_model_that_does_not_finish_in_time_ends_in_a_plan_by_the_deadline(
    stub: StubLLM, serve: Serve, fault: Hang | Streamed
) -> None:
    url = serve()
    stub.default = fault
    events = read_stream(url)
    plan = final_plan(events)
    assert plan["metadata"]["source"] == "fallback"
    assert events[-1][2] < TIMEOUT + 0.5 + MARGIN
    if isinstance(fault, Streamed):  # the model's first steps went out, then were withdrawn
        names = [name for name, _, _ in events]
        assert names.index("step") < names.index("plan.reset")
        assert events[names.index("plan.reset")][1] == {"reason": "fallback"}


def test_a_client_that_leaves_cancels_the_model_call(stub: StubLLM, serve: Serve) -> None:
    url = serve(TIMEOUT_SECONDS="30")
    stub.default = Streamed(chunk_chars=16, interval=0.1)  # about 7 s to write
    events = read_stream(url, stop_after_step=True)
    assert events[-1][0] == "step"
    left = time.monotonic()
    assert stub.cut_off.wait(timeout=5), "the model kept writing for a caller who had left"
    assert time.monotonic() - left < 5
    with httpx.Client(base_url=url, timeout=10) as client:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            metrics = client.get("/metrics").text
            if 'planner_streams_total{outcome="disconnected"} 1.0' in metrics:
                break
        health = client.get("/health").json()
    assert 'planner_streams_total{outcome="disconnected"} 1.0' in metrics
    assert health["circuits"] == {"gpt-3.5-turbo": "closed"}  # no verdict on the model
    assert stub.calls == 1
