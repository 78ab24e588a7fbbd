"""The embedded plan store: bounded maps in this process, TTLs on the injected clock.

The default when no Redis is configured. Records are kept as JSON text, like in Redis, so a
caller that changes a dict it got back does not change the store, and both backends accept
and return the same things. Each kind of record (plans, idempotency keys, cache entries) has
its own bound, so a busy cache cannot push plans out.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict
from typing import Generic, TypeVar

from planner_arm.clock import Clock, Deadline
from planner_arm.store.base import (
    Claimed,
    ClaimOutcome,
    InProgress,
    JSONObject,
    StoreKind,
    answered_record,
    claim_record,
    decode,
    encode,
    outcome_of,
)

V = TypeVar("V")


class ExpiringMap(Generic[V]):
    """Least-recently-used values, each until its own expiry time on the clock."""

    def __init__(self, max_entries: int, clock: Clock) -> None:
        self._max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[str, tuple[float, V]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires_at, value = entry
        if self._clock.now() >= expires_at:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return value

    def put(self, key: str, value: V, ttl: float) -> None:
        self._entries[key] = (self._clock.now() + ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)

    def delete(self, key: str) -> None:
        self._entries.pop(key, None)


class MemoryStore:
    """Plans, idempotency records and cache entries of one process."""

    def __init__(self, *, ttl_seconds: float, max_entries: int, clock: Clock) -> None:
        self._ttl = ttl_seconds
        self._plans: ExpiringMap[str] = ExpiringMap(max_entries, clock)
        self._keys: ExpiringMap[str] = ExpiringMap(max_entries, clock)
        self._cache: ExpiringMap[str] = ExpiringMap(max_entries, clock)
        # Set when a claimed key is answered or let go, so its waiters look again at once.
        self._settled: dict[str, asyncio.Event] = {}

    @property
    def kind(self) -> StoreKind:
        return "memory"

    async def put_plan(self, plan_id: str, record: JSONObject, ttl: float | None = None) -> None:
        self._plans.put(plan_id, encode(record), self._ttl if ttl is None else ttl)

    async def get_plan(self, plan_id: str) -> JSONObject | None:
        stored = self._plans.get(plan_id)
        return None if stored is None else decode(stored)

    async def claim(self, key: str, fingerprint: str, *, lease_seconds: float) -> ClaimOutcome:
        # No await between the look and the write: in one event loop this is atomic.
        stored = self._keys.get(key)
        if stored is not None:
            return outcome_of(stored, fingerprint)
        claim = Claimed(key=key, fingerprint=fingerprint, token=uuid.uuid4().hex)
        self._keys.put(key, claim_record(claim), lease_seconds)
        self._wake(key)  # waiters on a claim whose lease ran out look at the new one
        return claim

    async def wait(
        self, key: str, fingerprint: str, deadline: Deadline, *, lease_seconds: float
    ) -> ClaimOutcome:
        while True:
            outcome = await self.claim(key, fingerprint, lease_seconds=lease_seconds)
            if not isinstance(outcome, InProgress) or deadline.expired:
                return outcome
            settled = self._settled.setdefault(key, asyncio.Event())
            try:
                await asyncio.wait_for(settled.wait(), deadline.remaining())
            except TimeoutError:
                return InProgress()

    async def complete(
        self, claim: Claimed, response: JSONObject, ttl: float | None = None
    ) -> bool:
        stored = self._keys.get(claim.key)
        if stored is not None and stored != claim_record(claim):
            return False
        answer = answered_record(claim, response)
        self._keys.put(claim.key, answer, self._ttl if ttl is None else ttl)
        self._wake(claim.key)
        return True

    async def release(self, claim: Claimed) -> None:
        if self._keys.get(claim.key) == claim_record(claim):
            self._keys.delete(claim.key)
        self._wake(claim.key)

    async def cache_get(self, key: str) -> JSONObject | None:
        stored = self._cache.get(key)
        return None if stored is None else decode(stored)

    async def cache_put(self, key: str, value: JSONObject, ttl: float) -> None:
        self._cache.put(key, encode(value), ttl)

    async def ping(self) -> None:
        return None

    async def healthy(self) -> bool:
        return True

    async def close(self) -> None:
        for event in self._settled.values():
            event.set()
        self._settled.clear()

    def _wake(self, key: str) -> None:
        event = self._settled.pop(key, None)
        if event is not None:
            event.set()
