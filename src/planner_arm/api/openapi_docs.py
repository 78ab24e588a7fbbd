"""The status codes each endpoint can answer, with examples, for the OpenAPI document."""

from __future__ import annotations

from typing import Any

from planner_arm.plan.schemas import ErrorResponse

_REQUEST_ID = "0b6f6b1e-3f7a-4c55-9d9e-0f1a2b3c4d5e"


def _error(description: str, code: str, detail: Any) -> dict[str, Any]:
    return {
        "model": ErrorResponse,
        "description": description,
        "content": {
            "application/json": {
                "example": {"error": code, "detail": detail, "request_id": _REQUEST_ID}
            }
        },
    }


PLAN_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: _error(
        "API keys are configured and the request carries none, or a wrong one "
        "(`WWW-Authenticate: Bearer`).",
        "unauthorized",
        "the API key is not valid",
    ),
    413: _error(
        "The body is over the size limit (64 KiB by default), counted as it arrives.",
        "payload_too_large",
        "the request body is over the limit of 65536 bytes",
    ),
    422: _error(
        "The body is not JSON, breaks a limit, or has unknown fields; `detail` lists them.",
        "invalid_request",
        [
            {
                "loc": ["body", "goal"],
                "msg": "Value error, goal must not be blank",
                "type": "value_error",
            }
        ],
    ),
    502: _error(
        "Fallback off: the model kept answering plans that break the rules.",
        "invalid_plan",
        "gpt-4o-mini: empty_action; problems: step 2: action is empty",
    ),
    503: _error(
        "Starting or stopping (`not_ready`), or, with the fallback off, no model answered "
        "(`llm_unavailable`).",
        "llm_unavailable",
        "gpt-4o-mini: llm_transient: HTTP 503: overloaded",
    ),
    504: _error(
        "Fallback off: the request deadline passed before a model answered.",
        "deadline_exceeded",
        "the request deadline passed",
    ),
}

READY_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "The planner is built and takes traffic."},
    503: _error("Starting, or shutting down.", "not_ready", "the service is stopping"),
}

METRICS_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Prometheus text format.",
        "content": {
            "text/plain": {
                "schema": {"type": "string"},
                "example": 'planner_plans_total{source="llm"} 42.0\n',
            }
        },
    }
}
