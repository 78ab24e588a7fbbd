"""The one endpoint this service calls, POST /chat/completions, through the SDK's own request
method.

`client.chat.completions.create` would serve as well, but the first touch of `client.chat`
imports every resource module of the SDK (admin, audio, beta, realtime, ...: about a second
on a small machine) for the one endpoint used here. `AsyncOpenAI.post` is the SDK's
documented way to call an endpoint directly: the same request building, auth, error mapping
and response parsing (into `ChatCompletion`, or a stream of `ChatCompletionChunk`s), without
that import.
"""

from __future__ import annotations

from typing import Any

import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

CHAT_COMPLETIONS_PATH = "/chat/completions"


async def create_completion(
    client: openai.AsyncOpenAI,
    options: dict[str, Any],
    *,
    timeout: float,  # noqa: ASYNC109 - the SDK's own timeout for the request
) -> ChatCompletion:
    """One chat completion: `options` is the request body (model, messages, ...)."""
    return await client.post(
        CHAT_COMPLETIONS_PATH,
        body=options,
        options={"timeout": timeout, "security": {"bearer_auth": True}},
        cast_to=ChatCompletion,
    )


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
