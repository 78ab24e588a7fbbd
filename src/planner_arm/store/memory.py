"""The embedded plan store: bounded maps in this process, TTLs on the injected clock.

The default when no Redis is configured. Records are kept as JSON text, like in Redis, so a
caller that changes a dict it got back does not change the store, and both backends accept
and return the same things; the text's length is what a record weighs. Each kind of record
(plans, idempotency keys, cache entries) has its own bounds, in entries and in bytes, so a
busy cache cannot push plans out and a flood of large plans cannot grow the process without
end; past a bound the least recently used records go first. Each owner's plans count against
its own cap of bytes (`owner_quota_bytes`).
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from planner_arm.clock import Clock, Deadline
from planner_arm.errors import TenantQuotaExceeded
from planner_arm.store.base import (
    Claimed,
    ClaimOutcome,
    InProgress,
    JSONObject,
    Principal,
    StoreKind,
    answered_record,
    claim_record,
    decode,
    encode,
    outcome_of,
    owned,
)

V = TypeVar("V")
Removed = Callable[[str, int], None]


def text_size(value: str) -> int:
    """What a JSON text weighs in the bound: its length (the records are mostly ASCII)."""
    return len(value)


class ExpiringMap(Generic[V]):
    """Least-recently-used values, each until its own expiry time on the clock, within a count
    and a total size (`size(value)`, measured once when the value is put). `on_remove(key,
    size)` hears of every value that leaves: expired, pushed out, deleted or replaced."""

    def __init__(
        self,
        max_entries: int,
        clock: Clock,
        *,
        max_bytes: int | None = None,
        size: Callable[[V], int] | None = None,
        on_remove: Removed | None = None,
    ) -> None:
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._size = size
        self._on_remove = on_remove
        self._clock = clock
        self._entries: OrderedDict[str, tuple[float, V, int]] = OrderedDict()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires_at, value, _ = entry
        if self._clock.now() >= expires_at:
            self.delete(key)
            return None
        self._entries.move_to_end(key)
        return value

    def names(self) -> list[str]:
        return list(self._entries)

    def expires_at(self, key: str) -> float | None:
        entry = self._entries.get(key)
        return None if entry is None else entry[0]

    def put(self, key: str, value: V, ttl: float) -> None:
        self.delete(key)
        weight = self._size(value) if self._size is not None else 0
        self._entries[key] = (self._clock.now() + ttl, value, weight)
        self.bytes += weight
        while len(self._entries) > self._max_entries or self._over_bytes():
            self._pop(next(iter(self._entries)))

    def delete(self, key: str) -> None:
        if key in self._entries:
            self._pop(key)

    def purge_expired(self) -> None:
        """Drop every expired value now (expiry is otherwise noticed on a read)."""
        now = self._clock.now()
        for key in [k for k, (at, _, _) in self._entries.items() if now >= at]:
            self._pop(key)

    def _over_bytes(self) -> bool:
        # The newest value always stays, even alone over the bound.
        return self._max_bytes is not None and self.bytes > self._max_bytes and len(self) > 1

    def _pop(self, key: str) -> None:
        _, _, weight = self._entries.pop(key)
        self.bytes -= weight
        if self._on_remove is not None:
            self._on_remove(key, weight)


class MemoryStore:
    """Plans, idempotency records and cache entries of one process."""

    def __init__(
        self,
        *,
        ttl_seconds: float,
        max_entries: int,
        clock: Clock,
        max_bytes: int | None = None,
        owner_quota_bytes: int | None = None,
    ) -> None:
        """`max_bytes`: the bound of each kind of record; `owner_quota_bytes`: the plan bytes
        one owner may hold (None: no cap)."""
        self._ttl = ttl_seconds
        self._clock = clock
        self._quota = owner_quota_bytes
        self._held: dict[str, int] = {}  # plan bytes by owner id
        self._plans: ExpiringMap[str] = ExpiringMap(
            max_entries, clock, max_bytes=max_bytes, size=text_size, on_remove=self._plan_gone
        )
        self._keys: ExpiringMap[str] = ExpiringMap(
            max_entries, clock, max_bytes=max_bytes, size=text_size
        )
        self._cache: ExpiringMap[str] = ExpiringMap(
            max_entries, clock, max_bytes=max_bytes, size=text_size
        )
        # Set when a claimed key is answered or let go, so its waiters look again at once.
        self._settled: dict[str, asyncio.Event] = {}

    @property
    def kind(self) -> StoreKind:
        return "memory"

    def held_bytes(self, owner: Principal) -> int:
        """The plan bytes `owner` holds now."""
        return self._held.get(owner.id, 0)

    async def put_plan(
        self, owner: Principal, plan_id: str, record: JSONObject, ttl: float | None = None
    ) -> None:
        text = encode(record)
        name = owned(owner, plan_id)
        if self._quota is not None and self._over_quota(owner, name, len(text)):
            raise TenantQuotaExceeded(
                f"This caller already holds its cap of {self._quota} bytes of stored plans.",
                retry_after=self._first_expiry(owner),
            )
        self._plans.put(name, text, self._ttl if ttl is None else ttl)
        self._held[owner.id] = self._held.get(owner.id, 0) + len(text)

    async def get_plan(self, owner: Principal, plan_id: str) -> JSONObject | None:
        stored = self._plans.get(owned(owner, plan_id))
        return None if stored is None else decode(stored)

    async def claim(
        self, owner: Principal, key: str, fingerprint: str, *, lease_seconds: float
    ) -> ClaimOutcome:
        # No await between the look and the write: in one event loop this is atomic.
        name = owned(owner, key)
        stored = self._keys.get(name)
        if stored is not None:
            return outcome_of(stored, fingerprint)
        claim = Claimed(owner=owner.id, key=key, fingerprint=fingerprint, token=uuid.uuid4().hex)
        self._keys.put(name, claim_record(claim), lease_seconds)
        self._wake(name)  # waiters on a claim whose lease ran out look at the new one
        return claim

    async def wait(
        self,
        owner: Principal,
        key: str,
        fingerprint: str,
        deadline: Deadline,
        *,
        lease_seconds: float,
    ) -> ClaimOutcome:
        name = owned(owner, key)
        while True:
            outcome = await self.claim(owner, key, fingerprint, lease_seconds=lease_seconds)
            if not isinstance(outcome, InProgress) or deadline.expired:
                return outcome
            settled = self._settled.setdefault(name, asyncio.Event())
            try:
                await asyncio.wait_for(settled.wait(), deadline.remaining())
            except TimeoutError:
                return InProgress()

    async def complete(
        self, claim: Claimed, response: JSONObject, ttl: float | None = None
    ) -> bool:
        name = f"{claim.owner}:{claim.key}"
        stored = self._keys.get(name)
        if stored is not None and stored != claim_record(claim):
            return False
        answer = answered_record(claim, response)
        self._keys.put(name, answer, self._ttl if ttl is None else ttl)
        self._wake(name)
        return True

    async def renew(self, claim: Claimed, lease_seconds: float) -> bool:
        name = f"{claim.owner}:{claim.key}"
        text = claim_record(claim)
        if self._keys.get(name) != text:
            return False
        self._keys.put(name, text, lease_seconds)
        return True

    async def release(self, claim: Claimed) -> None:
        name = f"{claim.owner}:{claim.key}"
        if self._keys.get(name) == claim_record(claim):
            self._keys.delete(name)
        self._wake(name)

    async def cache_get(self, owner: Principal, key: str) -> JSONObject | None:
        stored = self._cache.get(owned(owner, key))
        return None if stored is None else decode(stored)

    async def cache_put(self, owner: Principal, key: str, value: JSONObject, ttl: float) -> None:
        self._cache.put(owned(owner, key), encode(value), ttl)

    async def ping(self) -> None:
        return None

    async def healthy(self) -> bool:
        return True

    async def eviction_policy(self) -> str | None:
        return None

    async def close(self) -> None:
        for event in self._settled.values():
            event.set()
        self._settled.clear()

    def _over_quota(self, owner: Principal, name: str, size: int) -> bool:
        assert self._quota is not None
        replaced = self._plans.get(name)
        freed = len(replaced) if replaced is not None else 0
        if self.held_bytes(owner) - freed + size <= self._quota:
            return False
        self._plans.purge_expired()  # plans that ran out free their bytes only when seen
        return self.held_bytes(owner) - freed + size > self._quota

    def _first_expiry(self, owner: Principal) -> float:
        """Seconds until the owner's oldest plan runs out and frees its bytes."""
        prefix = f"{owner.id}:"
        now = self._clock.now()
        times = [
            at
            for name in self._plans.names()
            if name.startswith(prefix) and (at := self._plans.expires_at(name)) is not None
        ]
        return max(1.0, min(times, default=now + self._ttl) - now)

    def _plan_gone(self, name: str, size: int) -> None:
        owner_id = name.partition(":")[0]
        left = self._held.get(owner_id, 0) - size
        if left > 0:
            self._held[owner_id] = left
        else:
            self._held.pop(owner_id, None)

    def _wake(self, name: str) -> None:
        event = self._settled.pop(name, None)
        if event is not None:
            event.set()
