"""The request id of every request: taken from `X-Request-ID` (or made), bound to the log
context, echoed in the answer.

A header that breaks the request-id rules gets the same 422 as the same value in a body's
`request_id`; a body's `request_id` replaces the header's for the answer and for every log
line after it (`use_request_id`).
"""

from __future__ import annotations

import uuid
from typing import Any

import structlog
from pydantic import TypeAdapter, ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from planner_arm.api.errors import invalid_request_response, validation_problems
from planner_arm.plan.schemas import RequestId

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
