"""Traces as a tracing backend receives them: a request that carries `traceparent` continues
the caller's trace, with a span for each model call (GenAI attributes), each store operation
and the rule-based fallback under the request's span, and log lines that name the span."""

from __future__ import annotations

import json

import httpx
import pytest
import respx
from opentelemetry.trace import SpanKind, StatusCode

from planner_arm.config import SANITIZE_FIELDS_VARIABLE
from support.app import TEST_KEY, FakeClock, answer, good_plan, make_settings, running_app
from support.stub_model import DEFAULT_MODEL
from support.tracing import (
    CALLER_SPAN_ID,
    CALLER_TRACE_ID,
    TRACEPARENT,
    in_memory_tracing,
    named,
    parent_id,
    span_id,
    trace_id,
)

GOAL = {"goal": "Fix authentication bug and add tests"}
HEADERS = {"traceparent": TRACEPARENT}


async def test_a_plan_request_continues_the_callers_trace(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = answer(good_plan(), model="gpt-3.5-turbo-0125")
    tracing, exporter = in_memory_tracing()
    async with running_app(make_settings(), fake_clock, tracing=tracing) as client:
        response = await client.post("/plan", json=GOAL, headers=HEADERS)
    assert response.status_code == 200
    body = response.json()
    spans = exporter.get_finished_spans()
    assert {trace_id(span) for span in spans} == {CALLER_TRACE_ID}

    [request] = [span for span in spans if span.kind is SpanKind.SERVER]
    assert request.name == "POST /plan"
    assert parent_id(request) == CALLER_SPAN_ID
    assert request.attributes is not None
    assert request.attributes["planner.plan_id"] == body["plan_id"]
    assert request.attributes["planner.source"] == "llm"
    assert request.attributes["planner.step_count"] == len(body["plan"])

    [chat] = named(spans, "chat ")
    assert chat.name == f"chat {DEFAULT_MODEL}"
    assert chat.kind is SpanKind.CLIENT
    assert parent_id(chat) == span_id(request)
    attributes = dict(chat.attributes or {})
    assert attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert attributes["gen_ai.usage.input_tokens"] == 900
    assert attributes["gen_ai.usage.output_tokens"] == 300
    assert attributes["gen_ai.response.model"] == "gpt-3.5-turbo-0125"
    assert attributes["gen_ai.request.model"] == DEFAULT_MODEL
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == attributes["gen_ai.system"] == "openai"
    assert "error.type" not in attributes

    # The HTTP request to the model is the chat span's child and carries the trace onward.
    [http] = [s for s in spans if s.kind is SpanKind.CLIENT and parent_id(s) == span_id(chat)]
    sent = chat_route.calls.last.request.headers["traceparent"]
    assert sent == f"00-{CALLER_TRACE_ID}-{span_id(http)}-01"

    [put] = named(spans, "store.put_plan")
    assert parent_id(put) == span_id(request)
    assert (put.attributes or {})["planner.store"] == "memory"
    # The memory store is in the process: no call out, no database system.
    assert put.kind is SpanKind.INTERNAL
    assert "db.system.name" not in (put.attributes or {})
    assert named(spans, "rule_based_fallback") == []


async def test_a_retried_model_call_is_two_spans_the_first_with_its_error(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    failed = httpx.Response(500, json={"error": {"message": "overloaded"}})
    chat_route.side_effect = [failed, answer(good_plan())]
    tracing, exporter = in_memory_tracing()
    async with running_app(make_settings(), fake_clock, tracing=tracing) as client:
        response = await client.post("/plan", json=GOAL, headers=HEADERS)
    assert response.json()["metadata"]["source"] == "llm"
    spans = exporter.get_finished_spans()
    [request] = [span for span in spans if span.kind is SpanKind.SERVER]
    first, second = named(spans, "chat ")
    assert parent_id(first) == parent_id(second) == span_id(request)
    assert (first.attributes or {})["error.type"] == "server_error"
    assert first.status.status_code is StatusCode.ERROR
    assert "error.type" not in (second.attributes or {})
    assert (second.attributes or {})["gen_ai.response.finish_reasons"] == ("stop",)
    assert fake_clock.sleeps  # the retry waited its backoff between the two


async def test_the_rule_based_answer_is_a_fallback_span_under_the_request(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = httpx.Response(401, json={"error": {"message": "bad key"}})
    tracing, exporter = in_memory_tracing()
    async with running_app(make_settings(), fake_clock, tracing=tracing) as client:
        response = await client.post("/plan", json=GOAL, headers=HEADERS)
    assert response.json()["metadata"]["source"] == "fallback"
    spans = exporter.get_finished_spans()
    [request] = [span for span in spans if span.kind is SpanKind.SERVER]
    [chat] = named(spans, "chat ")
    [fallback] = named(spans, "rule_based_fallback")
    assert parent_id(fallback) == parent_id(chat) == span_id(request)
    assert (chat.attributes or {})["error.type"] == "auth_failed"
    assert (fallback.attributes or {})["planner.fallback.reason"] == "llm_unavailable"
    assert (request.attributes or {})["planner.source"] == "fallback"
    assert (request.attributes or {})["planner.step_count"] == len(response.json()["plan"])


async def test_without_a_model_the_fallback_span_says_why() -> None:
    tracing, exporter = in_memory_tracing()
    async with running_app(make_settings(llm=False), tracing=tracing) as client:
        await client.post("/plan", json=GOAL, headers=HEADERS)
    spans = exporter.get_finished_spans()
    [fallback] = named(spans, "rule_based_fallback")
    assert (fallback.attributes or {})["planner.fallback.reason"] == "llm_disabled"
    assert trace_id(fallback) == CALLER_TRACE_ID
    assert named(spans, "chat ") == []


async def test_probes_make_no_spans() -> None:
    tracing, exporter = in_memory_tracing()
    async with running_app(make_settings(llm=False), tracing=tracing) as client:
        for path in ("/health", "/ready", "/metrics"):
            assert (await client.get(path)).status_code == 200
        await client.get("/capabilities")
    assert [span.name for span in exporter.get_finished_spans()] == ["GET /capabilities"]


async def test_log_lines_of_a_traced_request_name_its_span(
    chat_route: respx.Route, fake_clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    failed = httpx.Response(500, json={"error": {"message": "overloaded"}})
    chat_route.side_effect = [failed, answer(good_plan())]
    tracing, exporter = in_memory_tracing()
    settings = make_settings(server={"log_format": "json"})
    async with running_app(settings, fake_clock, tracing=tracing) as client:
        capsys.readouterr()  # start-up lines are outside any request
        await client.post("/plan", json=GOAL, headers=HEADERS)
    lines = {
        line["event"]: line
        for line in map(json.loads, capsys.readouterr().err.splitlines())
        if line["event"] != "service_stopped"
    }
    spans = exporter.get_finished_spans()
    [request] = [span for span in spans if span.kind is SpanKind.SERVER]
    first, _ = named(spans, "chat ")
    assert {line["trace_id"] for line in lines.values()} == {CALLER_TRACE_ID}
    assert lines["plan_created"]["span_id"] == span_id(request)
    # Logged after the failed call's span ended: the line belongs to the request's span.
    assert lines["llm_call_failed"]["span_id"] == span_id(request)
    assert span_id(first) != span_id(request)


CAPTURE_VARIABLES = [
    f"OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_{side}"
    for side in ("SERVER_REQUEST", "SERVER_RESPONSE", "CLIENT_REQUEST", "CLIENT_RESPONSE")
]
SERVICE_KEY = "svc-key-0123456789SECRET"


async def test_no_credential_reaches_a_span_even_with_every_header_captured(
    chat_route: respx.Route, fake_clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in CAPTURE_VARIABLES:
        monkeypatch.setenv(variable, ".*")
    # The operator's own list is kept, and the credential headers are added to it.
    monkeypatch.setenv(SANITIZE_FIELDS_VARIABLE, "x-tenant-token")
    chat_route.return_value = answer(good_plan())
    tracing, exporter = in_memory_tracing()
    settings = make_settings(auth={"api_keys": [SERVICE_KEY]})
    sent = {
        **HEADERS,
        "Authorization": f"Bearer {SERVICE_KEY}",
        "Cookie": "session=cookie-SECRET",
        "X-Tenant-Token": "tenant-token-SECRET",
    }
    async with running_app(settings, fake_clock, tracing=tracing) as client:
        bearer = await client.post("/plan", json=GOAL, headers=sent)
        header = await client.post("/plan", json=GOAL, headers={"X-API-Key": SERVICE_KEY})
    assert bearer.status_code == header.status_code == 200
    spans = exporter.get_finished_spans()
    said = repr(
        [(span.name, span.attributes, [e.attributes for e in span.events]) for span in spans]
    )
    for secret in (SERVICE_KEY, TEST_KEY, "cookie-SECRET", "tenant-token-SECRET"):
        assert secret not in said
    # The headers were captured (the capture is on), their values redacted.
    first, second = [span for span in spans if span.kind is SpanKind.SERVER]
    redacted = ("[REDACTED]",)
    for name in ("authorization", "cookie", "x_tenant_token"):
        assert (first.attributes or {})[f"http.request.header.{name}"] == redacted, name
    assert (second.attributes or {})["http.request.header.x_api_key"] == redacted
    assert (first.attributes or {})["http.request.header.traceparent"] == (TRACEPARENT,)
    [model_call] = [s for s in spans if s.kind is SpanKind.CLIENT and s.name.startswith("POST")]
    assert (model_call.attributes or {})["http.request.header.authorization"] == redacted
