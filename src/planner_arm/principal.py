"""Who a request is for: the principal whose records, rate, caps and share of the model's call
slots it takes, and how a principal's id is derived from an API key or a tenant's name.

The id is an HMAC-SHA256 of the name (`tenant:<name>` or `key:<key>`), so the store, the logs
and the metrics never hold a key. Without keys every caller is the one `ANONYMOUS` principal.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

# The HMAC key when no `auth.principal_secret` is configured: ids then depend on the keys
# alone, the same on every replica (so a Redis store with keys requires a secret).
FIXED_DERIVATION = b"planner-arm/principal/v1"


@dataclass(frozen=True)
class Principal:
    """Who a record belongs to: `id` is a keyed hash of the API key (or of the tenant's name
    when keys name one), never the key; `tenant` the configured tenant name, if any (bounded:
    it comes from the configuration, never from a request)."""

    id: str
    tenant: str | None = None

    @property
    def label(self) -> str:
        """What a log line may say about the caller: the tenant, else a short hash."""
        return self.tenant or self.id[:12]


# The one principal of a service with no API keys configured.
ANONYMOUS = Principal(id="anonymous", tenant=None)


def principal_id(secret: bytes, kind: str, name: str) -> str:
    return hmac.new(secret, f"{kind}:{name}".encode(), hashlib.sha256).hexdigest()


def principal_of(secret: bytes, tenant: str | None, key: str) -> Principal:
    """The principal a configured key authenticates: its tenant's when the entry names one,
    else the key's own."""
    if tenant is not None:
        return Principal(id=principal_id(secret, "tenant", tenant), tenant=tenant)
    return Principal(id=principal_id(secret, "key", key))
