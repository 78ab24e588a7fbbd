"""/mcp: the MCP server (`planner_arm.api.mcp_server`) over streamable HTTP, in this app.

The same API keys guard it as the planning endpoints (the same check, the same 401 body), and
it serves the lifespan's own `Runtime`: one composition root for both protocols. Stateless:
each POST is a whole exchange, so any replica can answer any call. The MCP SDK (and the
server-sent events library it answers with) is imported on the first request to /mcp, not
with the app: a service nobody calls over MCP never loads it.

Before the key, the Host and Origin are checked (`api/hosts.py`, the rule every route follows
while no keys are set; the SDK's own DNS-rebinding protection is given the same hosts): a web
page that reaches a local instance through a DNS name rebound to 127.0.0.1 names a foreign
host: 421 `host_not_allowed`; one that calls it from its own origin: 403 `origin_not_allowed`.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskGroup
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from planner_arm.api.deps import admitted
from planner_arm.api.hosts import AnsweredHosts
from planner_arm.config import ServerSettings
from planner_arm.errors import NotReady
from planner_arm.service.wiring import Runtime

if TYPE_CHECKING:
    from mcp.server.transport_security import TransportSecuritySettings

MCP_PATH = "/mcp"


def mcp_transport_security(server: ServerSettings) -> TransportSecuritySettings:
    """The answered hosts (`AnsweredHosts`) as the SDK's transport writes them: each name and
    each name on any port, and the origins of both, plus the trusted origins."""
    from mcp.server.transport_security import TransportSecuritySettings

    answered = AnsweredHosts.of(server)
    hosts = [form for name in answered.names for form in (name, f"{name}:*")]
    origins = [f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[*origins, *answered.trusted_origins],
    )


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
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
        from sse_starlette.sse import AppStatus

        from planner_arm.api.mcp_server import build_mcp_server

        self.manager = StreamableHTTPSessionManager(
            app=build_mcp_server(runtime),
            stateless=True,  # any replica answers any call: no session lives in a process
            security_settings=mcp_transport_security(server),
        )
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
        self._hosts = AnsweredHosts.of(server)
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
        # First, so a page on a foreign host learns nothing, not even whether keys are set.
        # The SDK's own check (the same hosts) would refuse it too, but in plain text.
        refused = self._hosts.refusal(request.headers)
        if refused is not None:
            raise refused
        sessions = await self._started()
        # A wrong key, a draining service or a caller over its rate: the one error body.
        # What the MCP handlers read as the caller (`planner_arm.api.mcp_server.tool_call`).
        request.state.caller = admitted(request)
        await sessions.manager.handle_request(scope, receive, send)
