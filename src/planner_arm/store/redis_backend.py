"""The shared plan store: one Redis for every replica, through redis-py's asyncio client.

Records are `<prefix>:plan:<owner>:<plan id>`, `<prefix>:cache:<owner>:<entry id>` and
`<prefix>:idempotency:<owner>:<key id>` (`<owner>` the principal's id, a hash; `<key id>` a
digest of the caller's Idempotency-Key, never its text), each with Redis's own expiry (PX).
Redis runs with `noeviction`, so nothing pushes one owner's records out for another's: each
owner's bytes of each kind are counted, by the same script that writes the record, in an
account of its own, three keys apart from every record: `<prefix>:held:<kind>:<owner>`
(record ids by expiry), `<prefix>:sizes:<kind>:<owner>` (what each holds) and
`<prefix>:total:<kind>:<owner>` (their sum). What a record holds in Redis is counted: its
text's UTF-8 bytes as the allocator rounds them, its key's name, its id twice in the account
and `RECORD_BYTES` of Redis's own. A plan past the owner's cap is refused; an answer or a
cache entry past it pushes out the owner's own records nearest their end. An idempotency key
is claimed with SET NX PX (one caller in all the replicas wins); the others poll it on the
injected clock until it holds an answer. Answering, renewing and letting go are
compare-and-set scripts, so a caller whose lease ran out cannot overwrite, extend or delete
the claim of the caller who took the key after it. Every Redis failure, including a timeout,
surfaces as `StoreUnavailable` (`StoreFull` when Redis refuses a write for want of memory).

Records of the layout before (accounts `held:<owner>`, `sizes:<owner>` and the like, with the
sum in a field `#total`; idempotency records `idem:<owner>:<key>`) are left alone and expire
by their TTL: plans and cache entries, whose names did not change, are still read (and not
counted in the new accounts); no other new name is an old one, so nothing old is read as new.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import uuid
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError, RedisError, ResponseError

from planner_arm.clock import Clock, Deadline
from planner_arm.errors import StoreFull, StoreUnavailable
from planner_arm.principal import Principal
from planner_arm.store.base import (
    NO_CAPS,
    Claimed,
    ClaimOutcome,
    InProgress,
    JSONObject,
    OwnerCaps,
    StoreKind,
    answered_record,
    claim_record,
    decode,
    encode,
    milliseconds,
    outcome_of,
    owned,
    quota_exceeded,
    utf8,
)

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
# What a record holds in Redis besides its text, its key's name and its id's two copies in
# its owner's account, as Redis's used_memory grows with each (Redis 7, jemalloc): the key's
# entries in the keyspace and in the expiry table, the value's header, the id's node in the
# sorted set and its field in the hash, and the allocator's rounding.
RECORD_BYTES = 280

# An owner's account of one kind of record, three keys (`a`): its record ids by expiry (ms, a
# sorted set), their sizes (a hash), and the sum of those sizes, in a key of its own, so that
# no record id, whatever its text, is ever the name of the sum. Lua's string.len counts bytes.
_ACCOUNT = (
    f"local RECORD_BYTES = {RECORD_BYTES}\n"
    + """
local function now_ms()
  -- To the microsecond, so records written one after another keep their order.
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end
local function account_of(first) return {KEYS[first], KEYS[first + 1], KEYS[first + 2]} end
-- What the allocator gives for `n` bytes: jemalloc's size classes, four to each doubling, so
-- a text just past a class takes up to a quarter more than its length.
local function allocated(n)
  if n <= 128 then return math.ceil(n / 16) * 16 end
  local step = 2 ^ (math.floor(math.log(n - 1) / math.log(2)) - 2)
  return math.ceil(n / step) * step
end
-- What a record holds: its text, its key's name, its id in the sorted set and in the hash.
local function weight(key, id, text)
  return allocated(string.len(text)) + string.len(key) + 2 * string.len(id) + RECORD_BYTES
end
local function size_of(a, id) return tonumber(redis.call('HGET', a[2], id) or '0') end
-- The sum kept; summed afresh from the sizes when its key is gone or it went wrong.
local function total(a)
  local sum = tonumber(redis.call('GET', a[3]) or '-1')
  if sum and sum >= 0 then return sum end
  sum = 0
  for _, size in ipairs(redis.call('HVALS', a[2])) do sum = sum + tonumber(size) end
  return sum
