"""Every error the planner raises, each a value with a stable `code`.

    PlannerError                      code, detail
    ├── RequestRejected               the caller's request cannot be served as sent
    │   ├── PayloadTooLarge           body over the configured limit
    │   ├── UnsupportedMediaType      a body that is not declared as JSON
    │   ├── Unauthorized              no valid API key for a planning endpoint
    │   ├── HostNotAllowed            /mcp with a Host it does not answer to (421)
    │   ├── OriginNotAllowed          /mcp from a web page of a foreign origin (403)
    │   ├── ReplanRejected            a replan that names no step, a finished one, nothing
    │   │   ├── ExpandRejected        an expansion of no step, or of one that cannot be
    │   │   └── InvalidPrevious       a plan sent back (/replan, /plan/expand,
    │   │                             /plan/specialize) that is not one to work on
    │   ├── ReplanLimitReached        the plan's chain has used its replans
    │   ├── BudgetExceeded            no plan fits the caller's budget
    │   ├── PlanNotFound              no stored plan has this id
    │   ├── IdempotencyKeyReused      the key was used with another body
    │   ├── InvalidIdempotencyKey     an Idempotency-Key that breaks the rules
    │   ├── IdempotencyInProgress     409 with `retry_after`: the key's first request is
    │   │                             still planning when this one's deadline comes
    │   └── TooManyRequests           429 with `retry_after`: `rate_limited` (the caller's
    │       │                         request rate) or `tenant_quota_exceeded` (plan bytes held)
    │       ├── FailedKeysLimited     too many wrong API keys from one client address
    │       └── ToolSetsBusy          `tool_sets_busy`: the caller's tool-set builds are all
    │                                 in use until its request's deadline
    ├── NotReady                      starting (`not_ready`) or draining (`shutting_down`)
    ├── StoreUnavailable              the plan store (Redis) does not answer
    │   └── StoreFull                 Redis refuses writes: out of memory (noeviction)
    ├── PlanParseError                no plan-shaped JSON in the model's answer
    ├── PlanValidationError           a plan that breaks a rule local repair cannot mend
    ├── LLMError                      the model call itself failed
    │   ├── LLMTransientError         timeout, connection, 5xx: worth another try
    │   ├── LLMRateLimited            429: worth a try after `retry_after` seconds
    │   ├── LLMRejected               401/403/404/400: the same call will fail again
    │   └── LLMUnsupportedFormat      400 naming response_format: retry without it
    └── PlanningFailed                every model failed and the fallback is off

Each class carries the HTTP status it is answered with (`http_status`), so the API and the
client read one table; `planner_arm.api.errors`
writes the one error body.
"""

from __future__ import annotations

from typing import ClassVar


