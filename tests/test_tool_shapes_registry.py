"""A new tool shape is one model class and one registry entry: a test-only Gemini-like
function declaration `{name, description, parametersJsonSchema}` is read by `ArmSpec` and by
a request's `tools`, with nothing else in `src/` edited."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from planner_arm import tool_shapes
from planner_arm.limits import ArmSpec
from planner_arm.plan import tools as plan_tools
from planner_arm.tool_shapes import SHAPES, ArmId, Schema, ToolShape, ToolShapes, arm_fields


# --- the new shape: one class and one entry (counted in docs/tools.md) ---
class GeminiFunction(BaseModel):
    name: ArmId
    description: str | None = None
    parametersJsonSchema: Schema | None = None


GEMINI = ToolShape(
    "gemini",
    GeminiFunction,
    lambda item: "parametersJsonSchema" in item,
    lambda tool: arm_fields(tool.name, tool.description, tool.parametersJsonSchema),
    "Gemini's {name, description, parametersJsonSchema}",
    {"input_schema": "parametersJsonSchema"},
)
# --- end of the new shape ---

# Before MCP and Anthropic, which also take any item with a `name`.
EXTENDED = ToolShapes((*SHAPES.shapes[:3], GEMINI, *SHAPES.shapes[3:]))
DECLARATION = {
    "name": "get_weather",
    "description": "The weather of a city",
    "parametersJsonSchema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


@pytest.fixture
def extended(monkeypatch: pytest.MonkeyPatch) -> ToolShapes:
    monkeypatch.setattr(tool_shapes, "SHAPES", EXTENDED)
    return EXTENDED


def test_arm_spec_reads_the_new_shape(extended: ToolShapes) -> None:
    spec = ArmSpec.model_validate(DECLARATION)
    assert spec.id == "get_weather"
    assert spec.description == "The weather of a city"
    assert spec.input_schema == DECLARATION["parametersJsonSchema"]


def test_a_request_reads_the_new_shape(extended: ToolShapes) -> None:
    class Request(BaseModel):
        tools: list[extended.item_type()]  # type: ignore[misc]

    request = Request.model_validate({"tools": [DECLARATION, {"id": "a", "description": "b"}]})
    assert isinstance(request.tools[0], GeminiFunction)
    specs = plan_tools.arm_specs(request.tools)
    assert [spec.id for spec in specs] == ["get_weather", "a"]
    assert plan_tools.undescribed(request.tools) == []
    bare = {"name": "ping", "parametersJsonSchema": {"properties": {"host": {}}}}
    assert plan_tools.undescribed(Request.model_validate({"tools": [bare]}).tools) == ["ping"]


def test_the_sentence_names_the_new_shape_and_the_order_holds(extended: ToolShapes) -> None:
    assert extended.accepted == (
        f"{SHAPES.accepted}".replace(
            "; MCP's", "; Gemini's {name, description, parametersJsonSchema}; MCP's"
        )
    )
    assert extended.shape_name(DECLARATION) == "gemini"
    assert extended.shape_name({"name": "x", "inputSchema": {}}) == "mcp"

    class Request(BaseModel):
        tools: list[extended.item_type()]  # type: ignore[misc]

    with pytest.raises(ValidationError, match="Gemini's"):
        Request.model_validate({"tools": [{"tool": "x"}]})


def test_a_problem_names_the_callers_own_key(extended: ToolShapes) -> None:
    class Request(BaseModel):
        tools: list[extended.item_type()]  # type: ignore[misc]

    bad = {**DECLARATION, "parametersJsonSchema": {"$ref": "https://example.com/x"}}
    request = Request.model_validate({"tools": [bad]})
    with pytest.raises(ValueError, match=r"tool 0 \('get_weather'\): parametersJsonSchema"):
        plan_tools.arm_specs(request.tools)


def test_the_shipped_registry_is_unchanged() -> None:
    assert [shape.name for shape in SHAPES.shapes] == [
        "arm",
        "openai",
        "openai_flat",
        "mcp",
        "anthropic",
    ]
    assert tool_shapes.tool_shape(DECLARATION) == "anthropic"