end
local function forget(a, id)
  local sum = total(a) - size_of(a, id)
  redis.call('HDEL', a[2], id)
  redis.call('ZREM', a[1], id)
  if redis.call('EXISTS', a[3]) == 1 then redis.call('SET', a[3], sum, 'KEEPTTL') end
end
local function purge(a, now)
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', a[1], '-inf', now)) do forget(a, id) end
end
local function account(a, id, size, now, ttl)
  local sum = total(a) - size_of(a, id) + size
  redis.call('HSET', a[2], id, size)
  redis.call('ZADD', a[1], now + ttl, id)
  redis.call('SET', a[3], sum)
  local keep = math.max(ttl, redis.call('PTTL', a[1]))
  for _, key in ipairs(a) do redis.call('PEXPIRE', key, keep) end
end
-- The owner's records nearest their end (keys `prefix .. id`) go until `size` more bytes
-- for `id` fit under `cap`; `id` itself stays.
local function evict(a, prefix, id, size, cap)
  while cap >= 0 and total(a) - size_of(a, id) + size > cap do
    local first = redis.call('ZRANGE', a[1], 0, 1)
    local victim = first[1]
    if victim == id then victim = first[2] end
    if not victim then return end
    redis.call('DEL', prefix .. victim)
    forget(a, victim)
  end
end
"""
)
# KEYS: the plan, the owner's plan account (ids by expiry, sizes, their sum). ARGV: the plan
# id, its text, the TTL in ms, the owner's cap in bytes (-1: none).
# Returns 0 when stored, else the milliseconds until the owner's oldest plan runs out.
_PUT_PLAN = (
    _ACCOUNT
    + """
local a, now = account_of(2), now_ms()
purge(a, now)
local size, ttl, cap = weight(KEYS[1], ARGV[1], ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if cap >= 0 and total(a) - size_of(a, ARGV[1]) + size > cap then
  local first = redis.call('ZRANGE', a[1], 0, 0, 'WITHSCORES')
  if first[2] then return math.max(1, tonumber(first[2]) - now) end
  return ttl
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ttl)
account(a, ARGV[1], size, now, ttl)
return 0
"""
)
# KEYS: the cache entry, the owner's cache account. ARGV: the entry's id, its text, the TTL
# in ms, the owner's cap in bytes (-1: none), the prefix of the owner's entry keys.
_PUT_CACHE = (
    _ACCOUNT
    + """
local a, now = account_of(2), now_ms()
purge(a, now)
local size, ttl = weight(KEYS[1], ARGV[1], ARGV[2]), tonumber(ARGV[3])
evict(a, ARGV[5], ARGV[1], size, tonumber(ARGV[4]))
redis.call('SET', KEYS[1], ARGV[2], 'PX', ttl)
account(a, ARGV[1], size, now, ttl)
return 0
"""
)
# KEYS: the idempotency key, the owner's account of answers. ARGV: the claim's text, the
# answer's text, the TTL in ms, the owner's cap in bytes (-1: none), the prefix of the
# owner's keys, the key's id. Only answers are accounted: a claim is small and lives for a
# lease.
_COMPLETE = (
    _ACCOUNT
    + """
