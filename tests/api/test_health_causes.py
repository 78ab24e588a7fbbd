"""What /health and the answers say of a model that fails: the last failure's cause, kept
once the circuit opens, and carried by the fallback's warning behind `circuit_open`."""

from __future__ import annotations

import json
from datetime import datetime

import httpx
import pytest
import respx

from support.app import FakeClock, answer, good_plan, make_settings, running_app

GOAL = {"goal": "Fix authentication bug and add tests"}
REFUSED = "[Errno 111] Connection refused"


async def test_health_keeps_the_cause_of_the_last_model_failure(
    chat_route: respx.Route, fake_clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    chat_route.side_effect = httpx.ConnectError(REFUSED)
    settings = make_settings(
        circuit={"consecutive_failures": 2},
        retry={"max_llm_calls": 1},
        server={"log_format": "json"},
    )
    async with running_app(settings, fake_clock) as client:
        before = (await client.get("/health")).json()
        first = (await client.post("/plan", json=GOAL)).json()
        failing = (await client.get("/health")).json()
        await client.post("/plan", json=GOAL)  # the second failure opens the circuit
        skipped = (await client.post("/plan", json=GOAL)).json()
        opened = (await client.get("/health")).json()
    assert before["llm_last_error"] is None
    # One failure: the circuit is still closed, but the cause is there to read.
    assert failing["llm"] == "configured"
    cause = failing["llm_last_error"]
    assert (cause["model"], cause["code"]) == ("gpt-3.5-turbo", "connection")
    assert REFUSED in cause["detail"]
    assert datetime.fromisoformat(cause["at"]).tzinfo is not None
    assert first["metadata"]["warnings"][0]["detail"].startswith("llm_unavailable: gpt-3.5-turbo: ")
    # Once the circuit is open, the cause is not lost: /health and the answer both say it.
    assert opened["llm"] == "degraded"
    assert opened["llm_last_error"]["code"] == "connection"
    assert skipped["metadata"]["attempts"] == 0
    [fallback] = [n for n in skipped["metadata"]["warnings"] if n["code"] == "fallback_used"]
    assert fallback["detail"].startswith("circuit_open: gpt-3.5-turbo: connection: ")
    assert REFUSED in fallback["detail"]
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line]
    [line] = [line for line in lines if line["event"] == "circuit_opened"]
    assert (line["model"], line["error"]) == ("gpt-3.5-turbo", "connection")
    assert REFUSED in line["detail"]


async def test_the_last_failure_stays_after_the_model_recovers(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.side_effect = [httpx.Response(503, json={}), answer(good_plan())]
    async with running_app(make_settings(retry={"max_llm_calls": 2}), fake_clock) as client:
        planned = (await client.post("/plan", json=GOAL)).json()
        health = (await client.get("/health")).json()
    assert planned["metadata"]["source"] == "llm"
    assert health["llm"] == "configured"
    assert health["llm_last_error"]["code"] == "server_error"


async def test_a_service_without_a_model_has_no_last_error() -> None:
    async with running_app(make_settings(llm=False)) as client:
        health = (await client.get("/health")).json()
    assert health["llm"] == "disabled"
    assert health["llm_last_error"] is None


async def test_a_request_the_model_refused_is_not_a_model_failure(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    too_long = {"error": {"message": "too long", "code": "context_length_exceeded"}}
    chat_route.return_value = httpx.Response(400, json=too_long)
    async with running_app(make_settings(retry={"max_llm_calls": 1}), fake_clock) as client:
        planned = (await client.post("/plan", json=GOAL)).json()
        health = (await client.get("/health")).json()
    assert planned["metadata"]["source"] == "fallback"
    assert health["llm_last_error"] is None
