"""What the endpoints get from the app, as `Annotated` dependency aliases: the state the
lifespan built, and for a planning endpoint the caller (the plan service and the principal
its key authenticates) once the key, our readiness and the principal's rate are checked; plus
the checks every planning POST shares (a JSON body, the Idempotency-Key header)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypedDict

from fastapi import Depends, Request, Response
from fastapi.routing import APIRoute

from planner_arm.api.auth import KeyCheck, RequestRates
from planner_arm.api.middleware import is_json_media_type
from planner_arm.api.openapi.responses import MAX_IDEMPOTENCY_KEY_CHARS
from planner_arm.errors import (
    InvalidIdempotencyKey,
    NotReady,
    RequestRejected,
    UnsupportedMediaType,
)
from planner_arm.metrics import PlannerMetrics
from planner_arm.principal import ANONYMOUS, Principal
from planner_arm.service.service import PlanService
from planner_arm.service.wiring import Runtime


@dataclass
class Readiness:
    """Whether the service takes new work: made with the app, ready once the lifespan has
    built the service, stopping from the server's SIGTERM on."""

    metrics: PlannerMetrics
    # The planning endpoints' API keys, the principal each authenticates, the wrong keys
    # each client address has tried.
    keys: KeyCheck
    # Each principal's request rate (the anonymous principal's without keys).
    rates: RequestRates
    state: Literal["starting", "ready", "stopping"] = "starting"
    started_at: float = field(default_factory=time.monotonic)

    def ready(self) -> None:
        self.state = "ready"
        self.metrics.ready.set(1)

    def begin_shutdown(self) -> None:
        """From now on /ready says 503, so the orchestrator sends no new work."""
        self.state = "stopping"
        self.metrics.ready.set(0)


class State(TypedDict):
    """What the lifespan yields: every request's `request.state`."""

    runtime: Runtime
    readiness: Readiness


# The dependencies are coroutines: FastAPI runs a plain function in a worker thread, a hop
# per request that costs more than the function itself.


async def get_state(request: Request) -> State:
    return State(runtime=request.state.runtime, readiness=request.state.readiness)


async def get_readiness(request: Request) -> Readiness:
    """The app's readiness: there before the lifespan runs and after it ends."""
    return readiness_of(request)


def readiness_of(request: Request) -> Readiness:
    readiness: Readiness = request.app.state.readiness
    return readiness


@dataclass(frozen=True)
class Caller:
    """A planning request's caller, over HTTP or MCP: the plan service it calls, the principal
    every call names (whose records it reads and writes: its API key's, checked before the
    call), and the transport it came by. Over MCP's stdio it is the local user who started
    the process, the anonymous principal."""

    plans: PlanService
    principal: Principal = ANONYMOUS
    transport: Literal["http", "stdio"] = "http"


async def planning_caller(request: Request) -> Caller:
    """The caller, once its key, our readiness and its request rate are checked.

    One dependency rather than several: FastAPI's dependency solving is a measurable part of
    a request's own cost (benchmarks/load.py)."""
    return admitted(request)


def admitted(request: Request) -> Caller:
    """`planning_caller`'s check, for /mcp too."""
    readiness = readiness_of(request)
    principal = readiness.keys.principal_for(request)
    if readiness.state == "stopping":
        # Requests already admitted finish; a new one might outlast the drain and be cut off,
        # so it is sent at once to try again, elsewhere or later.
        raise NotReady("the service is shutting down", code="shutting_down")
    if readiness.state == "starting":
        raise NotReady("the planner is not ready")
    readiness.rates.admit(principal)
    runtime: Runtime = request.state.runtime
    return Caller(runtime.plans, principal)


StateDep = Annotated[State, Depends(get_state)]
ReadinessDep = Annotated[Readiness, Depends(get_readiness)]
PlanningDep = Annotated[Caller, Depends(planning_caller)]


class JSONBodyRoute(APIRoute):
    """A route whose body must be declared as JSON: anything else is a 415 that says so,
    rather than a 422 about a string that is not an object. A body that brings tools, from a
    caller with its most requests waiting for tool sets to be built, is refused before it is
    parsed (`tool_set_admitted`)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def handle_json(request: Request) -> Response:
            content_type = request.headers.get("content-type", "")
            body = await request.body()
            if not is_json_media_type(content_type) and body:
                raise UnsupportedMediaType(
                    "The body must be JSON, sent with content-type: application/json "
                    f"(this one was {'sent as ' + content_type if content_type else 'untyped'})."
                )
            if _TOOLS_KEY in body:
                tool_set_admitted(request)
            return await handle(request)

        return handle_json


# How a body that brings tools names them (inside a JSON string a quote is escaped).
_TOOLS_KEY = b'"tools"'


def tool_set_admitted(request: Request) -> None:
    """ToolSetsBusy for a request bringing tools whose principal has its most requests
    waiting for tool sets to be built: parsing and checking a large tool set is most of what
    such a request costs the event loop, so a caller flooding new sets within its rate is
    refused before that. A missing or wrong key is left to `planning_caller`, which counts
    it against the client's address once."""
    readiness = readiness_of(request)
    if readiness.state != "ready":
        return
    try:
        principal = readiness.keys.keys.principal_for(request)
    except RequestRejected:
        return
    runtime: Runtime = request.state.runtime
    runtime.plans.admit_tool_set(principal)


StreamFormat = Literal["sse", "ndjson"]
SSE_TYPE = "text/event-stream"
NDJSON_TYPE = "application/x-ndjson"


def stream_format(request: Request) -> StreamFormat | None:
    """The stream the caller asked for in Accept, or None for the JSON answer."""
    accept = request.headers.get("accept", "").lower()
    if SSE_TYPE in accept:
        return "sse"
    if NDJSON_TYPE in accept:
        return "ndjson"
    return None


_PRINTABLE = re.compile(r"[\x20-\x7e]+")


def idempotency_key(request: Request) -> str | None:
    """The Idempotency-Key header, checked; None when the request has none."""
    key = request.headers.get("idempotency-key")
    if key is None:
        return None
    if len(key) > MAX_IDEMPOTENCY_KEY_CHARS or not _PRINTABLE.fullmatch(key):
        raise InvalidIdempotencyKey(
            "The Idempotency-Key header must be 1 to "
            f"{MAX_IDEMPOTENCY_KEY_CHARS} printable ASCII characters."
        )
    return key
