"""The LLM client against the real openai SDK, with the HTTP endpoint mocked by respx."""

from __future__ import annotations

import asyncio
import json
from types import ModuleType

import httpx
import pytest
import respx

from planner_arm.errors import (
    LLMError,
    LLMRateLimited,
    LLMRejected,
    LLMTransientError,
    LLMUnsupportedFormat,
)
from planner_arm.llm.client import AnswerSchema, LLMClient, SdkLoader, redact
from planner_arm.strategies.answer_schemas import plan_json_schema
from support.app import TEST_KEY, answer, completion_body, make_settings

MESSAGES = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]


@pytest.fixture
async def client() -> LLMClient:
    llm = LLMClient(make_settings(), httpx.AsyncClient())
    yield llm
    await llm.aclose()


def sent_json(route: respx.Route, index: int = -1) -> dict[str, object]:
    return json.loads(route.calls[index].request.content)


async def test_completion_carries_content_usage_and_finish_reason(
    client: LLMClient, chat_route: respx.Route
) -> None:
    chat_route.return_value = answer(
        "{}", finish_reason="length", prompt_tokens=11, completion_tokens=7
    )
    result = await client.complete("gpt-3.5-turbo", MESSAGES, timeout=5)
    assert result.content == "{}"
    assert result.truncated
    assert (result.prompt_tokens, result.completion_tokens) == (11, 7)
    request = chat_route.calls.last.request
    assert request.headers["authorization"] == f"Bearer {TEST_KEY}"
    body = sent_json(chat_route)
    assert body["response_format"] == {"type": "json_object"}
    assert body["model"] == "gpt-3.5-turbo"
    assert body["temperature"] == 0.3
    assert body["max_tokens"] == 2000


async def test_sdk_does_not_retry_on_its_own(client: LLMClient, chat_route: respx.Route) -> None:
    chat_route.return_value = httpx.Response(500, json={"error": {"message": "boom"}})
    with pytest.raises(LLMTransientError):
        await client.complete("gpt-3.5-turbo", MESSAGES, timeout=5)
    assert chat_route.call_count == 1


@pytest.mark.parametrize(
    ("status", "message", "error_type", "code"),
    [
        (401, "Incorrect API key provided", LLMRejected, "auth_failed"),
        (403, "Forbidden", LLMRejected, "forbidden"),
        (404, "The model `nope` does not exist", LLMRejected, "model_not_found"),
        (
            400,
            "This model's maximum context length is 4097 tokens",
            LLMRejected,
            "context_length_exceeded",
        ),
        (400, "something else", LLMRejected, "bad_request"),
        (500, "oops", LLMTransientError, "server_error"),
        (502, "bad gateway", LLMTransientError, "server_error"),
        (503, "overloaded", LLMTransientError, "server_error"),
        (429, "slow down", LLMRateLimited, "llm_rate_limited"),
    ],
)
async def test_status_errors_map_to_our_classes(
    client: LLMClient,
    chat_route: respx.Route,
    status: int,
    message: str,
    error_type: type[LLMError],
    code: str,
) -> None:
    chat_route.return_value = httpx.Response(status, json={"error": {"message": message}})
    with pytest.raises(error_type) as caught:
        await client.complete("gpt-3.5-turbo", MESSAGES, timeout=5)
    assert caught.value.code == code
    assert caught.value.status == status


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after": "3"}, 3.0),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({}, None),
    ],
)
async def test_retry_after_headers(
    client: LLMClient, chat_route: respx.Route, headers: dict[str, str], expected: float | None
) -> None:
    chat_route.return_value = httpx.Response(429, headers=headers, json={"error": {}})
    with pytest.raises(LLMRateLimited) as caught:
        await client.complete("gpt-3.5-turbo", MESSAGES, timeout=5)
    assert caught.value.retry_after == expected


async def test_connection_error_is_transient(client: LLMClient, chat_route: respx.Route) -> None:
    chat_route.side_effect = httpx.ConnectError("refused")
    with pytest.raises(LLMTransientError) as caught:
        await client.complete("gpt-3.5-turbo", MESSAGES, timeout=5)
    assert caught.value.code == "connection"


