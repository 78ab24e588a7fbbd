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
