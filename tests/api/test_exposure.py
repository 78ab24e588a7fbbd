"""A service reachable beyond this machine: it says so when it asks no caller for a key (the
start-up log, /health), limits the anonymous caller's rate too, limits the wrong keys one
client address may try, and keeps a stored plan out of shared caches."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs
from typer.testing import CliRunner

from planner_arm.api.app import create_app
from planner_arm.api.auth import client_address
from planner_arm.config import Settings
from support.app import FakeClock, make_settings, running_app, with_lifespan

GOAL = {"goal": "Fix authentication bug and add tests"}
KEY = "key-one-0123456789"
GOOD = {"X-API-Key": KEY}
WRONG = {"X-API-Key": "key-one-0123456780"}
REPO = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[[0-9;]*m")
EVERYWHERE = "0.0.0.0"  # noqa: S104 (only the settings' host: nothing binds it here)


def settings_for(host: str, **overrides: Any) -> Settings:
    return make_settings(llm=False, server={"host": host}, **overrides)


async def start_up_log(settings: Settings) -> list[dict[str, Any]]:
    """The log lines of the app's start-up."""
    app = create_app(settings, http_client=httpx.AsyncClient())
    with capture_logs() as logs:  # after create_app, which configures logging
        async with with_lifespan(app):
            pass
    return logs


@pytest.mark.parametrize("host", [EVERYWHERE, "::", "10.1.2.3", "planner.internal"])
async def test_serving_beyond_loopback_without_keys_is_a_warning_at_start_up(host: str) -> None:
    logs = await start_up_log(settings_for(host))
    [warning] = [line for line in logs if line["event"] == "serving_without_keys"]
    assert warning["log_level"] == "warning"
    assert warning["host"] == host
    assert "PLANNER_API_KEYS" in warning["fix"]
    assert warning["requests_per_second"] == 20.0


async def test_the_warning_reads_as_the_configuration_reference_prints_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = make_settings(llm=False, server={"host": EVERYWHERE, "log_format": "console"})
    app = create_app(settings, http_client=httpx.AsyncClient())
    async with with_lifespan(app):
        pass
    printed = [
        ANSI.sub("", line).split(" ", 1)[1]  # colours and the timestamp cut, as the docs do
        for line in capsys.readouterr().err.splitlines()
        if "serving_without_keys" in line
    ]
    reference = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    documented = [line for line in reference.splitlines() if line.startswith("[warning  ] serv")]
    assert len(printed) == 1
    assert printed == documented


@pytest.mark.parametrize(
    ("host", "auth"),
    [
        ("127.0.0.1", {}),
        ("localhost", {}),
        ("::1", {}),
        (EVERYWHERE, {"api_keys": [KEY]}),
    ],
)
async def test_loopback_or_keys_start_without_the_warning(host: str, auth: dict[str, Any]) -> None:
    logs = await start_up_log(settings_for(host, auth=auth))
    assert "service_started" in [line["event"] for line in logs]
    assert "serving_without_keys" not in [line["event"] for line in logs]


async def test_health_says_when_the_service_is_open_beyond_loopback() -> None:
    async with running_app(settings_for(EVERYWHERE)) as client:
        exposed = (await client.get("/health")).json()
    async with running_app(settings_for("127.0.0.1")) as client:
        local = (await client.get("/health")).json()
    async with running_app(settings_for(EVERYWHERE, auth={"api_keys": [KEY]})) as client:
        keyed = (await client.get("/health")).json()
    assert exposed["auth"] == "none"
    [warning] = exposed["warnings"]
    assert warning["code"] == "serving_without_keys"
    assert "PLANNER_API_KEYS" in warning["detail"]
    assert (local["auth"], local["warnings"]) == ("none", [])
    assert (keyed["auth"], keyed["warnings"]) == ("keys", [])


async def test_the_anonymous_caller_has_a_request_rate_too(fake_clock: FakeClock) -> None:
    settings = make_settings(llm=False, tenants={"requests_per_second": 0.5, "burst": 2})
    async with running_app(settings, fake_clock) as client:
        first = [(await client.post("/plan", json=GOAL)).status_code for _ in range(2)]
        over = await client.post("/plan", json=GOAL)
        probe = await client.get("/health")  # the probes are not planning requests
        fake_clock.time += 2.0
        later = await client.post("/plan", json=GOAL)
    assert first == [200, 200]
    assert over.status_code == 429
    assert over.json()["error"] == "rate_limited"
    assert over.headers["retry-after"] == "2"
    assert probe.status_code == 200
    assert later.status_code == 200


