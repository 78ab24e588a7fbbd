"""The `Host` and `Origin` a request may name: the one rule against DNS rebinding, for /mcp
always and for every other route while no API keys are set.

A web page can reach a service on 127.0.0.1 through a DNS name of its own rebound to that
address, and then read the answers: its requests name that foreign host. The service answers
to loopback names (127.0.0.1, localhost, [::1]), to the address or name it is bound to unless
that is a wildcard, and to `server.mcp_allowed_hosts`, each on any port; an `Origin`, when a
browser sends one, must be http or https on one of those hosts, or one of
`server.cors_allow_origins`. A foreign host is 421 `host_not_allowed`, a foreign origin 403
`origin_not_allowed`, before the key and before the body is read.

The probes and the scrape (GET /health, /ready, /metrics) are answered whatever the host: a
kubelet names the pod's address and Prometheus the address it scraped, and what they read is
open to every caller even when keys are set, so a rebinding page gains nothing from them.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass

import structlog
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from planner_arm.api.auth import is_loopback
from planner_arm.api.errors import error_response
from planner_arm.config import ServerSettings
from planner_arm.errors import HostNotAllowed, OriginNotAllowed, RequestRejected

log = structlog.get_logger("planner_arm.api.hosts")

# Host names that reach only this machine, as a Host header writes them.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
# Answered whatever the host: the orchestrator's probes and the metrics scrape.
PROBE_PATHS = frozenset({"/health", "/ready", "/metrics"})
_PROBE_METHODS = frozenset({"GET", "HEAD"})


def _names_a_host(bound: str) -> bool:
    """False for a wildcard bind address (0.0.0.0, ::), which no Host header names."""
    try:
        return not ipaddress.ip_address(bound).is_unspecified
    except ValueError:
        return bool(bound)


@dataclass(frozen=True)
class AnsweredHosts:
    """The host names the service answers to (each on any port), and the origins it trusts
    besides those hosts'."""

    names: tuple[str, ...]
    trusted_origins: tuple[str, ...] = ()

    @classmethod
    def of(cls, server: ServerSettings) -> AnsweredHosts:
        names = [*LOOPBACK_HOSTS, *server.mcp_allowed_hosts]
        bound = server.host.strip().strip("[]")
        if _names_a_host(bound) and not is_loopback(bound):
            names.append(f"[{bound}]" if ":" in bound else bound)  # an IPv6 address in brackets
        return cls(tuple(dict.fromkeys(names)), tuple(server.cors_allow_origins))

    def host_allowed(self, host: str | None) -> bool:
        """Whether a Host header names one of the hosts, on any port or none."""
        if not host:
            return False
        return any(host == name or host.startswith(f"{name}:") for name in self.names)

    def origin_allowed(self, origin: str | None) -> bool:
        """Whether an Origin header (none: not a browser's cross-origin request) is trusted."""
        if not origin or origin in self.trusted_origins:
            return True
        scheme, separator, host = origin.partition("://")
        return scheme in ("http", "https") and bool(separator) and self.host_allowed(host)

    def refusal(self, headers: Mapping[str, str]) -> RequestRejected | None:
        """Why a request with these headers is refused, or None. Neither error names the
        host or origin: the caller's input is not echoed."""
        if not self.host_allowed(headers.get("host")):
            return HostNotAllowed(
                "the service does not answer to the host this request names; an operator "
                "adds a host with server.mcp_allowed_hosts (MCP_ALLOWED_HOSTS)"
            )
        if not self.origin_allowed(headers.get("origin")):
            return OriginNotAllowed("the service takes no requests from web pages of this origin")
        return None


class HostCheckMiddleware:
    """Every HTTP request but the probes' refused unless its Host and Origin are answered:
    what a service without API keys has against a page that reaches it by a rebound name."""

    def __init__(self, app: ASGIApp, hosts: AnsweredHosts) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        probe = scope.get("path") in PROBE_PATHS and scope.get("method") in _PROBE_METHODS
        refused = None
        if scope["type"] == "http" and not probe:
            refused = self.hosts.refusal(Headers(scope=scope))
        if refused is None:
            await self.app(scope, receive, send)
            return
        # Without the host: it is the caller's input, and a page may send any.
        log.warning("request_failed", status=refused.http_status, error=refused.code)
        request_id = str(scope.get("state", {}).get("request_id", ""))
        response = error_response(refused.http_status, refused.code, refused.detail, request_id)
        await response(scope, receive, send)
