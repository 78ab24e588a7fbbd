"""API keys for the planning endpoints: `Authorization: Bearer <key>` or `X-API-Key`.

Every configured key is compared in constant time, and all of them are compared on every
request, so the time taken says nothing about which key (or how much of one) matched.
"""

from __future__ import annotations

import hmac

from fastapi import Request

from planner_arm.errors import Unauthorized


def presented_key(request: Request) -> str | None:
    """The API key the request carries, if any."""
    authorization = request.headers.get("authorization", "")
    scheme, _, credentials = authorization.partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    key = request.headers.get("x-api-key", "").strip()
    return key or None


def key_matches(presented: str, keys: list[bytes]) -> bool:
    given = presented.encode()
    matched = False
    for key in keys:
        matched |= hmac.compare_digest(given, key)
    return matched


def check_api_key(request: Request, keys: list[bytes]) -> None:
    """Passes when no keys are configured, or when the request carries one of them."""
    if not keys:
        return
    presented = presented_key(request)
    if presented is None:
        raise Unauthorized("an API key is required: Authorization: Bearer <key> or X-API-Key")
    if not key_matches(presented, keys):
        raise Unauthorized("the API key is not valid")
