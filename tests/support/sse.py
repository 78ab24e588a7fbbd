"""Streams in tests: a model's SSE answer for respx, and a plan stream read back as events."""

from __future__ import annotations

import json
from typing import Any

import httpx


def model_sse(pieces: list[str], *, usage: bool = True, finish: str | None = "stop") -> bytes:
    """An OpenAI chat completion stream carrying `pieces` as text deltas."""

    def event(choices: list[dict[str, Any]], **extra: Any) -> str:
        chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        return f"data: {json.dumps({**chunk, 'choices': choices, **extra})}\n\n"

    body = "".join(
        event([{"index": 0, "delta": {"content": piece}, "finish_reason": None}])
        for piece in pieces
    )
    if finish is not None:
        body += event([{"index": 0, "delta": {}, "finish_reason": finish}])
        if usage:
            counts = {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}
            body += event([], usage=counts)
        body += "data: [DONE]\n\n"
    return body.encode()


def streamed(pieces: list[str], **kwargs: Any) -> httpx.Response:
    body = model_sse(pieces, **kwargs)
    return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})


def pieces_of(text: str, size: int = 7) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def parse_sse(text: str) -> list[tuple[str, Any]]:
    """(event, data) of each event of an SSE body; comment lines (pings) are skipped."""
    events = []
    for block in text.split("\n\n"):
        lines = [line for line in block.splitlines() if line and not line.startswith(":")]
        if not lines:
            continue
        fields = dict(line.split(": ", 1) for line in lines)
        events.append((fields["event"], json.loads(fields["data"])))
    return events


def check_reset_rule(events: list[tuple[str, Any]]) -> dict[str, Any]:
    """Asserts the stream's contract and returns the final plan: plan.started first, one
    plan last, and the steps after the last plan.reset are the plan's steps, field for field."""
    names = [name for name, _ in events]
    assert names[0] == "plan.started", names
    assert names[-1] == "plan", names
    assert names.count("plan") == 1, names
    assert "error" not in names, names
    plan: dict[str, Any] = events[-1][1]
    assert events[0][1]["plan_id"] == plan["plan_id"]
    last_reset = max((i for i, name in enumerate(names) if name == "plan.reset"), default=0)
    after = [data for name, data in events[last_reset:] if name == "step"]
    assert after == plan["plan"]
    return plan
