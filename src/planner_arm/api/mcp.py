"""/mcp: the MCP server (`planner_arm.api.mcp_server`) over streamable HTTP, in this app.

The same API keys guard it as the planning endpoints (the same check, the same 401 body), and
it serves the lifespan's own `Service`: one composition root for both protocols. Stateless:
each POST is a whole exchange, so any replica can answer any call.

Before the key, the SDK's DNS-rebinding protection checks `Host` and `Origin`: loopback names
on any port, the configured `server.host` unless it is a wildcard, and `server.mcp_allowed_hosts`
(any port, http or https); `server.cors_allow_origins` are trusted origins too. A web page that
reaches a local instance through a DNS name rebound to 127.0.0.1 names a foreign host: 421
`host_not_allowed`; one that calls it from its own origin: 403 `origin_not_allowed`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from sse_starlette.sse import AppStatus
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from planner_arm.api.auth import is_loopback
from planner_arm.api.deps import planning_caller
from planner_arm.api.mcp_server import Caller, build_mcp_server
from planner_arm.config import ServerSettings
from planner_arm.errors import HostNotAllowed, NotReady, OriginNotAllowed, RequestRejected
from planner_arm.service.wiring import Service

MCP_PATH = "/mcp"
# Host names that reach only this machine, as a Host header writes them.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
# The SDK's refusals (by their status), as this API's errors.
_REFUSALS: dict[int, tuple[type[RequestRejected], str]] = {
    421: (
        HostNotAllowed,
        "/mcp does not answer to the host this request names; an operator adds a host with "
        "server.mcp_allowed_hosts (MCP_ALLOWED_HOSTS)",
    ),
    403: (OriginNotAllowed, "/mcp takes no requests from web pages of this origin"),
}


def mcp_transport_security(server: ServerSettings) -> TransportSecuritySettings:
    """The Host and Origin values /mcp accepts: loopback, the bound host unless it is a
    wildcard, and the configured hosts, each on any port; plus the CORS origins."""
    names = [*LOOPBACK_HOSTS, *server.mcp_allowed_hosts]
    bound = server.host.strip().strip("[]")
    if _names_a_host(bound) and not is_loopback(bound):
        names.append(f"[{bound}]" if ":" in bound else bound)  # an IPv6 address in brackets
    hosts = [form for name in dict.fromkeys(names) for form in (name, f"{name}:*")]
    origins = [f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[*origins, *server.cors_allow_origins],
    )


def _names_a_host(bound: str) -> bool:
    """False for a wildcard bind address (0.0.0.0, ::), which no Host header names."""
    try:
        return not ipaddress.ip_address(bound).is_unspecified
    except ValueError:
        return bool(bound)


class MCPEndpoint:
    """The ASGI app of /mcp: the caller's key and our readiness are checked as for any
    planning endpoint, then the MCP session manager the lifespan runs takes the request."""

    def __init__(self, security: TransportSecuritySettings) -> None:
        self._security = security
        self._host_check = TransportSecurityMiddleware(security)
        self._sessions: StreamableHTTPSessionManager | None = None
        # The SDK answers a POST as server-sent events through sse-starlette, which by default
        # ends every open stream of the process at uvicorn's exit signal: a tool call in
        # flight would lose its answer. Here each stream ends with its call's answer, so the
        # drain (api/server.py) lets them finish as it does every other request.
        AppStatus.disable_automatic_graceful_drain()  # type: ignore[no-untyped-call]

    @asynccontextmanager
    async def serving(self, service: Service) -> AsyncIterator[None]:
        """Serves `service` over MCP while the context is open (the app's lifespan)."""
        server = build_mcp_server(service, transport_security=self._security)
        server.streamable_http_app()  # makes the session manager, run here rather than there
        sessions = server.session_manager
        async with sessions.run():
            self._sessions = sessions
            try:
                yield
            finally:
                self._sessions = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        # First, so a page on a foreign host learns nothing, not even whether keys are set.
        # The SDK's own check (the same settings) would refuse it too, but in plain text.
        refused = await self._host_check.validate_request(request, is_post=False)
        if refused is not None:
            refusal, detail = _REFUSALS.get(refused.status_code, _REFUSALS[421])
            raise refusal(detail)
        # A wrong key, a draining service or a caller over its rate: the one error body.
        admitted = planning_caller(request)
        if self._sessions is None:
            raise NotReady("the planner is not ready")
        # What the MCP handlers read as the caller (`planner_arm.api.mcp_server.tool_call`).
        request.state.caller = Caller("http", admitted.principal)
        await self._sessions.handle_request(scope, receive, send)
