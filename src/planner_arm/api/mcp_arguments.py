"""How an MCP tool takes its request: the endpoint body's fields as the tool's own arguments
(`plan(goal=..., constraints=...)`), not one object nested under a name, since an agent (and
the small model behind it) calls a tool with the fields it knows.

The input schema is the request model's own, at the top level, with the service's limits and
a description an agent can act on for each field; the request model itself checks a call, so
an error names the field as the agent wrote it (`goal: ...`). The older form, the whole
request under `request`, is still read (and logged, `mcp_nested_arguments`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from mcp.server.fastmcp.utilities.func_metadata import ArgModelBase, FuncMetadata
from pydantic import BaseModel, create_model

log = structlog.get_logger("planner_arm.api.mcp_arguments")

NESTED_KEY = "request"
# What the request models leave undescribed, or describe for an HTTP caller, said to an agent.
_AGENT_DESCRIPTIONS = {
    "request_id": "An id of your own for this call, echoed in the answer and the service's log",
    "options": '{"use_cache": false} plans afresh instead of answering a cached plan',
    "budget": "Limits of your own: max_steps, max_duration_seconds, max_llm_usd",
    "step_states": 'Each step\'s state by its number: {"1": "completed", "2": {"status": '
    '"failed", "error": "..."}}; a step left out is pending',
}
_GOAL_OF_THE_PLAN = "What to accomplish; left out, the goal (and constraints) of the plan named"


def agent_schema(model: type[BaseModel], *, goal_of_the_plan: bool = False) -> dict[str, Any]:
    """The input schema of a tool that takes `model`: its fields at the top level. With
    `goal_of_the_plan`, `goal` is optional: the tool reads it from the plan the call names."""
    schema = model.model_json_schema(by_alias=True)
    properties: dict[str, Any] = schema["properties"]
    for name, description in _AGENT_DESCRIPTIONS.items():
        if name in properties and "description" not in properties[name]:
            properties[name] = {**properties[name], "description": description}
    if goal_of_the_plan and "goal" in properties:
        properties["goal"] = {**properties["goal"], "description": _GOAL_OF_THE_PLAN}
        required = [name for name in schema.pop("required", []) if name != "goal"]
        if required:
            schema["required"] = required
    return schema


def unnested(arguments: dict[str, Any], tool: str) -> dict[str, Any]:
    """The request's fields: `arguments` themselves, or the object an older caller sent as
    `request` alone (no request model has a field of that name, so the two cannot clash)."""
    nested = arguments.get(NESTED_KEY)
    if len(arguments) == 1 and isinstance(nested, dict):
        log.info("mcp_nested_arguments", tool=tool)
        return nested
    return arguments


class FlatArguments(FuncMetadata):
    """A tool's arguments read as one request: unnested, then pre-parsed as the SDK does for
    its own tools (a list or an object sent as JSON text is read as what it says), and passed
    whole to the tool function, which completes and checks them with the request model."""

    tool: str

    async def call_fn_with_arg_validation(
        self,
        fn: Callable[..., Any | Awaitable[Any]],
        fn_is_async: bool,
        arguments_to_validate: dict[str, Any],
        arguments_to_pass_directly: dict[str, Any] | None,
    ) -> Any:
        arguments = self.pre_parse_json(unnested(arguments_to_validate, self.tool))
        return await fn(arguments, **(arguments_to_pass_directly or {}))


def flat_arguments(tool: str, model: type[BaseModel], made: FuncMetadata) -> FlatArguments:
    """`made` (what the SDK read from the tool function: its output schema) taking `model`'s
    fields as the tool's arguments."""
    # The SDK's JSON pre-parsing reads the fields of an arguments model: the request's own.
    fields = create_model(model.__name__, __base__=(model, ArgModelBase))
    return FlatArguments(
        arg_model=fields,
        output_schema=made.output_schema,
        output_model=made.output_model,
        wrap_output=made.wrap_output,
        tool=tool,
    )
