"""Shared fixtures: isolated settings, a fake clock, the OpenAI endpoint mocked with respx,
and the app running with its lifespan behind an ASGI transport."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from hypothesis import settings as hypothesis_settings

from planner_arm.clock import Clock
from planner_arm.config import ENV_FIELDS, Settings, load_settings
from redis_server import RedisServer
from stub_llm import PLAN, StubLLM, completion

# Under CI every property test draws the same cases each run, so a landing does not depend on
# luck; on a developer's machine they draw new ones, to keep finding what CI would not.
hypothesis_settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    hypothesis_settings.load_profile("ci")

LLM_BASE_URL = "http://llm.test/v1"
CHAT_URL = f"{LLM_BASE_URL}/chat/completions"
TEST_KEY = "sk-test-0123456789abcdefSECRET"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "real-model-answers"


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests see only the variables they set, never the developer's or CI's."""
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


def completion_body(content: str | None, **kwargs: Any) -> dict[str, Any]:
    """An OpenAI chat completion response carrying `content` (the stub model's shape)."""
    return completion(content, **kwargs)


def answer(content: str | dict[str, Any], **kwargs: Any) -> httpx.Response:
    text = content if isinstance(content, str) else json.dumps(content)
    return httpx.Response(200, json=completion_body(text, **kwargs))


def good_plan() -> dict[str, Any]:
    """A valid 4-step plan (retriever, two coders in parallel, judge); a fresh copy."""
    return copy.deepcopy(PLAN)


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

    from planner_arm.api.app import create_app

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


@pytest.fixture
def stub() -> Iterator[StubLLM]:
    """A real OpenAI-compatible stub model on loopback (tests/stub_llm.py), for the tests
    that start the service as a process; script it with `stub.script(...)`."""
    with StubLLM() as model:
        yield model


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One real redis-server for the session; tests that stop theirs start their own."""
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The session's Redis, emptied for this test."""
    import redis

    with redis.Redis(port=redis_server.port, socket_timeout=5) as client:
        client.flushall()
    return redis_server.url
