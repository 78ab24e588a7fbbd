"""What every planning endpoint checks before it runs: the API key, that the service takes
work now, that a body is JSON, and the Idempotency-Key header."""

from __future__ import annotations

import re
from collections.abc import Callable, Coroutine
from email.message import Message
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from planner_arm.api.auth import check_api_key
from planner_arm.api.lifecycle_docs import MAX_IDEMPOTENCY_KEY_CHARS
from planner_arm.api.state import Services
from planner_arm.errors import InvalidIdempotencyKey, NotReady, UnsupportedMediaType
from planner_arm.planning.lifecycle import PlanLifecycle


async def planning_services(request: Request) -> tuple[Services, PlanLifecycle]:
    """What a planning endpoint needs, once the caller's key and our readiness are checked.

    One dependency rather than several: FastAPI's dependency solving is a measurable part of
    a request's own cost (benchmarks/load.py).
    """
    services: Services = request.app.state.services
    check_api_key(request, services.api_keys)
    if services.state == "stopping":
        # Requests already admitted finish; a new one might outlast the drain and be cut off,
        # so it is sent at once to try again, elsewhere or later.
        raise NotReady("the service is shutting down", code="shutting_down")
    if services.lifecycle is None or services.state == "starting":
        raise NotReady("the planner is not ready")
    return services, services.lifecycle


def _is_json(content_type: str) -> bool:
    if content_type == "application/json":  # what nearly every caller sends
        return True
    message = Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


class JSONBodyRoute(APIRoute):
    """A route whose body must be declared as JSON: anything else is a 415 that says so,
    rather than a 422 about a string that is not an object."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def handle_json(request: Request) -> Response:
            content_type = request.headers.get("content-type", "")
            if not _is_json(content_type) and await request.body():
                raise UnsupportedMediaType(
                    "The body must be JSON, sent with content-type: application/json "
                    f"(this one was {'sent as ' + content_type if content_type else 'untyped'})."
                )
            return await handle(request)

        return handle_json


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
