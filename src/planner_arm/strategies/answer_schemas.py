"""The JSON schemas a model's answers follow, as `response_format: json_schema` sends them
(where the model is configured for it): a plan's, a tool plan's, and a step input's (the
arm's input schema without its annotations)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def plan_json_schema(arm_ids: Sequence[str]) -> dict[str, Any]:
    """The answer's JSON schema, for servers that accept `response_format: json_schema`."""
    step = {
        "type": "object",
        "properties": {
            "step": {"type": "integer"},
            "action": {"type": "string"},
            "required_arm": {"type": "string", "enum": list(arm_ids)},
            "acceptance_criteria": {"type": "array", "items": {"type": "string"}},
            "depends_on": {"type": "array", "items": {"type": "integer"}},
            "estimated_cost_tier": {"type": "integer"},
            "estimated_duration_seconds": {"type": "integer"},
            # Optional: a hierarchical sub-plan's step to be broken down again.
            "compound": {"type": "boolean"},
        },
        "required": [
            "step",
            "action",
            "required_arm",
            "acceptance_criteria",
            "depends_on",
            "estimated_cost_tier",
            "estimated_duration_seconds",
        ],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "plan": {"type": "array", "items": step},
            "rationale": {"type": "string"},
            "confidence": {"type": "number"},
            "complexity_score": {"type": "number"},
        },
        "required": ["plan", "rationale", "confidence", "complexity_score"],
        "additionalProperties": False,
    }


def tools_json_schema(tool_ids: Sequence[str]) -> dict[str, Any]:
    """A tool plan's answer schema: the `tool` of each step one of `tool_ids` (the tools the
    prompt lists), for servers that accept `response_format: json_schema`."""
    step = {
        "type": "object",
        "properties": {
            "step": {"type": "integer"},
            "tool": {"type": "string", "enum": list(tool_ids)},
            "action": {"type": "string"},
            "depends_on": {"type": "array", "items": {"type": "integer"}},
        },
        "required": ["step", "tool", "action", "depends_on"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"plan": {"type": "array", "items": step}},
        "required": ["plan"],
        "additionalProperties": False,
    }


# Keywords that only describe a schema: words for a reader, none of them a constraint.
_ANNOTATIONS = frozenset({"title", "description", "examples", "$comment"})
# Keywords whose value maps names to schemas, and those whose value is a schema or a list of
# them: where a schema's annotations are found.
_SCHEMA_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)
_SCHEMA_KEYWORDS = frozenset(
    {
        "items",
        "prefixItems",
        "additionalProperties",
        "unevaluatedProperties",
        "unevaluatedItems",
        "contains",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
        "allOf",
        "anyOf",
        "oneOf",
    }
)


def decoding_schema(schema: Any) -> Any:
    """`schema` without its annotations (titles, descriptions, examples, comments), for
    `response_format`: a server may show that schema to the model as its own words, and a
    caller's description is data, which the user message carries."""
    if isinstance(schema, list):
        return [decoding_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    kept: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _ANNOTATIONS:
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            kept[key] = {name: decoding_schema(inner) for name, inner in value.items()}
        elif key in _SCHEMA_KEYWORDS:
            kept[key] = decoding_schema(value)
        else:
            kept[key] = value
    return kept
