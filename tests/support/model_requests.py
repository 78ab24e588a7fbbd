"""What the service sent a model, read back: a chat completion request's messages, and the
JSON data its user message carries (one JSON value a line among our own words)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx


def messages_of(request: httpx.Request | Mapping[str, Any]) -> list[dict[str, Any]]:
    """The messages of a chat completion request (respx's, or the stub model's log)."""
    body = json.loads(request.content) if isinstance(request, httpx.Request) else request
    messages: list[dict[str, Any]] = body["messages"]
    return messages


def system_of(request: httpx.Request | Mapping[str, Any]) -> str:
    return str(messages_of(request)[0]["content"])


def user_of(request: httpx.Request | Mapping[str, Any]) -> str:
    return str(messages_of(request)[1]["content"])


def data_lines(text: str) -> list[Any]:
    """Every line of `text` that is one JSON object or list, decoded."""
    found = []
    for line in text.splitlines():
        if line.startswith(("{", "[")):
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
    return found


def request_data(request: httpx.Request | Mapping[str, Any]) -> dict[str, Any]:
    """The user message's data object that holds the goal (a plan's, a step input's)."""
    (data,) = [item for item in data_lines(user_of(request)) if isinstance(item, dict)
               and "goal" in item]  # fmt: skip
    return data


def listed_tools(request: httpx.Request | Mapping[str, Any]) -> list[dict[str, Any]]:
    """The tools a tool plan's prompt lists, one JSON object a line of its user message."""
    return [item for item in data_lines(user_of(request)) if isinstance(item, dict)
            and "name" in item]  # fmt: skip
