"""The embedded plan store: bounded maps in this process, TTLs on the injected clock.

The default when no Redis is configured. Records are kept as the UTF-8 bytes of their JSON,
like in Redis, so a caller that changes a dict it got back does not change the store, both
backends accept and return the same things, and a record weighs what it holds (`held_size`):
a `str` with one emoji in it would take four bytes for each of its characters. Each kind of
record (plans, idempotency keys, cache entries) has its own bounds, in entries and in bytes,
so a busy cache cannot push plans out and a flood of large plans cannot grow the process
without end. Each owner's records are a least-recently-used map of their own, and the bound
of a kind is shared fairly among the owners (`FairShareMap`): past it, an owner over its
share loses its own oldest records, never one within its share. Each owner also has its own
caps (`OwnerCaps`): a plan past them is refused; an answer kept for a key or a cache entry
pushes out the owner's own oldest.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from planner_arm.clock import Clock, Deadline
from planner_arm.principal import Principal
from planner_arm.store.base import (
    NO_CAPS,
    Claimed,
    ClaimOutcome,
    InProgress,
    JSONObject,
    OwnerCaps,
    RecordKind,
    StoreKind,
    answered_record,
    claim_record,
    decode,
    encode,
    outcome_of,
    owned,
    quota_exceeded,
    utf8,
)

V = TypeVar("V")
Removed = Callable[[str, int], None]
Weigher = Callable[[str, V], int]

# What an entry of a map holds besides its key and its value, as tracemalloc measures it
# (CPython 3.11, 64 bits): the tuple of expiry, value and weight, the float and the int in
# it, and the entry's share of the ordered dict (its slot and links, with the dict's slack).
ENTRY_BYTES = 120


def held_size(key: str, value: bytes) -> int:
    """What one record weighs in a bound: the bytes its value, its key and its entry hold."""
    return sys.getsizeof(value) + sys.getsizeof(key) + ENTRY_BYTES


class ExpiringMap(Generic[V]):
    """Least-recently-used values, each until its own expiry time on the clock, within a count
    and a total size (`size(key, value)`, measured once when the value is put). `on_remove(key,
    size)` hears of every value that leaves: expired, pushed out, deleted or replaced."""

    def __init__(
        self,
        max_entries: int,
        clock: Clock,
        *,
        max_bytes: int | None = None,
        size: Weigher[V] | None = None,
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

    def weight(self, key: str) -> int:
        """What the value under `key` weighs (0 when there is none)."""
        entry = self._entries.get(key)
        return 0 if entry is None else entry[2]

    def first_expiry(self) -> float | None:
        """When the value that runs out first does, on the clock; None when empty."""
        return min((at for at, _, _ in self._entries.values()), default=None)

    def put(self, key: str, value: V, ttl: float) -> int:
        """Keep `value` for `ttl` seconds; returns what it weighs."""
        self.delete(key)
        weight = self._size(key, value) if self._size is not None else 0
        self._entries[key] = (self._clock.now() + ttl, value, weight)
        self.bytes += weight
        while len(self._entries) > self._max_entries or self._over_bytes():
            self.pop_oldest()
        return weight

    def delete(self, key: str) -> None:
        if key in self._entries:
            self._pop(key)

    def pop_oldest(self) -> None:
        """Drop the least recently used value."""
        self._pop(next(iter(self._entries)))

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


class FairShareMap(Generic[V]):
    """Many owners' values, each owner's in an `ExpiringMap` of its own (its own least recently
    used go first past `owner_max_bytes`), all within one process-wide count and size.

    Past the process-wide bound a value goes from an owner over its fair share: the bound
    divided among the owners that hold values now. The writer's own least recently used go
    when it is over its share (it pays for its own traffic); else those of the owner holding
    the most, which is then over its share. So an owner within its share never loses a value
    before its expiry to another's writes."""

    def __init__(
        self,
        max_entries: int,
        clock: Clock,
        *,
        max_bytes: int | None = None,
        size: Weigher[V] | None = None,
        owner_max_bytes: int | None = None,
    ) -> None:
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._size = size
        self._owner_max_bytes = owner_max_bytes
        self._clock = clock
        self._owners: dict[str, ExpiringMap[V]] = {}
        self.entries = 0
        self.bytes = 0

    def __len__(self) -> int:
        return self.entries

    def get(self, owner: str, key: str) -> V | None:
        values = self._owners.get(owner)
        if values is None:
            return None
        found = values.get(key)
        self._forget_if_empty(owner)
        return found

    def put(self, owner: str, key: str, value: V, ttl: float) -> None:
        values = self._owners.get(owner)
        if values is None:
            values = ExpiringMap(
                self._max_entries,
                self._clock,
                max_bytes=self._owner_max_bytes,
                size=self._size,
                on_remove=self._removed,
            )
            self._owners[owner] = values
        # Two statements: `put` may push out the owner's oldest, whose weight `_removed` takes
        # off `self.bytes` meanwhile; `self.bytes += values.put(...)` would read the total
        # before that and write the stale sum back.
        weight = values.put(key, value, ttl)
        self.bytes += weight
        self.entries += 1
        self._trim(owner)

    def delete(self, owner: str, key: str) -> None:
        values = self._owners.get(owner)
        if values is not None:
            values.delete(key)
            self._forget_if_empty(owner)

    def held_bytes(self, owner: str) -> int:
        """What `owner`'s values weigh now."""
        values = self._owners.get(owner)
        return 0 if values is None else values.bytes

    def weight(self, owner: str, key: str) -> int:
        values = self._owners.get(owner)
        return 0 if values is None else values.weight(key)

    def purge_expired(self, owner: str) -> None:
        """Drop `owner`'s expired values now (expiry is otherwise noticed on a read)."""
        values = self._owners.get(owner)
        if values is not None:
            values.purge_expired()
            self._forget_if_empty(owner)

    def first_expiry(self, owner: str) -> float | None:
        """When `owner`'s first value runs out, on the clock; None when it holds none."""
        values = self._owners.get(owner)
        return None if values is None else values.first_expiry()

    def _removed(self, _: str, weight: int) -> None:
        self.entries -= 1
        self.bytes -= weight

    def _forget_if_empty(self, owner: str) -> None:
        values = self._owners.get(owner)
        if values is not None and not len(values):
            del self._owners[owner]

    def _trim(self, writer: str) -> None:
        while True:
            by_bytes = self._max_bytes is not None and self.bytes > self._max_bytes
            if not by_bytes and self.entries <= self._max_entries:
                return
            victim = self._victim(writer, by_bytes)
            if victim is None:
                return  # the writer's one new value is over its share alone: it stays
            self._owners[victim].pop_oldest()
            self._forget_if_empty(victim)

    def _victim(self, writer: str, by_bytes: bool) -> str | None:
        """Whose least recently used value goes: the writer's when it holds more than its
        fair share (never its newest), else the owner holding the most."""

        def held(owner: str) -> int:
            values = self._owners[owner]
            return values.bytes if by_bytes else len(values)

        bound = self._max_bytes if by_bytes else self._max_entries
        assert bound is not None
        if held(writer) * len(self._owners) > bound:
            return writer if len(self._owners[writer]) > 1 else None
        # Within its share, so the others hold more than theirs: the largest is over.
        return max((owner for owner in self._owners if owner != writer), key=held)


