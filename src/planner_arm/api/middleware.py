"""Pure-ASGI middleware at the edge: the body size limit and the HTTP metrics.

The size limit acts before anything parses the body, and counts the bytes actually received,
so a chunked body or a lying Content-Length cannot get past it.
"""

from __future__ import annotations

import json
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from planner_arm.metrics import PlannerMetrics


async def send_error(send: Send, status: int, code: str, detail: str, request_id: str) -> None:
    """Writes the one error shape without going through the app (used before routing)."""
    body = json.dumps({"error": code, "detail": detail, "request_id": request_id}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        request_id = scope.get("state", {}).get("request_id", "")
        too_large = f"the request body is over the limit of {self.max_bytes} bytes"
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await send_error(send, 413, "payload_too_large", too_large, request_id)
                return

        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await send_error(send, 413, "payload_too_large", too_large, request_id)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break

        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class HTTPMetricsMiddleware:
    """Counts requests and latency by route template (never the raw path: bounded labels)."""

    def __init__(self, app: ASGIApp, metrics: PlannerMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            method = scope["method"]
            metrics = self.metrics
            metrics.child(metrics.http_requests, method, template, str(status)).inc()
            metrics.child(metrics.http_latency, method, template).observe(
                time.perf_counter() - started
            )
