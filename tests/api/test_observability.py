"""What operators read: metric labels bounded whatever a client sends, 413s counted under the
route they were sent to, latency buckets that reach the request timeout, and one request id
in the answer and in every log line of the request."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import respx
from prometheus_client.parser import text_string_to_metric_families

from support.app import TEST_KEY, FakeClock, make_settings, running_app


def samples(metrics_text: str, name: str) -> list[Any]:
    return [
        s
        for family in text_string_to_metric_families(metrics_text)
        for s in family.samples
        if s.name == name
    ]


async def test_method_and_route_labels_are_bounded() -> None:
    async with running_app(make_settings(llm=False)) as client:
        for method in ("BREW", "PROPFIND", "X" * 200):
            await client.request(method, "/plan")
            await client.request(method, f"/random/{method}")
        await client.get("/nope/12345")
        metrics = (await client.get("/metrics")).text
    requests = samples(metrics, "planner_http_requests_total")
    assert {s.labels["method"] for s in requests} <= {"GET", "POST", "HEAD", "OPTIONS", "other"}
    assert {s.labels["route"] for s in requests} == {"/plan", "unmatched"}
    other_plan = [
        s for s in requests if s.labels["method"] == "other" and s.labels["route"] == "/plan"
    ]
    assert sum(s.value for s in other_plan) == 3
    assert "BREW" not in metrics
    assert "12345" not in metrics


async def test_a_413_is_counted_under_the_route_it_was_sent_to() -> None:
    big = json.dumps({"goal": "g", "context": {"x": "y" * 70_000}}).encode()
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post(
            "/plan", content=big, headers={"content-type": "application/json"}
        )
        await client.post("/elsewhere", content=big, headers={"content-type": "application/json"})
        metrics = (await client.get("/metrics")).text
    assert response.status_code == 413
    too_large = {
        s.labels["route"]: s.value
        for s in samples(metrics, "planner_http_requests_total")
        if s.labels["status"] == "413"
    }
    assert too_large == {"/plan": 1, "unmatched": 1}


@pytest.mark.parametrize(("timeout_seconds", "top"), [(10, 30.0), (45, 60.0), (300, 300.0)])
async def test_latency_buckets_reach_the_request_timeout(
    timeout_seconds: float, top: float
) -> None:
    settings = make_settings(llm=False, planning={"timeout_seconds": timeout_seconds})
    async with running_app(settings) as client:
        await client.post("/plan", json={"goal": "Write the release notes"})
        metrics = (await client.get("/metrics")).text
    for name in (
        "planner_http_request_duration_seconds_bucket",
        "planner_llm_call_duration_seconds_bucket",
        "gen_ai_client_operation_duration_seconds_bucket",
    ):
        found = samples(metrics, name)
        if not found:
            continue  # no model call here: its histograms have no children yet
        edges = {float(s.labels["le"]) for s in found} - {float("inf")}
        assert max(edges) == top, name
        assert max(edges) >= timeout_seconds


async def test_the_body_request_id_is_the_one_in_every_log_line(
    chat_route: respx.Route, fake_clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    chat_route.return_value = httpx.Response(
        401, json={"error": {"message": f"Incorrect API key {TEST_KEY}"}}
    )
    settings = make_settings(server={"log_level": "DEBUG", "log_format": "json"})
    async with running_app(settings, fake_clock) as client:
        capsys.readouterr()  # start-up lines carry no request id
        response = await client.post(
            "/plan",
            json={"goal": "Fix the login bug", "request_id": "from-the-body"},
            headers={"X-Request-ID": "from-the-header"},
        )
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line]
    during = [line for line in lines if line["event"] != "service_stopped"]
    assert response.json()["request_id"] == "from-the-body"
    assert response.headers["x-request-id"] == "from-the-body"
    events = {line["event"] for line in during}
    assert {"llm_call_failed", "plan_created"} <= events, events
    assert {line.get("request_id") for line in during} == {"from-the-body"}
