"""Every error the planner raises, each a value with a stable `code`.

    PlannerError                      code, detail
    ├── RequestRejected               the caller's request cannot be served (4xx)
    │   ├── PayloadTooLarge           body over the configured limit (413)
    │   └── Unauthorized              no valid API key for a planning endpoint (401)
    ├── PlanParseError                no plan-shaped JSON in the model's answer
    ├── PlanValidationError           a plan that breaks a rule local repair cannot mend
    ├── LLMError                      the model call itself failed
    │   ├── LLMTransientError         timeout, connection, 5xx: worth another try
    │   ├── LLMRateLimited            429: worth a try after `retry_after` seconds
    │   ├── LLMRejected               401/403/404/400: the same call will fail again
    │   └── LLMUnsupportedFormat      400 naming response_format: retry without it
    ├── PlanningFailed                every model failed and the fallback is off (5xx)
    └── StoreUnavailable              the plan store (Redis) did not answer in time (503)

The API maps each class to one HTTP status; nothing below the planner knows HTTP.
"""

from __future__ import annotations


class PlannerError(Exception):
    """Base class: a machine-readable code and a human-readable detail."""

    code: str = "planner_error"

    def __init__(self, detail: str, *, code: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return f"{self.code}: {self.detail}"


class RequestRejected(PlannerError):
    code = "invalid_request"


class PayloadTooLarge(RequestRejected):
    code = "payload_too_large"


class Unauthorized(RequestRejected):
    code = "unauthorized"


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

    def __init__(self, detail: str, *, code: str, errors: list[str] | None = None) -> None:
        super().__init__(detail, code=code)
        self.errors = errors or []


class StoreUnavailable(PlannerError):
    """The shared plan store failed or timed out; callers may carry on without it."""

    code = "store_unavailable"
