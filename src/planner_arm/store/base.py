"""What every plan store offers, who owns its records, and the outcomes of claiming an
idempotency key.

A store keeps three kinds of JSON records, each with a TTL: plan records (an answer and the
request it answered), idempotency records (who is answering a key, then the answer), and plan
cache entries. Every record belongs to a `Principal` (the caller's API key, as a keyed hash, or
the one anonymous principal when no keys are configured): a record is found only by its owner,
and another owner's id reads exactly like an unknown one. Backends: memory (one process) and
Redis (shared by replicas). Every method of the Redis backend raises `StoreUnavailable` when
Redis fails, so callers can fail soft; `put_plan` raises `TenantQuotaExceeded` when the owner
already holds its cap of plan bytes (`OwnerCaps`).

Idempotency, as a caller sees it::

    outcome = await store.claim(owner, key, fingerprint, lease_seconds=timeout)
    if isinstance(outcome, InProgress):
        outcome = await store.wait(owner, key, fingerprint, deadline, lease_seconds=timeout)
    match outcome:
        case Claimed():   answer (renewing the lease while it works), then
                          `complete(outcome, answer)`; on failure `release(outcome)`
        case Replay():    outcome.response is the first caller's answer
        case Conflict():  same key, different body
        case InProgress(): the first caller is still at it when the deadline ran out

An idempotency record is JSON: `{"fingerprint", "token"}` while its first caller answers (a
claim), then `{"fingerprint", "response"}` once answered. Encoding is canonical (sorted keys),
so a claim's text can be rebuilt from the claim and compared with what the store holds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import structlog

from planner_arm.clock import Deadline
from planner_arm.errors import StoreUnavailable, TenantQuotaExceeded
from planner_arm.metrics import PlannerMetrics
from planner_arm.principal import Principal

JSONObject = dict[str, Any]
StoreKind = Literal["memory", "redis"]
RecordKind = Literal["plan", "idempotency", "cache"]


@dataclass(frozen=True)
class OwnerCaps:
    """The bytes of each kind of record one owner may hold, as its store counts what a record
    holds (its JSON's UTF-8 bytes, its name and its place in the store); None: no cap.

    Past `plan_bytes` a plan is refused (429 `tenant_quota_exceeded`: a stored plan is the
    caller's to keep for its TTL). Past `idempotency_bytes` (answers kept for keys) and
    `cache_bytes` the owner's own records nearest their end go first. Every cap counts only
    the owner's records, so no owner's traffic takes another's room."""

    plan_bytes: int | None = None
    idempotency_bytes: int | None = None
    cache_bytes: int | None = None


NO_CAPS = OwnerCaps()
_CAPPED = {"plan": "stored plans", "idempotency": "idempotency records", "cache": "cache entries"}


def quota_exceeded(kind: RecordKind, cap: int, retry_after: float) -> TenantQuotaExceeded:
    """The refusal of a record that would take its owner past `cap` bytes of `kind`."""
    return TenantQuotaExceeded(
        f"This caller already holds its cap of {cap} bytes of {_CAPPED[kind]}.",
        retry_after=retry_after,
    )


@dataclass(frozen=True)
class Claimed:
    """This caller holds the key: it answers, then completes or releases the claim."""

    owner: str  # the principal's id: a key is only ever its owner's
    key: str
    fingerprint: str
    # Tells this claim from a later one on the same key (after the lease ran out).
    token: str


@dataclass(frozen=True)
class Replay:
    """The key was answered before with the same body: this is that answer."""

    response: JSONObject


@dataclass(frozen=True)
class Conflict:
    """The key was used with a different body."""


@dataclass(frozen=True)
class InProgress:
    """Another caller holds the key with the same body and has not answered yet."""


ClaimOutcome = Claimed | Replay | Conflict | InProgress


class PlanStore(Protocol):
    """The records the service shares across replicas. `ttl` None means the store's default."""

    @property
    def kind(self) -> StoreKind:
        """Which store it is, for logs and /health."""

    @property
    def shared(self) -> bool:
        """Whether every replica reads the same records (then one cache serves them all)."""

    @property
    def system(self) -> str | None:
        """The database its operations call out of the process (a span's `db.system.name`);
        None for a store inside the process."""

    async def put_plan(
        self, owner: Principal, plan_id: str, record: JSONObject | str, ttl: float | None = None
    ) -> None:
        """Keep a plan record (the answer and the request it answered) for `owner`, given as
        a JSON object or as its JSON text; raises TenantQuotaExceeded when that would take the
        owner past its cap of plan bytes."""

    async def get_plan(self, owner: Principal, plan_id: str) -> JSONObject | None:
        """The owner's plan record, or None when unknown, expired or another owner's."""

    async def claim(
        self, owner: Principal, key: str, fingerprint: str, *, lease_seconds: float
    ) -> ClaimOutcome:
        """Take the owner's idempotency key for `lease_seconds`, or say who has it and how."""

    async def wait(
        self,
        owner: Principal,
        key: str,
        fingerprint: str,
        deadline: Deadline,
        *,
        lease_seconds: float,
    ) -> ClaimOutcome:
        """Wait for the holder's answer; claims the key if the holder let it go.

        InProgress only when the deadline runs out first."""

    async def complete(
        self, claim: Claimed, response: JSONObject, ttl: float | None = None
    ) -> bool:
        """Store the answer for the key; False when the claim was lost (its lease ran out and
        another caller took the key), in which case the other caller's answer stands."""

    async def renew(self, claim: Claimed, lease_seconds: float) -> bool:
        """Extend the claim's lease while its caller still works; False when it is lost."""

    async def release(self, claim: Claimed) -> None:
        """Let the key go after a failure, so the next request with it starts afresh."""

    async def cache_get(self, owner: Principal, key: str) -> JSONObject | None:
        """The owner's plan cache entry, or None."""

    async def cache_put(self, owner: Principal, key: str, value: JSONObject, ttl: float) -> None:
        """Keep a plan cache entry of the owner's for `ttl` seconds."""

    async def ping(self) -> None:
        """Return when the store answers; raise StoreUnavailable otherwise."""

    async def healthy(self) -> bool:
        """True when the store answers now."""

    async def eviction_policy(self) -> str | None:
        """Redis's `maxmemory-policy`; `unknown` when it may not be read; None in memory."""

    async def close(self) -> None:
        """Release connections; the store is not used after this."""


def owned(owner: Principal, name: str) -> str:
    """The name of a record within its owner's records."""
    return f"{owner.id}:{name}"


def note_store_failure(metrics: PlannerMetrics, operation: str, error: StoreUnavailable) -> None:
    """A store operation that failed: the answer goes out without it, and the metric and the
    log line say so."""
    metrics.child(metrics.store_errors, operation).inc()
    cause = error.__cause__
    structlog.get_logger("planner_arm.store").warning(
        "store_failed", operation=operation, error=error.detail, cause=str(cause or "")[:200]
    )


def encode(value: JSONObject | str) -> str:
    """A record's JSON text; a text is taken as the record's JSON already (the service writes
    a plan record's JSON once, from its model)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def utf8(text: str) -> bytes:
    """A text as the store holds it. A lone surrogate (JSON may escape one into a string) is
    kept as its three bytes rather than refused: every string is a name or a text like any
    other."""
    return text.encode("utf-8", "surrogatepass")


def decode(stored: str | bytes) -> JSONObject:
    text = stored.decode("utf-8", "surrogatepass") if isinstance(stored, bytes) else stored
    value: Any = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("a stored record is not a JSON object")
    return value


def claim_record(claim: Claimed) -> str:
    return encode({"fingerprint": claim.fingerprint, "token": claim.token})


def answered_record(claim: Claimed, response: JSONObject) -> str:
    return encode({"fingerprint": claim.fingerprint, "response": response})


def outcome_of(stored: str | bytes, fingerprint: str) -> ClaimOutcome:
    """What a caller with `fingerprint` gets from a key that already holds `stored`."""
    record = decode(stored)
    if record.get("fingerprint") != fingerprint:
        return Conflict()
    response = record.get("response")
    if isinstance(response, dict):
        return Replay(response)
    return InProgress()


def milliseconds(seconds: float) -> int:
    """A TTL for Redis's PX: whole milliseconds, never zero (zero would be refused)."""
    return max(1, round(seconds * 1000))
