"""The tool sets kept built, by content, within a count and a byte budget, shared fairly.

Each kept set has the principal that built it and its measured weight in bytes. Past either
bound, a set no request holds goes: the least recently used of the principal that holds the
most (bytes when the bytes are over, sets when the count is; the most recent builder first
among equals), and only while that principal holds more than its fair share (the bound over
the principals holding sets). A principal that churns through tool sets therefore evicts its
own, never the set of one within its share. A set in use is never evicted: its bytes count,
and the bounds are kept again when it is let go.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass
class _Kept(Generic[T]):
    value: T
    owner: str
    weight: int
    holds: int = 0


class KeptToolSets(Generic[T]):
    def __init__(self, max_sets: int, max_bytes: int) -> None:
        self.max_sets = max_sets
        self.max_bytes = max_bytes
        self._kept: OrderedDict[str, _Kept[T]] = OrderedDict()
        self._turns = itertools.count()
        self._last_put: dict[str, int] = {}  # each owner's latest build, for ties
        self.bytes = 0
        self._evicted: list[T] = []

    def __len__(self) -> int:
        return len(self._kept)

    def __contains__(self, key: str) -> bool:
        return key in self._kept

    def get(self, key: str) -> T | None:
        """The set under `key`, or None; a look only (it is not marked as used)."""
        kept = self._kept.get(key)
        return None if kept is None else kept.value

    def hold(self, key: str) -> T | None:
        """The set under `key`, held (not evicted until `release`) and marked as used."""
        kept = self._kept.get(key)
        if kept is None:
            return None
        kept.holds += 1
        self._kept.move_to_end(key)
        return kept.value

    def put(self, key: str, value: T, owner: str, weight: int, *, held: bool = False) -> T:
        """Keeps `value` built by `owner` (the set already kept under `key` when there is
        one), held when `held`; then keeps the bounds."""
        if key not in self._kept:
            self._kept[key] = _Kept(value, owner, weight)
            self.bytes += weight
            self._last_put[owner] = next(self._turns)
        kept = self._kept[key]
        self._kept.move_to_end(key)
        if held:
            kept.holds += 1
        self._shrink()
        return kept.value

    def release(self, key: str, weight: int) -> None:
        """A request is done with the set under `key`, which now weighs `weight` (parts built
        while it was in use count from now); then keeps the bounds."""
        kept = self._kept.get(key)
        if kept is None:
            return
        kept.holds -= 1
        self.bytes += weight - kept.weight
        kept.weight = weight
        self._shrink()

    def take_evicted(self) -> list[T]:
        """The sets evicted since the last call: whoever takes them frees them (a large
        set's objects take a while to free)."""
        evicted, self._evicted = self._evicted, []
        return evicted

    def held_by(self, owner: str) -> tuple[int, int]:
        """How many sets `owner` built that are kept, and their bytes."""
        mine = [kept.weight for kept in self._kept.values() if kept.owner == owner]
        return len(mine), sum(mine)

    def _shrink(self) -> None:
        while len(self._kept) > self.max_sets or self.bytes > self.max_bytes:
            key = self._victim(by_bytes=self.bytes > self.max_bytes)
            if key is None:
                return  # every set left is in use
            gone = self._kept.pop(key)
            self.bytes -= gone.weight
            self._evicted.append(gone.value)
            if not any(kept.owner == gone.owner for kept in self._kept.values()):
                del self._last_put[gone.owner]

    def _victim(self, *, by_bytes: bool) -> str | None:
        """The least recently used free set of the principal holding the most, among those
        holding more than their fair share of the bound (the bound over the principals that
        hold sets); None when each such principal's sets are all in use."""
        holding: dict[str, int] = {}
        free: dict[str, str] = {}  # each owner's least recently used set not in use
        for key, kept in self._kept.items():
            holding[kept.owner] = holding.get(kept.owner, 0) + (kept.weight if by_bytes else 1)
            if kept.holds == 0:
                free.setdefault(kept.owner, key)
        share = (self.max_bytes if by_bytes else self.max_sets) / len(holding)
        over = [owner for owner in free if holding[owner] > share]
        if not over:
            return None
        owner = max(over, key=lambda name: (holding[name], self._last_put.get(name, -1)))
        return free[owner]
