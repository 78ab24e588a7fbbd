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

`build_mcp_server(runtime)` serves one built `Runtime` on the SDK's low-level `Server`, through
its public handlers only (tools/list, tools/call, resources/...): each tool is listed with its
request model's JSON schema and its answer model's, and a call is read and checked here, by
the request model. The app serves it at /mcp (streamable HTTP, behind the API keys, see
`api/mcp.py`), and `planner-arm mcp` runs it on stdio. An error is a tool error whose text
starts with the HTTP API's error code (`plan_not_found: ...`).
"""

from __future__ import annotations

import importlib
import inspect
import re
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import structlog
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.types import (
    CallToolResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    Prompt,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    TextContent,
    TextResourceContents,
    Tool,
    ToolAnnotations,
)
from pydantic import AnyUrl, BaseModel, Field, ValidationError, create_model

from planner_arm.api.deps import Caller
from planner_arm.api.mcp_arguments import agent_schema, tool_arguments
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
# get_plan's arguments; the name is the schema's title, as agents have seen it listed.
GetPlanArguments = create_model("get_planArguments", plan_id=(PlanId, ...))

SERVER_NAME = "planner-arm"
INSTRUCTIONS = (
    "Turns a goal into a validated, executable plan: a DAG of steps, each for one arm. "
    "Call `plan` with a goal; after running steps, call `replan` with the plan_id and each "
    "step's state to revise the rest, keeping the finished steps. Plans are kept as "
    "plan://{plan_id}."
)
PLAN_TEMPLATE = "plan://{plan_id}"
_PLAN_URI = re.compile(r"plan://(?P<plan_id>[^/]+)")
_PLAN_RESOURCE = "A stored plan (a plan, replan or expand_step answer) as JSON."
_JSON = "application/json"
# A quiet stream is not a problem here: the notifications carry no keep-alive.
_PING_SECONDS = 3600.0
_READ_ONLY = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
_PLANS = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=True)
_UNEXPECTED = "the planner failed unexpectedly; the service log has the cause"

# Reports one more step of a plan being written: (how many so far, the message).
Progress = Callable[[float, str], Awaitable[None]]


@dataclass(frozen=True)
class ToolCall:
    """What one tool call works with: who called (and the plan service it calls), the
    request id, and where its progress goes when its caller asked for progress."""

    caller: Caller
    request_id: str
    progress: Progress | None = None

    @property
    def plans(self) -> PlanService:
        return self.caller.plans


@dataclass(frozen=True)
class PlannerTool:
    """One tool: what tools/list says of it, and what a call to it runs with the arguments
    as `mcp_arguments.tool_arguments` reads them."""

    name: str
    description: str
    arguments: type[BaseModel]
    answer: type[BaseModel]
    input_schema: dict[str, Any]
    annotations: ToolAnnotations
    run: Callable[[dict[str, Any], ToolCall], Awaitable[BaseModel]]
    # Reads the whole request under `request`, as the first release's tools took it.
    nested_form: bool = True

    def listed(self) -> Tool:
        return Tool(
            name=self.name,
            description=self.description,
            inputSchema=self.input_schema,
            outputSchema=self.answer.model_json_schema(),
            annotations=self.annotations,
        )


# mcp 2.x takes a low-level server's handlers as its constructor's arguments (`on_call_tool=`,
# each called with the request's context and its params) and names its error `MCPError`; 1.x
# registers them with decorators and gives the request's context as `request_context`.
_HANDLERS_IN_CONSTRUCTOR = "on_call_tool" in inspect.signature(Server.__init__).parameters
if TYPE_CHECKING:
    _LowLevelServer = Server[Any, Any]
else:  # generic in its lifespan and request types in 1.x, in its lifespan alone in 2.x
    _LowLevelServer = Server


class PlannerMCP(_LowLevelServer):
    """The SDK's low-level server with the planner's tools and its plan resources. A call's
    arguments are checked by the tool's request model, not against the listed schema first:
    the model names the field as the agent wrote it, and reads what a JSON Schema check would
    refuse (a list sent as JSON text, the older nested form)."""

    def __init__(self, runtime: Runtime, tools: Sequence[PlannerTool]) -> None:
        self._runtime = runtime
        self._max_json_depth = runtime.settings.server.max_json_depth
        self._tools = {tool.name: tool for tool in tools}
        self._listed = [tool.listed() for tool in tools]
        # serverInfo names the service and its version, as /health says it, not the SDK.
        about: dict[str, Any] = {"version": service_version(), "instructions": INSTRUCTIONS}
        if _HANDLERS_IN_CONSTRUCTOR:
            super().__init__(SERVER_NAME, **about, **self._handlers())
            return
        super().__init__(SERVER_NAME, **about)
        self.list_tools()(self._list_tools)  # type: ignore[no-untyped-call]
        self.call_tool(validate_input=False)(self._call_tool)
        self.list_resources()(self._list_resources)  # type: ignore[no-untyped-call]
        self.list_resource_templates()(self._list_templates)  # type: ignore[no-untyped-call]
        self.read_resource()(self._read_resource)  # type: ignore[no-untyped-call]
        self.list_prompts()(self._list_prompts)  # type: ignore[no-untyped-call]

    async def run_stdio_async(self) -> None:
        """Serves one client on stdin and stdout until it closes them."""
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read, write):
            await self.run(read, write, self.create_initialization_options())

    # What the handlers answer, whichever SDK calls them.

    def _tool_call(self, context: Any) -> ToolCall:
        """The call of `context`, the SDK's request context: its transport's request, its
        progress token, session and request id."""
        token = _progress_token(context.meta)
        progress: Progress | None = None
        if token is not None:
            session, request_id = context.session, str(context.request_id)

            async def progress(done: float, message: str) -> None:
                await session.send_progress_notification(
                    token, done, None, message, related_request_id=request_id
                )

        return tool_call(self._runtime, context.request, progress)

    async def _answer(self, name: str, arguments: dict[str, Any], context: Any) -> CallToolResult:
        tool = self._tools.get(name)
        if tool is None:
            return _tool_error(f"Unknown tool: {name}")
        try:
            read = tool_arguments(
                name, arguments, tool.arguments, self._max_json_depth, nested_form=tool.nested_form
            )
            answer = await tool.run(read, self._tool_call(context))
        except Exception as error:  # each is the call's error result, and the session goes on
            return _tool_error(tool_error_text(error))
        return CallToolResult(
            content=[TextContent(type="text", text=answer.model_dump_json(indent=2))],
            structuredContent=answer.model_dump(mode="json", by_alias=True),
            isError=False,
        )

    def _templates(self) -> list[ResourceTemplate]:
        template = ResourceTemplate(
            uriTemplate=PLAN_TEMPLATE, name="plan", description=_PLAN_RESOURCE, mimeType=_JSON
        )
        return [template]

    async def _plan_json(self, uri: str, request: object | None) -> str:
        """The stored plan `uri` names, as JSON. A failure is a planner's error, whose text
        reads `<code>: <detail>` as a tool error's does, or `Unknown resource: ...`."""
        found = _PLAN_URI.fullmatch(uri)
        if found is None:
            raise LookupError(f"Unknown resource: {uri}")
        call = tool_call(self._runtime, request)
        try:
            response = await call.plans.get(found["plan_id"], principal=call.caller.principal)
        except PlannerError:
            raise
        except Exception as error:
            log.error("mcp_resource_failed", error_type=type(error).__name__, exc_info=error)
            raise PlannerError(_UNEXPECTED, code="internal_error") from error
        return response.model_dump_json()

    # mcp 1.x: each handler registered by its decorator. A failed read is answered as a
    # protocol error whose message is the exception's text.

    async def _list_tools(self) -> list[Tool]:
        return self._listed

    async def _call_tool(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        return await self._answer(name, arguments, self.request_context)

    async def _list_prompts(self) -> list[Prompt]:
        return []  # none, but prompts/list has always been answered

    async def _list_resources(self) -> list[Resource]:
        return []  # the plans are read through their template; none is listed

    async def _list_templates(self) -> list[ResourceTemplate]:
        return self._templates()

    async def _read_resource(self, uri: AnyUrl) -> list[ReadResourceContents]:
        text = await self._plan_json(str(uri), self.request_context.request)
        return [ReadResourceContents(content=text, mime_type=_JSON)]

    # mcp 2.x: the handlers given to the constructor.

    def _handlers(self) -> dict[str, Any]:
        async def on_list_tools(ctx: Any, params: Any) -> ListToolsResult:
            return ListToolsResult(tools=self._listed)

        async def on_call_tool(ctx: Any, params: Any) -> CallToolResult:
            return await self._answer(params.name, params.arguments or {}, ctx)

        async def on_list_prompts(ctx: Any, params: Any) -> ListPromptsResult:
            return ListPromptsResult(prompts=[])

        async def on_list_resources(ctx: Any, params: Any) -> ListResourcesResult:
            return ListResourcesResult(resources=[])

        async def on_list_resource_templates(ctx: Any, params: Any) -> ListResourceTemplatesResult:
            return ListResourceTemplatesResult(resourceTemplates=self._templates())

        async def on_read_resource(ctx: Any, params: Any) -> ReadResourceResult:
            # 2.x answers any other exception as "Internal server error": the message is
            # carried by the SDK's own error, with the code 1.x answers.
            mcp_error: Any = importlib.import_module("mcp.shared.exceptions").MCPError
            try:
                text = await self._plan_json(str(params.uri), ctx.request)
            except Exception as error:
                raise mcp_error(0, str(error)) from error
            contents = TextResourceContents(uri=params.uri, mimeType=_JSON, text=text)
            return ReadResourceResult(contents=[contents])

        return {
            "on_list_tools": on_list_tools,
            "on_call_tool": on_call_tool,
            "on_list_prompts": on_list_prompts,
            "on_list_resources": on_list_resources,
            "on_list_resource_templates": on_list_resource_templates,
            "on_read_resource": on_read_resource,
        }


def _progress_token(meta: object) -> str | int | None:
    """The progress token of a request's `_meta`: an object in mcp 1.x, a mapping in 2.x."""
    if isinstance(meta, Mapping):
        token = meta.get("progress_token", meta.get("progressToken"))
    else:
        token = getattr(meta, "progressToken", None)
    return token if isinstance(token, str | int) else None


def _tool_error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], isError=True)


