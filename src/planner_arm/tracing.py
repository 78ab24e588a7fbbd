"""OpenTelemetry traces: the process's tracer provider, built once from the `OTEL_*` settings.

With an OTLP endpoint configured (and `OTEL_SDK_DISABLED` not true), `start_tracing` builds an
SDK provider that batches spans to the endpoint over OTLP/HTTP; the app hands it to the
FastAPI and httpx instrumentations and to the composition root, which gives each layer its
tracer. Without one, `NO_TRACING` stands in: its tracer is the API's no-op tracer, nothing is
instrumented and the SDK is never imported, so an untraced process pays nothing for it.

Log lines written inside a span carry its ids (`planner_arm.logging.add_trace_ids`).
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from opentelemetry import trace

from planner_arm.config import TracingSettings

# The instrumentation scope of every span the service makes itself.
TRACER_NAME = "planner_arm"

# The request span's attributes: the answer that went out.
PLAN_ID = "planner.plan_id"
PLAN_SOURCE = "planner.source"
PLAN_STEPS = "planner.step_count"


@dataclass(frozen=True)
class Tracing:
    """The tracer provider of the process, or None when tracing is off."""

    provider: trace.TracerProvider | None = None
    version: str | None = None

    @property
    def enabled(self) -> bool:
        return self.provider is not None

    def tracer(self) -> trace.Tracer:
        """The tracer for the service's own spans (the no-op tracer when off)."""
        if self.provider is None:
            return trace.NoOpTracer()
        return self.provider.get_tracer(TRACER_NAME, self.version)

    def instrument_client(self, client: httpx.AsyncClient) -> None:
        """A span for each request `client` sends, with the trace context in its headers."""
        if self.provider is None:
            return
        from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

        HTTPXClientInstrumentor.instrument_client(client, tracer_provider=self.provider)

    def shutdown(self) -> None:
        """Export what is still buffered, then stop the exporter."""
        shutdown = getattr(self.provider, "shutdown", None)
        if shutdown is not None:
            shutdown()


NO_TRACING = Tracing()


def start_tracing(settings: TracingSettings, version: str) -> Tracing:
    """The provider the settings ask for: spans batched to the OTLP endpoint, or none."""
    url = settings.traces_url
    if url is None:
        return NO_TRACING
    # Imported here: a process without tracing never loads the SDK or the exporter.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"service.name": settings.service_name, "service.version": version})
    provider = TracerProvider(resource=resource)
    # Headers, timeout and compression come from the exporter's own OTEL_EXPORTER_OTLP_*.
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=url)))
    return Tracing(provider, version)
