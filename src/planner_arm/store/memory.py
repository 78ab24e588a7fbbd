"""The embedded store: bounded dicts in this process, each entry with its own expiry.

The default with no Redis configured. Plans, idempotency records and cached plans share one
least-recently-used bound, so a busy process holds at most `max_entries` records.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from typing import Any

from planner_arm.clock import Clock
from planner_arm.store.base import Claim, Claimed, Conflict, InProgress, Replay, StoreKind


class MemoryStore:
    kind: StoreKind = "memory"

    def __init__(self, max_entries: int, clock: Clock) -> None:
        self._max_entries = max_entries
        self._clock = clock
        # (namespace, key) -> (expires at, value)
        self._entries: OrderedDict[tuple[str, str], tuple[float, Any]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def _get(self, namespace: str, key: str) -> Any | None:
        entry = self._entries.get((namespace, key))
        if entry is None:
            return None
        expires_at, value = entry
        if self._clock.now() >= expires_at:
            del self._entries[(namespace, key)]
            return None
        self._entries.move_to_end((namespace, key))
        return value

    def _set(self, namespace: str, key: str, value: Any, ttl_seconds: float) -> None:
        self._entries[(namespace, key)] = (self._clock.now() + ttl_seconds, value)
        self._entries.move_to_end((namespace, key))
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)

    async def put_plan(self, plan_id: str, record: dict[str, Any], ttl_seconds: float) -> None:
        # A copy each way: a caller changing its dict must not change what is stored.
        self._set("plan", plan_id, copy.deepcopy(record), ttl_seconds)

    async def get_plan(self, plan_id: str) -> dict[str, Any] | None:
        found = self._get("plan", plan_id)
        return copy.deepcopy(found) if found is not None else None

    async def claim(self, key: str, fingerprint: str, ttl_seconds: float) -> Claim:
        # No await between the read and the write: atomic on the event loop.
        held = self._get("idem", key)
        if held is None:
            self._set("idem", key, (fingerprint, None), ttl_seconds)
            return Claimed()
        held_fingerprint, record = held
        if held_fingerprint != fingerprint:
            return Conflict()
        if record is None:
            return InProgress()
        return Replay(copy.deepcopy(record))

    async def complete(self, key: str, record: dict[str, Any], ttl_seconds: float) -> None:
        held = self._get("idem", key)
        if held is not None:
            self._set("idem", key, (held[0], copy.deepcopy(record)), ttl_seconds)

    async def release(self, key: str) -> None:
        self._entries.pop(("idem", key), None)

    async def cache_get(self, key: str) -> dict[str, Any] | None:
        found = self._get("cache", key)
        return copy.deepcopy(found) if found is not None else None

    async def cache_put(self, key: str, record: dict[str, Any], ttl_seconds: float) -> None:
        self._set("cache", key, copy.deepcopy(record), ttl_seconds)

    async def ping(self) -> bool:
        return True

    async def aclose(self) -> None:
        self._entries.clear()