async def test_a_hanging_server_is_cut_off_at_the_timeout(
    client: LLMClient, chat_route: respx.Route
) -> None:
    async def hang(request: httpx.Request) -> httpx.Response:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    chat_route.side_effect = hang
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(LLMTransientError) as caught:
        await client.complete("gpt-3.5-turbo", MESSAGES, timeout=0.2)
    assert caught.value.code == "timeout"
    assert loop.time() - started < 1.0


async def test_unsupported_response_format_is_remembered(
    client: LLMClient, chat_route: respx.Route
) -> None:
    chat_route.side_effect = [
        httpx.Response(400, json={"error": {"message": "response_format is not supported"}}),
        answer("{}"),
        answer("{}"),
    ]
    with pytest.raises(LLMUnsupportedFormat):
        await client.complete("small-model", MESSAGES, timeout=5)
    await client.complete("small-model", MESSAGES, timeout=5)
    await client.complete("small-model", MESSAGES, timeout=5)
    assert "response_format" in sent_json(chat_route, 0)
    assert "response_format" not in sent_json(chat_route, 1)
    assert "response_format" not in sent_json(chat_route, 2)


async def test_json_schema_format_sends_the_plan_schema(chat_route: respx.Route) -> None:
    settings = make_settings(model={"response_format": "json_schema"})
    llm = LLMClient(settings, httpx.AsyncClient())
    chat_route.return_value = answer("{}")
    schema = AnswerSchema("plan", plan_json_schema(settings.arm_ids))
    await llm.complete("gpt-4o-mini", MESSAGES, timeout=5, answer_schema=schema)
    await llm.aclose()
    fmt = sent_json(chat_route)["response_format"]
    assert fmt["type"] == "json_schema"
    arms = fmt["json_schema"]["schema"]["properties"]["plan"]["items"]["properties"]
    assert "judge" in arms["required_arm"]["enum"]


async def test_no_format_when_configured_off(chat_route: respx.Route) -> None:
    llm = LLMClient(make_settings(model={"response_format": "none"}), httpx.AsyncClient())
    chat_route.return_value = answer("{}")
    await llm.complete("m", MESSAGES, timeout=5)
    await llm.aclose()
    assert "response_format" not in sent_json(chat_route)


async def test_missing_usage_is_reported(client: LLMClient, chat_route: respx.Route) -> None:
    body = completion_body("{}")
    del body["usage"]
    chat_route.return_value = httpx.Response(200, json=body)
    result = await client.complete("m", MESSAGES, timeout=5)
    assert not result.usage_reported
    assert result.prompt_tokens == 0


async def test_provider_error_text_never_carries_the_key(
    client: LLMClient, chat_route: respx.Route
) -> None:
    message = f"Incorrect API key provided: {TEST_KEY[:3]}...{TEST_KEY[-8:]} or {TEST_KEY}"
    chat_route.return_value = httpx.Response(401, json={"error": {"message": message}})
    with pytest.raises(LLMRejected) as caught:
        await client.complete("m", MESSAGES, timeout=5)
    assert TEST_KEY not in str(caught.value)
    assert TEST_KEY[-8:] not in str(caught.value)


def test_redact_removes_key_shaped_text() -> None:
    assert "sk-proj-abcdef123456" not in redact("bad key sk-proj-abcdef123456 given", None)


def test_pool_is_sized_from_config() -> None:
    from planner_arm.llm.client import build_http_client

    settings = make_settings(
        connection={
            "max_connections": 7,
            "max_keepalive_connections": 3,
            "keepalive_expiry_seconds": 12,
            "connect_timeout_seconds": 2,
        },
    )
    client = build_http_client(settings)
    pool = client._transport._pool  # the httpcore pool behind the client
    assert pool._max_connections == 7
    assert pool._max_keepalive_connections == 3
    assert pool._keepalive_expiry == 12
    assert client.timeout.connect == 2


async def test_one_pooled_connection_serves_many_calls(chat_route: respx.Route) -> None:
    http = httpx.AsyncClient()
    llm = LLMClient(make_settings(), http)
    chat_route.return_value = answer("{}")
    for _ in range(3):
        await llm.complete("m", MESSAGES, timeout=5)
    assert llm._client._client is http  # the SDK uses our client, not one of its own
    await llm.aclose()


