"""The shared store: Redis, through redis-py's asyncio client, so N replicas see one set of
plans, idempotency claims and cached plans.

Keys are namespaced (`<prefix>:plan:<id>`, `<prefix>:idem:<key>`, `<prefix>:cache:<key>`) and
expire by Redis's own TTL. A claim is one `SET NX PX`, atomic across replicas. The client
retries nothing and every call is bounded by `timeout_seconds`: when Redis is down the service
must learn it at once and answer without it, not wait behind a reconnect loop.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from typing import Any, TypeVar

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from planner_arm.errors import StoreUnavailable
from planner_arm.store.base import Claim, Claimed, Conflict, InProgress, Replay, StoreKind

T = TypeVar("T")
# A claim read back just after another replica released it is claimed again, a few times.
_CLAIM_TRIES = 3


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


class RedisStore:
    kind: StoreKind = "redis"

    def __init__(self, url: str, *, key_prefix: str, timeout_seconds: float) -> None:
        self._timeout = timeout_seconds
        self._prefix = key_prefix
        self._redis: Redis = Redis.from_url(
            url,
            socket_timeout=timeout_seconds,
            socket_connect_timeout=timeout_seconds,
            retry=Retry(NoBackoff(), 0),
            retry_on_timeout=False,
            decode_responses=True,
        )

    def _key(self, namespace: str, key: str) -> str:
        return f"{self._prefix}:{namespace}:{key}"

    async def _call(self, operation: Awaitable[T]) -> T:
        # Twice the socket timeout: a connect and one command, whatever the client does inside.
        try:
            async with asyncio.timeout(self._timeout * 2):
                return await operation
        except (RedisError, OSError, TimeoutError) as error:
            raise StoreUnavailable(f"redis: {type(error).__name__}: {error}"[:200]) from error

    async def _get_json(self, key: str) -> Any | None:
        raw = await self._call(self._redis.get(key))
        return None if raw is None else json.loads(raw)

    async def _set_json(self, key: str, value: Any, ttl_seconds: float) -> None:
        await self._call(self._redis.set(key, json.dumps(value), px=_ms(ttl_seconds)))

    async def put_plan(self, plan_id: str, record: dict[str, Any], ttl_seconds: float) -> None:
        await self._set_json(self._key("plan", plan_id), record, ttl_seconds)

    async def get_plan(self, plan_id: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = await self._get_json(self._key("plan", plan_id))
        return found

    async def claim(self, key: str, fingerprint: str, ttl_seconds: float) -> Claim:
        redis_key = self._key("idem", key)
        held_value = json.dumps({"fingerprint": fingerprint, "record": None})
        for _ in range(_CLAIM_TRIES):
            if await self._call(
                self._redis.set(redis_key, held_value, nx=True, px=_ms(ttl_seconds))
            ):
                return Claimed()
            held = await self._get_json(redis_key)
            if held is None:
                continue  # released or expired between the two calls: claim it again
            if held.get("fingerprint") != fingerprint:
                return Conflict()
            if held.get("record") is None:
                return InProgress()
            return Replay(held["record"])
        return InProgress()

    async def complete(self, key: str, record: dict[str, Any], ttl_seconds: float) -> None:
        redis_key = self._key("idem", key)
        held = await self._get_json(redis_key)
        if held is None:
            return  # the claim expired: nobody is waiting on it any more
        held["record"] = record
        await self._set_json(redis_key, held, ttl_seconds)

    async def release(self, key: str) -> None:
        await self._call(self._redis.delete(self._key("idem", key)))

    async def cache_get(self, key: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = await self._get_json(self._key("cache", key))
        return found

    async def cache_put(self, key: str, record: dict[str, Any], ttl_seconds: float) -> None:
        await self._set_json(self._key("cache", key), record, ttl_seconds)

    async def ping(self) -> bool:
        try:
            return bool(await self._call(self._redis.ping()))
        except StoreUnavailable:
            return False

    async def aclose(self) -> None:
        await self._redis.aclose()