@asynccontextmanager
async def clients_at(
    settings: Settings, clock: FakeClock, *addresses: str
) -> AsyncIterator[list[httpx.AsyncClient]]:
    """One app, and a client of it for each client address."""
    app = create_app(settings, http_client=httpx.AsyncClient(), clock=clock.as_clock())
    async with with_lifespan(app) as served:
        clients = [
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=served, client=(address, 40000)),
                base_url="http://localhost",
            )
            for address in addresses
        ]
        try:
            yield clients
        finally:
            for client in clients:
                await client.aclose()


async def test_wrong_keys_from_one_address_are_cut_off_there_only(
    fake_clock: FakeClock,
) -> None:
    auth = {"api_keys": [KEY], "max_failed_keys": 3, "failed_keys_window_seconds": 60}
    settings = make_settings(llm=False, auth=auth)
    addresses = ("203.0.113.7", "198.51.100.9", "192.0.2.44")
    async with clients_at(settings, fake_clock, *addresses) as (guesser, neighbour, forgetful):
        guesses = [(await guesser.post("/plan", json=GOAL, headers=WRONG)) for _ in range(3)]
        cut_off = await guesser.post("/plan", json=GOAL, headers=WRONG)
        # Not even the right key is looked at from there: a 200 would confirm a guess.
        right_key = await guesser.post("/plan", json=GOAL, headers=GOOD)
        elsewhere_wrong = await neighbour.post("/plan", json=GOAL, headers=WRONG)
        elsewhere_right = await neighbour.post("/plan", json=GOAL, headers=GOOD)
        # A missing key is not a guess.
        no_key = [(await forgetful.post("/plan", json=GOAL)).status_code for _ in range(5)]
        forgetful_right = await forgetful.post("/plan", json=GOAL, headers=GOOD)
        fake_clock.time += 20.0  # three attempts a minute: one more after 20 s
        again = await guesser.post("/plan", json=GOAL, headers=GOOD)
    assert [response.status_code for response in guesses] == [401, 401, 401]
    for refused in (cut_off, right_key):
        assert refused.status_code == 429
        assert refused.json()["error"] == "too_many_failed_keys"
        assert set(refused.json()) == {"error", "detail", "request_id"}
        assert refused.headers["retry-after"] == "20"
    assert (elsewhere_wrong.status_code, elsewhere_right.status_code) == (401, 200)
    assert (no_key, forgetful_right.status_code) == ([401] * 5, 200)
    assert again.status_code == 200


async def test_the_addresses_remembered_are_bounded(fake_clock: FakeClock) -> None:
    auth = {"api_keys": [KEY], "max_failed_keys": 1, "tracked_addresses": 2}
    settings = make_settings(llm=False, auth=auth)
    addresses = ("203.0.113.1", "203.0.113.2", "203.0.113.3")
    async with clients_at(settings, fake_clock, *addresses) as (first, second, third):
        cut_off = [(await first.post("/plan", json=GOAL, headers=WRONG)).status_code for _ in "ab"]
        # Two more addresses with a wrong key each: the first, least recently seen, is
        # forgotten, as the bound says (and starts again with its full allowance).
        others = [
            (await c.post("/plan", json=GOAL, headers=WRONG)).status_code for c in (second, third)
        ]
        forgotten = await first.post("/plan", json=GOAL, headers=WRONG)
        still_counted = await third.post("/plan", json=GOAL, headers=WRONG)
    assert cut_off == [401, 429]
    assert others == [401, 401]
    assert forgotten.status_code == 401
    assert still_counted.status_code == 429


@pytest.mark.parametrize(
    ("first", "second", "together"),
    [
        ("203.0.113.7", "203.0.113.8", False),
        ("2001:db8:0:1::7", "2001:db8:0:1:ffff::9", True),  # one /64: one host, most likely
        ("2001:db8:0:1::7", "2001:db8:0:2::7", False),
        ("::ffff:203.0.113.7", "203.0.113.7", True),  # IPv4 through a dual-stack socket
    ],
)
def test_wrong_keys_are_counted_by_address_and_by_ipv6_network(
    first: str, second: str, together: bool
) -> None:
    def counted(host: str) -> str:
        return client_address({"type": "http", "client": (host, 1)})

    assert (counted(first) == counted(second)) is together


async def test_a_stored_plan_is_kept_out_of_shared_caches() -> None:
    async with running_app(make_settings(llm=False, auth={"api_keys": [KEY]})) as client:
        plan_id = (await client.post("/plan", json=GOAL, headers=GOOD)).json()["plan_id"]
        as_json = await client.get(f"/plan/{plan_id}", headers=GOOD)
        as_page = await client.get(f"/plan/{plan_id}", headers={**GOOD, "Accept": "text/html"})
    for answer in (as_json, as_page):
        assert answer.status_code == 200
        assert answer.headers["cache-control"] == "private, no-store"
        varies = {name.strip().lower() for name in answer.headers["vary"].split(",")}
        assert {"accept", "authorization", "x-api-key"} <= varies


