"""What both clients do the same way around a call: its headers, reading its answer into a
model or an error, and telling a transport failure from an answer."""

from __future__ import annotations

import uuid

import httpx
from pydantic import ValidationError

from planner_arm.client.calls import Answer, Call
from planner_arm.client.errors import (
    PlannerError,
    ServerError,
    TransportError,
    error_from_response,
)
from planner_arm.client.events import PLAN, SSE_TYPE, PlanEvent
from planner_arm.client.retry import parse_retry_after

DEFAULT_BASE_URL = "http://localhost:8080"
# The service's own planning deadline is 10 s by default (/capabilities `timeout_seconds`).
DEFAULT_TIMEOUT_SECONDS = 60.0
USER_AGENT = "planner-arm-client"


def idempotency_key(call: Call[Answer]) -> str | None:
    """The call's Idempotency-Key, kept across its retries: the caller's, or for a POST
    without one, one made for it."""
    if call.idempotency_key is None and call.method == "POST":
        return f"client-{uuid.uuid4().hex}"
    return call.idempotency_key


def build_request(
    http: httpx.Client | httpx.AsyncClient,
    base_url: str,
    call: Call[Answer],
    key: str | None,
    api_key: str | None,
    timeout: float,
    accept: str = "application/json",
) -> httpx.Request:
    headers = {"accept": accept, "user-agent": USER_AGENT}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    if key is not None:
        headers["idempotency-key"] = key
    return http.build_request(
        call.method, base_url + call.path, json=call.body, headers=headers, timeout=timeout
    )


def answer_error(response: httpx.Response) -> PlannerError:
    """The error of a non-2xx answer, its body read."""
    retry_after = parse_retry_after(response.headers.get("retry-after"))
    return error_from_response(response.status_code, response.content, retry_after)


def transport_error(error: httpx.RequestError) -> TransportError:
    reason = str(error) or type(error).__name__
    return TransportError(f"no answer from the service: {reason}", code="transport_error")


def parse_answer(response: httpx.Response, call: Call[Answer]) -> Answer:
    """The answer's JSON as the call's model; an answer of another shape is a ServerError."""
    model = call.answer
    try:
        return model.model_validate_json(response.content)
    except ValidationError as error:
        raise ServerError(
            f"the answer is not a {model.__name__}: {error.error_count()} problem(s)",
            status=response.status_code,
            code="unexpected_answer",
        ) from error


def is_event_stream(response: httpx.Response) -> bool:
    content_type = str(response.headers.get("content-type", ""))
    return content_type.startswith(SSE_TYPE)


def plan_as_event(response: httpx.Response) -> PlanEvent:
    """A plan answered as JSON to a stream request: its one `plan` event."""
    return PlanEvent(PLAN, response.json())
