"""Pure-ASGI middleware at the edge: the request id, the body limits and the HTTP metrics.

The request id of every request is taken from `X-Request-ID` (or made), bound to the log
context and echoed in the answer; a header that breaks the request-id rules gets the same 422
as the same value in a body's `request_id`, and a body's `request_id` replaces the header's for
the answer and every log line after it (`use_request_id`). The size limit acts before anything
parses the body, and counts the bytes actually received, so a chunked body or a lying
Content-Length cannot get past it. So does the nesting limit of a JSON body, for every route
(/mcp too): a body nested deeper than `server.max_json_depth` is refused with a 422 before a
parser, a model or a handler recurses into it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from email.message import Message as MediaType
from itertools import accumulate
from typing import Any

import structlog
from pydantic import TypeAdapter, ValidationError
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from planner_arm.api.errors import error_response, invalid_request_response, validation_problems
from planner_arm.metrics import PlannerMetrics
from planner_arm.plan.schemas import ErrorItem, RequestId

# Label values come from these fixed sets, never from what a client sends.
METHOD_LABELS = frozenset({"GET", "POST", "HEAD", "OPTIONS"})
OTHER_METHOD = "other"
UNMATCHED_ROUTE = "unmatched"


def is_json_media_type(content_type: str) -> bool:
    """Whether a Content-Type declares JSON: application/json or application/<name>+json."""
    if content_type == "application/json":  # what nearly every caller sends
        return True
    media_type = MediaType()
    media_type["content-type"] = content_type
    subtype = media_type.get_content_subtype()
    return media_type.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


# Every byte but the four brackets, deleted by bytes.translate.
_NOT_A_BRACKET = bytes(range(256)).translate(None, b"[]{}")
_OPENING = frozenset(b"[{")


def json_nesting_over(body: bytes, limit: int) -> bool:
    """Whether `body`, read as JSON, nests arrays and objects more than `limit` deep. Brackets
    inside strings do not count; a body that is not JSON is left to the parser to refuse.
    Every pass but the last runs in C: the body is never walked byte by byte in Python."""
    if body.count(b"[") + body.count(b"{") <= limit:  # the usual body: no scan at all
        return False
    # Escapes first (an escaped backslash, then an escaped quote, read left to right as a
    # JSON parser reads them), so every quote left opens or closes a string.
    unescaped = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    outside_strings = b"".join(unescaped.split(b'"')[::2])
    brackets = outside_strings.translate(None, _NOT_A_BRACKET)
    steps = (1 if byte in _OPENING else -1 for byte in brackets)
    return any(depth > limit for depth in accumulate(steps))


def _content_type(scope: Scope) -> str:
    for name, value in scope.get("headers", []):
        if name == b"content-type":
            return bytes(value).decode("latin-1")
    return ""


class BodyLimitMiddleware:
    """The body of a POST: at most `max_bytes` (413), and, declared as JSON, nested at most
    `max_json_depth` deep (422 `invalid_request`, problem `json_too_deep`). Python's JSON
    parser, pydantic's and the code that walks a parsed body all recurse once per level, so
    without this a small body nested a thousand deep reaches them as a RecursionError."""

    def __init__(self, app: ASGIApp, max_bytes: int, max_json_depth: int) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_json_depth = max_json_depth

    async def _too_deep(self, scope: Scope, receive: Receive, send: Send) -> None:
        request_id = scope.get("state", {}).get("request_id", "")
        message = f"the JSON body nests arrays and objects more than {self.max_json_depth} deep"
        problem = ErrorItem(code="json_too_deep", message=message, loc=["body"])
        await invalid_request_response(request_id, [problem])(scope, receive, send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        request_id = scope.get("state", {}).get("request_id", "")
        detail = f"The request body is over the limit of {self.max_bytes} bytes."
        await error_response(413, "payload_too_large", detail, request_id)(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await self._too_large(scope, receive, send)
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
                await self._too_large(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break

        body = b"".join(chunks)
        if is_json_media_type(_content_type(scope)) and json_nesting_over(
            body, self.max_json_depth
        ):
            await self._too_deep(scope, receive, send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def route_label(scope: Scope, routes: Sequence[BaseRoute]) -> str:
    """The template of the route the request was for, even when a layer before routing (the
    body limit) answered it; `unmatched` for a path no route takes."""
    route = scope.get("route")
    template = getattr(route, "path", None)
    if template:
        return str(template)
    for candidate in routes:
        template = getattr(candidate, "path", None)
        if template and candidate.matches(scope)[0] is not Match.NONE:
            return str(template)
    return UNMATCHED_ROUTE


def method_label(method: str) -> str:
    return method if method in METHOD_LABELS else OTHER_METHOD


class HTTPMetricsMiddleware:
    """Counts requests and latency by method, route template and status: bounded labels."""

    def __init__(self, app: ASGIApp, metrics: PlannerMetrics, routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes

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
            template = route_label(scope, self.routes)
            method = method_label(scope["method"])
            metrics = self.metrics
            metrics.child(metrics.http_requests, method, template, str(status)).inc()
            metrics.child(metrics.http_latency, method, template).observe(
                time.perf_counter() - started
            )


REQUEST_ID_HEADER = b"x-request-id"
_REQUEST_ID_RULES: TypeAdapter[str] = TypeAdapter(RequestId)


def use_request_id(scope: Scope | dict[str, Any], request_id: str) -> None:
    """From now on the answer and the log lines of this request carry `request_id`."""
    scope.setdefault("state", {})["request_id"] = request_id
    structlog.contextvars.bind_contextvars(request_id=request_id)


def request_id_for(scope: Scope | dict[str, Any], given: str | None) -> str:
    """The request's id: the body's `request_id` when it has one (then used from now on),
    else the one the middleware chose from the header or made."""
    if given:
        use_request_id(scope, given)
    request_id: str = scope["state"]["request_id"]
    return request_id


def _header_value(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == REQUEST_ID_HEADER:
            text: str = bytes(value).decode("latin-1")
            return text
    return None


class RequestContextMiddleware:
    """Binds the request id (header or a new UUID) to the log context and echoes it back.

    The endpoint may replace the id with the one in the body through `use_request_id`;
    this middleware reads `scope["state"]["request_id"]` when the response starts.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        structlog.contextvars.clear_contextvars()
        state = scope.setdefault("state", {})
        given = _header_value(scope)
        problems = []
        if given is not None:
            try:
                _REQUEST_ID_RULES.validate_python(given)
            except ValidationError as error:
                problems = validation_problems(error.errors(), prefix=("header", "x-request-id"))
        use_request_id(scope, given if given is not None and not problems else str(uuid.uuid4()))

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v) for k, v in message.get("headers", []) if k.lower() != REQUEST_ID_HEADER
                ]
                headers.append((REQUEST_ID_HEADER, state["request_id"].encode("latin-1")))
                message["headers"] = headers
            await send(message)

        try:
            if problems:
                response = invalid_request_response(state["request_id"], problems)
                await response(scope, receive, send_with_id)
            else:
                await self.app(scope, receive, send_with_id)
        finally:
            structlog.contextvars.clear_contextvars()
