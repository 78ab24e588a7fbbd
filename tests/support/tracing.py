"""Traces for tests: a tracer provider whose spans land in memory, and ways to read them."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from planner_arm.tracing import Tracing

# A caller's trace context, as an orchestrator sends it in `traceparent`.
CALLER_TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CALLER_TRACE_ID}-{CALLER_SPAN_ID}-01"


def in_memory_tracing() -> tuple[Tracing, InMemorySpanExporter]:
    """Tracing whose every finished span is kept by the exporter returned with it."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Tracing(provider, "test"), exporter


def hex_id(value: int, width: int) -> str:
    return format(value, f"0{width}x")


def span_id(span: ReadableSpan) -> str:
    assert span.context is not None
    return hex_id(span.context.span_id, 16)


def trace_id(span: ReadableSpan) -> str:
    assert span.context is not None
    return hex_id(span.context.trace_id, 32)


def parent_id(span: ReadableSpan) -> str | None:
    return None if span.parent is None else hex_id(span.parent.span_id, 16)


def named(spans: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    """The spans whose name starts with `prefix`, in the order they started."""
    found = [span for span in spans if span.name.startswith(prefix)]
    return sorted(found, key=lambda span: span.start_time or 0)
