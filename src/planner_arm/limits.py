"""What a plan request may hold: the `limits` section of the configuration, and the shapes a
request shares with the configuration (an arm or tool, a worked example).

Its own module, with pydantic alone, because the request models (`plan/schemas.py`) are built
from it and the Python client imports those models without the service's dependencies.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


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


class ArmSpec(_Section):
    """An arm (one of the built-in agents) or a tool of the caller: only `id` and
    `description` are required."""

    id: str = Field(min_length=1, max_length=ARM_ID_MAX_CHARS, pattern=ARM_ID_PATTERN)
    description: str = Field(min_length=1, max_length=ARM_DESCRIPTION_MAX_CHARS)
    capabilities: list[str] = Field(default_factory=list, max_length=32)
    # Words in an action that point at this arm (the rule-based selector's first signal).
    keywords: list[str] = Field(default_factory=list, max_length=64)
    # The JSON Schema of the tool's arguments: a step's input follows it (stage 2).
    input_schema: dict[str, Any] | None = None
    # Typed resources: a link from A to B makes sense when B consumes what A produces.
    consumes: list[Annotated[str, Field(pattern=RESOURCE_PATTERN)]] = Field(
        default_factory=list, max_length=16
    )
    produces: list[Annotated[str, Field(pattern=RESOURCE_PATTERN)]] = Field(
        default_factory=list, max_length=16
    )

    @field_validator("id")
    @classmethod
    def _id_trimmed(cls, value: str) -> str:
        if value != value.strip():
            raise ValueError("an arm id has no leading or trailing spaces")
        return value


class ExampleStep(_Section):
    tool: str = Field(min_length=1, max_length=ARM_ID_MAX_CHARS)
    action: str | None = Field(None, max_length=500)
    depends_on: list[int] = Field(default_factory=list, max_length=50)


class WorkedExample(_Section):
    """A solved request: what was asked, and the tool calls that do it (steps numbered from 1
    in list order; `depends_on` names earlier steps)."""

    request: str = Field(min_length=1, max_length=4_000)
    steps: list[ExampleStep] = Field(min_length=1, max_length=50)