class NotListening:
    """What `serve` runs in these tests instead of a server on a port."""

    def __init__(self, served: list[Settings]) -> None:
        self.served = served

    def __call__(self, app: Any, settings: Settings) -> NotListening:
        self.served.append(settings)
        return self

    def run(self) -> None:
        pass


def test_the_bind_address_given_to_serve_is_the_one_the_app_judges(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`serve --host` reaches the settings the app reads (its warning, /mcp's hosts)."""
    from planner_arm.api import server
    from planner_arm.cli import cli

    served: list[Settings] = []
    monkeypatch.setattr(server, "build_server", NotListening(served))
    result = CliRunner().invoke(cli, ["serve", "--host", EVERYWHERE, "--port", "9099"])
    assert result.exit_code == 0, result.output
    [settings] = served
    assert (settings.server.host, settings.server.port) == (EVERYWHERE, 9099)


def test_serve_stops_at_once_on_keys_with_redis_and_no_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from planner_arm.api import server
    from planner_arm.cli import cli

    served: list[Settings] = []
    monkeypatch.setattr(server, "build_server", NotListening(served))
    monkeypatch.setenv("PLANNER_API_KEYS", f"acme:{KEY}")
    monkeypatch.setenv("PLANNER_STORE_URL", "redis://redis.internal:6379/0")
    result = CliRunner().invoke(cli, ["serve"])
    assert (result.exit_code, served) == (2, [])
    said = " ".join(result.output.split())
    assert "configuration error: auth: principal_secret is required" in said
    assert KEY not in said


REBOUND = {"host": "rebind.attacker.example:8080", "origin": "http://rebind.attacker.example:8080"}


async def test_without_keys_every_route_answers_only_to_the_hosts_mcp_answers_to() -> None:
    # Bound everywhere, as in a container, with one name of its own to answer to.
    server = {"host": EVERYWHERE, "mcp_allowed_hosts": ["planner-arm"]}
    settings = make_settings(llm=False, server=server)
    async with running_app(settings) as client:
        rebound = [
            await client.post("/plan", json=GOAL, headers=REBOUND),
            await client.post("/plan", json=GOAL, headers={"host": "rebind.attacker.example"}),
            await client.get("/plan/some-plan", headers=REBOUND),
            await client.get("/capabilities", headers=REBOUND),
            await client.get("/docs", headers=REBOUND),
        ]
        foreign_page = await client.post(
            "/plan", json=GOAL, headers={"host": "127.0.0.1:8080", "origin": "http://evil.example"}
        )
        served = [
            await client.post("/plan", json=GOAL, headers={"host": host})
            for host in ("127.0.0.1:8080", "localhost", "[::1]:9000", "planner-arm:8080")
        ]
        # A kubelet names the pod's address, Prometheus the address it scrapes.
        probes = [
            await client.get(path, headers={"host": "10.244.1.7:8080"})
            for path in ("/health", "/ready", "/metrics")
        ]
    for answer in rebound:
        assert answer.status_code == 421
        assert answer.json()["error"] == "host_not_allowed"
        assert "attacker" not in answer.json()["detail"]
    assert (foreign_page.status_code, foreign_page.json()["error"]) == (403, "origin_not_allowed")
    assert [answer.status_code for answer in served] == [200] * 4
    assert [answer.status_code for answer in probes] == [200] * 3


async def test_with_keys_the_key_guards_the_http_api_whatever_the_host() -> None:
    async with running_app(make_settings(llm=False, auth={"api_keys": [KEY]})) as client:
        keyed = await client.post("/plan", json=GOAL, headers={**REBOUND, **GOOD})
        keyless = await client.post("/plan", json=GOAL, headers=REBOUND)
    assert keyed.status_code == 200
    assert (keyless.status_code, keyless.json()["error"]) == (401, "unauthorized")


async def test_the_start_up_log_says_how_each_key_entry_was_read() -> None:
    keys = ["acme:k-2024-old", "acme:k-2025-new", "plain-key-0123456789"]
    logs = await start_up_log(make_settings(llm=False, auth={"api_keys": keys}))
    read = [line for line in logs if line["event"] == "api_key_read"]
    assert [(line["entry"], line["tenant"], line["read_as"]) for line in read] == [
        (1, "acme", "named tenant"),
        (2, "acme", "named tenant"),
        (3, None, "key only, tenant derived from the key"),
    ]
    said = repr(logs)
    assert not any(secret in said for secret in ("k-2024-old", "k-2025-new", "plain-key"))
