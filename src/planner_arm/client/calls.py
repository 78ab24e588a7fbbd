"""Each endpoint's call, described once: its arguments, its documentation, and the HTTP call
they make (method, path, JSON body, the model of its answer).

`PlannerClient` and `AsyncPlannerClient` expose these functions as their methods (`Sent`,
`Streamed`); the only difference between the two is how they wait. The bodies are left to
the service to validate (its limits come from its config, which a client does not know): a
bad one comes back as `InvalidRequest` listing each problem.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from pydantic import BaseModel

from planner_arm.limits import WorkedExample
from planner_arm.plan.endpoint_schemas import (
    CapabilitiesResponse,
    HealthResponse,
    SpecializeResponse,
    StepState,
    ValidateResponse,
)
from planner_arm.plan.schemas import Budget, PlanResponse, PlanStep, Strategy

# A step's state: the model, its JSON, or just its status ("completed", "failed", ...).
StepStateLike = StepState | Mapping[str, Any] | str
PlanLike = PlanResponse | Mapping[str, Any]
# A tool in any shape the service takes: its JSON, a pydantic model of it (an MCP client
# session's `mcp.types.Tool`, 1.x or 2.x), or an object with `name` and `inputSchema`.
ToolLike = object
ExampleLike = WorkedExample | Mapping[str, Any]
Answer = TypeVar("Answer", bound=BaseModel)
# What an MCP tool is made of, read off an object that is neither a mapping nor a model.
_MCP_TOOL_ATTRIBUTES = ("name", "title", "description", "inputSchema", "outputSchema")


@dataclass(frozen=True)
class Call(Generic[Answer]):
    """One HTTP call of the API and the model of its 2xx answer. A POST carries an
    Idempotency-Key (`idempotency_key`, or one made for the call and kept across its
    retries)."""

    method: str
    path: str
    answer: type[Answer]
    body: dict[str, Any] | None = None
    idempotency_key: str | None = None


def _json(value: BaseModel | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    return dict(value)


def tool_json(tool: ToolLike) -> dict[str, Any]:
    """A tool as the JSON the service reads, whatever shape it is in; the client never
    imports `mcp`: a model is dumped by its aliases (MCP's `inputSchema`), another object
    read by MCP's attribute names."""
    if isinstance(tool, Mapping):
        return dict(tool)
    dump = getattr(tool, "model_dump", None)
    if callable(dump):
        data = dump(mode="json", by_alias=True, exclude_none=True)
        if isinstance(data, dict):
            return data
    if hasattr(tool, "name") and hasattr(tool, "inputSchema"):
        data = {key: getattr(tool, key, None) for key in _MCP_TOOL_ATTRIBUTES}
        data["annotations"] = _plain(getattr(tool, "annotations", None))
        return {key: value for key, value in data.items() if value is not None}
    raise TypeError(
        f"a tool is a mapping, a pydantic model or an object with name and inputSchema, "
        f"not {type(tool).__name__}"
    )


def _plain(value: Any) -> Any:
    """Hints as JSON: a model's dump, an object's attributes, or the value itself."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", by_alias=True, exclude_none=True)
    if value is not None and not isinstance(value, Mapping) and hasattr(value, "__dict__"):
        return {key: item for key, item in vars(value).items() if item is not None}
    return value


def plan_fields(
    goal: str | None,
    constraints: Sequence[str] | None = None,
    context: Mapping[str, Any] | None = None,
    *,
    strategy: Strategy | None = None,
    max_depth: int | None = None,
    budget: Budget | Mapping[str, Any] | None = None,
    specialize: bool = False,
    use_cache: bool = True,
    request_id: str | None = None,
    tools: Sequence[ToolLike] | None = None,
    examples: Sequence[ExampleLike] | None = None,
) -> dict[str, Any]:
    """The /plan body; the fields left out take the service's defaults (a replan without a
    goal takes its plan's)."""
    body: dict[str, Any] = {} if goal is None else {"goal": goal}
    if tools is not None:
        body["tools"] = [tool_json(tool) for tool in tools]
    if examples is not None:
        body["examples"] = [_json(example) for example in examples]
    if constraints is not None:
        body["constraints"] = list(constraints)
    if context is not None:
        body["context"] = dict(context)
    if strategy is not None:
        body["strategy"] = strategy
    if max_depth is not None:
        body["max_depth"] = max_depth
    if budget is not None:
        body["budget"] = _json(budget)
    if specialize:
        body["specialize"] = True
    if not use_cache:
        body["options"] = {"use_cache": False}
    if request_id is not None:
        body["request_id"] = request_id
    return body


def _one_plan(previous: PlanLike | None, plan_id: str | None) -> dict[str, Any]:
    if (previous is None) == (plan_id is None):
        raise TypeError("give exactly one of previous and plan_id")
    if previous is None:
        return {"plan_id": plan_id}
    if isinstance(previous, PlanResponse):
        return {"previous": previous.model_dump(mode="json")}
    return {"previous": dict(previous)}


def step_states_json(
    states: Mapping[int, StepStateLike] | Mapping[str, StepStateLike] | None,
) -> dict[str, Any]:
    """`step_states` keyed by step number as text, whether given as int or str keys; a bare
    status is sent as it is (the API takes `{"1": "completed"}` too)."""
    out: dict[str, Any] = {}
    for step, state in (states or {}).items():
        out[str(step)] = state if isinstance(state, str) else _json(state)
    return out


def plan(
    goal: str,
    constraints: Sequence[str] | None = None,
    context: Mapping[str, Any] | None = None,
    *,
    strategy: Strategy | None = None,
    budget: Budget | Mapping[str, Any] | None = None,
    specialize: bool = False,
    use_cache: bool = True,
    idempotency_key: str | None = None,
    max_depth: int | None = None,
    request_id: str | None = None,
    tools: Sequence[ToolLike] | None = None,
    examples: Sequence[ExampleLike] | None = None,
) -> Call[PlanResponse]:
    """POST /plan: a validated, executable plan for `goal`; over `tools` (any shape the
    service takes, the tools an MCP client session lists among them) instead of the
    configured arms, with worked `examples`."""
    body = plan_fields(
        goal, constraints, context, strategy=strategy, max_depth=max_depth, budget=budget,
        specialize=specialize, use_cache=use_cache, request_id=request_id, tools=tools,
        examples=examples,
    )  # fmt: skip
    return Call("POST", "/plan", PlanResponse, body, idempotency_key)


STREAM_DOC = """POST /plan as server-sent events, each as it comes: `plan.started`, `step`s,
`plan.reset`s, and last `plan` (its `.plan` is the whole answer). An `error` event is raised as
the `PlannerError` /plan would have answered. The request is sent when iteration starts (with
the async client, wrap it in `contextlib.aclosing` to close it early). Takes the arguments of
`plan`."""


def replan(
    goal: str | None = None,
    *,
    previous: PlanLike | None = None,
    plan_id: str | None = None,
    step_states: Mapping[int, StepStateLike] | Mapping[str, StepStateLike] | None = None,
    replan_steps: Sequence[int] | None = None,
    reason: str | None = None,
    constraints: Sequence[str] | None = None,
    context: Mapping[str, Any] | None = None,
    strategy: Strategy | None = None,
    budget: Budget | Mapping[str, Any] | None = None,
    max_replans: int | None = None,
    idempotency_key: str | None = None,
    request_id: str | None = None,
    tools: Sequence[ToolLike] | None = None,
    examples: Sequence[ExampleLike] | None = None,
    specialize: bool = False,
) -> Call[PlanResponse]:
    """POST /replan: the plan revised, its finished steps kept. Give exactly one of
    `previous` (the whole plan) and `plan_id` (a stored plan). Without `goal`, the service
    takes the plan's own (a stored plan's, or the one `previous` carries). `step_states` maps
    a step number (int or str) to a `StepState`, its JSON, or just its status. `tools`,
    `examples` and `specialize` as for `plan`."""
    body = {
        **plan_fields(
            goal,
            constraints,
            context,
            strategy=strategy,
            budget=budget,
            request_id=request_id,
            tools=tools,
            examples=examples,
            specialize=specialize,
        ),
        **_one_plan(previous, plan_id),
    }
    if step_states:
        body["step_states"] = step_states_json(step_states)
    if replan_steps:
        body["replan_steps"] = list(replan_steps)
    if reason is not None:
        body["reason"] = reason
    if max_replans is not None:
        body["max_replans"] = max_replans
    return Call("POST", "/replan", PlanResponse, body, idempotency_key)


def validate(
    steps: Sequence[PlanStep | Mapping[str, Any]],
    fix: bool = False,
    *,
    tools: Sequence[ToolLike] | None = None,
    goal: str | None = None,
    constraints: Sequence[str] | None = None,
    context: Mapping[str, Any] | None = None,
) -> Call[ValidateResponse]:
    """POST /plan/validate: every problem of an edited plan (no model call); with `fix`,
    what /plan would mend is mended and listed in `warnings`. Over `tools` (the plan's, as
    `plan` takes them) the steps' tools and inputs are checked against them; the valid plan
    carries `goal` and `constraints`, so it can be replanned as `previous` with the same
    `tools`."""
    body: dict[str, Any] = {"plan": [_json(step) for step in steps], "fix": fix}
    if tools is not None:
        body["tools"] = [tool_json(tool) for tool in tools]
    if goal is not None:
        body["goal"] = goal
    if constraints is not None:
        body["constraints"] = list(constraints)
    if context is not None:
        body["context"] = dict(context)
    return Call("POST", "/plan/validate", ValidateResponse, body)


def get(plan_id: str) -> Call[PlanResponse]:
    """GET /plan/{plan_id}: a stored plan, as it was answered."""
    return Call("GET", f"/plan/{quote(plan_id, safe='')}", PlanResponse)


def expand(
    goal: str,
    *,
    step: int,
    previous: PlanLike | None = None,
    plan_id: str | None = None,
    constraints: Sequence[str] | None = None,
    context: Mapping[str, Any] | None = None,
    strategy: Strategy | None = None,
    budget: Budget | Mapping[str, Any] | None = None,
    idempotency_key: str | None = None,
    request_id: str | None = None,
    tools: Sequence[ToolLike] | None = None,
    examples: Sequence[ExampleLike] | None = None,
    specialize: bool = False,
) -> Call[PlanResponse]:
    """POST /plan/expand: a new version of the plan with `step` replaced by its
    sub-plan. Give exactly one of `previous` and `plan_id`. `tools`, `examples` and
    `specialize` as for `plan`."""
    body = {
        **plan_fields(
            goal,
            constraints,
            context,
            strategy=strategy,
            budget=budget,
            request_id=request_id,
            tools=tools,
            examples=examples,
            specialize=specialize,
        ),
        **_one_plan(previous, plan_id),
        "step": step,
    }
    return Call("POST", "/plan/expand", PlanResponse, body, idempotency_key)


def specialize(
    step: int,
    *,
    previous: PlanLike | None = None,
    plan_id: str | None = None,
    goal: str | None = None,
    tools: Sequence[ToolLike] | None = None,
) -> Call[SpecializeResponse]:
    """POST /plan/specialize: the typed input of `step`'s arm, or the arguments of its tool
    among `tools` (the plan's, as `plan` takes them). Give exactly one of `previous` and
    `plan_id`."""
    body: dict[str, Any] = {**_one_plan(previous, plan_id), "step": step}
    if goal is not None:
        body["goal"] = goal
    if tools is not None:
        body["tools"] = [tool_json(tool) for tool in tools]
    return Call("POST", "/plan/specialize", SpecializeResponse, body)


def health() -> Call[HealthResponse]:
    """GET /health: liveness, the model's and the store's state."""
    return Call("GET", "/health", HealthResponse)


def capabilities() -> Call[CapabilitiesResponse]:
    """GET /capabilities: the arms, limits, deadline and measured latency."""
    return Call("GET", "/capabilities", CapabilitiesResponse)
