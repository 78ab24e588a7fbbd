"""OpenAPI extras of the lifecycle endpoints (/plan/validate, /replan, GET /plan/{id}): every
status with an example, and the Idempotency-Key header."""

from __future__ import annotations

from typing import Any

from planner_arm.api import openapi_examples as examples
from planner_arm.api.openapi_docs import (
    PLAN_RESPONSES,
    error_doc,
    header_parameter,
    ok_doc,
    streamed_ok_doc,
)

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
        "The plan was replanned `max_replans` times already (counted by the service from the "
        "stored chain), or the first request with this Idempotency-Key is still planning.",
        "replan_limit",
        "Max replans exceeded: the plan was replanned 3 times, at most 3 are allowed",
    ),
)
REPLAN_RESPONSES[422] = error_doc(
    "The body breaks a limit, or the replan names an unknown step (`unknown_step`), marks a "
    "completed one (`completed_step`), has nothing to replan (`nothing_to_replan`), keeps a "
    "finished step whose inputs are unfinished (`inconsistent_step_states`), no plan fits the "
    "budget (`budget_exceeded`, with `figures`), or reuses an Idempotency-Key with another "
    "body (`idempotency_key_reused`). `errors` lists each problem.",
    "unknown_step",
    "step_states names step 9, which the plan does not have.",
    errors=[{"code": "unknown_step", "message": "no step 9 in the plan", "step": 9}],
)

GET_PLAN_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: ok_doc("The stored answer, exactly as it was given.", examples.PLAN),
    401: PLAN_RESPONSES[401],
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
