"""The planner as an MCP server (the official `mcp` SDK): the planning endpoints as tools, each
stored plan as a resource, and the steps of a plan being written as progress notifications.

    tools       plan, replan, validate_plan, expand_step, specialize_step, get_plan: each
                takes the fields of its HTTP endpoint's body as its arguments (see
                `api/mcp_arguments.py`) and answers what the endpoint answers, through the
                same `PlanService` call; replan and expand_step read the goal of the plan
                they name when the call gives none
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
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Annotated, Any

import structlog
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ResourceError, ToolError
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import ContentBlock, ToolAnnotations
from pydantic import AnyUrl, BaseModel, Field, ValidationError

from planner_arm.api.deps import Caller
from planner_arm.api.mcp_arguments import agent_schema, flat_arguments
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

PlanId = Annotated[
    str, Field(description="The plan_id of an answer of plan, replan or expand_step")
]

SERVER_NAME = "planner-arm"
INSTRUCTIONS = (
    "Turns a goal into a validated, executable plan: a DAG of steps, each for one arm. "
    "Call `plan` with a goal; after running steps, call `replan` with the plan_id and each "
    "step's state to revise the rest, keeping the finished steps. Plans are kept as "
    "plan://{plan_id}."
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
    """FastMCP whose tools take their request's fields as arguments, and whose errors read as
    the HTTP API's: `<code>: <detail>`."""

    def add_request_tool(
        self,
        fn: Callable[..., Awaitable[Any]],
        model: type[BaseModel],
        schema: dict[str, Any],
        annotations: ToolAnnotations,
        max_json_depth: int,
    ) -> None:
        """`fn(arguments, ctx)` as a tool whose arguments are `model`'s fields (`schema`),
        nested at most `max_json_depth` deep as a body may be."""
        self.add_tool(
            fn,
            description=inspect.cleandoc(fn.__doc__ or ""),
            annotations=annotations,
            structured_output=True,
        )
        tool = self._tool_manager.get_tool(fn.__name__)
        if tool is None:  # the SDK refused the name
            raise LookupError(f"the tool {fn.__name__!r} was not added")
        tool.fn_metadata = flat_arguments(tool.name, model, tool.fn_metadata, max_json_depth)
        tool.parameters = schema

    async def call_tool(
        self, name: str, arguments: dict[str, Any]
    ) -> list[ContentBlock] | dict[str, Any] | Any:
        try:
            return await super().call_tool(name, arguments)
        except ToolError as error:
            raise ToolError(tool_error_text(error.__cause__, error)) from error

    async def read_resource(self, uri: AnyUrl | str) -> Iterable[ReadResourceContents]:
        try:
            return await super().read_resource(uri)
        except Exception as error:
            # The SDK wraps a template's failure in a new error (twice), its cause kept only
            # as the context: the planner's error says it once, as a tool error would.
            cause = planner_error_in(error)
            if cause is None:
                raise
            raise ResourceError(f"{cause.code}: {cause.detail}") from cause


def planner_error_in(error: BaseException) -> PlannerError | None:
    """The planner's error that `error` was raised for, if any."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, PlannerError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def tool_error_text(cause: BaseException | None, error: ToolError) -> str:
    """The text of a failed tool call: the error code first, as the HTTP API's body has it."""
    if isinstance(cause, PlannerError):
        return f"{cause.code}: {cause.detail}"
    if isinstance(cause, ValidationError):
        problems = "; ".join(
            _problem_text(problem["loc"], problem["msg"])
            for problem in cause.errors(include_url=False)
        )
        return f"invalid_request: {problems}"
    if cause is None:  # the SDK's own refusal, such as an unknown tool
        return str(error)
    log.error("mcp_tool_failed", error_type=type(cause).__name__, exc_info=cause)
    return "internal_error: the planner failed unexpectedly; the service log has the cause"


def _problem_text(location: tuple[int | str, ...], message: str) -> str:
    # A check of the whole request (exactly one of previous and plan_id) has no location.
    if not location:
        return message
    return f"{'.'.join(str(part) for part in location)}: {message}"


