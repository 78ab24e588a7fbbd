"""Error answers: one shape whoever writes them, 415 for a body not sent as JSON, the same 422
for a bad request id in the header as in the body, Retry-After on 503 and 504, and what a
request meets while the service drains."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
import respx

from support.app import FakeClock, answer, good_plan, make_settings, running_app, with_lifespan
from support.invariants import assert_error_body, assert_valid_plan

GOAL = {"goal": "Fix authentication bug and add tests"}


async def test_every_layer_writes_the_same_error_shape() -> None:
    """The 413 (written by the body-limit middleware before routing) and the 422 (written by
    the validation handler) have the same keys and a string detail."""
    big = json.dumps({"goal": "g", "context": {"x": "y" * 70_000}}).encode()
    async with running_app(make_settings(llm=False)) as client:
        too_large = await client.post(
            "/plan", content=big, headers={"content-type": "application/json"}
        )
        invalid = await client.post("/plan", json={"goal": "", "goals": "typo"})
    large_body = assert_error_body(too_large, 413, "payload_too_large")
    invalid_body = assert_error_body(invalid, 422, "invalid_request")
    assert "65536 bytes" in large_body["detail"]
    assert "errors" not in large_body
    assert invalid_body["detail"].startswith("The request is not valid: body.goal")
    assert "1 more problem" in invalid_body["detail"]
    assert {tuple(e["loc"]) for e in invalid_body["errors"]} == {
        ("body", "goal"),
        ("body", "goals"),
    }


@pytest.mark.parametrize(
    ("content_type", "said"),
    [
        ("text/plain", "sent as text/plain"),
        ("application/x-www-form-urlencoded", "sent as application/x-www-form-urlencoded"),
        (None, "untyped"),
    ],
)
async def test_a_body_not_sent_as_json_is_415(content_type: str | None, said: str) -> None:
    headers = {"content-type": content_type} if content_type else {}
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post("/plan", content=json.dumps(GOAL), headers=headers)
    assert response.request.headers.get("content-type") == content_type
    body = assert_error_body(response, 415, "unsupported_media_type")
    assert "content-type: application/json" in body["detail"]
    assert said in body["detail"]


@pytest.mark.parametrize(
    "content_type", ["application/json; charset=utf-8", "application/vnd.plan+json"]
)
async def test_json_with_parameters_or_a_json_suffix_is_accepted(content_type: str) -> None:
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post(
            "/plan", content=json.dumps(GOAL), headers={"content-type": content_type}
        )
    assert response.status_code == 200
    assert_valid_plan(response.json())


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    "path", ["/plan", "/replan", "/plan/validate", "/plan/expand", "/plan/specialize", "/mcp"]
)
async def test_a_body_nested_a_thousand_deep_is_a_422_on_every_route(path: str) -> None:
    # 2 KB: far under the size limit; a parser that recursed into it would fail with a trace.
    body = '{"goal": "g", "plan_id": "p", "step": 1, "context": {"x": ' + nested(1000) + "}}"
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post(path, content=body, headers=headers)
    answer = assert_error_body(response, 422, "invalid_request")
    assert answer["errors"] == [
        {"code": "json_too_deep", "loc": ["body"],
         "message": "the JSON body nests arrays and objects more than 64 deep"}
    ]  # fmt: skip


async def test_the_nesting_limit_counts_only_arrays_and_objects_outside_strings() -> None:
    settings = make_settings(llm=False, server={"max_json_depth": 4})
    brackets_in_text = '[[[[[[[[ {{{{ ]]]] \\" ]]]]]]'
    deep = {"a": {"b": {"c": {"d": 1}}}}  # the body, context, a, b, c: five
    async with running_app(settings) as client:
        within = await client.post(
            "/plan", json={"goal": brackets_in_text, "context": {"a": {"b": [1]}}}
        )
        over = await client.post("/plan", json={"goal": brackets_in_text, "context": deep})
        as_text = await client.post(
            "/plan", content=nested(10), headers={"content-type": "text/plain"}
        )
    assert within.status_code == 200, within.text
    assert within.json()["plan"]
    assert assert_error_body(over, 422, "invalid_request")["errors"][0]["code"] == "json_too_deep"
    # A body that is not JSON is refused for that (415), whatever it holds.
    assert_error_body(as_text, 415, "unsupported_media_type")


@pytest.mark.parametrize("bad_id", ["r" * 129, "tab\there"])
async def test_a_bad_request_id_header_gets_the_answer_the_body_gets(bad_id: str) -> None:
    async with running_app(make_settings(llm=False)) as client:
        in_header = await client.post("/plan", json=GOAL, headers={"X-Request-ID": bad_id})
        in_body = await client.post("/plan", json={**GOAL, "request_id": bad_id})
        on_a_probe = await client.get("/health", headers={"X-Request-ID": bad_id})
    header_body = assert_error_body(in_header, 422, "invalid_request")
    body_body = assert_error_body(in_body, 422, "invalid_request")
    assert_error_body(on_a_probe, 422, "invalid_request")

    def problems(body: dict[str, Any]) -> list[tuple[str, str]]:
        return [(e["code"], e["message"]) for e in body["errors"]]

    assert problems(header_body) == problems(body_body)
    assert header_body["errors"][0]["loc"] == ["header", "x-request-id"]
    assert body_body["errors"][0]["loc"] == ["body", "request_id"]
    assert in_header.headers["x-request-id"] != bad_id  # a fresh id, not the refused one


async def test_retry_after_on_deadline_and_on_an_open_circuit(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    chat_route.return_value = httpx.Response(503, json={})
    settings = make_settings(
        fallback={"enabled": False},
        circuit={"consecutive_failures": 1, "cooldown_seconds": 42.5},
        retry={"max_llm_calls": 1},
    )
    async with running_app(settings, fake_clock) as client:
        unavailable = await client.post("/plan", json=GOAL)
    assert_error_body(unavailable, 503, "llm_unavailable")
    assert unavailable.headers["retry-after"] == "43"  # the circuit's cooldown, whole seconds


async def test_retry_after_on_a_key_still_in_progress(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    arrived, release = asyncio.Event(), asyncio.Event()

    async def held(request: httpx.Request) -> httpx.Response:
        arrived.set()
        await release.wait()
        return answer(good_plan())

    chat_route.side_effect = held
    keyed = {"Idempotency-Key": "k-1"}
    async with running_app(make_settings(), fake_clock) as client:
        first = asyncio.create_task(client.post("/plan", json=GOAL, headers=keyed))
        await arrived.wait()
        second = asyncio.create_task(client.post("/plan", json=GOAL, headers=keyed))
        for _ in range(100):  # time passes for the waiting one, until its deadline (10 s)
            fake_clock.time += 1
            done, _ = await asyncio.wait({second}, timeout=0.1)
            if done:
                break
        waited = await second
        release.set()
        answered = await first
    assert answered.status_code == 200
    assert_error_body(waited, 409, "idempotency_in_progress")
    assert int(waited.headers["retry-after"]) >= 1


async def test_retry_after_on_504(chat_route: respx.Route) -> None:
    async def hang(request: httpx.Request) -> httpx.Response:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    chat_route.side_effect = hang
    settings = make_settings(planning={"timeout_seconds": 0.2}, fallback={"enabled": False})
    async with running_app(settings) as client:
        response = await client.post("/plan", json=GOAL)
    assert_error_body(response, 504, "deadline_exceeded")
    assert int(response.headers["retry-after"]) >= 1


async def test_not_ready_says_when_to_retry() -> None:
    from planner_arm.api.app import create_app

    app = create_app(make_settings(llm=False))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        ready = await client.get("/ready")
        plan = await client.post("/plan", json=GOAL)
    assert_error_body(ready, 503, "not_ready")
    assert_error_body(plan, 503, "not_ready")
    assert ready.headers["retry-after"] == plan.headers["retry-after"] == "1"


async def test_draining_finishes_accepted_plans_and_turns_new_ones_away(
    chat_route: respx.Route,
) -> None:
    from planner_arm.api.app import create_app

    arrived, release = asyncio.Event(), asyncio.Event()

    async def held(request: httpx.Request) -> httpx.Response:
        arrived.set()
        await release.wait()
        return answer(good_plan())

    chat_route.side_effect = held
    app = create_app(make_settings(), http_client=httpx.AsyncClient())
    async with with_lifespan(app) as served:
        transport = httpx.ASGITransport(app=served)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            accepted = asyncio.create_task(client.post("/plan", json=GOAL))
            await arrived.wait()
            app.state.readiness.begin_shutdown()  # what SIGTERM does
            late = await client.post("/plan", json={"goal": "Write the release notes"})
            ready = await client.get("/ready")
            release.set()
            first = await accepted
    assert first.status_code == 200
    assert first.json()["metadata"]["source"] == "llm"
    assert_error_body(late, 503, "shutting_down")
    assert late.headers["retry-after"] == "1"
    assert_error_body(ready, 503, "not_ready")
    assert chat_route.call_count == 1


@pytest.mark.parametrize(
    ("path", "content", "said", "example"),
    [
        (
            "/plan",
            b'{"goal": "x",}',
            "Expecting property name enclosed in double quotes at line 1 column 14",
            '{"goal": "Fix authentication bug and add tests"}',
        ),
        (
            "/plan",
            b'{"goal":\n "Fix the login bug"\n "constraints": []}',
            "Expecting ',' delimiter at line 3 column 2",
            '{"goal": "Fix authentication bug and add tests"}',
        ),
        ("/plan/validate", b"plan=[]", "Expecting value at line 1 column 1", '{"plan": '),
    ],
)
async def test_a_body_that_is_not_json_says_where_and_what_to_send(
    path: str, content: bytes, said: str, example: str
) -> None:
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post(
            path, content=content, headers={"content-type": "application/json"}
        )
    body = assert_error_body(response, 422, "invalid_request")
    assert body["detail"].startswith(f"The body is not valid JSON: {said}; send a JSON object like")
    assert example in body["detail"]
    # The example is JSON a caller can send as it is.
    shown = body["detail"].split("send a JSON object like ", 1)[1].removesuffix(".")
    assert isinstance(json.loads(shown), dict)
    assert body["errors"] == [
        {
            "code": "json_invalid",
            "message": body["detail"][0].lower() + body["detail"][1:-1],
            "loc": ["body"],
        }
    ]
