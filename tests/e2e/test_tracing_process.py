"""The service as a process, exporting its spans over OTLP/HTTP to a receiver on loopback: a
traced POST /plan arrives as the caller's trace, and the spans still buffered at SIGTERM are
exported before the process exits."""

from __future__ import annotations

import httpx
import pytest

from support.otlp_receiver import OTLPReceiver
from support.service import free_port, start_service
from support.stub_model import DEFAULT_MODEL, StubLLM
from support.tracing import CALLER_SPAN_ID, CALLER_TRACE_ID, TRACEPARENT

pytestmark = pytest.mark.slow


def test_spans_of_a_traced_request_reach_the_otlp_endpoint(stub: StubLLM) -> None:
    port = free_port()
    with OTLPReceiver() as receiver:
        env = {
            "OPENAI_BASE_URL": stub.base_url,
            "LOG_FORMAT": "json",
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        }
        process, _, reader = start_service(port, env)
        try:
            response = httpx.post(
                f"http://127.0.0.1:{port}/plan",
                json={"goal": "Fix authentication bug and add tests"},
                headers={"traceparent": TRACEPARENT},
                timeout=10,
            )
            assert response.status_code == 200, response.text
        finally:
            # The batch would wait seconds to send; the shutdown sends it now.
            process.terminate()
            assert process.wait(timeout=15) in (0, -15)
            reader.join(timeout=5)
        # The request, the model call and its HTTP request, and the store's write.
        spans = receiver.spans(4)
        spans += receiver.more()
    by_name = {span.name: span for span in spans}
    assert {span.trace_id for span in spans} == {CALLER_TRACE_ID}
    assert {span.resource["service.name"] for span in spans} == {"planner-arm"}
    assert set(receiver.paths) == {"/v1/traces"}
    request = by_name["POST /plan"]
    assert request.parent_id == CALLER_SPAN_ID
    assert request.attributes["planner.plan_id"] == response.json()["plan_id"]
    assert request.attributes["planner.source"] == "llm"
    chat = by_name[f"chat {DEFAULT_MODEL}"]
    assert chat.parent_id == request.span_id
    assert chat.attributes["gen_ai.request.model"] == DEFAULT_MODEL
    assert chat.attributes["gen_ai.usage.output_tokens"] > 0
    assert chat.attributes["gen_ai.response.finish_reasons"] == ["stop"]
    assert by_name["store.put_plan"].parent_id == request.span_id


def test_credentials_never_reach_the_collector_whatever_headers_are_captured(
    stub: StubLLM,
) -> None:
    service_key, model_key = "svc-key-0123456789SECRET", "sk-model-0123456789SECRET"
    port = free_port()
    with OTLPReceiver() as receiver:
        env = {
            "OPENAI_BASE_URL": stub.base_url,
            "OPENAI_API_KEY": model_key,
            "PLANNER_API_KEYS": service_key,
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            # The standard variables, set to capture every header both ways.
            "OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_SERVER_REQUEST": ".*",
            "OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_SERVER_RESPONSE": ".*",
            "OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_CLIENT_REQUEST": ".*",
            "OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_CLIENT_RESPONSE": ".*",
        }
        process, _, reader = start_service(port, env)
        try:
            base = f"http://127.0.0.1:{port}"
            keyed = {"Authorization": f"Bearer {service_key}", "traceparent": TRACEPARENT}
            planned = httpx.post(f"{base}/plan", json={"goal": "Fix bug 7"}, headers=keyed)
            read = httpx.get(
                f"{base}/plan/{planned.json()['plan_id']}", headers={"X-API-Key": service_key}
            )
            assert (planned.status_code, read.status_code) == (200, 200)
        finally:
            process.terminate()
            assert process.wait(timeout=15) in (0, -15)
            reader.join(timeout=5)
        spans = receiver.spans(5)
        spans += receiver.more()
    said = repr([(span.name, span.attributes, span.resource) for span in spans])
    assert service_key not in said
    assert model_key not in said
    by_name = {span.name: span for span in spans}
    assert by_name["POST /plan"].attributes["http.request.header.authorization"] == ["[REDACTED]"]
    reading = by_name["GET /plan/{plan_id}"].attributes
    assert reading["http.request.header.x_api_key"] == ["[REDACTED]"]
    assert reading["http.response.header.cache_control"] == ["private, no-store"]
    [model_call] = [span for span in spans if span.name == "POST"]
    assert model_call.attributes["http.request.header.authorization"] == ["[REDACTED]"]
