"""A chat completion read as it is written: the text deltas go to a sink as they arrive.

The model's server streams (`stream=True`) and reports the usage in its last chunk when it
can (`stream_options.include_usage`); the deltas are joined into the same `Completion` a
plain call returns, so the planner reads the answer the same way either way.
"""

from __future__ import annotations

import re
import time
from typing import Any, Protocol

import openai

from planner_arm.errors import LLMTransientError
from planner_arm.llm.chat_endpoint import stream_completion

# A provider's refusal of streaming itself (not of the request): asked without it instead.
STREAM_WORDS = re.compile(r"\bstream", re.IGNORECASE)


class AnswerSink(Protocol):
    """Who watches an answer being written."""

    def begin(self, model: str) -> None:
        """A new answer starts: whatever text came before belongs to an abandoned one."""

    def text(self, delta: str) -> None:
        """The next piece of the answer's text."""


async def read_stream(
    client: openai.AsyncOpenAI,
    options: dict[str, Any],
    sink: AnswerSink,
    started: float,
    *,
    timeout: float,  # noqa: ASYNC109 - the SDK's own timeout for the request
) -> tuple[str | None, str | None, Any, float]:
    """(content, finish reason, usage or None, latency); raises LLMTransientError when the
    stream ends before the answer does. Transport errors propagate as the SDK raises them."""
    stream = await stream_completion(client, options, timeout=timeout)
    parts: list[str] = []
    finish_reason: str | None = None
    usage: Any = None
    refusal: list[str] = []
    async with stream:
        async for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices[:1]:
                delta = choice.delta
                if delta.content:
                    parts.append(delta.content)
                    sink.text(delta.content)
                if getattr(delta, "refusal", None):
                    refusal.append(delta.refusal or "")
                if choice.finish_reason is not None:
                    finish_reason = choice.finish_reason
    if finish_reason is None:
        raise LLMTransientError("the answer's stream ended before the answer", code="stream_broken")
    content = "".join(parts) or ("".join(refusal) or None)
    return content, finish_reason, usage, time.perf_counter() - started
