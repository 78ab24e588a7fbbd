"""The shared plan store: one Redis for every replica, through redis-py's asyncio client.

Keys are `<prefix>:plan:<id>`, `<prefix>:idem:<key>` and `<prefix>:cache:<key>`, each with
Redis's own expiry (PX). An idempotency key is claimed with SET NX PX (one caller in all the
replicas wins); the others poll it on the injected clock until it holds an answer. Answering
and letting go are compare-and-set scripts, so a caller whose lease ran out cannot overwrite
or delete the claim of the caller who took the key after it. Every Redis failure, including
a timeout, surfaces as `StoreUnavailable`.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from planner_arm.clock import Clock, Deadline
from planner_arm.errors import StoreUnavailable
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
    milliseconds,
    outcome_of,
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
# A claim finds its key gone between SET NX and GET only when it expires or is let go in that
# instant; a few more tries settle it.
_CLAIM_ATTEMPTS = 3


def redis_client(url: str, socket_timeout: float) -> Redis:
    """A client that gives up fast: short timeouts and one immediate reconnect, no backoff."""
    return Redis.from_url(
        url,
        socket_timeout=socket_timeout,
        socket_connect_timeout=socket_timeout,
        retry=Retry(NoBackoff(), 1),
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
    ) -> None:
        """`operation_timeout_seconds` bounds each command whatever the client does inside
        (a reconnect, a handshake, its own retry): a frozen Redis costs at most that."""
        self._redis = client
        self._operation_timeout = operation_timeout_seconds
        self._clock = clock
        self._ttl = ttl_seconds
        self._prefix = key_prefix
        self._poll = poll_interval_seconds
        self._complete = client.register_script(_COMPLETE)
        self._release = client.register_script(_RELEASE)

    @property
    def kind(self) -> StoreKind:
        return "redis"

    def key(self, kind: str, name: str) -> str:
        """The Redis key of a record: `<prefix>:<kind>:<name>`."""
        return f"{self._prefix}:{kind}:{name}"

    async def put_plan(self, plan_id: str, record: JSONObject, ttl: float | None = None) -> None:
        px = milliseconds(self._ttl if ttl is None else ttl)
        await self._run(self._redis.set(self.key("plan", plan_id), encode(record), px=px))

    async def get_plan(self, plan_id: str) -> JSONObject | None:
        return await self._get_json(self.key("plan", plan_id))

    async def claim(self, key: str, fingerprint: str, *, lease_seconds: float) -> ClaimOutcome:
        name = self.key("idem", key)
        for _ in range(_CLAIM_ATTEMPTS):
            claim = Claimed(key=key, fingerprint=fingerprint, token=uuid.uuid4().hex)
            text = claim_record(claim)
            px = milliseconds(lease_seconds)
            if await self._run(self._redis.set(name, text, nx=True, px=px)):
                return claim
            stored = await self._run(self._redis.get(name))
            if stored is not None:
                return outcome_of(stored, fingerprint)
        return InProgress()

    async def wait(
        self, key: str, fingerprint: str, deadline: Deadline, *, lease_seconds: float
    ) -> ClaimOutcome:
        while True:
            outcome = await self.claim(key, fingerprint, lease_seconds=lease_seconds)
            if not isinstance(outcome, InProgress) or deadline.expired:
                return outcome
            await self._clock.sleep(min(self._poll, deadline.remaining()))

    async def complete(
        self, claim: Claimed, response: JSONObject, ttl: float | None = None
    ) -> bool:
        px = milliseconds(self._ttl if ttl is None else ttl)
        args: list[str | int] = [claim_record(claim), answered_record(claim, response), px]
        done = await self._run(self._complete(keys=[self.key("idem", claim.key)], args=args))
        return bool(done)

    async def release(self, claim: Claimed) -> None:
        name = self.key("idem", claim.key)
        await self._run(self._release(keys=[name], args=[claim_record(claim)]))

    async def cache_get(self, key: str) -> JSONObject | None:
        return await self._get_json(self.key("cache", key))

    async def cache_put(self, key: str, value: JSONObject, ttl: float) -> None:
        name = self.key("cache", key)
        await self._run(self._redis.set(name, encode(value), px=milliseconds(ttl)))

    async def ping(self) -> None:
        await self._run(self._redis.ping())

    async def healthy(self) -> bool:
        try:
            await self.ping()
        except StoreUnavailable:
            return False
        return True

    async def close(self) -> None:
        # Closing the connections to a Redis that is gone is not worth an error.
        with contextlib.suppress(RedisError, OSError):
            await self._redis.aclose()

    async def _get_json(self, name: str) -> JSONObject | None:
        stored = await self._run(self._redis.get(name))
        return None if stored is None else decode(stored)

    async def _run(self, command: Any) -> Any:
        """Await one Redis command; any failure of Redis becomes StoreUnavailable."""
        try:
            async with asyncio.timeout(self._operation_timeout):
                return await command
        except (RedisError, OSError, TimeoutError) as exc:
            # The caller sees the kind of failure; the address and the library's wording stay
            # in the log line of whoever handles it (the chained cause).
            raise StoreUnavailable(
                f"the plan store (Redis) did not answer ({type(exc).__name__})"
            ) from exc
