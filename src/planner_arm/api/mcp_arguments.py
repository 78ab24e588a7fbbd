"""How an MCP tool takes its request: the endpoint body's fields as the tool's own arguments
(`plan(goal=..., constraints=...)`), not one object nested under a name, since an agent (and
the small model behind it) calls a tool with the fields it knows.

The input schema is the request model's own, at the top level, with the service's limits and
a description an agent can act on for each field; the request model itself checks a call, so
an error names the field as the agent wrote it (`goal: ...`). The older form, the whole
request under `request`, is still read (and logged, `mcp_nested_arguments`).

A field that is not plain text sent as JSON text (`"constraints": "[...]"`, as some agent hosts
send every argument) is read as the array or object it says, as the SDK's own tools read it.
The arguments are held to the nesting limit of a body (`server.max_json_depth`, problem
`json_too_deep`), counting what a field sent as JSON text will be read as: the text is
measured without parsing it, since Python's JSON parser recurses once per level.
"""

from __future__ import annotations

import json
from typing import Any

import structlog
from pydantic import BaseModel, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from planner_arm.api.middleware import json_nesting_over
from planner_arm.plan.schemas import context_depth_exceeds

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


def _nesting_problem(value: Any, limit: int, read_as_json: bool) -> str | None:
    """What nests too deep in `value`, a field of arguments at a body's level: its value or
    the JSON text it will be read as (then measured without parsing it)."""
    if isinstance(value, dict | list) and context_depth_exceeds(value, limit - 1):
        return f"the value nests arrays and objects more than {limit} deep"
    text = value if read_as_json and isinstance(value, str) else ""
    if json_nesting_over(text.encode("utf-8", "surrogatepass"), limit - 1):
        return f"the JSON text nests arrays and objects more than {limit} deep"
    return None


def _read_as_json(fields: type[BaseModel]) -> frozenset[str]:
    """The argument names (fields and their aliases) whose JSON text is read as what it says:
    those of the fields that are not plain text."""
    return frozenset(
        key
        for name, field in fields.model_fields.items()
        if field.annotation is not str
        for key in (name, field.alias)
        if key
    )


def _json_text_read(value: Any) -> Any:
    """`value`, or the array, object, true, false or null its JSON text says. A number or a
    string sent as text stays text: the model reads it as such where a field wants one."""
    if not isinstance(value, str):
        return value
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        return value
    return value if isinstance(parsed, str | int | float) else parsed


def tool_arguments(
    tool: str,
    arguments: dict[str, Any],
    fields: type[BaseModel],
    max_json_depth: int,
    *,
    nested_form: bool = False,
) -> dict[str, Any]:
    """`arguments` as the tool's model reads them: unnested (with `nested_form`), held to the
    nesting limit of a body, then each field that is not plain text read from its JSON text.

    Raises a `ValidationError` titled `tool` (problem `json_too_deep`) for a field nested too
    deep; completing and checking the arguments is the model's own work."""
    if nested_form:
        arguments = unnested(arguments, tool)
    as_json = _read_as_json(fields)
    too_deep: list[InitErrorDetails] = []
    for key, value in arguments.items():
        problem = _nesting_problem(value, max_json_depth, key in as_json)
        if problem is not None:
            error = PydanticCustomError("json_too_deep", problem)
            too_deep.append({"type": error, "loc": (key,), "input": ""})
    if too_deep:
        raise ValidationError.from_exception_data(tool, too_deep)
    return {
        key: _json_text_read(value) if key in as_json else value for key, value in arguments.items()
    }
