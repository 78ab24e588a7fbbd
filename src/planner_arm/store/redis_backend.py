"""The shared plan store: one Redis for every replica, through redis-py's asyncio client.

Keys are `<prefix>:plan:<owner>:<id>`, `<prefix>:idem:<owner>:<key>` and
`<prefix>:cache:<owner>:<key>` (`<owner>` the principal's id, a hash), each with Redis's own
expiry (PX). Storing a plan is one script that also keeps the owner's account of plan bytes
(`<prefix>:held:<owner>`, plan ids by expiry, and `<prefix>:sizes:<owner>`, their sizes) and
refuses a plan past the owner's cap. An idempotency key is claimed with SET NX PX (one caller
in all the replicas wins); the others poll it on the injected clock until it holds an answer.
Answering, renewing and letting go are compare-and-set scripts, so a caller whose lease ran out
cannot overwrite, extend or delete the claim of the caller who took the key after it. Every
Redis failure, including a timeout, surfaces as `StoreUnavailable` (`StoreFull` when Redis
refuses a write for want of memory).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError, RedisError, ResponseError

from planner_arm.clock import Clock, Deadline
from planner_arm.errors import StoreFull, StoreUnavailable, TenantQuotaExceeded
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
    milliseconds,
    outcome_of,
    owned,
)

# KEYS[1] the key; ARGV: the claim's text, the answer's text, the TTL in ms.
_COMPLETE = """
local current = redis.call('GET', KEYS[1])
if current == false or current == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
"""
# KEYS[1] the key; ARGV[1] the claim's text.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""
# KEYS[1] the key; ARGV: the claim's text, the lease in ms.
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
# KEYS: the plan, the owner's plan ids by expiry (ms), their sizes (and '#total').
# ARGV: the plan id, its text, the TTL in ms, the owner's cap in bytes (-1: none).
# Returns 0 when stored, else the milliseconds until the owner's oldest plan runs out.
_PUT_PLAN = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
for _, id in ipairs(gone) do
  local size = tonumber(redis.call('HGET', KEYS[3], id) or '0')
  redis.call('HDEL', KEYS[3], id)
  redis.call('HINCRBY', KEYS[3], '#total', -size)
end
if #gone > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now) end
local size = string.len(ARGV[2])
local old = tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or '0')
local total = tonumber(redis.call('HGET', KEYS[3], '#total') or '0')
local quota = tonumber(ARGV[4])
local ttl = tonumber(ARGV[3])
if quota >= 0 and total - old + size > quota then
  local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  if first[2] then return math.max(1, tonumber(first[2]) - now) end
  return ttl
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ttl)
redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], size)
redis.call('HINCRBY', KEYS[3], '#total', size - old)
local keep = math.max(ttl, redis.call('PTTL', KEYS[2]))
redis.call('PEXPIRE', KEYS[2], keep)
redis.call('PEXPIRE', KEYS[3], keep)
return 0
"""
# A claim finds its key gone between SET NX and GET only when it expires or is let go in that
# instant; a few more tries settle it.
_CLAIM_ATTEMPTS = 3


def redis_client(url: str, socket_timeout: float) -> Redis:
    """A client that gives up fast: short timeouts, no backoff, and one immediate reconnect
    when a pooled connection turns out closed (Redis restarted) but no second try after a
    timeout, which would double what a frozen Redis costs."""
    return Redis.from_url(
        url,
        socket_timeout=socket_timeout,
        socket_connect_timeout=socket_timeout,
        retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
        retry_on_timeout=False,
        decode_responses=True,
    )


