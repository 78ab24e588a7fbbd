"""Builds the plan store the settings ask for: Redis when `store.url` is set, else memory."""

from __future__ import annotations

from planner_arm.clock import Clock
from planner_arm.config import Settings
from planner_arm.store.base import PlanStore
from planner_arm.store.memory import MemoryStore


def build_store(settings: Settings, clock: Clock) -> PlanStore:
    """The store for this process; nothing connects until the first command."""
    config = settings.store
    if config.url is None:
        return MemoryStore(
            ttl_seconds=config.ttl_seconds, max_entries=config.max_entries, clock=clock
        )
    # Imported here: a process without Redis configured never loads the client library.
    from planner_arm.store.redis_backend import RedisStore, redis_client

    client = redis_client(config.url.get_secret_value().strip(), config.socket_timeout_seconds)
    return RedisStore(
        client,
        clock=clock,
        ttl_seconds=config.ttl_seconds,
        key_prefix=config.key_prefix,
        poll_interval_seconds=config.poll_interval_seconds,
        # One command and one reconnect, each within the socket timeout.
        operation_timeout_seconds=2 * config.socket_timeout_seconds,
    )
