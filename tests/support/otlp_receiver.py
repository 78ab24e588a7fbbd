"""A small OTLP/HTTP trace receiver on loopback: what a collector would get from the service.

It accepts `POST /v1/traces` with a protobuf `ExportTraceServiceRequest` (gzip or plain),
decodes it with the official protobuf classes (opentelemetry-proto), and keeps every span
with its resource's attributes; `spans(count)` waits for them without sleeping.

Run as a script it stands in for a collector (the traced load benchmark's):

    .venv/bin/python tests/support/otlp_receiver.py --port 4318
"""

from __future__ import annotations

import argparse
import gzip
import queue
import signal
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

TRACES_PATH = "/v1/traces"


@dataclass(frozen=True)
class ReceivedSpan:
    span: Span
    resource: dict[str, Any]

    @property
    def name(self) -> str:
        return self.span.name

    @property
    def trace_id(self) -> str:
        return self.span.trace_id.hex()

    @property
    def span_id(self) -> str:
        return self.span.span_id.hex()

    @property
    def parent_id(self) -> str:
        return self.span.parent_span_id.hex()

    @property
    def attributes(self) -> dict[str, Any]:
        return {item.key: value_of(item.value) for item in self.span.attributes}


def value_of(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None


class OTLPReceiver:
    """`with OTLPReceiver() as receiver:` then point OTEL_EXPORTER_OTLP_ENDPOINT at
    `receiver.endpoint`."""

    def __init__(self, port: int = 0, *, keep: bool = True) -> None:
        """`keep=False` only counts the spans (a long benchmark sends a great many)."""
        self._keep_spans = keep
        self.count = 0
        self._received: queue.Queue[ReceivedSpan] = queue.Queue()
        self.paths: list[str] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> OTLPReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def spans(self, count: int, timeout: float = 15) -> list[ReceivedSpan]:
        """The first `count` spans received, waiting up to `timeout` seconds for each."""
        found = []
        for _ in range(count):
            try:
                found.append(self._received.get(timeout=timeout))
            except queue.Empty:
                names = [span.name for span in found]
                raise AssertionError(f"only {len(found)} spans arrived: {names}") from None
        return found

    def more(self) -> list[ReceivedSpan]:
        """Whatever else has arrived, without waiting."""
        found = []
        while not self._received.empty():
            found.append(self._received.get_nowait())
        return found

    def _keep(self, path: str, body: bytes) -> None:
        if self._keep_spans:
            self.paths.append(path)
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            resource = {
                item.key: value_of(item.value) for item in resource_spans.resource.attributes
            }
            for scope_spans in resource_spans.scope_spans:
                self.count += len(scope_spans.spans)
                if not self._keep_spans:
                    continue
                for span in scope_spans.spans:
                    self._received.put(ReceivedSpan(span, resource))

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != TRACES_PATH:
                    self.send_error(404)
                    return
                receiver._keep(self.path, body)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the test reads spans, not access lines

        return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description="An OTLP/HTTP trace receiver on loopback.")
    parser.add_argument("--port", type=int, default=4318)
    port = parser.parse_args().port
    receiver = OTLPReceiver(port, keep=False)
    print(
        f"receiving spans at {receiver.endpoint}{TRACES_PATH}; Ctrl-C prints the count", flush=True
    )

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)  # stopped by SIGTERM too, and still says how many
    try:
        receiver._server.serve_forever()
    except KeyboardInterrupt:
        print(f"{receiver.count} spans received", flush=True)


if __name__ == "__main__":
    main()
