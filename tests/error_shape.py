"""`assert_error_body`: the one error shape every error answer of the API has.

`{"error": code, "detail": one sentence, "request_id": id}`, plus `errors` (each problem:
`code`, `message`, maybe `loc` and `step`) when a request or a plan had problems to list, and
`figures` when no plan fits a budget.
"""

from __future__ import annotations

from typing import Any

import httpx


def assert_error_body(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body: dict[str, Any] = response.json()
    assert set(body) - {"errors", "figures"} == {"error", "detail", "request_id"}, body
    assert body["error"] == code
    assert isinstance(body["detail"], str), body
    assert body["detail"].strip(), body
    assert body["request_id"]
    assert response.headers["x-request-id"] == body["request_id"]
    for problem in body.get("errors", []):
        assert {"code", "message"} <= set(problem) <= {"code", "message", "loc", "step"}, problem
        assert isinstance(problem["code"], str)
        assert problem["code"]
        assert isinstance(problem["message"], str)
        assert problem["message"]
    assert "Traceback" not in response.text
    return body