def test_a_model_call_imports_none_of_the_sdks_other_resources() -> None:
    """`client.chat` would import every resource module of the SDK (about a second of start-up
    on a small machine); the service's calls, plain and streamed, import none of them."""
    import subprocess
    import sys

    script = """
import asyncio, sys
import httpx, respx
sys.path.insert(0, "tests")
from support.app import answer, make_settings
from planner_arm.llm.client import LLMClient
from support.sse import model_sse

class Sink:
    def begin(self, model): pass
    def text(self, delta): pass

async def main():
    with respx.mock(assert_all_called=False) as mock:
        streamed = httpx.Response(
            200, content=model_sse(["{", "}"]), headers={"content-type": "text/event-stream"}
        )
        mock.post(url__regex=r".*/chat/completions").mock(side_effect=[answer("{}"), streamed])
        llm = LLMClient(make_settings(), httpx.AsyncClient())
        plain = await llm.complete("gpt-3.5-turbo", [{"role": "user", "content": "u"}], timeout=5)
        streamed = await llm.complete(
            "gpt-3.5-turbo", [{"role": "user", "content": "u"}], timeout=5, sink=Sink()
        )
        await llm.aclose()
    print(plain.content, streamed.content, "openai.resources" in sys.modules)

asyncio.run(main())
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["{}", "{}", "False"]


def test_building_the_client_imports_no_sdk() -> None:
    """The service is ready before the SDK is imported: building the client (as the lifespan
    does before ready) imports none of it; the first call does."""
    import subprocess
    import sys

    script = """
import asyncio, sys
import httpx, respx
sys.path.insert(0, "tests")
from support.app import answer, make_settings
from planner_arm.llm.client import LLMClient

async def main():
    llm = LLMClient(make_settings(), httpx.AsyncClient())
    print("openai" in sys.modules)
    with respx.mock(assert_all_called=False) as mock:
        mock.post(url__regex=r".*/chat/completions").mock(return_value=answer("{}"))
        done = await llm.complete("gpt-3.5-turbo", [{"role": "user", "content": "u"}], timeout=5)
    await llm.aclose()
    print(done.content, "openai" in sys.modules)

asyncio.run(main())
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "{}", "True"]


async def test_a_call_waits_for_the_sdk_no_longer_than_its_timeout(
    chat_route: respx.Route,
) -> None:
    class Stuck(SdkLoader):
        async def get(self) -> ModuleType:
            await asyncio.Event().wait()  # an import that never ends
            raise AssertionError("unreachable")

    llm = LLMClient(make_settings(), httpx.AsyncClient())
    llm.sdk = Stuck()
    with pytest.raises(LLMTransientError) as caught:
        await llm.complete("m", MESSAGES, timeout=0.05)
    assert caught.value.code == "timeout"
    assert "the SDK was still loading" in caught.value.detail
    assert not chat_route.called
    await llm.aclose()


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (b"<html>Bad gateway</html>", "the body"),
        (b'{"choices": "none today"}', "choices"),
        (b'{"choices": [{"message": {"content": ["a", "list"]}}]}', "choices.0.message.content"),
    ],
    ids=["not-json", "no-choices", "content-not-text"],
)
async def test_a_200_that_is_no_chat_completion_is_a_transient_bad_response(
    client: LLMClient, chat_route: respx.Route, body: bytes, where: str
) -> None:
    chat_route.return_value = httpx.Response(
        200, content=body, headers={"content-type": "application/json"}
    )
    with pytest.raises(LLMTransientError) as caught:
        await client.complete("m", MESSAGES, timeout=5)
    assert caught.value.code == "bad_response"
    assert caught.value.detail.startswith(f"unusable response: {where}: ")


async def test_fields_the_planner_does_not_read_are_ignored(
    client: LLMClient, chat_route: respx.Route
) -> None:
    body = completion_body("{}", model="gpt-x-2026")
    body["system_fingerprint"] = "fp_1"
    body["choices"][0]["logprobs"] = {"content": [{"token": "{", "logprob": -0.1}]}
    body["service_tier"] = "default"
    chat_route.return_value = httpx.Response(200, json=body)
    done = await client.complete("m", MESSAGES, timeout=5)
    assert (done.content, done.finish_reason, done.response_model) == ("{}", "stop", "gpt-x-2026")
    assert (done.prompt_tokens, done.completion_tokens, done.usage_reported) == (900, 300, True)
