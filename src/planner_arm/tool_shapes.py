"""The shapes a caller's tool is accepted in, as ONE registry: each shape is one pydantic model
and one `ToolShape` entry (its name, how an item is told to be one, how it becomes an arm's
fields). The request's union type, the detection order and the sentence naming the accepted
shapes all derive from `SHAPES`. Pydantic alone: the client imports it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

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
Description = Annotated[str, Field(min_length=1, max_length=ARM_DESCRIPTION_MAX_CHARS)]
Resource = Annotated[str, Field(pattern=RESOURCE_PATTERN)]
Schema = dict[str, Any]

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NOT_WORD = re.compile(r"[^0-9a-zA-Z]+")


def name_words(name: str) -> str:
    """A tool name as words: `GetMovieCredit` and `get_movie_credit` are "get movie credit"."""
    return " ".join(_NOT_WORD.sub(" ", _CAMEL.sub(" ", name)).lower().split())


# The shapes, one model each.


class Tool(BaseModel):
    """A tool in our arm shape."""

    model_config = ConfigDict(extra="forbid")

    id: ArmId
    description: Description
    input_schema: Schema | None = None
    consumes: list[Resource] = Field(default_factory=list, max_length=16)
    produces: list[Resource] = Field(default_factory=list, max_length=16)


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


# The registry.


@dataclass(frozen=True)
class ToolShape:
    """One accepted shape: its `name` (the union's tag), its `model`, `detect` (is this raw
    mapping one? asked in registry order), `to_arm` (a validated tool as an arm's fields), its
    part of the sentence naming the accepted shapes (`said`; None: said with another), and
    the caller's own spelling of an arm's fields (`fields`), so a problem names their key."""

    name: str
    model: type[BaseModel]
    detect: Callable[[Mapping[str, Any]], bool]
    to_arm: Callable[[Any], dict[str, Any]]
    said: str | None = None
    fields: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolShapes:
    """The accepted shapes, in the order an item is told by."""

    shapes: Sequence[ToolShape]

    @functools.cached_property
    def accepted(self) -> str:
        """Said when an item is none of them: one sentence, the same on every edge."""
        return "a tool is one of: " + "; ".join(s.said for s in self.shapes if s.said)

    @functools.cached_property
    def _by_model(self) -> dict[type[BaseModel], ToolShape]:
        return {shape.model: shape for shape in self.shapes}

    def detect(self, item: object) -> ToolShape | None:
        """The shape an item is sent in (a raw mapping, or a model of one), or None."""
        # Raw mappings first: every item of every request's tools is told by this, twice.
        if isinstance(item, Mapping):
            for shape in self.shapes:
                if shape.detect(item):
                    return shape
            return None
        if isinstance(item, BaseModel):
            found = self._by_model.get(type(item))
            if found is None and "id" in type(item).model_fields:
                return self.shapes[0]  # a model of arm fields (an ArmSpec) is ours
            return found
        return None

    def of(self, tool: BaseModel) -> ToolShape:
        """The shape of a validated tool."""
        return self._by_model[type(tool)]

    def item_type(self) -> Any:
        """One item of a request's `tools`: the union of the models, told apart by `detect`."""
        tagged = tuple(Annotated[shape.model, Tag(shape.name)] for shape in self.shapes)
        return Annotated[
            Union[tagged],  # noqa: UP007 - a union built from the registry
            Discriminator(self.shape_name),
            BeforeValidator(self._known),
        ]

    def shape_name(self, item: object) -> str | None:
        found = self.detect(item)
        return None if found is None else found.name

    def problem(self, item: object) -> str:
        """What is wrong with an item of no shape: the shapes accepted, and what it had."""
        if isinstance(item, Mapping):
            # The caller's own keys, so each is cut short, and a dozen at most.
            keys = ", ".join(_cut(str(key), 40) for key in list(item)[:12]) or "no keys"
            return f"{self.accepted}; this item has {keys}"
        return f"{self.accepted}; this item is a {type(item).__name__}, not an object"

    def _known(self, item: Any) -> Any:
        # One problem per item of no shape, instead of one per field of every shape it is not.
        if self.detect(item) is None:
            raise PydanticCustomError("tool_shape", "{problem}", {"problem": self.problem(item)})
        return item


# How each shape becomes an arm's fields.


def arm_fields(
    name: str,
    description: str | None,
    schema: Schema | None,
    title: str | None = None,
    output: Schema | None = None,
    annotations: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A foreign tool as the fields of an arm: `name` is the id, its input schema the arm's;
    a missing description is made from the title or the name and the parameter names; a
    longer description than an arm takes is cut."""
    description = (description or "").strip() or stand_in_description(name, title, schema)
    return {
        "id": name,
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


def _function_fields(spec: FunctionSpec) -> dict[str, Any]:
    return arm_fields(spec.name, spec.description, spec.parameters)


def _mcp_fields(tool: McpTool) -> dict[str, Any]:
    # One spelling of each hint: MCP's (the 2.x SDK's models say `read_only_hint`).
    hints = {_hint_name(key): value for key, value in (tool.annotations or {}).items()}
    title = tool.title or _text(hints.get("title"))
    return arm_fields(
        tool.name, tool.description, tool.inputSchema, title, tool.outputSchema, hints
    )


# Keys an MCP tool may have and an Anthropic one has not.
_MCP_ONLY_KEYS = frozenset({"inputSchema", "outputSchema", "output_schema", "annotations", "title"})

SHAPES = ToolShapes(
    (
        ToolShape(
            "arm",
            Tool,
            lambda item: "id" in item,
            # Its fields as they are (a model's field values are its __dict__): no copy of a
            # schema the arm reads again anyway.
            lambda tool: dict(tool.__dict__),
            "our shape {id, description}",
        ),
        ToolShape(
            "openai",
            FunctionTool,
            lambda item: item.get("type") == "function" and "function" in item,
            lambda tool: _function_fields(tool.function),
            "OpenAI's {type: function, function: {name, description, parameters}}",
            {"input_schema": "function.parameters"},
        ),
        ToolShape(
            "openai_flat",
            FlatFunctionTool,
            lambda item: item.get("type") == "function" and "name" in item,
            _function_fields,
            fields={"input_schema": "parameters"},
        ),
        ToolShape(
            "mcp",
            McpTool,
            lambda item: "name" in item and not _MCP_ONLY_KEYS.isdisjoint(item),
            _mcp_fields,
            "MCP's {name, inputSchema} as tools/list gives it",
            {"input_schema": "inputSchema", "output_schema": "outputSchema"},
        ),
        ToolShape(
            "anthropic",
            AnthropicTool,
            lambda item: "name" in item and item.get("type") != "function",
            lambda tool: arm_fields(tool.name, tool.description, tool.input_schema),
            "Anthropic's {name, description, input_schema}",
        ),
    )
)
ACCEPTED_SHAPES = SHAPES.accepted

if TYPE_CHECKING:
    ToolItem = BaseModel
else:
    ToolItem = SHAPES.item_type()


def tool_shape(item: object) -> str | None:
    """Which shape a tool is sent in (its name in `SHAPES`), told in the registry's order;
    None: none of them."""
    return SHAPES.shape_name(item)


def shape_problem(item: object) -> str:
    """What is wrong with an item that is no tool shape: the shapes accepted, and what it had."""
    return SHAPES.problem(item)


def shape_of(tool: BaseModel) -> ToolShape:
    """The registry entry of a validated tool."""
    return SHAPES.of(tool)


def foreign_arm_fields(tool: BaseModel) -> dict[str, Any]:
    """A tool of any shape as the fields of an arm."""
    return SHAPES.of(tool).to_arm(tool)


def raw_arm_fields(data: Any) -> Any:
    """Raw data of a foreign shape as an arm's fields (the configuration's and `ArmSpec`'s
    reading); data in our shape, or in none, is given back as it is."""
    shape = SHAPES.detect(data)
    if shape is None or shape.name == "arm":
        return data
    return shape.to_arm(shape.model.model_validate(data))


@functools.lru_cache(maxsize=256)
def _hint_name(key: str) -> str:
    return to_camel(key) if "_" in key else key


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
