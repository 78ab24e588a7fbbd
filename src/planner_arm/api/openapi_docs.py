"""The OpenAPI document's extras: every status of every endpoint with an example, the
headers each operation reads, the API-key security schemes, and the arms of this app.

`header_parameter` declares a header an operation reads; `operation_extra` attaches headers
(and the security requirement) to a route. `customise_openapi` adds what depends on the
app's settings: the security schemes and the enum of configured arms.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from planner_arm.api import openapi_examples as examples
from planner_arm.plan.schemas import MAX_REQUEST_ID_CHARS, REQUEST_ID_PATTERN, ErrorResponse

BEARER_SCHEME = "bearerAuth"
API_KEY_SCHEME = "apiKeyHeader"

SECURITY_SCHEMES: dict[str, Any] = {
    BEARER_SCHEME: {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key as a bearer token: `Authorization: Bearer <key>`.",
    },
    API_KEY_SCHEME: {
        "type": "apiKey",
        "in": "header",
        "name": "X-API-Key",
        "description": "The same API key in its own header.",
    },
}


def header_parameter(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    """An optional request header, as an OpenAPI parameter."""
    return {
        "name": name,
        "in": "header",
        "required": False,
        "description": description,
        "schema": schema,
    }


_REQUEST_ID_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_REQUEST_ID_CHARS,
    "pattern": REQUEST_ID_PATTERN,
}
_REQUEST_ID_TEXT = (
    "Your id for this request (printable ASCII, at most 128 characters), echoed in the "
    "X-Request-ID response header and in every log line; a new UUID when absent. A value "
    "that breaks these rules is refused (422)."
)
REQUEST_ID_HEADER = header_parameter("X-Request-ID", _REQUEST_ID_TEXT, _REQUEST_ID_SCHEMA)
PLAN_REQUEST_ID_HEADER = header_parameter(
    "X-Request-ID",
    _REQUEST_ID_TEXT + " A `request_id` in the body takes its place.",
    _REQUEST_ID_SCHEMA,
)
CACHE_CONTROL_HEADER = header_parameter(
    "Cache-Control",
    "`no-cache` plans afresh instead of repeating a recent plan for the same request "
    "(as `options.use_cache: false`).",
    {"type": "string", "example": "no-cache"},
)


def operation_extra(
    *headers: dict[str, Any], secured: bool = False, required: bool = False
) -> dict[str, Any]:
    """`openapi_extra` for a route: the headers it reads and, when `secured`, the API key
    (either scheme; optional unless the service has keys configured)."""
    extra: dict[str, Any] = {"parameters": list(headers)}
    if secured:
        options: list[dict[str, list[str]]] = [{BEARER_SCHEME: []}, {API_KEY_SCHEME: []}]
        extra["security"] = options if required else [*options, {}]
    return extra


def error_doc(description: str, code: str, detail: str, **extra: Any) -> dict[str, Any]:
    example = {"error": code, "detail": detail, "request_id": examples.REQUEST_ID, **extra}
    return {
        "model": ErrorResponse,
        "description": description,
        "content": {"application/json": {"example": example}},
    }


def ok_doc(description: str, example: Any) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"example": example}}}


def streamed_ok_doc(description: str, example: dict[str, Any]) -> dict[str, Any]:
    """A plan answer that can also come as a stream of events, chosen by the Accept header."""
    step = example["plan"][0]
    started = {"plan_id": example["plan_id"], "request_id": examples.REQUEST_ID, "model": "m"}
    events = [("plan.started", started), ("step", step), ("plan", example)]
    sse = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)
    ndjson = "".join(json.dumps({"event": name, "data": data}) + "\n" for name, data in events)
    text = {"schema": {"type": "string"}}
    return {
        "description": description
        + " With `Accept: text/event-stream` (or `application/x-ndjson`): the events "
        "plan.started, one `step` per checked step, `plan.reset` when sent steps are "
        "withdrawn, and one final `plan` whose data is this answer.",
        "content": {
            "application/json": {"example": example},
            "text/event-stream": {**text, "example": sse},
            "application/x-ndjson": {**text, "example": ndjson},
        },
    }


_INVALID_HEADER = error_doc(
    "The X-Request-ID header breaks the request-id rules; `errors` says how.",
    "invalid_request",
    "The request is not valid: header.x-request-id: String should have at most 128 characters.",
    errors=[
        {
            "code": "string_too_long",
            "message": "String should have at most 128 characters",
            "loc": ["header", "x-request-id"],
        }
    ],
)
_INTERNAL = error_doc(
    "An unexpected error; the answer shows nothing of the service's insides.",
    "internal_error",
    "an unexpected error occurred",
)

PLAN_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: streamed_ok_doc("A valid, executable plan.", examples.PLAN),
    401: error_doc(
        "API keys are configured and the request carries none, or a wrong one "
        "(`WWW-Authenticate: Bearer`).",
        "unauthorized",
        "the API key is not valid",
    ),
    413: error_doc(
        "The body is over the size limit (64 KiB by default), counted as it arrives.",
        "payload_too_large",
        "The request body is over the limit of 65536 bytes.",
    ),
    415: error_doc(
        "The body is not sent as JSON (`content-type: application/json`).",
        "unsupported_media_type",
        "The body must be JSON, sent with content-type: application/json "
        "(this one was sent as text/plain).",
    ),
    422: error_doc(
        "The body is not JSON, breaks a limit or has unknown fields, or the X-Request-ID "
        "header breaks the request-id rules; `errors` lists each problem.",
        "invalid_request",
        "The request is not valid: body.goal: Value error, goal must not be blank.",
        errors=[
            {
                "code": "value_error",
                "message": "Value error, goal must not be blank",
                "loc": ["body", "goal"],
            }
        ],
    ),
    500: _INTERNAL,
    502: error_doc(
        "With the fallback planner switched off: the model kept answering plans that break "
        "the rules; `errors` lists the problems of the last one.",
        "invalid_plan",
        f"No valid plan: the model's last answer ({examples.MODEL}: empty_action) had 1 "
        "problem, listed in errors.",
        errors=[{"code": "invalid_plan", "message": "step 2: action is empty"}],
    ),
    503: error_doc(
        "Starting (`not_ready`) or shutting down (`shutting_down`), or, with the fallback "
        "planner switched off, no model answered (`llm_unavailable`). `Retry-After` says when "
        "to try again.",
        "shutting_down",
        "the service is shutting down",
    ),
    504: error_doc(
        "With the fallback planner switched off: the request deadline passed before a model "
        "answered. `Retry-After` says when to try again.",
        "deadline_exceeded",
        "the request deadline passed",
    ),
}

HEALTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: ok_doc("The process answers.", examples.HEALTH),
    422: _INVALID_HEADER,
    500: _INTERNAL,
}

READY_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: ok_doc("The planner is built and takes traffic.", examples.READY),
    422: _INVALID_HEADER,
    500: _INTERNAL,
    503: error_doc(
        "Starting, or shutting down; `Retry-After` says when to try again.",
        "not_ready",
        "the service is stopping",
    ),
}

CAPABILITIES_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: ok_doc("What this arm does, measured from its own traffic.", examples.CAPABILITIES),
    422: _INVALID_HEADER,
    500: _INTERNAL,
}

METRICS_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Prometheus text format.",
        "content": {"text/plain": {"schema": {"type": "string"}, "example": examples.METRICS}},
    },
    422: _INVALID_HEADER,
    500: _INTERNAL,
}


def customise_openapi(
    openapi: Callable[[], dict[str, Any]], arm_ids: list[str]
) -> Callable[[], dict[str, Any]]:
    """Wraps an app's `openapi()`: adds the security schemes, and names the configured arms
    as the only values of a step's `required_arm` (every plan answered keeps to them)."""
    done = False

    def document() -> dict[str, Any]:
        nonlocal done
        schema = openapi()  # built once and cached by FastAPI; completed here once
        if not done:
            components = schema.setdefault("components", {})
            components.setdefault("securitySchemes", {}).update(SECURITY_SCHEMES)
            step = components["schemas"]["PlanStep"]["properties"]["required_arm"]
            step["enum"] = list(arm_ids)
            done = True
        return schema

    return document
