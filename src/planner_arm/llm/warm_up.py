"""One rehearsal of a model call at start-up, so the first real request is not the slow one.

The SDK builds its response parsers on first use, and httpx's connection pool imports its
asyncio backend on its first connection: together some tens of milliseconds that would
otherwise land on the first plan request. The rehearsal runs the SDK's whole request and
response path, plain and streamed, against an in-process transport: no network, no model,
nothing counted.
"""

from __future__ import annotations

import json

import httpx
import openai

from planner_arm.llm.chat_endpoint import create_completion, stream_completion

_BASE_URL = "http://warm-up.invalid/v1"
_CHUNK = {"id": "w", "object": "chat.completion.chunk", "created": 0, "model": "w"}


def _answer(request: httpx.Request) -> httpx.Response:
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
    """Run one plain and one streamed call through the SDK against an in-process answer."""
    # httpcore imports anyio's asyncio backend when its pool first runs: import it now.
    import anyio._backends._asyncio  # noqa: F401

    transport = httpx.MockTransport(_answer)
    async with httpx.AsyncClient(transport=transport) as http:
        client = openai.AsyncOpenAI(api_key="warm-up", base_url=_BASE_URL, http_client=http)
        options = {"model": "w", "messages": [{"role": "user", "content": "w"}]}
        await create_completion(client, options, timeout=5)
        stream = await stream_completion(client, options, timeout=5)
        async with stream:
            async for _ in stream:
                pass