local current = redis.call('GET', KEYS[1])
if current ~= false and current ~= ARGV[1] then return 0 end
local a, now = account_of(2), now_ms()
purge(a, now)
local size, ttl = weight(KEYS[1], ARGV[6], ARGV[2]), tonumber(ARGV[3])
evict(a, ARGV[5], ARGV[6], size, tonumber(ARGV[4]))
redis.call('SET', KEYS[1], ARGV[2], 'PX', ttl)
account(a, ARGV[6], size, now, ttl)
return 1
"""
)
# A claim finds its key gone between SET NX and GET only when it expires or is let go in that
# instant; a few more tries settle it.
_CLAIM_ATTEMPTS = 3


def key_id(key: str) -> str:
    """The id an Idempotency-Key is filed under: a digest of fixed length, so a caller's key,
    whatever its length or its characters, names no other record and costs no more room."""
    return hashlib.blake2b(utf8(key), digest_size=16).hexdigest()


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
        # A lone surrogate in a name or a text travels as its bytes, as in the memory store.
        encoding_errors="surrogatepass",
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
        caps: OwnerCaps = NO_CAPS,
    ) -> None:
        """`operation_timeout_seconds` bounds each command whatever the client does inside
        (a reconnect, a handshake): a frozen Redis costs at most that. `caps`: what one
        owner may hold of each kind of record."""
        self._redis = client
        self._operation_timeout = operation_timeout_seconds
        self._caps = caps
        self._clock = clock
        self._ttl = ttl_seconds
        self._prefix = key_prefix
        self._poll = poll_interval_seconds
        self._complete = client.register_script(_COMPLETE)
        self._release = client.register_script(_RELEASE)
        self._renew = client.register_script(_RENEW)
        self._put_plan = client.register_script(_PUT_PLAN)
        self._put_cache = client.register_script(_PUT_CACHE)

    @property
    def kind(self) -> StoreKind:
        return "redis"

    @property
    def shared(self) -> bool:
        return True

    @property
    def system(self) -> str | None:
        return "redis"

    def key(self, kind: str, name: str) -> str:
        """The Redis key of a record: `<prefix>:<kind>:<name>`."""
        return f"{self._prefix}:{kind}:{name}"

    async def put_plan(
        self, owner: Principal, plan_id: str, record: JSONObject | str, ttl: float | None = None
    ) -> None:
        px = milliseconds(self._ttl if ttl is None else ttl)
        keys = [self.key("plan", owned(owner, plan_id)), *self.account_keys("plan", owner.id)]
        cap = self._caps.plan_bytes
        args: list[str | int] = [plan_id, encode(record), px, -1 if cap is None else cap]
        wait_ms = await self._run(self._put_plan(keys=keys, args=args))
        if wait_ms:
            assert cap is not None  # only a cap refuses
            raise quota_exceeded("plan", cap, int(wait_ms) / 1000)

    async def get_plan(self, owner: Principal, plan_id: str) -> JSONObject | None:
        return await self._get_json(self.key("plan", owned(owner, plan_id)))

    async def claim(
        self, owner: Principal, key: str, fingerprint: str, *, lease_seconds: float
    ) -> ClaimOutcome:
        name = self.key("idempotency", owned(owner, key_id(key)))
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
        cap = self._caps.idempotency_bytes
        args: list[str | int] = [
            claim_record(claim),
            answered_record(claim, response),
            px,
            -1 if cap is None else cap,
            self.key("idempotency", f"{claim.owner}:"),
            key_id(claim.key),
        ]
        keys = [self._idem(claim), *self.account_keys("idempotency", claim.owner)]
        return bool(await self._run(self._complete(keys=keys, args=args)))

    async def renew(self, claim: Claimed, lease_seconds: float) -> bool:
        args: list[str | int] = [claim_record(claim), milliseconds(lease_seconds)]
        return bool(await self._run(self._renew(keys=[self._idem(claim)], args=args)))

    async def release(self, claim: Claimed) -> None:
        await self._run(self._release(keys=[self._idem(claim)], args=[claim_record(claim)]))

    async def cache_get(self, owner: Principal, key: str) -> JSONObject | None:
        return await self._get_json(self.key("cache", owned(owner, key)))

    async def cache_put(self, owner: Principal, key: str, value: JSONObject, ttl: float) -> None:
        cap = self._caps.cache_bytes
        args: list[str | int] = [
            key,
            encode(value),
            milliseconds(ttl),
            -1 if cap is None else cap,
            self.key("cache", f"{owner.id}:"),
        ]
        keys = [self.key("cache", owned(owner, key)), *self.account_keys("cache", owner.id)]
        await self._run(self._put_cache(keys=keys, args=args))

    def account_keys(self, kind: str, owner_id: str) -> list[str]:
        """The Redis keys of an owner's account of `kind` (plan, idempotency, cache): its record ids
        by expiry, their sizes, and the sum of those."""
        return [self.key(part, f"{kind}:{owner_id}") for part in ("held", "sizes", "total")]

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
        return self.key("idempotency", f"{claim.owner}:{key_id(claim.key)}")

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
