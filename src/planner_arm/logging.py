"""structlog set-up and the middleware that gives every log line of a request its id.

JSON lines when the output is not a terminal (production, containers); readable console
lines on a terminal. `configure_logging` runs when the app is built, never on import.
"""

from __future__ import annotations

import logging
import sys
import uuid
from typing import Any, Literal

import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from planner_arm.plan.schemas import MAX_REQUEST_ID_CHARS

REQUEST_ID_HEADER = "x-request-id"


LogFormat = Literal["auto", "json", "console"]


def _renderer(fmt: LogFormat) -> structlog.typing.Processor:
    use_console = fmt == "console" or (fmt == "auto" and sys.stderr.isatty())
    if use_console:
        return structlog.dev.ConsoleRenderer()
    return structlog.processors.JSONRenderer()


def configure_logging(level: str = "INFO", fmt: LogFormat = "auto") -> None:
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            _renderer(fmt),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level]),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )


def uvicorn_log_config(level: str = "INFO", fmt: LogFormat = "auto") -> dict[str, Any]:
    """uvicorn's own lines (start-up, shutdown, errors) in the same format as ours."""
    formatter = {
        "()": structlog.stdlib.ProcessorFormatter,
        "processor": _renderer(fmt),
        "foreign_pre_chain": [
            structlog.stdlib.add_log_level,
            structlog.stdlib.add_logger_name,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
        ],
    }
    handler = {
        "class": "logging.StreamHandler",
        "formatter": "structured",
        "stream": "ext://sys.stderr",
    }
    logger = {"handlers": ["default"], "level": level, "propagate": False}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"structured": formatter},
        "handlers": {"default": handler},
        "loggers": {"uvicorn": logger, "uvicorn.error": logger, "uvicorn.access": logger},
    }


def _header_request_id(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"x-request-id":
            text: str = bytes(value).decode("latin-1").strip()
            if 0 < len(text) <= MAX_REQUEST_ID_CHARS and text.isprintable():
                return text
    return None


class RequestContextMiddleware:
    """Binds the request id (header or a new UUID) to the log context and echoes it back.

    The endpoint may replace the id with the one in the body: it writes
    `scope["state"]["request_id"]`, which this middleware reads when the response starts.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        state["request_id"] = _header_request_id(scope) or str(uuid.uuid4())
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(request_id=state["request_id"])

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v) for k, v in message.get("headers", []) if k.lower() != b"x-request-id"
                ]
                headers.append((b"x-request-id", state["request_id"].encode("latin-1", "replace")))
                message["headers"] = headers
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            structlog.contextvars.clear_contextvars()