def tool_error_text(cause: BaseException | None, refusal: BaseException | None = None) -> str:
    """The text of a failed tool call: the error code first, as the HTTP API's body has it.

    `cause`: what the tool raised; `refusal`: a refusal of the protocol's own, such as an
    unknown tool, when the tool raised nothing."""
    if isinstance(cause, PlannerError):
        return f"{cause.code}: {cause.detail}"
    if isinstance(cause, ValidationError):
        problems = "; ".join(
            _problem_text(problem["loc"], problem["msg"])
            for problem in cause.errors(include_url=False)
        )
        return f"invalid_request: {problems}"
    if cause is None and refusal is not None:
        return str(refusal)
    if cause is not None:
        log.error("mcp_tool_failed", error_type=type(cause).__name__, exc_info=cause)
    return f"internal_error: {_UNEXPECTED}"


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


def tool_call(
    runtime: Runtime, request: object | None, progress: Progress | None = None
) -> ToolCall:
    """The one place a tool call meets the plan service, with who called it: over HTTP the
    caller /mcp admitted (on the transport's `request`), over stdio the local user."""
    state = getattr(request, "state", None)
    caller = getattr(state, "caller", None)
    request_id = getattr(state, "request_id", None)
    return ToolCall(
        caller=caller if isinstance(caller, Caller) else Caller(runtime.plans, transport="stdio"),
        request_id=request_id if isinstance(request_id, str) else uuid.uuid4().hex,
        progress=progress,
    )


