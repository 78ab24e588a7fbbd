"""The caller's own tools: the shapes a request may send them in, and finding the right ones.

A request's `tools` replace the configured arms for that request. Each item is either our arm
shape (`id`, `description`, optional `input_schema`, `consumes`, `produces`) or the OpenAI
function-tool shape (`{"type": "function", "function": {"name", "description",
"parameters"}}`); both become `ArmSpec`s. Pydantic only: the client imports these models.
Ranking tools against a text is `plan/tool_index.py`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from planner_arm.limits import (
    ARM_DESCRIPTION_MAX_CHARS,
    ARM_ID_MAX_CHARS,
    ARM_ID_PATTERN,
    RESOURCE_PATTERN,
    ArmSpec,
)

ToolId = Annotated[str, Field(min_length=1, max_length=ARM_ID_MAX_CHARS, pattern=ARM_ID_PATTERN)]
Description = Annotated[str, Field(min_length=1, max_length=ARM_DESCRIPTION_MAX_CHARS)]
Resource = Annotated[str, Field(pattern=RESOURCE_PATTERN)]


class Tool(BaseModel):
    """A tool in our arm shape."""

    model_config = ConfigDict(extra="forbid")

    id: ToolId
    description: Description
    input_schema: dict[str, Any] | None = None
    consumes: list[Resource] = Field(default_factory=list, max_length=16)
    produces: list[Resource] = Field(default_factory=list, max_length=16)


class FunctionSpec(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: ToolId
    description: Description
    parameters: dict[str, Any] | None = None


class FunctionTool(BaseModel):
    """A tool in the OpenAI function-tool shape."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["function"]
    function: FunctionSpec


ToolItem = Tool | FunctionTool


def arm_specs(tools: Sequence[ToolItem]) -> list[ArmSpec]:
    """The tools as arms; raises ValueError naming a repeated id."""
    specs = [_spec(tool) for tool in tools]
    seen: set[str] = set()
    for spec in specs:
        if spec.id in seen:
            raise ValueError(f"tool id {spec.id!r} is given twice")
        seen.add(spec.id)
    return specs


def _spec(tool: ToolItem) -> ArmSpec:
    if isinstance(tool, FunctionTool):
        function = tool.function
        return ArmSpec(
            id=function.name, description=function.description, input_schema=function.parameters
        )
    return ArmSpec(
        id=tool.id,
        description=tool.description,
        input_schema=tool.input_schema,
        consumes=tool.consumes,
        produces=tool.produces,
    )


def tool_set_key(specs: Sequence[ArmSpec]) -> str:
    """A digest of a tool set's content: the same tools, the same key."""
    text = json.dumps([spec.model_dump(mode="json") for spec in specs], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NOT_WORD = re.compile(r"[^0-9a-zA-Z]+")


def name_words(name: str) -> str:
    """A tool name as words: `GetMovieCredit` and `get_movie_credit` are "get movie credit"."""
    return " ".join(_NOT_WORD.sub(" ", _CAMEL.sub(" ", name)).lower().split())


# Where one piece of work in a request ends and the next begins.
_PIECES = re.compile(
    r"(?<=[.!?;])\s+|\n+|,?\s+\b(?:and then|then|after that|afterwards|finally|also|and)\b\s+",
    re.I,
)
_FILLER = re.compile(
    r"^(?:please|i (?:want|need|would like) to|i'd like to|can you|could you|help me)\s+", re.I
)
_MIN_PIECE_WORDS = 2


def request_pieces(text: str) -> list[str]:
    """The pieces of work a request asks for, in its order: its sentences, cut again at
    "and", "then", "after that" (pieces of one word are dropped)."""
    pieces = []
    for raw in _PIECES.split(text):
        piece = _FILLER.sub("", (raw or "").strip(" ,.;:"))
        if len(piece.split()) >= _MIN_PIECE_WORDS:
            pieces.append(piece)
    return pieces or [text.strip()]
