"""What the client raises: one class per kind of answer a caller handles differently.

    PlannerError                 status, code (the service's `error`), detail, request_id
    ├── TransportError           no answer at all: connection refused or broken, timeout
    ├── InvalidRequest           400, 413, 415, 422: the request cannot be served as sent
    │   └── BudgetExceeded       422 budget_exceeded; `figures` holds each limit and value
    ├── Unauthorized             401: no API key, or a wrong one
    ├── PlanNotFound             404: no stored plan has this id (or its TTL passed)
    ├── Conflict                 409: replan_limit, idempotency_in_progress
    ├── Unavailable              429, 503: try again later; `retry_after` in seconds
    └── ServerError              500, 502, 504 and any other 5xx

These are the client's own classes (`planner_arm.client.errors`), not the service's
`planner_arm.errors`: a client never holds a server-side exception.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from planner_arm.errors import status_for_code
from planner_arm.plan.schemas import ErrorItem


class PlannerError(Exception):
    """Base class of every client error.

    `status` is the HTTP status (None when no answer came), `code` the service's error code
    (the body's `error`), `detail` its sentence, `request_id` the body's request id, `errors`
    each listed problem (a 422's fields, a replan's steps), `body` the whole error body.
    """

    def __init__(
        self,
        detail: str,
        *,
        status: int | None = None,
        code: str = "planner_error",
        request_id: str | None = None,
        errors: list[ErrorItem] | None = None,
        body: Mapping[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status
        self.code = code
        self.request_id = request_id
        self.errors = errors or []
        self.body: dict[str, Any] = dict(body or {})
        self.retry_after = retry_after

    def __str__(self) -> str:
        where = f"{self.status} " if self.status is not None else ""
        return f"{where}{self.code}: {self.detail}"


class TransportError(PlannerError):
    """No answer: the connection was refused or broke, or the timeout passed."""


class InvalidRequest(PlannerError):
    """400, 413, 415 or 422: fix the request; sending it again gets the same answer."""


class BudgetExceeded(InvalidRequest):
    """422 budget_exceeded: no plan fits the budget."""

    @property
    def figures(self) -> dict[str, float]:
        """Each limit of the budget and the value of the smallest plan found."""
        figures = self.body.get("figures") or {}
        return {str(name): float(value) for name, value in figures.items()}


class Unauthorized(PlannerError):
    """401: the service wants an API key (`api_key=`), or the one given is wrong."""


class PlanNotFound(PlannerError):
    """404: no stored plan has this id; send the whole plan as `previous` instead."""


class Conflict(PlannerError):
    """409: the plan's chain used its replans (`replan_limit`), or the first request with
    this Idempotency-Key is still planning (`idempotency_in_progress`)."""


class Unavailable(PlannerError):
    """429 or 503: the service (or its model, or its store) cannot take this now;
    `retry_after` says when to try again, when the service said."""


class ServerError(PlannerError):
    """500, 502, 504 or another 5xx: the service failed to answer this request."""


def _class_for(status: int | None, code: str) -> type[PlannerError]:
    if code == "budget_exceeded":
        return BudgetExceeded
    if status in (429, 503):
        return Unavailable
    if status == 401:
        return Unauthorized
    if status == 404 and code in ("plan_not_found", "not_found"):
        return PlanNotFound
    if status == 409:
        return Conflict
    if status is not None and status >= 500:
        return ServerError
    return InvalidRequest


def error_from_body(
    status: int | None, body: Mapping[str, Any], retry_after: float | None = None
) -> PlannerError:
    """The error for an error body `{"error", "detail", "request_id", "errors"?}`; with no
    status (an SSE `error` event) the status is read from the code where it is known."""
    code = str(body.get("error") or "http_error")
    if status is None:
        status = status_for_code(code)
    detail = str(body.get("detail") or f"the service answered {status}")
    request_id = body.get("request_id")
    problems = [ErrorItem.model_validate(item) for item in body.get("errors") or []]
    error_class = _class_for(status, code)
    return error_class(
        detail,
        status=status,
        code=code,
        request_id=str(request_id) if request_id is not None else None,
        errors=problems,
        body=body,
        retry_after=retry_after,
    )


def error_from_response(
    status: int, content: bytes, retry_after: float | None = None
) -> PlannerError:
    """The error for an HTTP answer that is not a 2xx; a body that is not the service's error
    shape (a proxy's page) still gives the class of its status."""
    try:
        body = json.loads(content)
    except ValueError:
        body = None
    if not isinstance(body, dict) or "error" not in body:
        text = content[:200].decode("utf-8", "replace").strip()
        body = {"error": "http_error", "detail": text or f"the service answered {status}"}
    return error_from_body(status, body, retry_after)
