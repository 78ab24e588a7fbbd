"""How idempotency records are written and read, the same way by every backend.

A record is JSON: `{"fingerprint", "token"}` while its first caller answers (a claim), then
`{"fingerprint", "response"}` once answered. Encoding is canonical (sorted keys), so a claim's
text can be rebuilt from the claim and compared with what the store holds.
"""

from __future__ import annotations

import json
from typing import Any

from planner_arm.store.base import Claimed, ClaimOutcome, Conflict, InProgress, JSONObject, Replay


def encode(value: JSONObject) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def decode(text: str) -> JSONObject:
    value: Any = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("a stored record is not a JSON object")
    return value


def claim_record(claim: Claimed) -> str:
    return encode({"fingerprint": claim.fingerprint, "token": claim.token})


def answered_record(claim: Claimed, response: JSONObject) -> str:
    return encode({"fingerprint": claim.fingerprint, "response": response})


def outcome_of(stored: str, fingerprint: str) -> ClaimOutcome:
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
