"""What a plan request may hold: the `limits` section of the configuration, and the models a
request shares with the configuration (an arm or tool, a worked example). The shapes a tool
may be sent in are `tool_shapes.py`.

Its own module, with pydantic alone, because the request models (`plan/schemas.py`) are built
from it and the Python client imports those models without the service's dependencies.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from planner_arm.tool_schema import schema_problem
from planner_arm.tool_shapes import (
    ARM_DESCRIPTION_MAX_CHARS as ARM_DESCRIPTION_MAX_CHARS,
)
from planner_arm.tool_shapes import (
    ARM_ID_MAX_CHARS as ARM_ID_MAX_CHARS,
)
from planner_arm.tool_shapes import (
    ARM_ID_PATTERN as ARM_ID_PATTERN,
)
from planner_arm.tool_shapes import (
    RESOURCE_PATTERN as RESOURCE_PATTERN,
)
from planner_arm.tool_shapes import (
    raw_arm_fields,
)


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


Schema = dict[str, Any]


class ArmSpec(_Section):
    """An arm (one of the built-in agents) or a tool of the caller: only `id` and
    `description` are required. A tool of any other accepted shape is read as one
    (`tool_shapes.py`)."""

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
        return raw_arm_fields(data)

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
