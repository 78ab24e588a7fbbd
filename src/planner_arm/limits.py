"""What a plan request may hold: the `limits` section of the configuration, and the shapes a
request shares with the configuration (an arm or tool, a worked example).

Its own module, with pydantic alone, because the request models (`plan/schemas.py`) are built
from it and the Python client imports those models without the service's dependencies.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from planner_arm.tool_schema import schema_problem


class _Section(BaseModel):
    # As every config section: unknown keys are typos, so they are refused.
    model_config = ConfigDict(extra="forbid", frozen=True)


class LimitsSettings(_Section):
    """What a plan request may hold; over these it is refused with a 422."""

    max_goal_chars: int = Field(8_000, ge=1, le=1_000_000)
    max_constraints: int = Field(32, ge=0, le=10_000)
    max_constraint_chars: int = Field(1_000, ge=1, le=1_000_000)
    max_context_bytes: int = Field(32 * 1024, ge=2, le=16 * 1024 * 1024)
    max_context_depth: int = Field(8, ge=1, le=100)
    # The `tools` of one request: how many, and their size as JSON.
    max_tools: int = Field(500, ge=1, le=10_000)
    max_tools_bytes: int = Field(512 * 1024, ge=1024, le=64 * 1024 * 1024)


# A tool's id as its platform names it: any printable text (spaces, capitals, parentheses) up
# to 128 characters, matched exactly. Refused: every control character (Unicode Cc: C0, DEL
# and C1, NEL among them), the line and paragraph separators U+2028 and U+2029, and the bidi
# controls (U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069), which break a log or a prompt
# line or make an id read as another. Written with \uXXXX escapes, which pydantic's engine,
# Python's `re` and a JSON Schema reader all understand, so the OpenAPI pattern stays ASCII.
ARM_ID_MAX_CHARS = 128
ARM_ID_PATTERN = r"^[^\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]+$"
ARM_DESCRIPTION_MAX_CHARS = 2_000
# What a tool takes or gives (`image`, `text`, `url`, ...): short lower-case type names.
RESOURCE_PATTERN = r"^[a-z][a-z0-9_.-]{0,39}$"


ArmId = Annotated[str, Field(min_length=1, max_length=ARM_ID_MAX_CHARS, pattern=ARM_ID_PATTERN)]
Schema = dict[str, Any]

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NOT_WORD = re.compile(r"[^0-9a-zA-Z]+")


def name_words(name: str) -> str:
    """A tool name as words: `GetMovieCredit` and `get_movie_credit` are "get movie credit"."""
    return " ".join(_NOT_WORD.sub(" ", _CAMEL.sub(" ", name)).lower().split())


class FunctionSpec(BaseModel):
    """The OpenAI function of a function tool."""

    model_config = ConfigDict(extra="ignore")

    name: ArmId
    description: str | None = None
    parameters: Schema | None = None


class FlatFunctionTool(FunctionSpec):
    """A tool in the flat shape of OpenAI's Responses API."""

    type: Literal["function"]


class FunctionTool(BaseModel):
    """A tool in the OpenAI function-tool shape (Chat Completions)."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["function"]
    function: FunctionSpec


class McpTool(BaseModel):
    """A tool as an MCP server's `tools/list` gives it (the SDK's field names, `input_schema`,
    are read too)."""

    model_config = ConfigDict(extra="ignore")

    name: ArmId
    title: str | None = None
    description: str | None = None
    # MCP's own field names, as on the wire.
    inputSchema: Schema | None = Field(
        None, validation_alias=AliasChoices("inputSchema", "input_schema")
    )
    outputSchema: Schema | None = Field(
        None, validation_alias=AliasChoices("outputSchema", "output_schema")
    )
    annotations: dict[str, Any] | None = None


class AnthropicTool(BaseModel):
    """A tool in Anthropic's shape; a bare `{name, description}` is one too."""

    model_config = ConfigDict(extra="ignore")

    name: ArmId
    description: str | None = None
    input_schema: Schema | None = None


ForeignTool = FunctionTool | FlatFunctionTool | McpTool | AnthropicTool
ToolShape = Literal["arm", "openai", "openai_flat", "mcp", "anthropic"]
FOREIGN_SHAPES: Mapping[str, type[ForeignTool]] = {
    "openai": FunctionTool,
    "openai_flat": FlatFunctionTool,
    "mcp": McpTool,
    "anthropic": AnthropicTool,
}
# Said when an item is none of them: one sentence, the same on every edge.
ACCEPTED_SHAPES = (
    "a tool is one of: our shape {id, description}; OpenAI's {type: function, function: "
    "{name, description, parameters}}; MCP's {name, inputSchema} as tools/list gives it; "
    "Anthropic's {name, description, input_schema}"
)


def tool_shape(item: object) -> ToolShape | None:
    """Which shape a tool is sent in, checked in this order: ours (`id`); OpenAI's (`type:
    function` with `function`, or flat with `name`); MCP's (`name` + `inputSchema`);
    Anthropic's (`name`, with `input_schema` or a bare `{name, description}`); None: none."""
    if isinstance(item, BaseModel):
        return _model_shape(item)
    if not isinstance(item, Mapping):
        return None
    if "id" in item:
        return "arm"
    if item.get("type") == "function":
        if "function" in item:
            return "openai"
        return "openai_flat" if "name" in item else None
    if "name" not in item:
        return None
    return "mcp" if _MCP_ONLY_KEYS.intersection(item) else "anthropic"


# Keys an MCP tool may have and an Anthropic one has not.
_MCP_ONLY_KEYS = frozenset({"inputSchema", "outputSchema", "output_schema", "annotations", "title"})


