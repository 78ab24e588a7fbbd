"""structlog set-up for our own lines and uvicorn's.

JSON lines when the output is not a terminal (production, containers); readable console
lines on a terminal. `configure_logging` runs when the app is built, never on import. The
request id reaches every line through structlog's contextvars, bound by
`planner_arm.api.middleware`.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Literal

import structlog

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
