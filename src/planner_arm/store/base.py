"""What the service keeps between requests, and on which replicas can agree: stored answers,
idempotency claims, cached plans. One small interface, two backends (memory and Redis).

Records are JSON-ready dicts, so both backends store exactly the same thing. Every failure of
the backend itself is a `StoreUnavailable`, which the planning layer turns into a degraded
answer, never a lost plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

StoreKind = Literal["memory", "redis"]


@dataclass(frozen=True)
class Claimed:
    """The key is this request's now: plan, then `complete` (or `release` on failure)."""


@dataclass(frozen=True)
class InProgress:
    """Another request holds the key and is still planning."""


@dataclass(frozen=True)
class Replay:
    """The key was completed with the same body: `record` is the answer given then."""

    record: dict[str, Any]


@dataclass(frozen=True)
class Conflict:
    """The key was claimed with a different body."""


Claim = Claimed | InProgress | Replay | Conflict


class PlanStore(Protocol):
    kind: StoreKind

    async def put_plan(self, plan_id: str, record: dict[str, Any], ttl_seconds: float) -> None:
        """Keep `record` (the answer and its request) under `plan_id` for `ttl_seconds`."""

    async def get_plan(self, plan_id: str) -> dict[str, Any] | None:
        """The record stored under `plan_id`, or None when there is none (or it expired)."""

    async def claim(self, key: str, fingerprint: str, ttl_seconds: float) -> Claim:
        """Claim an idempotency key for a body (`fingerprint`), atomically across replicas."""

    async def complete(self, key: str, record: dict[str, Any], ttl_seconds: float) -> None:
        """Record the answer of a claimed key; later claims with the same body replay it."""

    async def release(self, key: str) -> None:
        """Give a claimed key up (planning failed), so a retry can claim it."""

    async def cache_get(self, key: str) -> dict[str, Any] | None:
        """A cached plan, or None."""

    async def cache_put(self, key: str, record: dict[str, Any], ttl_seconds: float) -> None:
        """Cache a plan for `ttl_seconds`."""

    async def ping(self) -> bool:
        """True when the backend answers now."""

    async def aclose(self) -> None:
        """Release connections."""
