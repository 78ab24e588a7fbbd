"""The calls that go through the openai SDK, and the only module that imports it.

Importing the SDK takes about half a second on a small machine, and the rule-based answer
needs none of it, so nothing on the way to readiness imports this module: the model client
(`llm/client.py`) has it imported in a worker thread once the service is ready, and a model
call made before that waits for the same import.

The one endpoint called, POST /chat/completions, goes through the SDK's documented
`AsyncOpenAI.post` rather than `client.chat.completions.create`: the same request building,
auth, error mapping and response parsing, without importing every resource module of the SDK
(about a second on a small machine) on the first touch of `client.chat`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from pydantic import BaseModel, ValidationError

from planner_arm.errors import LLMTransientError

CHAT_COMPLETIONS_PATH = "/chat/completions"


def new_client(api_key: str, base_url: str | None, http_client: httpx.AsyncClient) -> Any:
    """The SDK's client over the process's connection pool, its own retries off (`max_retries=0`):
    the planner's retry policy is the only retry loop."""
    return openai.AsyncOpenAI(
        api_key=api_key, base_url=base_url, max_retries=0, http_client=http_client
    )


class _Message(BaseModel):
    content: str | None = None
    refusal: str | None = None


class _Choice(BaseModel):
    message: _Message = _Message()
    finish_reason: str | None = None


class _Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ChatAnswer(BaseModel):
    """Of a chat completion, what the planner reads: the first choice's text or refusal, how
    it ended, the tokens and the model that answered. Anything else the server sends is
    ignored, unread."""

    model: str | None = None
    choices: list[_Choice] = []
    usage: _Usage | None = None


async def create_completion(
    client: openai.AsyncOpenAI,
    options: dict[str, Any],
    *,
    timeout: float,  # noqa: ASYNC109 - the SDK's own timeout for the request
) -> ChatAnswer:
    """One chat completion: `options` is the request body (model, messages, ...). The SDK
    builds, sends and checks the call; its body is read into `ChatAnswer` in one pass of
    pydantic's JSON parser rather than into the SDK's own objects."""
    raw = await client.post(
        CHAT_COMPLETIONS_PATH,
        body=options,
        options={"timeout": timeout, "security": {"bearer_auth": True}},
        cast_to=httpx.Response,
    )
    try:
        return ChatAnswer.model_validate_json(raw.content)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the body"
        detail = f"unusable response: {where}: {first['msg']}"
        raise LLMTransientError(detail, code="bad_response") from error


async def stream_completion(
    client: openai.AsyncOpenAI,
    options: dict[str, Any],
    *,
    timeout: float,  # noqa: ASYNC109 - the SDK's own timeout for the request
) -> openai.AsyncStream[ChatCompletionChunk]:
    """The same call streamed: the body gets `stream: true` and asks for the usage."""
    body = {**options, "stream": True, "stream_options": {"include_usage": True}}
    return await client.post(
        CHAT_COMPLETIONS_PATH,
        body=body,
        options={"timeout": timeout, "security": {"bearer_auth": True}},
        cast_to=ChatCompletion,
        stream=True,
        stream_cls=openai.AsyncStream[ChatCompletionChunk],
    )


async def read_stream(
    client: openai.AsyncOpenAI,
    options: dict[str, Any],
    on_text: Callable[[str], None],
    started: float,
    *,
    timeout: float,  # noqa: ASYNC109 - the SDK's own timeout for the request
) -> tuple[str | None, str | None, Any, float, str | None]:
    """(content, finish reason, usage or None, latency, the model that answered), each piece
    of text to `on_text` as it arrives; raises LLMTransientError when the stream ends before
    the answer does. Transport errors propagate as the SDK raises them."""
    stream = await stream_completion(client, options, timeout=timeout)
    parts: list[str] = []
    finish_reason: str | None = None
    usage: Any = None
    refusal: list[str] = []
    answered_by: str | None = None
    async with stream:
        async for chunk in stream:
            answered_by = chunk.model or answered_by
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices[:1]:
                delta = choice.delta
                if delta.content:
                    parts.append(delta.content)
                    on_text(delta.content)
                if getattr(delta, "refusal", None):
                    refusal.append(delta.refusal or "")
                if choice.finish_reason is not None:
                    finish_reason = choice.finish_reason
    if finish_reason is None:
        raise LLMTransientError("the answer's stream ended before the answer", code="stream_broken")
    content = "".join(parts) or ("".join(refusal) or None)
    return content, finish_reason, usage, time.perf_counter() - started, answered_by


_REHEARSAL_URL = "http://warm-up.invalid/v1"
_CHUNK = {"id": "w", "object": "chat.completion.chunk", "created": 0, "model": "w"}


def _rehearsal_answer(request: httpx.Request) -> httpx.Response:
    if json.loads(request.content).get("stream"):
        chunk = {**_CHUNK, "choices": [{"index": 0, "delta": {"content": "{}"}}]}
        body = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n"
        return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})
    message = {"role": "assistant", "content": "{}"}
    completion = {
        "id": "w",
        "object": "chat.completion",
        "created": 0,
        "model": "w",
        "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    return httpx.Response(200, json=completion)


async def rehearse_model_call() -> None:
    """Run one plain and one streamed call through the SDK against an in-process answer (no
    network, no model, nothing counted): the SDK's parsers and httpx's asyncio backend are
    then built before the first real request, not during it."""
    # httpcore imports anyio's asyncio backend when its pool first runs: import it now.
    import anyio._backends._asyncio  # noqa: F401

    transport = httpx.MockTransport(_rehearsal_answer)
    async with httpx.AsyncClient(transport=transport) as http:
        client = openai.AsyncOpenAI(api_key="warm-up", base_url=_REHEARSAL_URL, http_client=http)
        options = {"model": "w", "messages": [{"role": "user", "content": "w"}]}
        await create_completion(client, options, timeout=5)
        stream = await stream_completion(client, options, timeout=5)
        async with stream:
            async for _ in stream:
                pass