def _model_shape(item: BaseModel) -> ToolShape | None:
    for shape, model in FOREIGN_SHAPES.items():
        if type(item) is model:
            return shape  # type: ignore[return-value]
    return "arm" if "id" in type(item).model_fields else None


def shape_problem(item: object) -> str:
    """What is wrong with an item that is no tool shape: the shapes accepted, and what it had."""
    if isinstance(item, Mapping):
        # The caller's own keys, so each is cut short, and a dozen at most.
        keys = ", ".join(_cut(str(key), 40) for key in list(item)[:12]) or "no keys"
        return f"{ACCEPTED_SHAPES}; this item has {keys}"
    return f"{ACCEPTED_SHAPES}; this item is a {type(item).__name__}, not an object"


def foreign_arm_fields(tool: ForeignTool) -> dict[str, Any]:
    """An MCP, Anthropic or OpenAI tool as the fields of an arm: `name` is the id, its input
    schema the arm's; a missing description is made from the title or the name and the
    parameter names; a longer description than an arm takes is cut."""
    title: str | None = None
    output: Schema | None = None
    annotations: dict[str, Any] | None = None
    spec: FunctionSpec | McpTool | AnthropicTool = (
        tool.function if isinstance(tool, FunctionTool) else tool
    )
    if isinstance(spec, FunctionSpec):  # the function of either OpenAI shape
        schema = spec.parameters
    elif isinstance(spec, McpTool):
        schema, output = spec.inputSchema, spec.outputSchema
        # One spelling of each hint: MCP's (the 2.x SDK's models say `read_only_hint`).
        annotations = {_hint_name(key): value for key, value in (spec.annotations or {}).items()}
        title = spec.title or _text(annotations.get("title"))
    else:
        schema = spec.input_schema
    description = (spec.description or "").strip() or stand_in_description(spec.name, title, schema)
    return {
        "id": spec.name,
        "title": _cut(title, ARM_DESCRIPTION_MAX_CHARS) if title else None,
        "description": _cut(description, ARM_DESCRIPTION_MAX_CHARS),
        "input_schema": schema,
        "output_schema": output,
        "annotations": annotations or None,
    }


def stand_in_description(name: str, title: str | None, schema: Schema | None) -> str:
    """What a tool without a description is planned from: its title or name, as words, and
    the names of its parameters."""
    words = (title or "").strip() or name_words(name) or name
    properties = (schema or {}).get("properties")
    names = [str(key) for key in properties] if isinstance(properties, Mapping) else []
    return f"{words} (takes {', '.join(names[:20])})" if names else words


@functools.lru_cache(maxsize=256)
def _hint_name(key: str) -> str:
    return to_camel(key) if "_" in key else key


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ArmSpec(_Section):
    """An arm (one of the built-in agents) or a tool of the caller: only `id` and
    `description` are required. An MCP, Anthropic or OpenAI tool is read as one
    (`foreign_arm_fields`)."""

    id: str = Field(min_length=1, max_length=ARM_ID_MAX_CHARS, pattern=ARM_ID_PATTERN)
    description: str = Field(min_length=1, max_length=ARM_DESCRIPTION_MAX_CHARS)
    capabilities: list[str] = Field(default_factory=list, max_length=32)
    # Words in an action that point at this arm (the rule-based selector's first signal).
    keywords: list[str] = Field(default_factory=list, max_length=64)
    # The JSON Schema of the tool's arguments: a step's input follows it (stage 2).
    input_schema: Schema | None = None
    # Typed resources: a link from A to B makes sense when B consumes what A produces.
    consumes: list[Annotated[str, Field(pattern=RESOURCE_PATTERN)]] = Field(
        default_factory=list, max_length=16
    )
    produces: list[Annotated[str, Field(pattern=RESOURCE_PATTERN)]] = Field(
        default_factory=list, max_length=16
    )
    # An MCP tool's: its display name (wording only), the JSON Schema of its result (the ids
    # it yields) and its hints (readOnlyHint, destructiveHint, ...).
    title: str | None = Field(None, max_length=ARM_DESCRIPTION_MAX_CHARS)
    output_schema: Schema | None = None
    annotations: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _foreign_shape(cls, data: Any) -> Any:
        shape = tool_shape(data)
        if shape is None or shape == "arm":
            return data
        return foreign_arm_fields(FOREIGN_SHAPES[shape].model_validate(data))

    @field_validator("input_schema", "output_schema")
    @classmethod
    def _schema_within_itself(cls, value: Schema | None) -> Schema | None:
        # A caller's schema is data: a reference that leaves it, or one that loops or unfolds
        # past the bounds, is refused here, before anything checks a value against it.
        problem = None if value is None else schema_problem(value)
        if problem is not None:
            raise PydanticCustomError("tool_schema", "{problem}", {"problem": problem})
        return value

    @field_validator("id")
    @classmethod
    def _id_trimmed(cls, value: str) -> str:
        if value != value.strip():
            raise ValueError("an arm id has no leading or trailing spaces")
        return value

    def destructive(self) -> bool:
        """A tool that says it may destroy or overwrite (MCP's `destructiveHint: true`, and
        not `readOnlyHint: true`); a tool that says nothing is not taken as one."""
        hints = self.annotations or {}
        if hints.get("readOnlyHint") is True:
            return False
        return hints.get("destructiveHint") is True


class ExampleStep(_Section):
    tool: str = Field(min_length=1, max_length=ARM_ID_MAX_CHARS)
    action: str | None = Field(None, max_length=500)
    depends_on: list[int] = Field(default_factory=list, max_length=50)


class WorkedExample(_Section):
    """A solved request: what was asked, and the tool calls that do it (steps numbered from 1
    in list order; `depends_on` names earlier steps)."""

    request: str = Field(min_length=1, max_length=4_000)
    steps: list[ExampleStep] = Field(min_length=1, max_length=50)