class PlannerError(Exception):
    """Base class: a machine-readable code, a human-readable detail, and the HTTP status an
    answer carries when this error reaches a caller (500: a bug, it should not)."""

    code: str = "planner_error"
    http_status: int = 500

    def __init__(self, detail: str, *, code: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return f"{self.code}: {self.detail}"


class RequestRejected(PlannerError):
    code = "invalid_request"
    http_status = 422


class PayloadTooLarge(RequestRejected):
    code = "payload_too_large"
    http_status = 413


class UnsupportedMediaType(RequestRejected):
    code = "unsupported_media_type"
    http_status = 415


class Unauthorized(RequestRejected):
    code = "unauthorized"
    http_status = 401


class HostNotAllowed(RequestRejected):
    """421: a request to /mcp whose Host is not one the service answers to there (a page
    reaching it through a DNS name rebound to this address)."""

    code = "host_not_allowed"
    http_status = 421


class OriginNotAllowed(RequestRejected):
    """403: a request to /mcp sent by a web page of an origin it does not trust."""

    code = "origin_not_allowed"
    http_status = 403


class ReplanRejected(RequestRejected):
    """422. `code`: unknown_step (a state or mark names no step of the plan), completed_step
    (a completed or running step is marked), inconsistent_step_states (a finished step whose
    inputs are not finished), nothing_to_replan (nothing failed, nothing marked, no reason).
    `errors` lists each problem as {"code", "message", "step"}."""

    code = "invalid_replan"

    def __init__(
        self, detail: str, *, code: str, errors: list[dict[str, object]] | None = None
    ) -> None:
        super().__init__(detail, code=code)
        self.errors = errors or []


class ReplanLimitReached(RequestRejected):
    """409: the plan has been replanned `replan_count` times, the most allowed."""

    code = "replan_limit"
    http_status = 409

    def __init__(self, replan_count: int, max_replans: int) -> None:
        super().__init__(
            f"Max replans exceeded: the plan was replanned {replan_count} times, "
            f"at most {max_replans} are allowed"
        )
        self.replan_count = replan_count
        self.max_replans = max_replans


class BudgetExceeded(RequestRejected):
    """422: no plan fits the budget; `figures` holds the limit and the best plan's value."""

    code = "budget_exceeded"

    def __init__(self, detail: str, *, figures: dict[str, float | int]) -> None:
        super().__init__(detail)
        self.figures = figures


class NotReady(PlannerError):
    """The service takes no new work now: `not_ready` while starting, `shutting_down` while
    it drains the requests it already accepted."""

    code = "not_ready"
    http_status = 503


class PlanParseError(PlannerError):
    """The model's answer holds no usable plan (`code`: empty, refusal, no_json, ...)."""

    code = "unparseable"


class PlanValidationError(PlannerError):
    """A plan that breaks a rule; `errors` lists every problem found, for the repair prompt."""

    code = "invalid_plan"

    def __init__(self, detail: str, *, code: str | None = None, errors: list[str] | None = None):
        super().__init__(detail, code=code)
        self.errors = errors or [detail]


class LLMError(PlannerError):
    """A failed model call. `status` is the HTTP status when there was one."""

    code = "llm_error"

    def __init__(self, detail: str, *, code: str | None = None, status: int | None = None):
        super().__init__(detail, code=code)
        self.status = status


class LLMTransientError(LLMError):
    code = "llm_transient"


class LLMRateLimited(LLMError):
    code = "llm_rate_limited"

    def __init__(self, detail: str, *, retry_after: float | None = None, status: int = 429):
        super().__init__(detail, status=status)
        self.retry_after = retry_after


class LLMRejected(LLMError):
    code = "llm_rejected"


class LLMUnsupportedFormat(LLMRejected):
    code = "llm_unsupported_response_format"


class PlanningFailed(PlannerError):
    """No valid plan and the fallback is off. `code` picks the status: llm_unavailable -> 503,
    deadline_exceeded -> 504, invalid_plan -> 502."""

    code = "planning_failed"
    STATUS_BY_CODE: ClassVar[dict[str, int]] = {
        "llm_unavailable": 503,
        "deadline_exceeded": 504,
        "invalid_plan": 502,
    }

    def __init__(self, detail: str, *, code: str, errors: list[str] | None = None) -> None:
        super().__init__(detail, code=code)
        self.errors = errors or []
        self.http_status = self.STATUS_BY_CODE.get(code, 503)


class PlanNotFound(RequestRejected):
    code = "plan_not_found"
    http_status = 404


class IdempotencyKeyReused(RequestRejected):
    code = "idempotency_key_reused"


class InvalidIdempotencyKey(RequestRejected):
    code = "invalid_idempotency_key"
    http_status = 400


class IdempotencyInProgress(RequestRejected):
    """409: the key's first request is still planning when this one's deadline came;
    `retry_after`: seconds until a retry is likely to get its answer."""

    code = "idempotency_in_progress"
    http_status = 409

    def __init__(self, detail: str, *, retry_after: float) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class TooManyRequests(RequestRejected):
    """429: the caller has used its share for now. `rate_limited`: over its request rate;
    `tenant_quota_exceeded`: it holds its cap of plan bytes in the store. `retry_after`:
    seconds until a retry may pass."""

    code = "rate_limited"
    http_status = 429

    def __init__(self, detail: str, *, code: str | None = None, retry_after: float) -> None:
        super().__init__(detail, code=code)
        self.retry_after = retry_after


class TenantQuotaExceeded(TooManyRequests):
    code = "tenant_quota_exceeded"


class FailedKeysLimited(TooManyRequests):
    """429: the client's address sent too many wrong API keys; no key of its is checked
    until `retry_after` seconds have passed."""

    code = "too_many_failed_keys"


class ToolSetsBusy(TooManyRequests):
    """429: every build a principal may run at once is building one of its other tool sets,
    and none ended before this request's deadline."""

    code = "tool_sets_busy"


class StoreUnavailable(PlannerError):
    """The plan store failed; writes fail soft, reads with no other source answer 503."""

    code = "store_unavailable"
    http_status = 503


class StoreFull(StoreUnavailable):
    """Redis refuses writes for want of memory (`maxmemory` under `noeviction`): the store is
    up and reads work, so this does not mark it down."""


class ExpandRejected(ReplanRejected):
    """422 from /plan/expand. `code`: unknown_step (the plan has no such step),
    step_not_expandable (the plan's final check), plan_too_large (no room for a sub-plan)."""

    code = "invalid_expand"


class InvalidPrevious(ReplanRejected):
    """422 `invalid_previous`: the plan a request about an earlier plan starts from (/replan,
    /plan/expand, /plan/specialize, sent as `previous` or stored) is not one to work on: an
    empty action or criterion, a repeated number, a dependency on itself, on a missing step
    or in a cycle, an arm the request cannot use. `errors` lists each problem with its step."""

    code = "invalid_previous"

    def __init__(self, detail: str, *, errors: list[dict[str, object]]) -> None:
        super().__init__(detail, code=self.code, errors=errors)


# Codes raised with `code=` on a class whose own code is another: their status is the class's.
_CODES_OF_CLASS: dict[type[PlannerError], tuple[str, ...]] = {
    ReplanRejected: (
        "unknown_step",
        "completed_step",
        "inconsistent_step_states",
        "nothing_to_replan",
    ),
    ExpandRejected: ("step_not_expandable", "plan_too_large"),
    NotReady: ("shutting_down",),
}


def _status_by_code() -> dict[str, int]:
    table: dict[str, int] = {"internal_error": 500}
    pending: list[type[PlannerError]] = [PlannerError]
    while pending:
        error_class = pending.pop()
        pending.extend(error_class.__subclasses__())
        table.setdefault(error_class.code, error_class.http_status)
        for code in _CODES_OF_CLASS.get(error_class, ()):
            table.setdefault(code, error_class.http_status)
    return table | PlanningFailed.STATUS_BY_CODE


def status_for_code(code: str) -> int:
    """The HTTP status an answer with error `code` carries (a streamed `error` event has no
    status line of its own); 500 for a code this service does not answer with."""
    return STATUS_BY_CODE.get(code, 500)


STATUS_BY_CODE: dict[str, int] = _status_by_code()
