"""The planner as an MCP server (the official `mcp` SDK): the planning endpoints as tools, each
stored plan as a resource, and the steps of a plan being written as progress notifications.

    tools       plan, replan, validate_plan, expand_step, specialize_step, get_plan: each
                takes the body its HTTP endpoint takes (`request`) and answers what it
                answers, through the same `PlanService` call
    resources   plan://{plan_id}: a stored plan as JSON (GET /plan/{plan_id})
    progress    `plan` with a progressToken: one notification per step as it is accepted,
                from the same stream as POST /plan with Accept: text/event-stream

`build_mcp_server(runtime)` serves one built `Runtime`: the app mounts it at /mcp (streamable
HTTP, behind the API keys, see `api/mcp.py`), and `planner-arm mcp` runs it on stdio. An error
is a tool error whose text starts with the HTTP API's error code (`plan_not_found: ...`).
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ResourceError, ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import ContentBlock, ToolAnnotations
from pydantic import ValidationError

from planner_arm.api.deps import Caller
from planner_arm.errors import PlannerError
from planner_arm.plan.endpoint_schemas import (
    ExpandRequest,
    ReplanRequest,
    SpecializeRequest,
    SpecializeResponse,
    ValidateRequest,
    ValidateResponse,
)
from planner_arm.plan.schemas import PlanRequest, PlanResponse, request_model_for
from planner_arm.service.service import PlanService
from planner_arm.service.stream import ERROR, PLAN, RESET, STEP, PlanStream, StreamEvent
from planner_arm.service.wiring import Runtime, service_version

log = structlog.get_logger("planner_arm.api.mcp_server")

SERVER_NAME = "planner-arm"
INSTRUCTIONS = (
    "Turns a goal into a validated, executable plan: a DAG of steps, each for one arm. "
    "Call `plan` with a goal; after running steps, call `replan` with each step's state to "
    "revise the rest, keeping the finished steps. Plans are kept as plan://{plan_id}."
)
# A quiet stream is not a problem here: the notifications carry no keep-alive.
_PING_SECONDS = 3600.0
_READ_ONLY = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
_PLANS = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=True)


@dataclass(frozen=True)
class ToolCall:
    """What one tool call works with: who called (and the plan service it calls), and the
    request id."""

    caller: Caller
    request_id: str

    @property
    def plans(self) -> PlanService:
        return self.caller.plans


class PlannerMCP(FastMCP):
    """FastMCP whose tool errors read as the HTTP API's: `<code>: <detail>`."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any]
    ) -> list[ContentBlock] | dict[str, Any] | Any:
        try:
            return await super().call_tool(name, arguments)
        except ToolError as error:
            raise ToolError(tool_error_text(error.__cause__, error)) from error


def tool_error_text(cause: BaseException | None, error: ToolError) -> str:
    """The text of a failed tool call: the error code first, as the HTTP API's body has it."""
    if isinstance(cause, PlannerError):
        return f"{cause.code}: {cause.detail}"
    if isinstance(cause, ValidationError):
        problems = "; ".join(
            f"{'.'.join(str(part) for part in problem['loc'])}: {problem['msg']}"
            for problem in cause.errors(include_url=False)
        )
        return f"invalid_request: {problems}"
    if cause is None:  # the SDK's own refusal, such as an unknown tool
        return str(error)
    log.error("mcp_tool_failed", error_type=type(cause).__name__, exc_info=cause)
    return "internal_error: the planner failed unexpectedly; the service log has the cause"


def tool_call(runtime: Runtime, ctx: Context[Any, Any, Any]) -> ToolCall:
    """The one place a tool call meets the plan service, with who called it: over HTTP the
    caller /mcp admitted, over stdio the local user."""
    request = ctx.request_context.request
    state = getattr(request, "state", None)
    caller = getattr(state, "caller", None)
    request_id = getattr(state, "request_id", None)
    return ToolCall(
        caller=caller if isinstance(caller, Caller) else Caller(runtime.plans, transport="stdio"),
        request_id=request_id if isinstance(request_id, str) else uuid.uuid4().hex,
    )


def _wants_progress(ctx: Context[Any, Any, Any]) -> bool:
    meta = ctx.request_context.meta
    return meta is not None and meta.progressToken is not None


def _progress_message(event: StreamEvent) -> str:
    if event.name == RESET:
        return f"plan.reset: the steps so far are withdrawn ({event.data.get('reason')})"
    step = event.data
    return f"step {step.get('step')}: {step.get('action')} ({step.get('required_arm')})"


async def plan_with_progress(
    ctx: Context[Any, Any, Any],
    stream: PlanStream,
    work: Callable[[PlanStream], Awaitable[PlanResponse]],
) -> PlanResponse:
    """`work`'s plan, each step reported as a progress notification once it is accepted
    (and each withdrawal, `plan.reset`), in the order the stream sends them."""
    reported = 0
    async for event in stream.events(work, _PING_SECONDS):
        if event.name in (STEP, RESET):
            reported += 1
            await ctx.report_progress(reported, None, _progress_message(event))
        elif event.name == PLAN:
            return PlanResponse.model_validate(event.data)
        elif event.name == ERROR and event.error is not None:
            raise event.error
    raise PlannerError("the plan stream ended without a plan", code="internal_error")


