"""The OpenAPI document's extras: every status of every endpoint with an example, the headers
each operation reads, the API-key security schemes, and the arms of this app.

`header_parameter` declares a header an operation reads; `operation_extra` attaches headers
(and the security requirement) to a route; the `*_RESPONSES` tables give each endpoint's
statuses. `customise_openapi` adds what depends on the app's settings: the security schemes
and the configured arms (a step's `required_arm`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from planner_arm.api.openapi import examples
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
    429: error_doc(
        "The caller is over its request rate (`rate_limited`; without API keys, the one "
        "anonymous caller's), already holds its cap of stored plan bytes "
        "(`tenant_quota_exceeded`), or its address sent too many wrong API keys "
        "(`too_many_failed_keys`); `Retry-After` says when to try again.",
        "rate_limited",
        "Over this caller's rate of 20 requests a second; try again in 1 s.",
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
    as a step's `required_arm` (a request that brings its own `tools` plans over those
    instead, so they are examples, not an enum)."""
    done = False

    def document() -> dict[str, Any]:
        nonlocal done
        schema = openapi()  # built once and cached by FastAPI; completed here once
        if not done:
            components = schema.setdefault("components", {})
            components.setdefault("securitySchemes", {}).update(SECURITY_SCHEMES)
            step = components["schemas"]["PlanStep"]["properties"]["required_arm"]
            step["examples"] = list(arm_ids)
            step["description"] = (
                "Which arm executes this: one of the configured arms, or of the request's "
                f"own `tools` when it brings them (configured: {', '.join(arm_ids)})"
            )
            done = True
        return schema

    return document


MAX_IDEMPOTENCY_KEY_CHARS = 255

IDEMPOTENCY_KEY_HEADER = header_parameter(
    "Idempotency-Key",
    "Plan this request once: the same key with the same body within the store's TTL gets "
    "the stored answer again (same plan_id, no model call), also from another replica and "
    "while the first is still planning. The same key with another body is a 422. Printable "
    f"ASCII, at most {MAX_IDEMPOTENCY_KEY_CHARS} characters.",
    # HTTP drops spaces around a header value, so a key starts and ends with a visible one.
    {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_IDEMPOTENCY_KEY_CHARS,
        "pattern": r"^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$",
    },
)

_BAD_KEY = error_doc(
    "The Idempotency-Key header is empty, longer than 255 characters or not printable ASCII.",
    "invalid_idempotency_key",
    "The Idempotency-Key header must be 1 to 255 printable ASCII characters.",
)
_KEY_REUSED = error_doc(
    "The Idempotency-Key was used with a different body.",
    "idempotency_key_reused",
    "This Idempotency-Key was used with a different request body; use a new key for a new request.",
)
_KEY_BUSY = error_doc(
    "The first request with this Idempotency-Key is still planning past its deadline.",
    "idempotency_in_progress",
    "A request with this Idempotency-Key is still being planned; try again.",
)
_NOT_FOUND = error_doc(
    "No stored plan has this id (never stored, or its TTL passed).",
    "plan_not_found",
    "No plan with id '5d0c2b0b6c9e4d7f9a0f3e1b2c4d6e8f' is stored (or it has expired).",
)
_STORE_DOWN = error_doc(
    "The plan store (Redis) does not answer; `Retry-After` says when to try again.",
    "store_unavailable",
    "redis: ConnectionError: Error 111 connecting to 127.0.0.1:6379. Connection refused.",
)


def _with(base: dict[int | str, dict[str, Any]], **extra: dict[str, Any]) -> dict[int | str, Any]:
    return {**base, **{int(status.removeprefix("s")): doc for status, doc in extra.items()}}


PLAN_WITH_KEY_RESPONSES = _with(PLAN_RESPONSES, s400=_BAD_KEY, s409=_KEY_BUSY)
PLAN_WITH_KEY_RESPONSES[422] = {
    **PLAN_RESPONSES[422],
    "description": PLAN_RESPONSES[422]["description"]
    + " `idempotency_key_reused`: the Idempotency-Key was used with a different body."
    " `budget_exceeded`: no plan fits `budget` (max_steps below the configured minimum, or "
    "not even the smallest rule-based plan fits); `figures` holds each limit and that plan's "
    "value.",
}

