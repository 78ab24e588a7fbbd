"""Plans as streams: server-sent events (`Accept: text/event-stream`) or one JSON object a
line (`Accept: application/x-ndjson`), with the events of `PlanStream`.

The stream starts only once the first event is known: an error before any event (a bad
budget, an Idempotency-Key conflict, a replan the request cannot have) is the endpoint's
normal JSON error answer, not a stream. A caller that goes away cancels the planning.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

from fastapi import Request, Response
from fastapi.responses import StreamingResponse

from planner_arm.api.deps import NDJSON_TYPE, SSE_TYPE, StreamFormat
from planner_arm.api.errors import planner_error_response
from planner_arm.plan.schemas import PlanResponse
from planner_arm.service.stream import ERROR, PING, PlanStream, StreamEvent

# Proxies close a connection idle for a minute or so; a comment line keeps it open.
PING_SECONDS = 15.0
_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def _frame(kind: StreamFormat, request: Request, event: StreamEvent) -> bytes:
    data = event.data
    if event.error is not None:
        data = json.loads(bytes(planner_error_response(request, event.error).body))
    if kind == "ndjson":
        return json.dumps({"event": event.name, "data": data}).encode() + b"\n"
    # json.dumps writes no raw line break, so the data is one `data:` line.
    return f"event: {event.name}\ndata: {json.dumps(data)}\n\n".encode()


async def streamed_plan(
    request: Request,
    kind: StreamFormat,
    new_stream: Callable[[str, str], PlanStream],
    request_id: str,
    work: Callable[[PlanStream], Awaitable[PlanResponse]],
    ping_seconds: float = PING_SECONDS,
) -> Response:
    """The streamed answer of `work` (a planning call that takes the stream as listener);
    `new_stream(plan_id, request_id)` makes the stream's events."""
    stream = new_stream(uuid.uuid4().hex, request_id)
    events = stream.events(work, ping_seconds)
    first = await anext(events)
    if first.name == ERROR and first.error is not None:
        await events.aclose()
        return planner_error_response(request, first.error)

    async def body() -> AsyncIterator[bytes]:
        try:
            event: StreamEvent | None = first
            while event is not None:
                if event.name != PING:
                    yield _frame(kind, request, event)
                elif kind == "sse":
                    yield b": ping\n\n"
                event = await anext(events, None)
        finally:
            await events.aclose()

    media_type = SSE_TYPE if kind == "sse" else NDJSON_TYPE
    return StreamingResponse(body(), media_type=media_type, headers=_HEADERS)