async def of_the_plan(call: ToolCall, arguments: dict[str, Any]) -> dict[str, Any]:
    """`arguments` with the goal and constraints of the plan they name (`plan_id`, stored, or
    `previous`, sent whole) when they give no goal: an agent revising a plan knows its id,
    not always the words of its goal. A plan that does not say its goal adds nothing."""
    if "goal" in arguments:
        return arguments
    previous, plan_id = arguments.get("previous"), arguments.get("plan_id")
    named: dict[str, Any] = {}
    if isinstance(previous, dict) and plan_id is None:
        named = previous
    elif isinstance(plan_id, str) and previous is None:
        stored = await call.plans.get(plan_id, principal=call.caller.principal)
        named = stored.model_dump(mode="json", include={"goal", "constraints"})
    goal = named.get("goal")
    if not isinstance(goal, str):
        return arguments
    return {"goal": goal, "constraints": named.get("constraints", []), **arguments}


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

    limits = runtime.settings.limits
    plan_request: type[PlanRequest] = request_model_for(limits)
    replan_request = request_model_for(limits, ReplanRequest)
    expand_request = request_model_for(limits, ExpandRequest)

    async def plan(arguments: dict[str, Any], ctx: Context[Any, Any, Any]) -> PlanResponse:
        """Break a goal into a validated, executable plan: a DAG of steps, each naming the
        arm (or one of your `tools`) that does it, with its dependencies, the stages that may
        run in parallel, and a plan_id. Call it before acting on a goal that takes more than
        one step. With a progressToken, each step is reported as soon as it is accepted."""
        call = tool_call(runtime, ctx)
        request = plan_request.model_validate(arguments)
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

    async def replan(arguments: dict[str, Any], ctx: Context[Any, Any, Any]) -> PlanResponse:
        """Revise a plan after a step failed or the situation changed: send its plan_id and
        each step's state (step_states; a reason if something changed). The finished steps
        are kept as they were; you get the new version of the plan and its diff."""
        call = tool_call(runtime, ctx)
        request = replan_request.model_validate(await of_the_plan(call, arguments))
        return await call.plans.replan(request, call.request_id, principal=call.caller.principal)

    async def validate_plan(
        arguments: dict[str, Any], ctx: Context[Any, Any, Any]
    ) -> ValidateResponse:
        """Check a plan you wrote or edited (its steps, as `plan`) without planning: every
        problem, each with a code and the step it concerns. Call it before running a plan
        that did not come from this server as it was answered."""
        call = tool_call(runtime, ctx)
        request = ValidateRequest.model_validate(arguments)
        return await call.plans.validate(request, call.request_id)

    async def expand_step(arguments: dict[str, Any], ctx: Context[Any, Any, Any]) -> PlanResponse:
        """Replace one step of a plan (plan_id and its step number) by a sub-plan for it,
        when the step is too coarse to run as it is: you get a new version of the plan."""
        call = tool_call(runtime, ctx)
        request = expand_request.model_validate(await of_the_plan(call, arguments))
        return await call.plans.expand(request, call.request_id, principal=call.caller.principal)

    async def specialize_step(
        arguments: dict[str, Any], ctx: Context[Any, Any, Any]
    ) -> SpecializeResponse:
        """The typed input of one step of a plan (plan_id and its step number), filled for
        the arm or tool that runs it: call it just before running that step."""
        call = tool_call(runtime, ctx)
        request = SpecializeRequest.model_validate(arguments)
        return await call.plans.specialize(
            request, call.request_id, principal=call.caller.principal
        )

    async def get_plan(plan_id: PlanId, ctx: Context[Any, Any, Any]) -> PlanResponse:
        """A plan this server made (by its plan_id), as it was answered, while it is kept."""
        call = tool_call(runtime, ctx)
        return await call.plans.get(plan_id, principal=call.caller.principal)

    async def plan_resource(plan_id: str) -> str:
        """A stored plan (a plan, replan or expand_step answer) as JSON."""
        # Not a `ctx` parameter: the SDK validates a resource function's arguments, and the
        # copy of the context that makes has lost the request.
        call = tool_call(runtime, server.get_context())
        response = await call.plans.get(plan_id, principal=call.caller.principal)
        return response.model_dump_json()

    for tool, model, hints in (
        (plan, plan_request, _PLANS),
        (replan, replan_request, _PLANS),
        (validate_plan, ValidateRequest, _READ_ONLY),
        (expand_step, expand_request, _PLANS),
        (specialize_step, SpecializeRequest, _PLANS),
    ):
        schema = agent_schema(model, goal_of_the_plan=tool in (replan, expand_step))
        server.add_request_tool(tool, model, schema, hints, runtime.settings.server.max_json_depth)
    server.add_tool(
        get_plan,
        description=inspect.cleandoc(get_plan.__doc__ or ""),
        annotations=_READ_ONLY,
        structured_output=True,
    )
    server.resource("plan://{plan_id}", name="plan", mime_type="application/json")(plan_resource)
    return server
