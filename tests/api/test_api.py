"""The HTTP API through ASGITransport with the lifespan running; the real openai SDK talks to
a respx-mocked endpoint, so every retry and fallback path runs the code a user would run."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
import pytest
import respx

from support.app import (
    FIXTURES,
    TEST_KEY,
    FakeClock,
    answer,
    fixture_text,
    good_plan,
    make_settings,
    running_app,
)
from support.invariants import assert_error_body as error_shape
from support.invariants import assert_valid_plan, sample

GOAL = {"goal": "Fix authentication bug and add tests", "constraints": ["No schema change"]}


def messages_sent(route: respx.Route, index: int) -> list[dict[str, str]]:
    messages: list[dict[str, str]] = json.loads(route.calls[index].request.content)["messages"]
    return messages


# --- success and repair -------------------------------------------------------------------


async def test_good_answer_becomes_the_plan(chat_route: respx.Route) -> None:
    chat_route.return_value = answer(good_plan())
    async with running_app(make_settings()) as client:
        response = await client.post("/plan", json=GOAL)
    assert response.status_code == 200
    body = response.json()
    assert_valid_plan(body)
    assert body["metadata"]["source"] == "llm"
    assert body["metadata"]["attempts"] == 1
    assert body["metadata"]["model"] == "gpt-3.5-turbo"
    assert [s["action"] for s in body["plan"]] == [s["action"] for s in good_plan()["plan"]]
    assert body["parallel_stages"] == [[1], [2, 3], [4]]
    assert body["critical_path_duration"] == 20 + 60 + 30
    assert body["total_estimated_duration"] == 150
    # 900 prompt and 300 completion tokens at $0.50 and $1.50 per million.
    assert body["estimated_cost"] == {
        "llm_usd": pytest.approx(0.0009),
        "prompt_tokens": 900,
        "completion_tokens": 300,
    }
    assert response.headers["x-request-id"] == body["request_id"]
    uuid.UUID(body["request_id"])  # generated when the caller gave none


async def test_request_id_from_body_then_header(chat_route: respx.Route) -> None:
    chat_route.return_value = answer(good_plan())
    async with running_app(make_settings()) as client:
        from_body = await client.post(
            "/plan", json={**GOAL, "request_id": "body-id"}, headers={"X-Request-ID": "hdr"}
        )
        from_header = await client.post("/plan", json=GOAL, headers={"X-Request-ID": "hdr-2"})
    assert from_body.json()["request_id"] == "body-id"
    assert from_body.headers["x-request-id"] == "body-id"
    assert from_header.json()["request_id"] == "hdr-2"
    assert from_header.headers["x-request-id"] == "hdr-2"


# Every real answer on file, so one added later is held to the same promise.
REAL_ANSWERS = sorted(path.name for path in FIXTURES.glob("*.txt"))


@pytest.mark.parametrize("name", REAL_ANSWERS)
async def test_real_small_model_answers_are_kept_and_repaired_locally(
    chat_route: respx.Route, name: str
) -> None:
    chat_route.return_value = answer(fixture_text(name))
    async with running_app(make_settings()) as client:
        response = await client.post("/plan", json=GOAL)
    body = response.json()
    assert response.status_code == 200
    assert_valid_plan(body)
    # Recovered from the one answer: no second paid call.
    assert body["metadata"]["source"] == "llm"
    assert body["metadata"]["attempts"] == 1
    assert body["metadata"]["repairs"]


async def test_fenced_answer_records_the_fence(chat_route: respx.Route) -> None:
    chat_route.return_value = answer(
        fixture_text("qwen2.5-coder-1.5b_no-response-format_fenced.txt")
    )
    async with running_app(make_settings()) as client:
        body = (await client.post("/plan", json=GOAL)).json()
    assert any(r["code"] == "code_fence" for r in body["metadata"]["repairs"])
    assert body["plan"][1]["action"] == "Locate the authentication codebase"


async def test_unusable_answer_gets_a_repair_prompt(chat_route: respx.Route) -> None:
    chat_route.side_effect = [
        answer("I'm sorry, but I can't help with planning that."),
        answer(good_plan()),
    ]
    async with running_app(make_settings()) as client:
        body = (await client.post("/plan", json=GOAL)).json()
    assert_valid_plan(body)
    assert body["metadata"]["source"] == "llm"
    assert body["metadata"]["attempts"] == 2
    repair = messages_sent(chat_route, 1)
    assert repair[2] == {
        "role": "assistant",
        "content": "I'm sorry, but I can't help with planning that.",
    }
    assert "could not be used as a plan" in repair[3]["content"]
    assert body["confidence"] < 0.9  # lowered for the extra call


async def test_cycle_is_shown_to_the_model(chat_route: respx.Route) -> None:
    cyclic = good_plan()
    cyclic["plan"][0]["depends_on"] = [2]
    chat_route.side_effect = [answer(cyclic), answer(good_plan())]
    async with running_app(make_settings()) as client:
        body = (await client.post("/plan", json=GOAL)).json()
    assert body["metadata"]["attempts"] == 2
    assert "cycle" in messages_sent(chat_route, 1)[3]["content"]


# --- retries, errors and fallback ----------------------------------------------------------


async def test_rate_limit_then_success_waits_as_told(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.side_effect = [
        httpx.Response(429, headers={"retry-after-ms": "1500"}, json={"error": {}}),
        answer(good_plan()),
    ]
    async with running_app(make_settings(), fake_clock) as client:
        body = (await client.post("/plan", json=GOAL)).json()
        metrics = (await client.get("/metrics")).text
    assert body["metadata"]["source"] == "llm"
    assert body["metadata"]["attempts"] == 2
    assert fake_clock.sleeps == [1.5]
    assert sample(metrics, "planner_retries_total", reason="rate_limited") == 1


async def test_rate_limit_longer_than_the_deadline_falls_back_at_once(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = httpx.Response(429, headers={"retry-after": "60"}, json={})
    async with running_app(make_settings(), fake_clock) as client:
        body = (await client.post("/plan", json=GOAL)).json()
    assert body["metadata"]["source"] == "fallback"
    assert chat_route.call_count == 1
    assert fake_clock.sleeps == []


async def test_server_errors_then_fallback(chat_route: respx.Route, fake_clock: FakeClock) -> None:
    chat_route.return_value = httpx.Response(503, json={"error": {"message": "overloaded"}})
    async with running_app(make_settings(), fake_clock) as client:
        response = await client.post("/plan", json=GOAL)
        metrics = (await client.get("/metrics")).text
    body = response.json()
    assert response.status_code == 200
    assert_valid_plan(body)
    assert body["metadata"]["source"] == "fallback"
    assert body["metadata"]["attempts"] == 3 == chat_route.call_count
    assert len(fake_clock.sleeps) == 2  # backoff between the three calls
    assert fake_clock.sleeps[1] > fake_clock.sleeps[0] * 0.9
    assert body["confidence"] == 0.35
    assert any(w["code"] == "fallback_used" for w in body["metadata"]["warnings"])
    assert sample(metrics, "planner_fallbacks_total", reason="llm_unavailable") == 1
    assert (
        sample(metrics, "planner_llm_calls_total", model="gpt-3.5-turbo", outcome="server_error")
        == 3
    )


async def test_server_error_then_success(chat_route: respx.Route, fake_clock: FakeClock) -> None:
    chat_route.side_effect = [httpx.Response(500, json={}), answer(good_plan())]
    async with running_app(make_settings(), fake_clock) as client:
        body = (await client.post("/plan", json=GOAL)).json()
    assert body["metadata"]["source"] == "llm"
    assert body["metadata"]["attempts"] == 2


async def test_hanging_model_falls_back_within_the_deadline(chat_route: respx.Route) -> None:
    async def hang(request: httpx.Request) -> httpx.Response:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    chat_route.side_effect = hang
    settings = make_settings(planning={"timeout_seconds": 0.3})
    loop = asyncio.get_running_loop()
    async with running_app(settings) as client:
        started = loop.time()
        response = await client.post("/plan", json=GOAL)
        elapsed = loop.time() - started
    assert response.status_code == 200
    assert_valid_plan(response.json())
    assert response.json()["metadata"]["source"] == "fallback"
    assert elapsed < 0.3 + 0.5


async def test_bad_key_is_not_retried(chat_route: respx.Route, fake_clock: FakeClock) -> None:
    chat_route.return_value = httpx.Response(
        401, json={"error": {"message": f"Incorrect API key provided: {TEST_KEY}"}}
    )
    async with running_app(make_settings(), fake_clock) as client:
        response = await client.post("/plan", json=GOAL)
        metrics = (await client.get("/metrics")).text
    body = response.json()
    assert body["metadata"]["source"] == "fallback"
    assert chat_route.call_count == 1
    assert fake_clock.sleeps == []
    assert TEST_KEY not in response.text
    assert TEST_KEY not in metrics


async def test_next_model_after_unknown_model(chat_route: respx.Route) -> None:
    chat_route.side_effect = [
        httpx.Response(404, json={"error": {"message": "model does not exist"}}),
        answer(good_plan()),
    ]
    settings = make_settings(model={"name": "gone", "fallback_models": ["gpt-4o-mini"]})
    async with running_app(settings) as client:
        body = (await client.post("/plan", json=GOAL)).json()
    assert body["metadata"]["model"] == "gpt-4o-mini"
    assert body["metadata"]["attempts"] == 2
    assert json.loads(chat_route.calls[1].request.content)["model"] == "gpt-4o-mini"


async def test_unsupported_response_format_is_retried_without_it(chat_route: respx.Route) -> None:
    chat_route.side_effect = [
        httpx.Response(400, json={"error": {"message": "'response_format' is not supported"}}),
        answer(good_plan()),
    ]
    async with running_app(make_settings()) as client:
        body = (await client.post("/plan", json=GOAL)).json()
    assert body["metadata"]["source"] == "llm"
    assert body["metadata"]["attempts"] == 2
    assert "response_format" not in json.loads(chat_route.calls[1].request.content)


async def test_no_key_serves_the_rule_based_planner(chat_route: respx.Route) -> None:
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post("/plan", json=GOAL)
        health = (await client.get("/health")).json()
    body = response.json()
    assert_valid_plan(body)
    assert body["metadata"]["source"] == "fallback"
    assert body["metadata"]["attempts"] == 0
    # The answer says why the rules answered.
    [warning] = body["metadata"]["warnings"]
    assert warning["code"] == "fallback_used"
    assert warning["detail"].startswith("llm_disabled: no model is configured")
    assert "Constraint" in " ".join(body["plan"][-1]["acceptance_criteria"]) or any(
        "No schema change" in c for c in body["plan"][-1]["acceptance_criteria"]
    )
    assert health["llm"] == "disabled"
    assert chat_route.call_count == 0


@pytest.mark.parametrize(
    ("side_effect", "status", "code"),
    [
        (httpx.Response(503, json={}), 503, "llm_unavailable"),
        (httpx.Response(401, json={}), 503, "llm_unavailable"),
        (httpx.Response(200, json={"choices": []}), 502, "invalid_plan"),
    ],
)
async def test_without_fallback_failures_are_5xx(
    chat_route: respx.Route,
    fake_clock: FakeClock,
    side_effect: httpx.Response,
    status: int,
    code: str,
) -> None:
    chat_route.return_value = side_effect
    settings = make_settings(fallback={"enabled": False})
    async with running_app(settings, fake_clock) as client:
        response = await client.post("/plan", json=GOAL)
        capabilities = (await client.get("/capabilities")).json()
    error_shape(response, status, code)
    assert capabilities["success_rate"] == 0.0
    assert capabilities["model_success_rate"] == 0.0


async def test_without_fallback_invalid_plans_list_the_problems(chat_route: respx.Route) -> None:
    chat_route.return_value = answer({"plan": [{"action": "", "required_arm": "coder"}]})
    async with running_app(make_settings(fallback={"enabled": False})) as client:
        response = await client.post("/plan", json=GOAL)
    body = error_shape(response, 502, "invalid_plan")
    assert "gpt-3.5-turbo" in body["detail"]
    messages = [problem["message"] for problem in body["errors"]]
    assert sum("action is empty" in message for message in messages) == 1  # each named, once
    assert "action is empty" not in body["detail"]  # listed in errors alone


# --- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "where"),
    [
        ({}, ["body", "goal"]),
        ({"goal": ""}, ["body", "goal"]),
        ({"goal": "   \n "}, ["body", "goal"]),
        ({"goal": "x" * 8001}, ["body", "goal"]),
        ({"goal": 42}, ["body", "goal"]),
        ({"goal": "g", "constraints": ["c"] * 33}, ["body", "constraints"]),
        ({"goal": "g", "constraints": ["c" * 1001]}, ["body", "constraints"]),
        ({"goal": "g", "constraints": "not a list"}, ["body", "constraints"]),
        ({"goal": "g", "context": {"blob": "x" * 33_000}}, ["body", "context"]),
        ({"goal": "g", "context": []}, ["body", "context"]),
        ({"goal": "g", "request_id": "r" * 129}, ["body", "request_id"]),
        ({"goal": "g", "request_id": "a\r\nSet-Cookie: x"}, ["body", "request_id"]),
        ({"goal": "g", "goals": "typo"}, ["body", "goals"]),
        ([1, 2], ["body"]),
    ],
)
async def test_invalid_requests_are_422(payload: object, where: list[str]) -> None:
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post("/plan", json=payload)
    body = error_shape(response, 422, "invalid_request")
    assert any(error["loc"] == where for error in body["errors"]), body["errors"]
    assert all(set(error) == {"code", "message", "loc"} for error in body["errors"])


async def test_malformed_json_is_422() -> None:
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post(
            "/plan", content=b'{"goal": "x",', headers={"content-type": "application/json"}
        )
    error_shape(response, 422, "invalid_request")


async def test_body_over_64_kib_is_413() -> None:
    payload = json.dumps({"goal": "g", "context": {"x": "y" * 70_000}}).encode()
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post(
            "/plan", content=payload, headers={"content-type": "application/json"}
        )
        metrics = (await client.get("/metrics")).text
    error_shape(response, 413, "payload_too_large")
    assert sample(metrics, "planner_http_requests_total", status="413") == 1


async def test_chunked_body_over_the_limit_is_413() -> None:
    async def chunks() -> Any:
        for _ in range(80):
            yield b" " * 1024

    async with running_app(make_settings(llm=False)) as client:
        response = await client.post(
            "/plan", content=chunks(), headers={"content-type": "application/json"}
        )
    assert "content-length" not in response.request.headers
    error_shape(response, 413, "payload_too_large")


async def test_unknown_route_and_method_use_the_error_shape() -> None:
    async with running_app(make_settings(llm=False)) as client:
        missing = await client.get("/nope")
        wrong_method = await client.get("/plan")
    error_shape(missing, 404, "not_found")
    error_shape(wrong_method, 405, "method_not_allowed")


# --- probes, capabilities, metrics -----------------------------------------------------------


async def test_health_never_calls_the_llm(chat_route: respx.Route) -> None:
    async with running_app(make_settings()) as client:
        response = await client.get("/health")
    body = response.json()
    assert response.status_code == 200
    assert body["status"] == "healthy"
    assert body["llm"] == "configured"
    assert body["model"] == "gpt-3.5-turbo"
    assert body["version"] == "0.1.0"
    assert body["uptime_seconds"] >= 0
    assert "T" in body["timestamp"]
    assert chat_route.call_count == 0
    assert TEST_KEY not in response.text


async def test_health_names_no_model_when_none_is_configured() -> None:
    async with running_app(make_settings(llm=False)) as client:
        body = (await client.get("/health")).json()
    assert body["llm"] == "disabled"
    assert body["model"] is None


async def test_ready_follows_the_lifespan() -> None:
    from planner_arm.api.app import create_app

    app = create_app(make_settings(llm=False))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        before = await client.get("/ready")
        async with app.router.lifespan_context(app):
            during = await client.get("/ready")
        after = await client.get("/ready")
    error_shape(before, 503, "not_ready")
    assert during.status_code == 200
    assert during.json() == {"status": "ready"}
    error_shape(after, 503, "not_ready")


async def test_capabilities_are_measured_from_traffic(chat_route: respx.Route) -> None:
    chat_route.return_value = answer(good_plan())
    async with running_app(make_settings()) as client:
        before = (await client.get("/capabilities")).json()
        await client.post("/plan", json=GOAL)
        await client.post("/plan", json=GOAL)
        after = (await client.get("/capabilities")).json()
    assert before["measured"] is False
    assert before["success_rate"] == 0.92  # the seed's figure until there is traffic
    assert after["measured"] is True
    assert after["success_rate"] == 1.0
    assert (before["model_success_rate"], after["model_success_rate"]) == (None, 1.0)
    assert after["plans_by_source"] == {"llm": 1, "cache": 1}
    assert after["average_latency_ms"] != before["average_latency_ms"]
    assert after["arm_id"] == "planner"
    assert {a["id"] for a in after["arms"]} >= {"coder", "judge"}
    assert (after["min_steps"], after["max_steps"]) == (3, 7)
    assert after["models"] == ["gpt-3.5-turbo"]


async def test_metrics_after_traffic(chat_route: respx.Route) -> None:
    chat_route.return_value = answer(
        fixture_text("qwen2.5-coder-1.5b_no-response-format_fenced.txt")
    )
    async with running_app(make_settings()) as client:
        await client.post("/plan", json=GOAL)
        await client.post("/plan", json={"goal": ""})
        response = await client.get("/metrics")
    text = response.text
    assert response.headers["content-type"].startswith("text/plain")
    assert sample(text, "planner_plans_total", source="llm") == 1
    assert sample(text, "planner_http_requests_total", route="/plan", status="200") == 1
    assert sample(text, "planner_http_requests_total", route="/plan", status="422") == 1
    assert sample(text, "planner_llm_calls_total", model="gpt-3.5-turbo", outcome="ok") == 1
    assert sample(text, "planner_llm_tokens_total", model="gpt-3.5-turbo", type="prompt") == 900
    assert sample(text, "planner_llm_cost_usd_total", model="gpt-3.5-turbo") > 0
    assert sample(text, "planner_repairs_total", reason="code_fence") == 1
    assert sample(text, "planner_plan_steps_count") == 1
    assert sample(text, "gen_ai_client_token_usage_count", gen_ai_token_type="input") == 1
    assert sample(text, "gen_ai_client_operation_duration_seconds_count") == 1
    assert sample(text, "planner_build_info", version="0.1.0") == 1
    assert sample(text, "planner_http_request_duration_seconds_count", route="/plan") == 2


# --- truncation and logs ----------------------------------------------------------------------


async def test_truncated_answer_is_kept_but_says_so(chat_route: respx.Route) -> None:
    text = json.dumps(good_plan())
    cut = text[: text.index('"rationale"') - 1]  # cut off inside the object, after the steps
    chat_route.return_value = answer(cut, finish_reason="length")
    async with running_app(make_settings()) as client:
        body = (await client.post("/plan", json=GOAL)).json()
    assert_valid_plan(body)
    assert body["metadata"]["attempts"] == 1
    assert any(r["code"] == "truncated_output" for r in body["metadata"]["repairs"])


async def test_logs_one_line_per_plan_and_never_the_key(
    chat_route: respx.Route, fake_clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    chat_route.side_effect = [
        httpx.Response(401, json={"error": {"message": f"Incorrect API key {TEST_KEY}"}}),
    ]
    long_goal = "Refactor the billing module " + "very " * 60 + "carefully"
    settings = make_settings(server={"log_level": "DEBUG", "log_format": "json"})
    async with running_app(settings, fake_clock) as client:
        await client.post("/plan", json={"goal": long_goal}, headers={"X-Request-ID": "log-1"})
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line]
    assert TEST_KEY not in json.dumps(lines)
    plans = [line for line in lines if line["event"] == "plan_created"]
    assert len(plans) == 1
    assert plans[0]["request_id"] == "log-1"
    assert plans[0]["goal"] == long_goal[:100]
    assert plans[0]["source"] == "fallback"
    assert plans[0]["fallback_reason"] == "llm_unavailable"
    assert plans[0]["attempts"] == 1
    assert plans[0]["steps"] >= 3
    assert "duration_ms" in plans[0]
    failed = [line for line in lines if line["event"] == "llm_call_failed"]
    assert failed
    assert failed[0]["error"] == "auth_failed"
    assert failed[0]["level"] == "warning"  # a model that fails is an operator's concern


async def test_raw_answer_is_logged_only_at_debug(
    chat_route: respx.Route, capsys: pytest.CaptureFixture[str]
) -> None:
    chat_route.return_value = answer(good_plan())
    for level, expected in (("INFO", False), ("DEBUG", True)):
        settings = make_settings(server={"log_level": level, "log_format": "json"})
        async with running_app(settings) as client:
            await client.post("/plan", json=GOAL)
        logged = capsys.readouterr().err
        assert ("token expiry check" in logged) is expected, level


async def test_health_reports_open_circuits(
    chat_route: respx.Route, fake_clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    chat_route.return_value = httpx.Response(503, json={})
    settings = make_settings(circuit={"consecutive_failures": 3}, server={"log_format": "json"})
    async with running_app(settings, fake_clock) as client:
        before = (await client.get("/health")).json()
        await client.post("/plan", json=GOAL)
        after = (await client.get("/health")).json()
        capabilities = (await client.get("/capabilities")).json()
        metrics = (await client.get("/metrics")).text
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line]
    opened = [line for line in lines if line["event"] == "circuit_opened"]
    assert [(line["model"], line["level"]) for line in opened] == [("gpt-3.5-turbo", "warning")]
    assert before["llm"] == "configured"
    assert before["circuits"] == {"gpt-3.5-turbo": "closed"}
    assert after["llm"] == "degraded"
    assert after["circuits"] == {"gpt-3.5-turbo": "open"}
    # /capabilities reads the same state, and counts the outage against the model.
    assert capabilities["llm"] == "degraded"
    assert capabilities["success_rate"] == 1.0  # the caller got a rule-based plan
    assert capabilities["model_success_rate"] == 0.0
    assert sample(metrics, "planner_llm_circuit_state", model="gpt-3.5-turbo") == 2
    assert sample(metrics, "planner_llm_circuit_opened_total", model="gpt-3.5-turbo") == 1
