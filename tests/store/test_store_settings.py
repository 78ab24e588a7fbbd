"""Choosing the store: PLANNER_STORE_URL or `store.url` picks Redis, nothing picks memory,
and a URL that is not Redis's stops start-up with one clear line (without its password)."""

from __future__ import annotations

import pytest

from planner_arm.config import ConfigError, load_settings
from planner_arm.principal import ANONYMOUS
from planner_arm.service.wiring import build_store
from support.app import FakeClock


async def test_without_a_url_the_store_is_in_memory(fake_clock: FakeClock) -> None:
    store = build_store(load_settings(), fake_clock.as_clock())
    assert store.kind == "memory"
    assert await store.healthy() is True


async def test_planner_store_url_picks_redis(
    monkeypatch: pytest.MonkeyPatch, fake_clock: FakeClock, redis_url: str
) -> None:
    monkeypatch.setenv("PLANNER_STORE_URL", redis_url)
    monkeypatch.setenv("PLANNER_STORE__TTL_SECONDS", "120")
    settings = load_settings()
    assert settings.store.ttl_seconds == 120
    store = build_store(settings, fake_clock.as_clock())
    assert store.kind == "redis"
    await store.put_plan(ANONYMOUS, "p-1", {"response": {"plan_id": "p-1"}})
    assert await store.get_plan(ANONYMOUS, "p-1") == {"response": {"plan_id": "p-1"}}
    await store.close()


def test_the_store_url_never_shows_in_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANNER_STORE_URL", "rediss://:s3cret-pw@redis.example:6380/1")
    settings = load_settings()
    assert "s3cret-pw" not in repr(settings)
    assert settings.store.url is not None
    assert settings.store.url.get_secret_value().startswith("rediss://")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            "http://:s3cret-pw@redis.example:6379",
            "store: url must start with redis:// or rediss:// (got scheme 'http')",
        ),
        ("redis.example:6379", "store: url must start with redis:// or rediss://"),
        ("redis://", "store: url names no host"),
    ],
)
def test_a_url_that_is_not_redis_stops_start_up(
    monkeypatch: pytest.MonkeyPatch, url: str, message: str
) -> None:
    monkeypatch.setenv("PLANNER_STORE_URL", url)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value).startswith(message)
    assert "s3cret-pw" not in str(caught.value)
