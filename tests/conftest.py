"""Shared fixtures: isolated environment, a fake clock, the OpenAI endpoint mocked with respx,
the stub model on loopback and a real redis-server. The helpers they use live in support/."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import respx
from hypothesis import settings as hypothesis_settings

from planner_arm.config import ENV_FIELDS
from planner_arm.config.near_miss import near_miss
from support.app import CHAT_URL, FakeClock
from support.redis_server import RedisServer
from support.stub_model import StubLLM

# Under CI every property test draws the same cases each run, so a landing does not depend on
# luck; on a developer's machine they draw new ones, to keep finding what CI would not.
hypothesis_settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    hypothesis_settings.load_profile("ci")


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests see only the variables they set, never the developer's or CI's."""
    for name in [*ENV_FIELDS, "PLANNER_CONFIG"]:
        monkeypatch.delenv(name, raising=False)
    for name in list(os.environ):
        # A name a slip away from the table's would stop start-up (config/near_miss.py).
        if name.startswith("PLANNER_") or near_miss(name, ENV_FIELDS) is not None:
            monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def llm_mock() -> Iterator[respx.MockRouter]:
    with respx.mock(assert_all_called=False, assert_all_mocked=True) as router:
        yield router


@pytest.fixture
def chat_route(llm_mock: respx.MockRouter) -> respx.Route:
    """The chat completions endpoint; each test sets its `side_effect` or `return_value`."""
    return llm_mock.post(CHAT_URL)


@pytest.fixture
def stub() -> Iterator[StubLLM]:
    """A real OpenAI-compatible stub model on loopback (support/stub_model.py), for the tests
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