REPLAN_RESPONSES = _with(
    PLAN_WITH_KEY_RESPONSES,
    s200=streamed_ok_doc(
        "The revised plan: finished steps kept as they were, `diff` says what changed.",
        examples.REPLAN,
    ),
    s404=_NOT_FOUND,
    s409=error_doc(
        "The plan was replanned `max_replans` times already (the smaller of the request's and "
        "planning.max_replans; counted by the service from the stored chain, else from the "
        "plan's own version and parent), or the first request with this Idempotency-Key is "
        "still planning.",
        "replan_limit",
        "Max replans exceeded: the plan was replanned 3 times, at most 3 are allowed",
    ),
)
REPLAN_RESPONSES[422] = error_doc(
    "The body breaks a limit, or the replan names an unknown step (`unknown_step`), marks a "
    "completed one (`completed_step`), has nothing to replan (`nothing_to_replan`), keeps a "
    "finished step whose inputs are unfinished (`inconsistent_step_states`), sends back a "
    "plan that is not one to work on (`invalid_previous`: an empty action or criterion, "
    "repeated numbers, dangling dependencies, a cycle, an arm not configured), no plan fits the "
    "budget (`budget_exceeded`, with `figures`), or reuses an Idempotency-Key with another "
    "body (`idempotency_key_reused`). `errors` lists each problem.",
    "unknown_step",
    "step_states names step 9, which the plan does not have.",
    errors=[{"code": "unknown_step", "message": "no step 9 in the plan", "step": 9}],
)

GET_PLAN_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The stored answer, exactly as it was given. With `Accept: text/html` "
        "(preferred to application/json, as a browser asks): the plan drawn as one "
        "self-contained HTML page (steps by stage, dependencies, critical path, estimates, "
        "source, warnings). Errors stay JSON either way.",
        "content": {
            "application/json": {"example": examples.PLAN},
            "text/html": {
                "schema": {"type": "string"},
                "example": f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">'
                f"\n<title>Plan {examples.PLAN['plan_id']}</title>\n…",
            },
        },
    },
    401: PLAN_RESPONSES[401],
    429: PLAN_RESPONSES[429],
    404: _NOT_FOUND,
    422: PLAN_RESPONSES[422],
    500: PLAN_RESPONSES[500],
    503: _STORE_DOWN,
}

VALIDATE_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: ok_doc(
        "The verdict: every problem at once, and the whole /plan answer when the plan is valid.",
        examples.VALIDATION,
    ),
    401: PLAN_RESPONSES[401],
    413: PLAN_RESPONSES[413],
    415: PLAN_RESPONSES[415],
    429: PLAN_RESPONSES[429],
    422: error_doc(
        "The body is not an object with a list `plan` (or has unknown fields).",
        "invalid_request",
        "The request is not valid: body.plan: Input should be a valid list.",
        errors=[
            {
                "code": "list_type",
                "message": "Input should be a valid list",
                "loc": ["body", "plan"],
            }
        ],
    ),
    500: PLAN_RESPONSES[500],
    503: PLAN_RESPONSES[503],
}


