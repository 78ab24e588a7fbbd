"""The OpenAPI document a client generator or a person at /docs reads: every status of every
operation with an example, readable operation ids, the API-key schemes, the headers the
service reads, the limits in force, and the arms this service answers with."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from pydantic import BaseModel

from planner_arm.plan.endpoint_schemas import (
    CapabilitiesResponse,
    HealthResponse,
    ReadyResponse,
    SpecializeResponse,
    ValidateResponse,
)
from planner_arm.plan.schemas import ErrorResponse, PlanResponse
from support.app import make_settings, running_app

OPERATIONS = {
    ("/plan", "post"): (
        "createPlan",
        {"200", "400", "401", "409", "413", "415", "422", "429", "500", "502", "503", "504"},
    ),
    ("/replan", "post"): (
        "replanPlan",
        {"200", "400", "401", "404", "409", "413", "415", "422", "429", "500", "502", "503", "504"},
    ),
    ("/plan/expand", "post"): (
        "expandPlanStep",
        {"200", "400", "401", "404", "409", "413", "415", "422", "429", "500", "502", "503", "504"},
    ),
    ("/plan/validate", "post"): (
        "validatePlan",
        {"200", "401", "413", "415", "422", "429", "500", "503"},
    ),
    ("/plan/specialize", "post"): (
        "specializeStep",
        {"200", "401", "404", "413", "415", "422", "429", "500", "503"},
    ),
    ("/plan/{plan_id}", "get"): ("getPlan", {"200", "401", "404", "422", "429", "500", "503"}),
    ("/health", "get"): ("getHealth", {"200", "422", "500"}),
    ("/ready", "get"): ("getReadiness", {"200", "422", "500", "503"}),
    ("/capabilities", "get"): ("getCapabilities", {"200", "422", "500"}),
    ("/metrics", "get"): ("getMetrics", {"200", "422", "500"}),
}
STREAMED = {"/plan", "/replan"}
STREAM_TYPES = {"text/event-stream", "application/x-ndjson"}
OK_MODELS: dict[str, type[BaseModel]] = {
    "/plan": PlanResponse,
    "/replan": PlanResponse,
    "/plan/expand": PlanResponse,
    "/plan/{plan_id}": PlanResponse,
    "/plan/validate": ValidateResponse,
    "/plan/specialize": SpecializeResponse,
    "/health": HealthResponse,
    "/ready": ReadyResponse,
    "/capabilities": CapabilitiesResponse,
}


async def openapi(**overrides: Any) -> dict[str, Any]:
    async with running_app(make_settings(llm=False, **overrides)) as client:
        document: dict[str, Any] = (await client.get("/openapi.json")).json()
    return document


async def test_every_status_of_every_operation_has_an_example() -> None:
    document = await openapi()
    found = {(path, method) for path, item in document["paths"].items() for method in item}
    assert found == set(OPERATIONS)
    for (path, method), (operation_id, statuses) in OPERATIONS.items():
        operation = document["paths"][path][method]
        assert operation["operationId"] == operation_id
        responses = operation["responses"]
        assert set(responses) == statuses, path
        for status, response in responses.items():
            assert response["description"], (path, status)
            contents = response["content"]
            if path in STREAMED and status == "200":
                # The same answer as a stream of events: its last event's data is the plan.
                assert set(contents) == {"application/json", *STREAM_TYPES}, path
                sse = contents["text/event-stream"]["example"]
                last = sse.strip().split("\n\n")[-1].split("\n")
                assert last[0] == "event: plan"
                assert (
                    json.loads(last[1].removeprefix("data: "))
                    == contents["application/json"]["example"]
                )
                ndjson = contents["application/x-ndjson"]["example"].splitlines()
                assert [json.loads(line)["event"] for line in ndjson][-1] == "plan"
                contents = {"application/json": contents["application/json"]}
            if path == "/plan/{plan_id}" and status == "200":
                # The same answer drawn for a browser (Accept: text/html).
                assert set(contents) == {"application/json", "text/html"}
                assert contents["text/html"]["example"].startswith("<!DOCTYPE html>")
                contents = {"application/json": contents["application/json"]}
            (content,) = contents.values()
            example = content["example"]
            if status != "200":
                ErrorResponse.model_validate(example)  # the one error shape, examples too
            elif path in OK_MODELS:
                OK_MODELS[path].model_validate(example)
            else:
                assert isinstance(example, str)


async def test_api_key_schemes_give_docs_an_authorize_button() -> None:
    open_document = await openapi()
    keyed = await openapi(auth={"api_keys": ["key-one-0123456789"]})
    schemes = keyed["components"]["securitySchemes"]
    assert schemes["bearerAuth"] == {**schemes["bearerAuth"], "type": "http", "scheme": "bearer"}
    assert schemes["apiKeyHeader"]["in"] == "header"
    assert schemes["apiKeyHeader"]["name"] == "X-API-Key"
    either = [{"bearerAuth": []}, {"apiKeyHeader": []}]
    assert keyed["paths"]["/plan"]["post"]["security"] == either
    # Without configured keys the key is optional: the empty requirement says so.
    assert open_document["paths"]["/plan"]["post"]["security"] == [*either, {}]
    assert "security" not in keyed["paths"]["/health"]["get"]  # the probes stay open


async def test_the_headers_the_service_reads_are_declared() -> None:
    document = await openapi()
    for path, method in OPERATIONS:
        parameters = {p["name"]: p for p in document["paths"][path][method]["parameters"]}
        request_id = parameters["X-Request-ID"]
        assert request_id["in"] == "header"
        assert request_id["schema"]["maxLength"] == 128
        assert re.fullmatch(request_id["schema"]["pattern"], "abc-123")
        assert not re.fullmatch(request_id["schema"]["pattern"], "a\r\nb")
    plan_headers = {p["name"] for p in document["paths"]["/plan"]["post"]["parameters"]}
    assert plan_headers == {"X-Request-ID", "Cache-Control", "Idempotency-Key"}
    replan_headers = {p["name"]: p for p in document["paths"]["/replan"]["post"]["parameters"]}
    assert set(replan_headers) == {"X-Request-ID", "Idempotency-Key"}
    assert replan_headers["Idempotency-Key"]["schema"]["maxLength"] == 255


async def test_every_limit_in_force_is_in_the_schema() -> None:
    limits = {
        "max_goal_chars": 500,
        "max_constraints": 4,
        "max_constraint_chars": 77,
        "max_context_bytes": 4096,
        "max_context_depth": 3,
    }
    document = await openapi(limits=limits)
    request = document["components"]["schemas"]["PlanRequest"]["properties"]
    assert request["goal"]["maxLength"] == 500
    assert request["constraints"]["maxItems"] == 4
    assert request["constraints"]["items"]["maxLength"] == 77
    assert "4 KiB" in request["context"]["description"]
    assert "3 levels" in request["context"]["description"]
    assert request["request_id"]["anyOf"][0]["maxLength"] == 128


async def test_required_arm_names_the_configured_arms_and_allows_a_requests_tools() -> None:
    arms = [
        {"id": "scout", "capabilities": ["search"], "description": "Finds things"},
        {"id": "judge", "capabilities": ["review"], "description": "Checks the work"},
    ]
    document = await openapi(arms=arms)
    step = document["components"]["schemas"]["PlanStep"]["properties"]["required_arm"]
    assert step["examples"] == ["scout", "judge"]
    assert "scout, judge" in step["description"]
    # A request's own tools are as valid: no enum may refuse them.
    assert "enum" not in step


@pytest.mark.parametrize(
    "internal",
    ["request_model_for", "_goal_not_blank", "benchmarks", ".py", "this base", "ClassVar"],
)
async def test_descriptions_use_no_internal_wording(internal: str) -> None:
    document = await openapi()
    texts: list[str] = []

    def collect(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("description", "summary") and isinstance(value, str):
                    texts.append(value)
                collect(value)
        elif isinstance(node, list):
            for value in node:
                collect(value)

    collect(document)
    assert texts
    assert not [text for text in texts if internal in text]
