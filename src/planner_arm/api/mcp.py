"""/mcp: the MCP server (`planner_arm.api.mcp_server`) over streamable HTTP, in this app.

The same API keys guard it as the planning endpoints (the same check, the same 401 body), and
it serves the lifespan's own `Runtime`: one composition root for both protocols. Stateless:
each POST is a whole exchange, so any replica can answer any call. The MCP SDK (and the
server-sent events library it answers with) is imported on the first request to /mcp, not
with the app: a service nobody calls over MCP never loads it.

Before the key, the SDK's DNS-rebinding protection checks `Host` and `Origin`: loopback names
on any port, the configured `server.host` unless it is a wildcard, and `server.mcp_allowed_hosts`
(any port, http or https); `server.cors_allow_origins` are trusted origins too. A web page that
reaches a local instance through a DNS name rebound to 127.0.0.1 names a foreign host: 421
`host_not_allowed`; one that calls it from its own origin: 403 `origin_not_allowed`.
"""

from __future__ import annotations

import asyncio
import importlib
import ipaddress
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskGroup
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from planner_arm.api.auth import is_loopback
from planner_arm.api.deps import admitted
from planner_arm.config import ServerSettings
from planner_arm.errors import HostNotAllowed, NotReady, OriginNotAllowed, RequestRejected
from planner_arm.service.wiring import Runtime

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import (
        TransportSecurityMiddleware,
        TransportSecuritySettings,
    )

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
    from mcp.server.transport_security import TransportSecuritySettings

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


def _import_sdk() -> None:
    for module in (
        "mcp.server.transport_security",
        "mcp.server.streamable_http_manager",
        "sse_starlette.sse",
        "planner_arm.api.mcp_server",
    ):
        importlib.import_module(module)


class _Sessions:
    """The MCP server of one runtime and its session manager, running in a task of the
    lifespan's own (its task group must end in the task it began in) until `stop`."""

    def __init__(self, runtime: Runtime, server: ServerSettings) -> None:
        from mcp.server.transport_security import TransportSecurityMiddleware
        from sse_starlette.sse import AppStatus

        from planner_arm.api.mcp_server import build_mcp_server

        security = mcp_transport_security(server)
        self.host_check: TransportSecurityMiddleware = TransportSecurityMiddleware(security)
        mcp_server = build_mcp_server(runtime, transport_security=security)
        mcp_server.streamable_http_app()  # makes the session manager, run here rather than there
        self.manager: StreamableHTTPSessionManager = mcp_server.session_manager
        self.started = anyio.Event()
        self.stop = anyio.Event()
        # The SDK answers a POST as server-sent events through sse-starlette, which by default
        # ends every open stream of the process at uvicorn's exit signal: a tool call in
        # flight would lose its answer. Here each stream ends with its call's answer, so the
        # drain (api/server.py) lets them finish as it does every other request.
        AppStatus.disable_automatic_graceful_drain()  # type: ignore[no-untyped-call]

    async def run(self) -> None:
        async with self.manager.run():
            self.started.set()
            await self.stop.wait()


class MCPEndpoint:
    """The ASGI app of /mcp: the Host and Origin checked, then the caller's key and our
    readiness as for any planning endpoint, then the MCP session manager takes the request.
    The SDK is imported, and the session manager started, on the first request."""

    def __init__(self, server: ServerSettings) -> None:
        self._server = server
        self._runtime: Runtime | None = None
        self._tasks: TaskGroup | None = None
        self._sessions: _Sessions | None = None
        self._starting: asyncio.Lock | None = None

    @asynccontextmanager
    async def serving(self, runtime: Runtime) -> AsyncIterator[None]:
        """Serves `runtime` over MCP while the context is open (the app's lifespan)."""
        async with anyio.create_task_group() as tasks:
            self._runtime, self._tasks = runtime, tasks
            try:
                yield
            finally:
                sessions, self._sessions = self._sessions, None
                self._runtime = self._tasks = None
                if sessions is not None:
                    sessions.stop.set()

    async def _started(self) -> _Sessions:
        """The running sessions, started by the first request (one start however many ask)."""
        if self._sessions is not None:
            return self._sessions
        self._starting = self._starting or asyncio.Lock()
        async with self._starting:
            if self._sessions is None:
                if self._runtime is None or self._tasks is None:
                    raise NotReady("the planner is not ready")
                # Importing the SDK takes a while: off the event loop, which serves the others.
                await anyio.to_thread.run_sync(_import_sdk)
                sessions = _Sessions(self._runtime, self._server)
                self._tasks.start_soon(sessions.run)
                await sessions.started.wait()
                self._sessions = sessions
        return self._sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        sessions = await self._started()
        # First, so a page on a foreign host learns nothing, not even whether keys are set.
        # The SDK's own check (the same settings) would refuse it too, but in plain text.
        refused = await sessions.host_check.validate_request(request, is_post=False)
        if refused is not None:
            refusal, detail = _REFUSALS.get(refused.status_code, _REFUSALS[421])
            raise refusal(detail)
        # A wrong key, a draining service or a caller over its rate: the one error body.
        # What the MCP handlers read as the caller (`planner_arm.api.mcp_server.tool_call`).
        request.state.caller = admitted(request)
        await sessions.manager.handle_request(scope, receive, send)
