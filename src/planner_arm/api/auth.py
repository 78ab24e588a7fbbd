"""Who is calling: API keys for the planning endpoints (`Authorization: Bearer <key>` or
`X-API-Key`), the principal each key authenticates, and each principal's request rate.

Every configured key is compared in constant time, and all of them are compared on every
request, so the time taken says nothing about which key (or how much of one) matched. A key
authenticates a principal: its tenant when the entry names one (`tenant:key`), else the key
itself; the principal's id is an HMAC-SHA256 of that name, so the store, the logs and the
metrics never hold a key. Without keys every caller is the one anonymous principal.
"""

from __future__ import annotations

import hashlib
import hmac
import math
from dataclasses import dataclass, field

from fastapi import Request

from planner_arm.clock import Clock
from planner_arm.config import AuthSettings, TenantSettings
from planner_arm.errors import TooManyRequests, Unauthorized
from planner_arm.store.base import ANONYMOUS, Principal

# The HMAC key when no `auth.principal_secret` is configured: ids then depend on the keys
# alone, the same on every replica (so a Redis store with keys requires a secret).
_FIXED_DERIVATION = b"planner-arm/principal/v1"


def principal_id(secret: bytes, kind: str, name: str) -> str:
    return hmac.new(secret, f"{kind}:{name}".encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class KeyRing:
    """The configured keys (as bytes, for constant-time comparison), each with the principal
    it authenticates."""

    entries: tuple[tuple[bytes, Principal], ...] = ()

    @classmethod
    def from_settings(cls, auth: AuthSettings) -> KeyRing:
        secret = _FIXED_DERIVATION
        if auth.principal_secret is not None:
            secret = auth.principal_secret.get_secret_value().encode()
        entries = []
        for tenant, key in auth.key_entries:
            if tenant is not None:
                principal = Principal(id=principal_id(secret, "tenant", tenant), tenant=tenant)
            else:
                principal = Principal(id=principal_id(secret, "key", key))
            entries.append((key.encode(), principal))
        return cls(tuple(entries))

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


def presented_key(request: Request) -> str | None:
    """The API key the request carries, if any."""
    authorization = request.headers.get("authorization", "")
    scheme, _, credentials = authorization.partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    key = request.headers.get("x-api-key", "").strip()
    return key or None


@dataclass
class _Bucket:
    tokens: float
    updated: float


@dataclass
class RequestRates:
    """A token bucket per principal: `requests_per_second`, up to `burst` at once. In this
    process: with several replicas each allows the rate. Principals come from the configured
    keys, so the buckets are bounded."""

    settings: TenantSettings
    clock: Clock
    _buckets: dict[str, _Bucket] = field(default_factory=dict)

    def admit(self, principal: Principal) -> None:
        """Takes one request from the principal's bucket; TooManyRequests when it is empty."""
        rate = self.settings.requests_per_second
        if rate <= 0:
            return
        now = self.clock.now()
        burst = float(self.settings.burst)
        bucket = self._buckets.setdefault(principal.id, _Bucket(burst, now))
        bucket.tokens = min(burst, bucket.tokens + (now - bucket.updated) * rate)
        bucket.updated = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return
        wait = (1.0 - bucket.tokens) / rate
        raise TooManyRequests(
            f"Over this caller's rate of {rate:g} requests a second; try again in "
            f"{math.ceil(wait)} s.",
            retry_after=wait,
        )
