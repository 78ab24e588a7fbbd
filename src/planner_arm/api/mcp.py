"""/mcp: the MCP server (`planner_arm.mcp_server`) over streamable HTTP, in this app.

The same API keys guard it as the planning endpoints (the same check, the same 401 body), and
it serves the lifespan's own `Service`: one composition root for both protocols. Stateless:
each POST is a whole exchange, so any replica can answer any call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from sse_starlette.sse import AppStatus
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from planner_arm.api.deps import planning_caller
from planner_arm.errors import NotReady
from planner_arm.mcp_server import Caller, build_mcp_server
from planner_arm.planning.wiring import Service

MCP_PATH = "/mcp"


class MCPEndpoint:
    """The ASGI app of /mcp: the caller's key and our readiness are checked as for any
    planning endpoint, then the MCP session manager the lifespan runs takes the request."""

    def __init__(self) -> None:
        self._sessions: StreamableHTTPSessionManager | None = None
        # The SDK answers a POST as server-sent events through sse-starlette, which by default
        # ends every open stream of the process at uvicorn's exit signal: a tool call in
        # flight would lose its answer. Here each stream ends with its call's answer, so the
        # drain (api/server.py) lets them finish as it does every other request.
        AppStatus.disable_automatic_graceful_drain()  # type: ignore[no-untyped-call]

    @asynccontextmanager
    async def serving(self, service: Service) -> AsyncIterator[None]:
        """Serves `service` over MCP while the context is open (the app's lifespan)."""
        server = build_mcp_server(service)
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
        # A wrong key, a draining service or a caller over its rate: the one error body.
        admitted = planning_caller(request)
        if self._sessions is None:
            raise NotReady("the planner is not ready")
        # What the MCP handlers read as the caller (`planner_arm.mcp_server.tool_call`).
        request.state.caller = Caller("http", admitted.principal)
        await self._sessions.handle_request(scope, receive, send)
