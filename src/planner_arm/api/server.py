"""Running the app under uvicorn, with a drain on SIGTERM.

On SIGTERM uvicorn stops accepting connections and waits for requests in flight; we also turn
/ready to 503 at the same moment, and bound the wait by `server.drain_seconds`.
"""

from __future__ import annotations

import gc
import math
import socket
import sys
from collections.abc import Callable
from types import FrameType

import uvicorn
from fastapi import FastAPI

from planner_arm.api.deps import Readiness
from planner_arm.config import Settings
from planner_arm.logging import uvicorn_log_config

# Collect the youngest generation after 20,000 allocations rather than 700: a request makes
# thousands of short-lived objects (pydantic models, dicts, the SDK's), and the default
# collects many times per request for little. The middle one every 2 of those rather than
# 20: what survives them (a tool set being built, the parsed tools of requests waiting for a
# build) is walked by each middle collection, which holds the interpreter meanwhile, and 20
# let it grow to pauses of 120 ms under a flood of new tool sets (30 ms at 2). The oldest
# after 500 middle ones, so whole-heap collections come as seldom as before.
_GC_THRESHOLDS = (20_000, 2, 500)
# How long a thread that wants the interpreter waits before the one running Python is made to
# give it up (Python's default: 5 ms).
_SWITCH_SECONDS = 0.001


def tune_garbage_collector() -> None:
    """After start-up: move everything built so far (modules, schemas, the planner) out of
    the collector's reach, since it lives as long as the process, and collect less often."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*_GC_THRESHOLDS)


def tune_thread_switching() -> None:
    """The event loop gets the interpreter back from a worker thread (a tool set being built,
    a rule-based plan) within 1 ms rather than 5: each step of every other request waits that
    long while a worker runs Python."""
    sys.setswitchinterval(_SWITCH_SECONDS)


def _request_drain_seconds(drain_seconds: float) -> int:
    """uvicorn takes whole seconds; half a second is kept for closing the LLM client and
    the lifespan, so the process is gone within `drain_seconds` of the signal."""
    return max(0, math.floor(drain_seconds - 0.5))


class DrainingServer(uvicorn.Server):
    """uvicorn's server, telling the app it is stopping as soon as the signal arrives."""

    def __init__(self, config: uvicorn.Config, on_exit_signal: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_exit_signal = on_exit_signal

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        tune_garbage_collector()
        tune_thread_switching()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._on_exit_signal()
        super().handle_exit(sig, frame)


def build_server(app: FastAPI, settings: Settings) -> DrainingServer:
    """uvicorn serving `app` on `server.host` and `server.port`."""
    readiness: Readiness = app.state.readiness
    config = uvicorn.Config(
        app,
        host=settings.server.host,
        port=settings.server.port,
        # The client address (the failed-key limit's) is the one X-Forwarded-For names when
        # the peer is a trusted proxy, else the peer's.
        proxy_headers=True,
        forwarded_allow_ips=settings.server.forwarded_allow_ips,
        log_level=settings.server.log_level.lower(),
        log_config=uvicorn_log_config(settings.server.log_level, settings.server.log_format),
        access_log=False,  # our own plan_created lines and metrics say more
        server_header=False,  # no library name or version on the wire
        timeout_graceful_shutdown=_request_drain_seconds(settings.server.drain_seconds),
    )
    return DrainingServer(config, readiness.begin_shutdown)