def build_mcp_server(
    runtime: Runtime, *, transport_security: TransportSecuritySettings | None = None
) -> FastMCP:
    """The MCP server of `runtime`, its request models with this service's limits.

    `transport_security`: the Host and Origin values its HTTP transport accepts (api/mcp.py);
    None, the SDK's own: loopback only."""
    server = PlannerMCP(
        SERVER_NAME,
        instructions=INSTRUCTIONS,
        # The app's route at /mcp is the endpoint: the API keys guard it, as the HTTP API.
        streamable_http_path="/",
        stateless_http=True,  # any replica answers any call: no session lives in a process
        transport_security=transport_security,
        log_level="WARNING",
    )
    # The version `initialize` answers in serverInfo: the service's, as /health says it (the
    # SDK would name its own). FastMCP takes no version; the low-level server it wraps does.
    server._mcp_server.version = service_version()

    async def plan(request: PlanRequest, ctx: Context[Any, Any, Any]) -> PlanResponse:
        """POST /plan: a validated, executable plan for `request.goal`. With a progressToken,
        each step is reported as it is accepted."""
        call = tool_call(runtime, ctx)
        use_cache = request.options.use_cache
        if not _wants_progress(ctx):
            return await call.plans.plan(
                request, call.request_id, use_cache=use_cache, principal=call.caller.principal
            )

        def work(stream: PlanStream) -> Awaitable[PlanResponse]:
            return call.plans.plan(
                request,
                call.request_id,
                use_cache=use_cache,
                listener=stream,
                principal=call.caller.principal,
            )

        stream = call.plans.stream(uuid.uuid4().hex, call.request_id)
        return await plan_with_progress(ctx, stream, work)

    async def replan(request: ReplanRequest, ctx: Context[Any, Any, Any]) -> PlanResponse:
        """POST /replan: the plan revised after a failure or a change, its finished steps
        kept. `step_states` maps a step number to its status (and output or error)."""
        call = tool_call(runtime, ctx)
        return await call.plans.replan(request, call.request_id, principal=call.caller.principal)

    async def validate_plan(
        request: ValidateRequest, ctx: Context[Any, Any, Any]
    ) -> ValidateResponse:
        """POST /plan/validate: every problem of an edited plan, without a model call."""
        call = tool_call(runtime, ctx)
        return await call.plans.validate(request, call.request_id)

    async def expand_step(request: ExpandRequest, ctx: Context[Any, Any, Any]) -> PlanResponse:
        """POST /plan/expand: a new version of the plan with one step replaced by its
        sub-plan."""
        call = tool_call(runtime, ctx)
        return await call.plans.expand(request, call.request_id, principal=call.caller.principal)

    async def specialize_step(
        request: SpecializeRequest, ctx: Context[Any, Any, Any]
    ) -> SpecializeResponse:
        """POST /plan/specialize: one step's typed arm input."""
        call = tool_call(runtime, ctx)
        return await call.plans.specialize(
            request, call.request_id, principal=call.caller.principal
        )

    async def get_plan(plan_id: str, ctx: Context[Any, Any, Any]) -> PlanResponse:
        """GET /plan/{plan_id}: a stored plan, as it was answered, while its TTL lasts."""
        call = tool_call(runtime, ctx)
        return await call.plans.get(plan_id, principal=call.caller.principal)

    async def plan_resource(plan_id: str) -> str:
        """A stored plan (a /plan, /replan or /plan/expand answer) as JSON."""
        # Not a `ctx` parameter: the SDK validates a resource function's arguments, and the
        # copy of the context that makes has lost the request.
        try:
            call = tool_call(runtime, server.get_context())
            response = await call.plans.get(plan_id, principal=call.caller.principal)
        except PlannerError as error:
            raise ResourceError(f"{error.code}: {error.detail}") from error
        return response.model_dump_json()

    # The request models carry this service's limits, as the HTTP routes' bodies do.
    limits = runtime.settings.limits
    plan.__annotations__["request"] = request_model_for(limits)
    replan.__annotations__["request"] = request_model_for(limits, ReplanRequest)
    expand_step.__annotations__["request"] = request_model_for(limits, ExpandRequest)
    for tool, hints in (
        (plan, _PLANS),
        (replan, _PLANS),
        (validate_plan, _READ_ONLY),
        (expand_step, _PLANS),
        (specialize_step, _PLANS),
        (get_plan, _READ_ONLY),
    ):
        description = inspect.cleandoc(tool.__doc__ or "")
        server.add_tool(tool, description=description, annotations=hints, structured_output=True)
    server.resource("plan://{plan_id}", name="plan", mime_type="application/json")(plan_resource)
    return server
