"""The app in process for tests: settings, a fake clock, model answers for respx, running_app."""

from __future__ import annotations

import copy
import json
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from planner_arm.clock import Clock
from planner_arm.config import Settings, load_settings
from support.stub_model import PLAN, completion

LLM_BASE_URL = "http://llm.test/v1"
CHAT_URL = f"{LLM_BASE_URL}/chat/completions"
TEST_KEY = "sk-test-0123456789abcdefSECRET"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "real-model-answers"


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


def make_settings(llm: bool = True, **overrides: Any) -> Settings:
    """Settings for tests: the LLM at the respx-mocked URL unless `llm` is False. The mocked
    model stands in for OpenAI's API, so its calls are billed at the built-in prices."""
    if llm:
        model = {"base_url": LLM_BASE_URL, "priced_by_provider": True, **overrides.pop("model", {})}
        overrides = {"model": model, "api_key": TEST_KEY, **overrides}
    return load_settings(**overrides)


def completion_body(content: str | None, **kwargs: Any) -> dict[str, Any]:
    """An OpenAI chat completion response carrying `content` (the stub model's shape)."""
    return completion(content, **kwargs)


def answer(content: str | dict[str, Any], **kwargs: Any) -> httpx.Response:
    """The model's 200 answer carrying `content` (a dict is sent as its JSON), for respx."""
    text = content if isinstance(content, str) else json.dumps(content)
    return httpx.Response(200, json=completion_body(text, **kwargs))


def good_plan() -> dict[str, Any]:
    """A valid 4-step plan (retriever, two coders in parallel, judge); a fresh copy."""
    return copy.deepcopy(PLAN)


def fixture_text(name: str) -> str:
    """One of the real small-model answers in tests/fixtures/real-model-answers."""
    return (FIXTURES / name).read_text(encoding="utf-8")


@asynccontextmanager
async def running_app(
    settings: Settings, clock: FakeClock | None = None, **kwargs: Any
) -> AsyncIterator[httpx.AsyncClient]:
    """The app with its lifespan running, and a client that talks to it in-process."""
    from planner_arm.api.app import create_app

    app = create_app(
        settings,
        http_client=httpx.AsyncClient(),
        clock=clock.as_clock() if clock else None,
        rng=random.Random(7),
        **kwargs,
    )
    async with with_lifespan(app) as served:
        # As a real server would: an unhandled error is a 500 response, not an exception.
        transport = httpx.ASGITransport(app=served, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            yield client


@asynccontextmanager
async def with_lifespan(app: Any) -> AsyncIterator[Any]:
    """`app` with its lifespan running, served as a server serves it: every request's scope
    carries a copy of the state the lifespan yielded (`request.state`)."""
    async with app.router.lifespan_context(app) as state:

        async def served(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] in ("http", "websocket"):
                scope = {**scope, "state": dict(state or {})}
            await app(scope, receive, send)

        yield served


@asynccontextmanager
async def app_transport(settings: Settings) -> AsyncIterator[httpx.ASGITransport]:
    """The app with its lifespan running, as a transport a client can be given."""
    from planner_arm.api.app import create_app

    app = create_app(settings, http_client=httpx.AsyncClient(), rng=random.Random(7))
    async with with_lifespan(app) as served:
        yield httpx.ASGITransport(app=served, raise_app_exceptions=False)
