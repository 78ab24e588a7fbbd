"""The service as a process behind a reverse proxy: wrong API keys are counted against the
client address the proxy names in X-Forwarded-For when the proxy is trusted
(`FORWARDED_ALLOW_IPS`), and against the proxy itself when it is not."""

from __future__ import annotations

import httpx
import pytest

from support.service import free_port, start_service, stop_services

pytestmark = pytest.mark.slow

KEY = "key-one-0123456789"
GOAL = {"goal": "Fix authentication bug and add tests"}


def statuses(trusted: str, calls: list[tuple[str, str]]) -> list[int]:
    """The statuses of POST /plan sent from loopback with (X-Forwarded-For, key) each, by a
    service that trusts the proxies `trusted` and allows two wrong keys per address."""
    port = free_port()
    env = {
        "PLANNER_API_KEYS": KEY,
        "PLANNER_AUTH__MAX_FAILED_KEYS": "2",
        "FORWARDED_ALLOW_IPS": trusted,
    }
    process, _, reader = start_service(port, env)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            return [
                http.post(
                    "/plan", json=GOAL, headers={"X-Forwarded-For": client, "X-API-Key": key}
                ).status_code
                for client, key in calls
            ]
    finally:
        stop_services([process])
        reader.join(timeout=5)


def test_a_trusted_proxy_names_the_client_whose_wrong_keys_count() -> None:
    calls = [
        ("203.0.113.7", "wrong-1"),
        ("203.0.113.7", "wrong-2"),
        ("203.0.113.7", "wrong-3"),
        ("203.0.113.7", KEY),
        ("198.51.100.9", "wrong-4"),
        ("198.51.100.9", KEY),
    ]
    # Loopback is the proxy here: trusted by default.
    assert statuses("127.0.0.1", calls) == [401, 401, 429, 429, 401, 200]


def test_an_untrusted_peer_is_the_client_whatever_it_forwards() -> None:
    calls = [("203.0.113.7", "wrong-1"), ("198.51.100.9", "wrong-2"), ("192.0.2.1", KEY)]
    assert statuses("10.9.9.9", calls) == [401, 401, 429]
