"""The store the settings ask for: Redis when `store.url` is set, else the embedded one."""

from __future__ import annotations

from planner_arm.clock import Clock
from planner_arm.config import Settings
from planner_arm.store.base import PlanStore
from planner_arm.store.memory import MemoryStore
from planner_arm.store.redis_store import RedisStore


def build_store(settings: Settings, clock: Clock) -> PlanStore:
    store = settings.store
    if store.url is None:
        return MemoryStore(store.max_entries, clock)
    return RedisStore(
        store.url.get_secret_value(),
        key_prefix=store.key_prefix,
        timeout_seconds=store.timeout_seconds,
    )