class MemoryStore:
    """Plans, idempotency records and cache entries of one process."""

    def __init__(
        self,
        *,
        ttl_seconds: float,
        max_entries: int,
        clock: Clock,
        max_bytes: int | None = None,
        caps: OwnerCaps = NO_CAPS,
        poll_interval_seconds: float = 0.05,
    ) -> None:
        """`max_entries`, `max_bytes`: the process-wide bound of each kind of record, shared
        fairly among the owners; `caps`: what one owner may hold of each kind."""
        self._ttl = ttl_seconds
        self._clock = clock
        self._caps = caps
        self._poll = poll_interval_seconds
        self._plans: FairShareMap[bytes] = FairShareMap(
            max_entries, clock, max_bytes=max_bytes, size=held_size
        )
        # Past the owner's cap its own least recently used go: an answer kept for a key is
        # asked for again soon after, if ever; a claim is renewed, so it is never the oldest.
        self._keys: FairShareMap[bytes] = FairShareMap(
            max_entries,
            clock,
            max_bytes=max_bytes,
            size=held_size,
            owner_max_bytes=caps.idempotency_bytes,
        )
        self._cache: FairShareMap[bytes] = FairShareMap(
            max_entries,
            clock,
            max_bytes=max_bytes,
            size=held_size,
            owner_max_bytes=caps.cache_bytes,
        )
        # Set when a claimed key is answered or let go, so its waiters look again at once.
        self._settled: dict[str, asyncio.Event] = {}

    @property
    def kind(self) -> StoreKind:
        return "memory"

    @property
    def shared(self) -> bool:
        return False

    @property
    def system(self) -> str | None:
        return None

    def held_bytes(self, owner: Principal, kind: RecordKind = "plan") -> int:
        """The bytes of records of `kind` that `owner` holds now."""
        return self._map(kind).held_bytes(owner.id)

    async def put_plan(
        self, owner: Principal, plan_id: str, record: JSONObject | str, ttl: float | None = None
    ) -> None:
        text = utf8(encode(record))
        cap = self._caps.plan_bytes
        if cap is not None:
            freed = self._plans.weight(owner.id, plan_id)  # a plan replaced frees its bytes
            self._refuse_past(cap, owner, held_size(plan_id, text) - freed)
        self._plans.put(owner.id, plan_id, text, self._ttl if ttl is None else ttl)

    async def get_plan(self, owner: Principal, plan_id: str) -> JSONObject | None:
        stored = self._plans.get(owner.id, plan_id)
        return None if stored is None else decode(stored)

    async def claim(
        self, owner: Principal, key: str, fingerprint: str, *, lease_seconds: float
    ) -> ClaimOutcome:
        # No await between the look and the write: in one event loop this is atomic.
        stored = self._keys.get(owner.id, key)
        if stored is not None:
            return outcome_of(stored, fingerprint)
        claim = Claimed(owner=owner.id, key=key, fingerprint=fingerprint, token=uuid.uuid4().hex)
        self._keys.put(owner.id, key, utf8(claim_record(claim)), lease_seconds)
        self._wake(owned(owner, key))  # waiters on a claim whose lease ran out see the new one
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
            # Woken when the key is settled; else it looks at its deadline on the clock again.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(settled.wait(), min(self._poll, deadline.remaining()))

    async def complete(
        self, claim: Claimed, response: JSONObject, ttl: float | None = None
    ) -> bool:
        stored = self._keys.get(claim.owner, claim.key)
        if stored is not None and stored != utf8(claim_record(claim)):
            return False
        answer = utf8(answered_record(claim, response))
        self._keys.put(claim.owner, claim.key, answer, self._ttl if ttl is None else ttl)
        self._wake(f"{claim.owner}:{claim.key}")
        return True

    async def renew(self, claim: Claimed, lease_seconds: float) -> bool:
        text = utf8(claim_record(claim))
        if self._keys.get(claim.owner, claim.key) != text:
            return False
        self._keys.put(claim.owner, claim.key, text, lease_seconds)
        return True

    async def release(self, claim: Claimed) -> None:
        if self._keys.get(claim.owner, claim.key) == utf8(claim_record(claim)):
            self._keys.delete(claim.owner, claim.key)
        self._wake(f"{claim.owner}:{claim.key}")

    async def cache_get(self, owner: Principal, key: str) -> JSONObject | None:
        stored = self._cache.get(owner.id, key)
        return None if stored is None else decode(stored)

    async def cache_put(self, owner: Principal, key: str, value: JSONObject, ttl: float) -> None:
        self._cache.put(owner.id, key, utf8(encode(value)), ttl)

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

    def _map(self, kind: RecordKind) -> FairShareMap[bytes]:
        return {"plan": self._plans, "idempotency": self._keys, "cache": self._cache}[kind]

    def _refuse_past(self, cap: int, owner: Principal, adding: int) -> None:
        """Raise TenantQuotaExceeded when `adding` bytes would take the owner's plans past
        `cap` (plans that ran out are let go first: they free their bytes)."""
        plans = self._plans
        if plans.held_bytes(owner.id) + adding <= cap:
            return
        plans.purge_expired(owner.id)
        if plans.held_bytes(owner.id) + adding <= cap:
            return
        first = plans.first_expiry(owner.id)
        now = self._clock.now()
        raise quota_exceeded("plan", cap, max(1.0, (first or now + self._ttl) - now))

    def _wake(self, name: str) -> None:
        event = self._settled.pop(name, None)
        if event is not None:
            event.set()
