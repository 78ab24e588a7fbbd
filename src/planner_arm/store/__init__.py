"""Plan store and idempotency records, in memory (the default) or in a Redis shared by replicas."""

from planner_arm.store.base import (
    Claimed,
    ClaimOutcome,
    Conflict,
    InProgress,
    JSONObject,
    PlanStore,
    Replay,
    StoreKind,
)
from planner_arm.store.factory import build_store
from planner_arm.store.memory import MemoryStore
from planner_arm.store.redis_backend import RedisStore

__all__ = [
    "ClaimOutcome",
    "Claimed",
    "Conflict",
    "InProgress",
    "JSONObject",
    "MemoryStore",
    "PlanStore",
    "RedisStore",
    "Replay",
    "StoreKind",
    "build_store",
]
