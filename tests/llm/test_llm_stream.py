"""The streaming model call against the real openai SDK, the SSE body mocked with respx."""

from __future__ import annotations

import json

import httpx
import pytest
import respx

from planner_arm.errors import LLMTransientError
from planner_arm.llm.client import LLMClient
from support.app import answer, make_settings
from support.sse import model_sse as sse

MESSAGES = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def begin(self, model: str) -> None:
        self.seen.append(("begin", model))

    def text(self, delta: str) -> None:
        self.seen.append(("text", delta))


def streamed(body: bytes) -> httpx.Response:
    return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})


@pytest.fixture
async def client() -> LLMClient:
    llm = LLMClient(make_settings(), httpx.AsyncClient())
    yield llm
    await llm.aclose()


async def test_the_text_reaches_the_sink_piece_by_piece_with_the_usage(
    client: LLMClient, chat_route: respx.Route
) -> None:
    chat_route.return_value = streamed(sse(['{"pl', 'an": ', "[]}"]))
    sink = Recorder()
    result = await client.complete("m", MESSAGES, timeout=5, sink=sink)
    assert sink.seen == [("begin", "m"), ("text", '{"pl'), ("text", 'an": '), ("text", "[]}")]
    assert result.content == '{"plan": []}'
    assert result.finish_reason == "stop"
    assert (result.prompt_tokens, result.completion_tokens) == (12, 5)
    assert result.usage_reported
    sent = json.loads(chat_route.calls.last.request.content)
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}


async def test_a_stream_without_usage_says_so(client: LLMClient, chat_route: respx.Route) -> None:
    chat_route.return_value = streamed(sse(["{}"], usage=False))
    result = await client.complete("m", MESSAGES, timeout=5, sink=Recorder())
    assert result.content == "{}"
    assert not result.usage_reported


async def test_a_stream_that_ends_before_the_answer_is_a_transient_error(
    client: LLMClient, chat_route: respx.Route
) -> None:
    chat_route.return_value = streamed(sse(['{"plan": [{"act'], finish=None))
    with pytest.raises(LLMTransientError) as caught:
        await client.complete("m", MESSAGES, timeout=5, sink=Recorder())
    assert caught.value.code == "stream_broken"


async def test_a_server_that_refuses_streaming_is_asked_without_it_and_remembered(
    client: LLMClient, chat_route: respx.Route
) -> None:
    refusal = httpx.Response(400, json={"error": {"message": "stream is not supported"}})
    chat_route.side_effect = [refusal, answer('{"plan": []}'), answer("{}")]
    sink = Recorder()
    result = await client.complete("m", MESSAGES, timeout=5, sink=sink)
    assert result.content == '{"plan": []}'
    assert result.usage_reported
    assert sink.seen[-1] == ("text", '{"plan": []}')  # the whole text at once
    await client.complete("m", MESSAGES, timeout=5, sink=Recorder())
    bodies = [json.loads(call.request.content) for call in chat_route.calls]
    assert [body.get("stream", False) for body in bodies] == [True, False, False]


async def test_without_a_sink_nothing_streams(client: LLMClient, chat_route: respx.Route) -> None:
    chat_route.return_value = answer("{}")
    await client.complete("m", MESSAGES, timeout=5)
    assert "stream" not in json.loads(chat_route.calls.last.request.content)