def _expanded_example() -> dict[str, Any]:
    """The /plan example with step 2 detailed in steps 5-7."""
    plan = copy.deepcopy(examples.PLAN)
    first, _, test, check = plan["plan"]
    sub = [
        {**first, "step": 5, "action": "Read the token expiry check in auth/login.py",
         "acceptance_criteria": ["Expiry comparison located"], "depends_on": [1], "parent": "2",
         "estimated_cost_tier": 1, "estimated_duration_seconds": 20},
        {**first, "step": 6, "action": "Patch the expiry comparison to use UTC", "parent": "2",
         "required_arm": "coder", "acceptance_criteria": ["Patch addresses the root cause"],
         "depends_on": [5], "estimated_cost_tier": 3, "estimated_duration_seconds": 40},
        {**check, "step": 7, "action": "Check that the patch fixes the expiry check",
         "acceptance_criteria": ["Patch addresses the root cause"], "depends_on": [6],
         "parent": "2"},
    ]  # fmt: skip
    plan["plan"] = [first, *sub, test, {**check, "depends_on": [3, 7]}]
    plan.update(
        version=2,
        parent_plan_id=plan["plan_id"],
        plan_id="9a1e7c3d5b2f4e6a8c0d1f3b5a7e9c2d",
        replan_count=0,
        diff={"kept": [1, 3, 4], "removed": [2], "added": [5, 6, 7]},
        parallel_stages=[[1], [3, 5], [6], [7], [4]],
        total_estimated_duration=180,
        critical_path_duration=140,
    )
    return plan


EXPAND = _expanded_example()

EXPAND_RESPONSES: dict[int | str, dict[str, Any]] = {
    **PLAN_WITH_KEY_RESPONSES,
    200: ok_doc(
        "The new version of the plan: the step replaced by its sub-plan, numbered above the "
        "highest, each new step's `parent` the replaced step; `diff` says what changed.",
        EXPAND,
    ),
    404: REPLAN_RESPONSES[404],
    422: error_doc(
        "The body breaks a limit, or names a step the plan does not have (`unknown_step`), "
        "the plan's final check (`step_not_expandable`), a plan with no room for a sub-plan "
        "(`plan_too_large`), a plan that is not one to work on (`invalid_previous`: an empty "
        "action or criterion, a cycle, an unknown dependency), no expansion fits the budget "
        "(`budget_exceeded`, with "
        "`figures`), or reuses an Idempotency-Key with another body (`idempotency_key_reused`).",
        "unknown_step",
        "the plan has no step 9 (it has steps [1, 2, 3, 4])",
        errors=[{"code": "unknown_step", "message": "no step 9", "step": 9}],
    ),
}


SPECIALIZED: dict[str, Any] = {
    "plan_id": "5d0c2b0b6c9e4d7f9a0f3e1b2c4d6e8f",
    "step": 2,
    "required_arm": "coder",
    "input": {
        "instruction": "Fix the token expiry check in the login handler found in "
        "{{steps.1.output}}",
        "language": "python",
        "files": ["auth/login.py"],
    },
    "source": "llm",
    "model": "gpt-4o-mini",
    "request_id": "0b6f6b1e-3f7a-4c55-9d9e-0f1a2b3c4d5e",
    "warnings": [],
}

SPECIALIZE_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: ok_doc(
        "The step's input, valid against its arm's input_schema in /capabilities; `source` "
        "says whether the model wrote it or the rules derived it.",
        SPECIALIZED,
    ),
    401: PLAN_RESPONSES[401],
    404: error_doc(
        "No stored plan has this `plan_id` (never stored, or its TTL passed).",
        "plan_not_found",
        "No plan with id '5d0c2b0b6c9e4d7f9a0f3e1b2c4d6e8f' is stored (or it has expired); "
        "send the whole plan as `previous` instead.",
    ),
    413: PLAN_RESPONSES[413],
    415: PLAN_RESPONSES[415],
    429: PLAN_RESPONSES[429],
    422: error_doc(
        "The plan has no such step (`unknown_step`), the stored record of a replan reported "
        "the step finished (`completed_step`: only a pending step gets an input), the plan "
        "is not one to work on (`invalid_previous`), or the body is not "
        "valid (`invalid_request`: not exactly one of previous and plan_id, a bad field); "
        "`errors` lists each problem of a bad body.",
        "unknown_step",
        "the plan has no step 9 (its steps are [1, 2, 3])",
    ),
    500: PLAN_RESPONSES[500],
    503: {
        **GET_PLAN_RESPONSES[503],
        "description": "The plan store (Redis) does not answer (`store_unavailable`), or the "
        "service is starting or shutting down; `Retry-After` says when to try again.",
    },
}
