"""One status table: every error class carries its HTTP status, and a code alone (a streamed
`error` event has no status line) reads the same status the JSON answer would carry."""

from __future__ import annotations

import pytest

from planner_arm import errors
from planner_arm.client.errors import Conflict, ServerError, Unavailable, error_from_body


def _classes() -> list[type[errors.PlannerError]]:
    found, pending = [], [errors.PlannerError]
    while pending:
        error_class = pending.pop()
        found.append(error_class)
        pending.extend(error_class.__subclasses__())
    return found


# PlanValidationError's code is also one of PlanningFailed's: on the wire it is always the
# latter (a model's invalid plan is never answered as such), so the table holds its status.
_ON_THE_WIRE = [cls for cls in _classes() if cls.code not in errors.PlanningFailed.STATUS_BY_CODE]


@pytest.mark.parametrize("error_class", _ON_THE_WIRE, ids=lambda cls: cls.__name__)
def test_a_class_code_reads_the_class_status(error_class: type[errors.PlannerError]) -> None:
    assert errors.status_for_code(error_class.code) == error_class.http_status


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("llm_unavailable", 503),
        ("deadline_exceeded", 504),
        ("invalid_plan", 502),
        ("store_unavailable", 503),
        ("shutting_down", 503),
        ("not_ready", 503),
        ("internal_error", 500),
        ("budget_exceeded", 422),
        ("plan_not_found", 404),
        ("replan_limit", 409),
        ("idempotency_in_progress", 409),
        ("unknown_step", 422),
        ("step_not_expandable", 422),
        ("unauthorized", 401),
        ("invalid_idempotency_key", 400),
        ("payload_too_large", 413),
    ],
)
def test_each_code_has_the_status_the_api_answers_with(code: str, status: int) -> None:
    assert errors.status_for_code(code) == status


def test_planning_failed_takes_its_status_from_its_code() -> None:
    assert errors.PlanningFailed("x", code="deadline_exceeded").http_status == 504
    assert errors.PlanningFailed("x", code="invalid_plan").http_status == 502
    assert errors.PlanningFailed("x", code="llm_unavailable").http_status == 503


def test_an_unknown_code_is_a_server_error() -> None:
    assert errors.status_for_code("no_such_code") == 500


def test_the_client_reads_a_streamed_error_by_the_same_table() -> None:
    assert isinstance(error_from_body(None, {"error": "store_unavailable"}), Unavailable)
    assert isinstance(error_from_body(None, {"error": "replan_limit"}), Conflict)
    gone = error_from_body(None, {"error": "deadline_exceeded", "detail": "late"})
    assert isinstance(gone, ServerError)
    assert gone.status == 504