class RedisStore:
    """Plans, idempotency records and cache entries in Redis, shared by replicas."""

    def __init__(
        self,
        client: Redis,
        *,
        clock: Clock,
        ttl_seconds: float,
        key_prefix: str,
        poll_interval_seconds: float,
        operation_timeout_seconds: float,
        owner_quota_bytes: int | None = None,
    ) -> None:
        """`operation_timeout_seconds` bounds each command whatever the client does inside
        (a reconnect, a handshake): a frozen Redis costs at most that. `owner_quota_bytes`:
        the plan bytes one owner may hold (None: no cap)."""
        self._redis = client
        self._operation_timeout = operation_timeout_seconds
        self._quota = owner_quota_bytes
        self._clock = clock
        self._ttl = ttl_seconds
        self._prefix = key_prefix
        self._poll = poll_interval_seconds
        self._complete = client.register_script(_COMPLETE)
        self._release = client.register_script(_RELEASE)
        self._renew = client.register_script(_RENEW)
        self._put_plan = client.register_script(_PUT_PLAN)

    @property
    def kind(self) -> StoreKind:
        return "redis"

    def key(self, kind: str, name: str) -> str:
        """The Redis key of a record: `<prefix>:<kind>:<name>`."""
        return f"{self._prefix}:{kind}:{name}"

    async def put_plan(
        self, owner: Principal, plan_id: str, record: JSONObject, ttl: float | None = None
    ) -> None:
        px = milliseconds(self._ttl if ttl is None else ttl)
        keys = [
            self.key("plan", owned(owner, plan_id)),
            self.key("held", owner.id),
            self.key("sizes", owner.id),
        ]
        quota = -1 if self._quota is None else self._quota
        wait_ms = await self._run(
            self._put_plan(keys=keys, args=[plan_id, encode(record), px, quota])
        )
        if wait_ms:
            raise TenantQuotaExceeded(
                f"This caller already holds its cap of {self._quota} bytes of stored plans.",
                retry_after=int(wait_ms) / 1000,
            )

    async def get_plan(self, owner: Principal, plan_id: str) -> JSONObject | None:
        return await self._get_json(self.key("plan", owned(owner, plan_id)))

    async def claim(
        self, owner: Principal, key: str, fingerprint: str, *, lease_seconds: float
    ) -> ClaimOutcome:
        name = self.key("idem", owned(owner, key))
        for _ in range(_CLAIM_ATTEMPTS):
            claim = Claimed(
                owner=owner.id, key=key, fingerprint=fingerprint, token=uuid.uuid4().hex
            )
            text = claim_record(claim)
            px = milliseconds(lease_seconds)
            if await self._run(self._redis.set(name, text, nx=True, px=px)):
                return claim
            stored = await self._run(self._redis.get(name))
            if stored is not None:
                return outcome_of(stored, fingerprint)
        return InProgress()

    async def wait(
        self,
        owner: Principal,
        key: str,
        fingerprint: str,
        deadline: Deadline,
        *,
        lease_seconds: float,
    ) -> ClaimOutcome:
        while True:
            outcome = await self.claim(owner, key, fingerprint, lease_seconds=lease_seconds)
            if not isinstance(outcome, InProgress) or deadline.expired:
                return outcome
            await self._clock.sleep(min(self._poll, deadline.remaining()))

    async def complete(
        self, claim: Claimed, response: JSONObject, ttl: float | None = None
    ) -> bool:
        px = milliseconds(self._ttl if ttl is None else ttl)
        args: list[str | int] = [claim_record(claim), answered_record(claim, response), px]
        done = await self._run(self._complete(keys=[self._idem(claim)], args=args))
        return bool(done)

    async def renew(self, claim: Claimed, lease_seconds: float) -> bool:
        args: list[str | int] = [claim_record(claim), milliseconds(lease_seconds)]
        return bool(await self._run(self._renew(keys=[self._idem(claim)], args=args)))

    async def release(self, claim: Claimed) -> None:
        await self._run(self._release(keys=[self._idem(claim)], args=[claim_record(claim)]))

    async def cache_get(self, owner: Principal, key: str) -> JSONObject | None:
        return await self._get_json(self.key("cache", owned(owner, key)))

    async def cache_put(self, owner: Principal, key: str, value: JSONObject, ttl: float) -> None:
        name = self.key("cache", owned(owner, key))
        await self._run(self._redis.set(name, encode(value), px=milliseconds(ttl)))

    async def ping(self) -> None:
        await self._run(self._redis.ping())

    async def healthy(self) -> bool:
        try:
            await self.ping()
        except StoreUnavailable:
            return False
        return True

    async def eviction_policy(self) -> str | None:
        """`maxmemory-policy` as Redis reports it; `unknown` when CONFIG GET is refused (a
        managed Redis, an ACL) and the store's failure when Redis does not answer."""
        try:
            found = await self._run(self._redis.config_get("maxmemory-policy"))
        except StoreFull:
            return "unknown"
        except StoreUnavailable as error:
            if isinstance(error.__cause__, ResponseError):
                return "unknown"
            raise
        return str(found.get("maxmemory-policy") or "unknown")

    async def close(self) -> None:
        # Closing the connections to a Redis that is gone is not worth an error.
        with contextlib.suppress(RedisError, OSError):
            await self._redis.aclose()

    def _idem(self, claim: Claimed) -> str:
        return self.key("idem", f"{claim.owner}:{claim.key}")

    async def _get_json(self, name: str) -> JSONObject | None:
        stored = await self._run(self._redis.get(name))
        return None if stored is None else decode(stored)

    async def _run(self, command: Any) -> Any:
        """Await one Redis command; any failure of Redis becomes StoreUnavailable."""
        try:
            async with asyncio.timeout(self._operation_timeout):
                return await command
        except ResponseError as exc:
            if isinstance(exc, OutOfMemoryError):
                # maxmemory reached under noeviction: writes are refused, reads still work.
                raise StoreFull("the plan store (Redis) is full and refuses writes") from exc
            raise StoreUnavailable(
                f"the plan store (Redis) refused a command ({type(exc).__name__})"
            ) from exc
        except (RedisError, OSError, TimeoutError) as exc:
            # The caller sees the kind of failure; the address and the library's wording stay
            # in the log line of whoever handles it (the chained cause).
            raise StoreUnavailable(
                f"the plan store (Redis) did not answer ({type(exc).__name__})"
            ) from exc