def _progress_message(event: StreamEvent) -> str:
    if event.name == RESET:
        return f"plan.reset: the steps so far are withdrawn ({event.data.get('reason')})"
    step = event.data
    return f"step {step.get('step')}: {step.get('action')} ({step.get('required_arm')})"


async def plan_with_progress(
    progress: Progress,
    stream: PlanStream,
    work: Callable[[PlanStream], Awaitable[PlanResponse]],
) -> PlanResponse:
    """`work`'s plan, each step reported as progress once it is accepted (and each
    withdrawal, `plan.reset`), in the order the stream sends them."""
    reported = 0
    async for event in stream.events(work, _PING_SECONDS):
        if event.name in (STEP, RESET):
            reported += 1
            await progress(reported, _progress_message(event))
        elif event.name == PLAN:
            return PlanResponse.model_validate(event.data)
        elif event.name == ERROR and event.error is not None:
            raise event.error
    raise PlannerError("the plan stream ended without a plan", code="internal_error")


def build_mcp_server(runtime: Runtime) -> PlannerMCP:
    """The MCP server of `runtime`, its request models with this service's limits."""
    limits = runtime.settings.limits
    plan_request: type[PlanRequest] = request_model_for(limits)
    replan_request = request_model_for(limits, ReplanRequest)
    expand_request = request_model_for(limits, ExpandRequest)

    async def plan(arguments: dict[str, Any], call: ToolCall) -> PlanResponse:
        """Break a goal into a validated, executable plan: a DAG of steps, each naming the
        arm (or one of your `tools`) that does it, with its dependencies, the stages that may
        run in parallel, and a plan_id. Call it before acting on a goal that takes more than
        one step. With a progressToken, each step is reported as soon as it is accepted."""
        request = plan_request.model_validate(arguments)
        use_cache = request.options.use_cache
        if call.progress is None:
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
        return await plan_with_progress(call.progress, stream, work)

    async def replan(arguments: dict[str, Any], call: ToolCall) -> PlanResponse:
        """Revise a plan after a step failed or the situation changed: send its plan_id and
        each step's state (step_states; a reason if something changed). The finished steps
        are kept as they were; you get the new version of the plan and its diff."""
        request = replan_request.model_validate(await of_the_plan(call, arguments))
        return await call.plans.replan(request, call.request_id, principal=call.caller.principal)

    async def validate_plan(arguments: dict[str, Any], call: ToolCall) -> ValidateResponse:
        """Check a plan you wrote or edited (its steps, as `plan`) without planning: every
        problem, each with a code and the step it concerns. Call it before running a plan
        that did not come from this server as it was answered."""
        request = ValidateRequest.model_validate(arguments)
        return await call.plans.validate(request, call.request_id)

    async def expand_step(arguments: dict[str, Any], call: ToolCall) -> PlanResponse:
        """Replace one step of a plan (plan_id and its step number) by a sub-plan for it,
        when the step is too coarse to run as it is: you get a new version of the plan."""
        request = expand_request.model_validate(await of_the_plan(call, arguments))
        return await call.plans.expand(request, call.request_id, principal=call.caller.principal)

    async def specialize_step(arguments: dict[str, Any], call: ToolCall) -> SpecializeResponse:
        """The typed input of one step of a plan (plan_id and its step number), filled for
        the arm or tool that runs it: call it just before running that step."""
        request = SpecializeRequest.model_validate(arguments)
        return await call.plans.specialize(
            request, call.request_id, principal=call.caller.principal
        )

    async def get_plan(arguments: dict[str, Any], call: ToolCall) -> PlanResponse:
        """A plan this server made (by its plan_id), as it was answered, while it is kept."""
        plan_id = GetPlanArguments.model_validate(arguments).plan_id  # type: ignore[attr-defined]
        return await call.plans.get(plan_id, principal=call.caller.principal)

    def request_tool(
        run: Callable[[dict[str, Any], ToolCall], Awaitable[BaseModel]],
        model: type[BaseModel],
        answer: type[BaseModel],
        annotations: ToolAnnotations,
    ) -> PlannerTool:
        return PlannerTool(
            name=run.__name__,
            description=inspect.cleandoc(run.__doc__ or ""),
            arguments=model,
            answer=answer,
            input_schema=agent_schema(model, goal_of_the_plan=run in (replan, expand_step)),
            annotations=annotations,
            run=run,
        )

    tools = [
        request_tool(plan, plan_request, PlanResponse, _PLANS),
        request_tool(replan, replan_request, PlanResponse, _PLANS),
        request_tool(validate_plan, ValidateRequest, ValidateResponse, _READ_ONLY),
        request_tool(expand_step, expand_request, PlanResponse, _PLANS),
        request_tool(specialize_step, SpecializeRequest, SpecializeResponse, _PLANS),
        PlannerTool(
            name="get_plan",
            description=inspect.cleandoc(get_plan.__doc__ or ""),
            arguments=GetPlanArguments,
            answer=PlanResponse,
            input_schema=GetPlanArguments.model_json_schema(by_alias=True),
            annotations=_READ_ONLY,
            run=get_plan,
            nested_form=False,
        ),
    ]
    return PlannerMCP(runtime, tools)
