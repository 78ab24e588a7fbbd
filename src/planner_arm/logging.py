"""structlog set-up for our own lines and uvicorn's.

JSON lines when the output is not a terminal (production, containers); readable console
lines on a terminal. `configure_logging` runs when the app is built, never on import. The
request id reaches every line through structlog's contextvars, bound by
`planner_arm.api.middleware`; inside a trace's span, its `trace_id` and `span_id` too.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any, Literal

import structlog
from opentelemetry import trace

LogFormat = Literal["auto", "json", "console"]


def _renderer(fmt: LogFormat) -> structlog.typing.Processor:
    use_console = fmt == "console" or (fmt == "auto" and sys.stderr.isatty())
    if use_console:
        return structlog.dev.ConsoleRenderer()
    return structlog.processors.JSONRenderer()


def add_trace_ids(
    logger: Any, method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """The active span's ids as the W3C trace context writes them (none outside a span)."""
    context = trace.get_current_span().get_span_context()
    if context.is_valid:
        event["trace_id"] = format(context.trace_id, "032x")
        event["span_id"] = format(context.span_id, "016x")
    return event


def configure_logging(level: str = "INFO", fmt: LogFormat = "auto") -> None:
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            add_trace_ids,
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
