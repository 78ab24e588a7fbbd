"""Schemathesis drives the service from its own OpenAPI document (the LLM off, so the
rule-based planner answers), with valid and invalid requests: no server errors, responses
that match the schema, and only documented status codes."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from planner_arm.api.app import create_app
from support.app import make_settings

EXAMPLES_PER_OPERATION = 60
STATEFUL_OPERATIONS = {
    "POST /replan",
    "POST /plan/expand",
    "POST /plan/specialize",
    "GET /plan/{plan_id}",
}

pytestmark = pytest.mark.slow


def test_every_operation_keeps_its_own_contract() -> None:
    # Bodies up to 4 MiB: generated tool sets and examples are large, and each should be
    # judged by its schema (422), not cut off by the size limit first (413).
    # Its client names the host `testserver`: without keys, a name the service must answer to.
    server = {"max_body_bytes": 4 * 1024 * 1024, "mcp_allowed_hosts": ["testserver"]}
    app = create_app(make_settings(llm=False, server=server))
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    checked = []
    statuses: dict[str, set[int]] = {}
    for result in schema.get_all_operations():
        operation = result.ok()

        strategy = operation.as_strategy(GenerationMode.POSITIVE) | operation.as_strategy(
            GenerationMode.NEGATIVE
        )

        @given(case=strategy)
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            derandomize=True,  # the same cases every run: CI does not depend on luck
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        )
        def conforms(case: schemathesis.Case) -> None:
            key = (case.headers or {}).get("Idempotency-Key")
            if key is not None and _valid_key(key):
                # Generated cases share keys across different bodies, which the service
                # rightly refuses (422); a key of its own per case keeps the check about the
                # schema. Invalid keys are kept, so the 400 is still driven.
                case.headers["Idempotency-Key"] = uuid.uuid4().hex
            response = case.call()
            # A replan or a fetch of a plan id nobody stored is refused by design (404, 422),
            # however well-formed: those answers depend on state, not on the schema.
            stateful = case.operation.label in STATEFUL_OPERATIONS
            # So is a budget no plan can fit (max_steps under the smallest plan, a duration
            # shorter than any step): well-formed, and refused with budget_exceeded; and tools
            # whose ids repeat or whose JSON passes the configured bytes, which a JSON schema
            # cannot say.
            refused = stateful or _refused_by_rule(response)
            case.validate_response(
                response, excluded_checks=[positive_data_acceptance] if refused else None
            )
            statuses.setdefault(case.operation.label, set()).add(response.status_code)

        conforms()
        checked.append(operation.label)
    # Real plans were made (the lifespan ran) and bad bodies were refused; a bad X-Request-ID
    # header is refused on every operation, and the service was never "not ready".
    assert {200, 422} <= statuses["POST /plan"], statuses
    assert statuses["GET /ready"] == {200, 422}
    assert sorted(checked) == [
        "GET /capabilities",
        "GET /health",
        "GET /metrics",
        "GET /plan/{plan_id}",
        "GET /ready",
        "POST /plan",
        "POST /plan/expand",
        "POST /plan/specialize",
        "POST /plan/validate",
        "POST /replan",
    ]
    assert 404 in statuses["GET /plan/{plan_id}"], statuses
    assert 200 in statuses["POST /plan/validate"], statuses
    assert {404, 422} <= statuses["POST /plan/specialize"], statuses


def _refused_by_rule(response: Any) -> bool:
    """A well-formed request refused by a rule its schema cannot state."""
    if response.status_code != 422:
        return False
    body = response.json()
    if not isinstance(body, dict):
        return False
    if body.get("error") == "budget_exceeded":
        return True
    problems = body.get("errors") or []
    by_rule = ("is given twice", "bytes as JSON")
    return body.get("error") == "invalid_request" and all(
        any(rule in str(problem.get("message")) for rule in by_rule) for problem in problems
    )


def _valid_key(key: str) -> bool:
    return 0 < len(key) <= 255 and all(" " <= char <= "~" for char in key)
