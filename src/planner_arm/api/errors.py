"""Errors over HTTP: the one function that writes the error body (each error class carries its
own status, in `planner_arm.errors`).

Every error answer, whoever raises it (a handler, the request-context or body-limit
middleware, FastAPI's own validation), is built by `error_response`:
`{"error": code, "detail": one sentence, "request_id": id}`, plus `errors` listing each
problem when a request (422) or the model's plans (502) had some. 503, 504, 429 and 409
`idempotency_in_progress` answers carry `Retry-After`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from planner_arm.errors import (
    BudgetExceeded,
    IdempotencyInProgress,
    PlannerError,
    PlanningFailed,
    ReplanRejected,
    TooManyRequests,
    Unauthorized,
)
from planner_arm.plan.schemas import ErrorItem, ErrorResponse

log = structlog.get_logger("planner_arm.api.errors")

_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}
# Starting or draining: another replica (or this one in a moment) can take the request.
SERVICE_BUSY_RETRY_SECONDS = 1


def error_response(
    status: int,
    code: str,
    detail: str,
    request_id: str,
    problems: Sequence[ErrorItem] = (),
    headers: Mapping[str, str] | None = None,
    figures: Mapping[str, int | float] | None = None,
) -> JSONResponse:
    """The one error answer of the whole API."""
    body = ErrorResponse(
        error=code,
        detail=detail,
        request_id=request_id,
        errors=list(problems) or None,
        figures=dict(figures) if figures else None,
    )
    return JSONResponse(body.model_dump(exclude_none=True), status_code=status, headers=headers)


def validation_problems(errors: Iterable[Any], prefix: Sequence[str | int] = ()) -> list[ErrorItem]:
    """pydantic's errors as problems: where and what, never the caller's input or a doc link."""
    return [
        ErrorItem(
            code=str(err.get("type", "invalid")),
            message=str(err.get("msg", "")),
            loc=[*prefix, *err.get("loc", ())],
        )
        for err in errors
    ]


def invalid_request_detail(problems: Sequence[ErrorItem]) -> str:
    first = problems[0]
    where = ".".join(str(part) for part in first.loc or ())
    more = len(problems) - 1
    tail = f" (and {more} more problem{'s' if more > 1 else ''}, listed in errors)" if more else ""
    return f"The request is not valid: {where + ': ' if where else ''}{first.message}{tail}."


def invalid_request_response(request_id: str, problems: Sequence[ErrorItem]) -> JSONResponse:
    return error_response(
        422, "invalid_request", invalid_request_detail(problems), request_id, problems
    )


# What a body that is not JSON is told to look like when its route's model shows no example.
PLAIN_BODY_EXAMPLE: dict[str, Any] = {"goal": "Fix the login bug"}


def body_example(request: Request) -> str:
    """The shortest example body of the request's route (its model's examples), as JSON: only
    its required fields when it has any, so the hint stays one short line."""
    field = getattr(request.scope.get("route"), "body_field", None)
    model = getattr(getattr(field, "field_info", None), "annotation", None)
    extra = getattr(model, "model_config", {}).get("json_schema_extra")
    examples = extra.get("examples") if isinstance(extra, dict) else None
    shown = [example for example in examples or [] if isinstance(example, dict)]
    if not shown:
        return json.dumps(PLAIN_BODY_EXAMPLE)
    example = min(shown, key=lambda body: len(json.dumps(body)))
    fields = getattr(model, "model_fields", {})
    required = {
        key: value for key, value in example.items() if key in fields and fields[key].is_required()
    }
    return json.dumps(required or example)


def not_json_response(request: Request, exc: RequestValidationError) -> JSONResponse | None:
    """The answer to a body the JSON parser gave up on: what the parser said, where (line and
    column, not a character offset), and what to send instead. None for any other error."""
    first = exc.errors()[0]
    document = exc.body
    if first.get("type") != "json_invalid" or not isinstance(document, str):
        return None
    position = first["loc"][-1] if isinstance(first["loc"][-1], int) else 0
    line = document.count("\n", 0, position) + 1
    column = position - (document.rfind("\n", 0, position) + 1) + 1
    said = first.get("ctx", {}).get("error", "it could not be parsed")
    message = (
        f"the body is not valid JSON: {said} at line {line} column {column}; send a JSON "
        f"object like {body_example(request)}"
    )
    problem = ErrorItem(code="json_invalid", message=message, loc=["body"])
    detail = message[0].upper() + message[1:] + "."
    return error_response(422, "invalid_request", detail, _request_id(request), [problem])


def _plan_problems(error: PlanningFailed) -> list[ErrorItem]:
    """Each problem of the model's last plan: text, or a value with `code` and a message."""
    items = []
    for problem in error.errors:
        if isinstance(problem, str):
            items.append(ErrorItem(code=error.code, message=problem))
        else:
            message = getattr(problem, "message", None) or getattr(problem, "detail", "")
            items.append(ErrorItem(code=str(problem.code), message=str(message)))
    return items


def _retry_after(request: Request, error: PlannerError) -> str:
    """Seconds until a retry has a chance: a model circuit's cooldown when one is open."""
    if isinstance(error, PlanningFailed) and request.state.runtime.llm_status() == "degraded":
        return str(math.ceil(request.state.runtime.settings.circuit.cooldown_seconds))
    return str(SERVICE_BUSY_RETRY_SECONDS)


def _request_id(request: Request) -> str:
    return str(request.scope.get("state", {}).get("request_id", ""))


def planner_error_response(request: Request, exc: PlannerError) -> JSONResponse:
    """The answer to `exc`; a streamed answer's `error` event carries the same body."""
    status = exc.http_status
    problems: list[ErrorItem] = []
    detail = exc.detail
    if isinstance(exc, ReplanRejected):
        problems = [ErrorItem.model_validate(problem) for problem in exc.errors]
    if isinstance(exc, PlanningFailed) and exc.errors:
        problems = _plan_problems(exc)
        count = len(problems)
        detail = (
            f"No valid plan: the model's last answer ({exc.detail}) had {count} "
            f"problem{'s' if count > 1 else ''}, listed in errors."
        )
    headers: dict[str, str] = {}
    if isinstance(exc, Unauthorized):
        headers["WWW-Authenticate"] = 'Bearer realm="planner-arm"'
    if status in (503, 504):
        headers["Retry-After"] = _retry_after(request, exc)
    if isinstance(exc, TooManyRequests | IdempotencyInProgress):
        headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
    log.warning("request_failed", status=status, error=exc.code)
    figures = exc.figures if isinstance(exc, BudgetExceeded) else None
    return error_response(
        status, exc.code, detail, _request_id(request), problems, headers, figures
    )


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(PlannerError)
    async def planner_error(request: Request, exc: PlannerError) -> JSONResponse:
        return planner_error_response(request, exc)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        not_json = not_json_response(request, exc)
        if not_json is not None:
            return not_json
        return invalid_request_response(_request_id(request), validation_problems(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:
            # FastAPI's answer to a body its JSON parser gives up on (nested too deeply).
            problem = ErrorItem(
                code="json_invalid", message="the body could not be parsed as JSON", loc=["body"]
            )
            return invalid_request_response(_request_id(request), [problem])
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        return error_response(
            exc.status_code, code, str(exc.detail), _request_id(request), headers=exc.headers
        )

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        # Logged with its trace for us; the caller gets the shape and no internals.
        log.exception("unhandled_error", error_type=type(exc).__name__)
        return error_response(
            500, "internal_error", "an unexpected error occurred", _request_id(request)
        )
