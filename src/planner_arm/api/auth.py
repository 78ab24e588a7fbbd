"""Who is calling: API keys for the planning endpoints (`Authorization: Bearer <key>` or
`X-API-Key`), the principal each key authenticates, each principal's request rate, and the
wrong keys each client address may try.

Every configured key is compared in constant time, and all of them are compared on every
request, so the time taken says nothing about which key (or how much of one) matched. A key
authenticates a principal: its tenant when the entry names one (`tenant:key`), else the key
itself; the principal's id is an HMAC-SHA256 of that name, so the store, the logs and the
metrics never hold a key. Without keys every caller is the one anonymous principal, within
the one request rate.

Wrong keys are counted per client address (the ASGI client: the peer, or the address a
trusted proxy names in X-Forwarded-For; an IPv6 client by its /64, which one host usually
holds whole): past the configured number the address is refused with 429 before its key is
looked at, so guessing runs at the refill rate, and a right key earns nothing until then.
"""

from __future__ import annotations

import hmac
import ipaddress
import math
from collections import OrderedDict
from dataclasses import dataclass, field

import structlog
from fastapi import Request
from starlette.types import Scope

from planner_arm.clock import Clock
from planner_arm.config import AuthSettings, Settings, TenantSettings
from planner_arm.errors import FailedKeysLimited, TooManyRequests, Unauthorized
from planner_arm.principal import ANONYMOUS, FIXED_DERIVATION, Principal, principal_of

log = structlog.get_logger("planner_arm.api.auth")

# The bind addresses that reach only this machine.
_LOOPBACK_NAMES = {"localhost", "ip6-localhost"}


@dataclass(frozen=True)
class KeyRing:
    """The configured keys (as bytes, for constant-time comparison), each with the principal
    it authenticates."""

    entries: tuple[tuple[bytes, Principal], ...] = ()

    @classmethod
    def from_settings(cls, auth: AuthSettings) -> KeyRing:
        secret = FIXED_DERIVATION
        if auth.principal_secret is not None:
            secret = auth.principal_secret.get_secret_value().encode()
        return cls(
            tuple(
                (key.encode(), principal_of(secret, tenant, key))
                for tenant, key in auth.key_entries
            )
        )

    @property
    def enabled(self) -> bool:
        return bool(self.entries)

    def principal_for(self, request: Request) -> Principal:
        """The caller's principal; Unauthorized without a valid key (when keys are set)."""
        if not self.entries:
            return ANONYMOUS
        presented = presented_key(request)
        if presented is None:
            raise Unauthorized("an API key is required: Authorization: Bearer <key> or X-API-Key")
        given = presented.encode()
        found: Principal | None = None
        for key, principal in self.entries:
            if hmac.compare_digest(given, key):
                found = principal
        if found is None:
            raise Unauthorized("the API key is not valid")
        return found


def log_key_entries(auth: AuthSettings) -> None:
    """One start-up line for each configured key saying how it was read: its place in the
    list and its tenant, never the key (a plain key's tenant is derived from the key)."""
    for number, (tenant, _) in enumerate(auth.key_entries, start=1):
        log.info(
            "api_key_read",
            entry=number,
            tenant=tenant,
            read_as="named tenant" if tenant else "key only, tenant derived from the key",
        )


def presented_key(request: Request) -> str | None:
    """The API key the request carries, if any."""
    authorization = request.headers.get("authorization", "")
    scheme, _, credentials = authorization.partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    key = request.headers.get("x-api-key", "").strip()
    return key or None


def client_address(scope: Scope) -> str:
    """Whom a request's failed keys are counted against: the client's address, an IPv6
    client's /64 network."""
    client = scope.get("client")
    host = client[0] if client else ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host or "unknown"
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:  # an IPv4 client of a dual-stack socket
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


def is_loopback(host: str) -> bool:
    """Whether a bind address (or name) reaches only this machine."""
    name = host.strip().strip("[]").lower()
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def serving_without_keys(settings: Settings) -> bool:
    """True when the service listens beyond this machine and asks no caller for a key."""
    return not settings.auth.enabled and not is_loopback(settings.server.host)


@dataclass
class _Bucket:
    tokens: float
    updated: float


@dataclass
class TokenBuckets:
    """A token bucket per name: `rate` tokens a second, up to `burst`; the `capacity` names
    used last are kept (one forgotten starts full again). In this process: with several
    replicas each counts its own."""

    rate: float
    burst: float
    clock: Clock
    capacity: int
    _buckets: OrderedDict[str, _Bucket] = field(default_factory=OrderedDict)

    def wait(self, name: str, take: bool) -> float:
        """Seconds until `name` has a token (0.0: it has one now); takes it when `take` and
        there is one. Only taking remembers a name."""
        if not take and name not in self._buckets:
            return 0.0  # a full bucket
        now = self.clock.now()
        bucket = self._buckets.pop(name, None) or _Bucket(self.burst, now)
        self._buckets[name] = bucket  # the most recently used, last
        if len(self._buckets) > self.capacity:
            self._buckets.popitem(last=False)
        bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.updated) * self.rate)
        bucket.updated = now
        if bucket.tokens < 1.0:
            return (1.0 - bucket.tokens) / self.rate
        if take:
            bucket.tokens -= 1.0
        return 0.0


@dataclass
class RequestRates:
    """Each principal's request rate: `requests_per_second`, up to `burst` at once (the one
    anonymous principal's without keys). Principals come from the configured keys, so the
    buckets are bounded."""

    settings: TenantSettings
    clock: Clock
    _buckets: TokenBuckets = field(init=False)

    def __post_init__(self) -> None:
        rate = self.settings.requests_per_second
        self._buckets = TokenBuckets(rate, float(self.settings.burst), self.clock, 1_000_000)

    def admit(self, principal: Principal) -> None:
        """Takes one request from the principal's bucket; TooManyRequests when it is empty."""
        rate = self.settings.requests_per_second
        if rate <= 0:
            return
        wait = self._buckets.wait(principal.id, take=True)
        if wait > 0:
            raise TooManyRequests(
                f"Over this caller's rate of {rate:g} requests a second; try again in "
                f"{math.ceil(wait)} s.",
                retry_after=wait,
            )


@dataclass
class KeyCheck:
    """A planning request's key, checked: the keys, and the wrong keys each client address
    has tried (`max_failed_keys` at once, then as many a `failed_keys_window_seconds`)."""

    keys: KeyRing
    settings: AuthSettings
    clock: Clock
    _failures: TokenBuckets = field(init=False)

    def __post_init__(self) -> None:
        allowed = float(self.settings.max_failed_keys)
        rate = allowed / self.settings.failed_keys_window_seconds
        self._failures = TokenBuckets(rate, allowed, self.clock, self.settings.tracked_addresses)

    def principal_for(self, request: Request) -> Principal:
        """The caller's principal. Unauthorized without a valid key (when keys are set);
        FailedKeysLimited, without looking at the key, from an address past its wrong keys."""
        if not self.keys.enabled:
            return ANONYMOUS
        address = client_address(request.scope)
        wait = self._failures.wait(address, take=False)
        if wait > 0:
            raise FailedKeysLimited(
                f"Too many wrong API keys from this address; try again in {math.ceil(wait)} s.",
                retry_after=wait,
            )
        try:
            return self.keys.principal_for(request)
        except Unauthorized:
            if presented_key(request) is not None:  # a wrong key, not a forgotten one
                self._failures.wait(address, take=True)
            raise
