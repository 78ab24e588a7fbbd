"""The model call slots of the process, shared fairly among the principals that want them.

At most `capacity` calls are under way at once. Free slots beyond the last `reserved` go to
whoever asks; those last ones go only to a principal with no call under way, or to one below
its fair share (the slots divided among the principals with calls under way or waiting) while
others want slots too. So a principal alone may use all but the reserve, and one that comes
along finds a free slot at once. When a slot frees, the waiter whose principal has the fewest
calls under way gets it (the first to come among equals). So one principal calling at its
allowed rate cannot leave another without a slot, however slow the model.

An owner is any hashable id (the principal's, as the store files its records); llm/ knows
nothing of principals beyond it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from dataclasses import dataclass, field


@dataclass(eq=False)
class _Waiter:
    owner: Hashable
    granted: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class FairSlots:
    """`capacity` call slots, each principal's share kept for it while it wants it."""

    def __init__(self, capacity: int, reserved: int = 0) -> None:
        """`reserved`: slots no principal takes past its share (at most capacity - 1)."""
        self.capacity = capacity
        self.reserved = max(0, min(reserved, capacity - 1))
        self._held: dict[Hashable, int] = {}
        self._in_use = 0
        self._waiting: list[_Waiter] = []

    @property
    def in_use(self) -> int:
        return self._in_use

    def held(self, owner: Hashable) -> int:
        """The calls `owner` has under way now."""
        return self._held.get(owner, 0)

    async def acquire(self, owner: Hashable, wait: float) -> bool:
        """Take a slot for `owner`, waiting at most `wait` seconds; False when none came."""
        if self._may_take(owner):
            self._take(owner)
            return True
        if wait <= 0:
            return False
        waiter = _Waiter(owner)
        self._waiting.append(waiter)
        try:
            async with asyncio.timeout(wait):
                await asyncio.shield(waiter.granted)
        except BaseException as ended:
            self._leave(waiter)
            if isinstance(ended, TimeoutError):
                return False
            raise
        return True

    def release(self, owner: Hashable) -> None:
        """Give back one of `owner`'s slots; the waiter with the fewest calls gets it."""
        left = self._held[owner] - 1
        if left:
            self._held[owner] = left
        else:
            del self._held[owner]
        self._in_use -= 1
        self._grant()

    def _may_take(self, owner: Hashable) -> bool:
        free = self.capacity - self._in_use
        if free <= 0:
            return False
        if free > self.reserved:
            return True  # idle capacity: whoever asks (waiters with the fewest calls first)
        held = self.held(owner)
        if held == 0:
            return True  # the reserve is for a principal with no call under way
        # Else only a principal below its fair share, while others want slots too.
        active = set(self._held) | {waiter.owner for waiter in self._waiting} | {owner}
        return len(active) > 1 and held < self.capacity // len(active)

    def _take(self, owner: Hashable) -> None:
        self._held[owner] = self.held(owner) + 1
        self._in_use += 1

    def _grant(self) -> None:
        while True:
            ready = [waiter for waiter in self._waiting if self._may_take(waiter.owner)]
            if not ready:
                return
            first = min(ready, key=lambda waiter: self.held(waiter.owner))  # stable: FIFO
            self._waiting.remove(first)
            self._take(first.owner)
            first.granted.set_result(None)

    def _leave(self, waiter: _Waiter) -> None:
        """A waiter that gave up or was cancelled: out of the queue, and a slot granted to it
        meanwhile goes back."""
        if waiter in self._waiting:
            self._waiting.remove(waiter)
            self._grant()  # its leaving may let another (over its share) through
        elif waiter.granted.done():
            self.release(waiter.owner)
