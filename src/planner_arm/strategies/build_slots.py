"""The build slots of the tool sets requests bring, shared fairly between principals.

A slot is a turn in the build lane: building a tool set, building a part of one, ranking its
tools for a request. At most `width` slots are in use at once in the process
(`tool_sets.max_builds`), at most `per_principal` by one principal. A freed slot goes to the
waiting principal with the fewest slots in use, and among equals to the one served least
recently, so a principal that sends one new tool set after another takes turns with the
others instead of going ahead of them. A wait for a slot ends at the request's deadline.

A request that waits for its tool set to be built (for a slot, or for the same set another
request is building) holds the set as it arrived, parsed, meanwhile: those requests are
counted per principal, at most `waiting_per_principal` each, and `waiting` in all, past which
only a principal below its share (`waiting` over the principals waiting, itself included) is
let in, so principals flooding together cannot shut out one more; a request past its bound is
refused at once (429 `tool_sets_busy`) rather than held in memory until its turn.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from planner_arm.clock import Deadline
from planner_arm.errors import ToolSetsBusy

# What a refused caller is told to wait before a retry: about one build.
BUSY_RETRY_SECONDS = 1.0


@dataclass(eq=False)
class _Waiter:
    owner: str
    granted: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class BuildSlots:
    def __init__(
        self, width: int, per_principal: int, waiting_per_principal: int, waiting: int
    ) -> None:
        self.width = width
        self.per_principal = per_principal
        self.waiting_per_principal = waiting_per_principal
        self.max_waiting = waiting
        self._in_use: dict[str, int] = {}
        self._queue: list[_Waiter] = []
        self._waiting: dict[str, int] = {}
        self._turns = itertools.count()
        self._served: dict[str, int] = {}  # each principal's latest slot, for the order

    @property
    def in_use(self) -> int:
        return sum(self._in_use.values())

    def waiting_of(self, owner: str) -> int:
        """The requests of `owner` waiting for their tool sets to be built now."""
        return self._waiting.get(owner, 0)

    def admit(self, owner: str) -> None:
        """ToolSetsBusy when one more request of `owner`'s may not wait for a build: the
        principal, or the service, has its most waiting."""
        mine = self.waiting_of(owner)
        if mine >= self.waiting_per_principal:
            raise ToolSetsBusy(
                f"{mine} of this caller's requests already wait for their tool sets to be "
                "built, the most allowed at once: send fewer new tool sets at once",
                retry_after=BUSY_RETRY_SECONDS,
            )
        if not self._room_for(owner):
            raise ToolSetsBusy(
                f"{self.max_waiting} requests wait for their tool sets to be built, the most "
                "the service holds at once, and this caller has its share of them: try again "
                "shortly",
                retry_after=BUSY_RETRY_SECONDS,
            )

    @asynccontextmanager
    async def waiting(self, owner: str) -> AsyncIterator[None]:
        """One request of `owner` counted as waiting for its tool set while inside;
        refused at once past the bounds (`admit`)."""
        self.admit(owner)
        self._waiting[owner] = self.waiting_of(owner) + 1
        try:
            yield
        finally:
            left = self._waiting[owner] - 1
            if left:
                self._waiting[owner] = left
            else:
                del self._waiting[owner]

    def _room_for(self, owner: str) -> bool:
        """Whether one more request of `owner`'s may wait: below the service's bound, or
        below its share of it."""
        if sum(self._waiting.values()) < self.max_waiting:
            return True
        principals = len(self._waiting.keys() | {owner})
        return self.waiting_of(owner) + 1 <= self.max_waiting / principals

    @asynccontextmanager
    async def slot(self, owner: str, deadline: Deadline) -> AsyncIterator[None]:
        """A slot of `owner`'s, held while inside (see `take`)."""
        await self.take(owner, deadline)
        try:
            yield
        finally:
            self.give_back(owner)

    async def take(self, owner: str, deadline: Deadline) -> None:
        """A slot for `owner`, at once when one is free for it, else when its turn comes;
        ToolSetsBusy when the request's deadline comes first."""
        if self._may_take(owner):
            self._take(owner)
            return
        waiter = _Waiter(owner)
        self._queue.append(waiter)
        try:
            async with asyncio.timeout(deadline.remaining()):
                await asyncio.shield(waiter.granted)
        except BaseException as ended:
            self._leave(waiter)
            if isinstance(ended, TimeoutError):
                raise ToolSetsBusy(
                    "no tool-set build slot came free for this request before its deadline: "
                    "other requests' tool sets were being built; send fewer new tool sets at "
                    "once",
                    retry_after=BUSY_RETRY_SECONDS,
                ) from None
            raise

    def give_back(self, owner: str) -> None:
        """One of `owner`'s slots is free again: it goes to the next waiter in turn."""
        left = self._in_use[owner] - 1
        if left:
            self._in_use[owner] = left
        else:
            del self._in_use[owner]
        self._grant()
        self._forget(owner)

    def _may_take(self, owner: str) -> bool:
        """A slot is free, `owner` is below its share, and no waiter may take it first."""
        if not self._free_for(owner):
            return False
        return not any(self._free_for(waiter.owner) for waiter in self._queue)

    def _free_for(self, owner: str) -> bool:
        return self.in_use < self.width and self._in_use.get(owner, 0) < self.per_principal

    def _take(self, owner: str) -> None:
        self._in_use[owner] = self._in_use.get(owner, 0) + 1
        self._served[owner] = next(self._turns)

    def _grant(self) -> None:
        while True:
            ready = [waiter for waiter in self._queue if self._free_for(waiter.owner)]
            if not ready:
                return
            # The fewest slots in use, then the least recently served; first come among equals.
            first = min(
                ready,
                key=lambda waiter: (
                    self._in_use.get(waiter.owner, 0),
                    self._served.get(waiter.owner, -1),
                ),
            )
            self._queue.remove(first)
            self._take(first.owner)
            first.granted.set_result(None)

    def _leave(self, waiter: _Waiter) -> None:
        """A waiter whose deadline came or that was cancelled: out of the queue, and a slot
        granted to it meanwhile goes to the next."""
        if waiter in self._queue:
            self._queue.remove(waiter)
            self._forget(waiter.owner)
        elif waiter.granted.done():
            self.give_back(waiter.owner)

    def _forget(self, owner: str) -> None:
        """A principal with no slot and no waiter leaves no trace (the table stays bounded
        by the principals at work)."""
        if owner not in self._in_use and all(waiter.owner != owner for waiter in self._queue):
            self._served.pop(owner, None)
