"""Shared fixtures: isolated settings, a fake clock, the OpenAI endpoint mocked with respx,
and the app running with its lifespan behind an ASGI transport."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from planner_arm.config import ENV_FIELDS, Settings, load_settings
from planner_arm.retry import Clock

LLM_BASE_URL = "http://llm.test/v1"
CHAT_URL = f"{LLM_BASE_URL}/chat/completions"
TEST_KEY = "sk-test-0123456789abcdefSECRET"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "real-model-answers"


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests see only the variables they set, never the developer's or CI's."""
    import os

    for name in [*ENV_FIELDS, "PLANNER_CONFIG"]:
        monkeypatch.delenv(name, raising=False)
    for name in list(os.environ):
        if name.startswith("PLANNER_"):
            monkeypatch.delenv(name, raising=False)


class FakeClock:
    """Time that moves only when a test (or a retry wait) moves it."""

    def __init__(self) -> None:
        self.time = 1000.0
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.time

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.time += seconds

    def as_clock(self) -> Clock:
        return Clock(now=self.now, sleep=self.sleep)


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()


def make_settings(llm: bool = True, **overrides: Any) -> Settings:
    """Settings for tests: the LLM at the respx-mocked URL unless `llm` is False."""
    if llm:
        model = {"base_url": LLM_BASE_URL, **overrides.pop("model", {})}
        overrides = {"model": model, "api_key": TEST_KEY, **overrides}
    return load_settings(**overrides)


def completion_body(
    content: str | None,
    *,
    finish_reason: str = "stop",
    prompt_tokens: int = 900,
    completion_tokens: int = 300,
    model: str = "gpt-3.5-turbo",
) -> dict[str, Any]:
    """An OpenAI chat completion response carrying `content`."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def answer(content: str | dict[str, Any], **kwargs: Any) -> httpx.Response:
    text = content if isinstance(content, str) else json.dumps(content)
    return httpx.Response(200, json=completion_body(text, **kwargs))


def good_plan() -> dict[str, Any]:
    return {
        "plan": [
            {
                "step": 1,
                "action": "Search the codebase for the authentication logic",
                "required_arm": "retriever",
                "acceptance_criteria": ["auth/login.py located", "Related tests listed"],
                "depends_on": [],
                "estimated_cost_tier": 1,
                "estimated_duration_seconds": 20,
            },
            {
                "step": 2,
                "action": "Write a patch that fixes the token expiry check",
                "required_arm": "coder",
                "acceptance_criteria": ["Patch addresses the root cause"],
                "depends_on": [1],
                "estimated_cost_tier": 3,
                "estimated_duration_seconds": 60,
            },
            {
                "step": 3,
                "action": "Write a regression test for the expiry bug",
                "required_arm": "coder",
                "acceptance_criteria": ["Test fails before the patch", "Test passes after"],
                "depends_on": [1],
                "estimated_cost_tier": 3,
                "estimated_duration_seconds": 40,
            },
            {
                "step": 4,
                "action": "Validate the fix against the goal and the constraints",
                "required_arm": "judge",
                "acceptance_criteria": ["All criteria met", "No schema change"],
                "depends_on": [2, 3],
                "estimated_cost_tier": 2,
                "estimated_duration_seconds": 30,
            },
        ],
        "rationale": "Locate, fix and test in parallel, then validate.",
        "confidence": 0.9,
        "complexity_score": 0.5,
    }


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


@pytest.fixture
def llm_mock() -> respx.MockRouter:
    with respx.mock(assert_all_called=False, assert_all_mocked=True) as router:
        yield router


@pytest.fixture
def chat_route(llm_mock: respx.MockRouter) -> respx.Route:
    """The chat completions endpoint; each test sets its `side_effect` or `return_value`."""
    return llm_mock.post(CHAT_URL)


@asynccontextmanager
async def running_app(
    settings: Settings, clock: FakeClock | None = None, **kwargs: Any
) -> AsyncIterator[httpx.AsyncClient]:
    """The app with its lifespan running, and a client that talks to it in-process."""
    import random

    from planner_arm.app import create_app

    app = create_app(
        settings,
        http_client=httpx.AsyncClient(),
        clock=clock.as_clock() if clock else None,
        rng=random.Random(7),
        **kwargs,
    )
    async with app.router.lifespan_context(app):
        # As a real server would: an unhandled error is a 500 response, not an exception.
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://planner") as client:
            yield client


@pytest.fixture
def app_client_factory() -> Callable[..., Any]:
    return running_app
