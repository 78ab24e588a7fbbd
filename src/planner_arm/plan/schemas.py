"""The API contract: request and response models of every endpoint.

`PlanStep` and the core fields of `PlanResponse` are the seed's, unchanged; the rest are
additions a caller can ignore.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from planner_arm.config import LimitsSettings

MAX_REQUEST_ID_CHARS = 128

PlanSource = Literal["llm", "fallback", "cache"]


class PlanOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    use_cache: bool = Field(
        True, description="False: plan afresh even if an identical request was just answered"
    )


def context_depth_exceeds(value: Any, limit: int) -> bool:
    """True when objects and lists nest deeper than `limit` (the context object is level 1).

    Iterative, and it stops at the first branch over the limit, so a hostile value costs
    little.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values() if _nests(child))
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item if _nests(child))
    return False


def _nests(value: Any) -> bool:
    return isinstance(value, dict | list)


class PlanRequest(BaseModel):
    """What to plan for. Unknown fields are refused so a typo is not silently ignored.

    The limits come from config: `request_model_for(limits)` makes the class an app uses;
    this base carries the defaults.
    """

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "goal": "Fix authentication bug and add tests",
                    "constraints": ["Don't modify database schema"],
                    "context": {"affected_files": ["auth/login.py"]},
                }
            ]
        },
    )
    limits: ClassVar[LimitsSettings] = LimitsSettings()

    goal: str = Field(
        min_length=1,
        max_length=limits.max_goal_chars,
        description="What to accomplish (not blank)",
        # Documented for clients; enforced by _goal_not_blank with a clearer message.
        json_schema_extra={"pattern": r"\S"},
    )
    constraints: list[str] = Field(default_factory=list, max_length=limits.max_constraints)
    context: dict[str, Any] = Field(default_factory=dict)
    # Printable ASCII only: it is echoed in a response header.
    request_id: str | None = Field(
        default=None, min_length=1, max_length=MAX_REQUEST_ID_CHARS, pattern=r"^[\x20-\x7e]+$"
    )
    options: PlanOptions = Field(default_factory=PlanOptions)

    @field_validator("goal")
    @classmethod
    def _goal_not_blank(cls, goal: str) -> str:
        if not goal.strip():
            raise ValueError("goal must not be blank")
        return goal

    @field_validator("constraints")
    @classmethod
    def _constraints_short(cls, constraints: list[str]) -> list[str]:
        most = cls.limits.max_constraint_chars
        for index, text in enumerate(constraints):
            if len(text) > most:
                raise ValueError(
                    f"constraint {index} is {len(text)} characters; at most {most} are allowed"
                )
        return [text.strip() for text in constraints if text.strip()]

    @field_validator("context")
    @classmethod
    def _context_small(cls, context: dict[str, Any]) -> dict[str, Any]:
        if not context:
            return context
        limits = cls.limits
        if context_depth_exceeds(context, limits.max_context_depth):
            raise ValueError(f"context nests deeper than {limits.max_context_depth} levels")
        size = len(json.dumps(context, ensure_ascii=False, default=str).encode())
        if size > limits.max_context_bytes:
            raise ValueError(
                f"context is {size} bytes as JSON; at most {limits.max_context_bytes} are allowed"
            )
        return context


def request_model_for(limits: LimitsSettings) -> type[PlanRequest]:
    """The request model with these limits, so the checks and the OpenAPI schema agree."""
    if limits == PlanRequest.limits:
        return PlanRequest
    model = create_model(
        "PlanRequest",
        __base__=PlanRequest,
        goal=(
            str,
            Field(
                min_length=1,
                max_length=limits.max_goal_chars,
                description="What to accomplish (not blank)",
                json_schema_extra={"pattern": r"\S"},
            ),
        ),
        constraints=(list[str], Field(default_factory=list, max_length=limits.max_constraints)),
    )
    model.limits = limits
    return model


class PlanStep(BaseModel):
    """A single step in the execution plan."""

    step: int = Field(ge=1)
    action: str = Field(min_length=1, description="What to do")
    required_arm: str = Field(description="Which arm executes this")
    acceptance_criteria: list[str] = Field(min_length=1, description="Success conditions")
    depends_on: list[int] = Field(default_factory=list, description="Prerequisite steps")
    estimated_cost_tier: int = Field(1, ge=1, le=5)
    estimated_duration_seconds: int = Field(30, ge=1)


class EstimatedCost(BaseModel):
    """What the planning calls themselves cost."""

    llm_usd: float = Field(ge=0)
    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)


class PlanNote(BaseModel):
    """One repair or warning: a stable code (see the README's table) and what it was about."""

    code: str = Field(min_length=1, description="A stable, machine-readable code")
    detail: str = Field(description="What was changed or noticed, for a person; may be empty")


class PlanMetadata(BaseModel):
    source: PlanSource
    model: str | None = Field(description="The model whose answer became the plan, if any")
    attempts: int = Field(ge=0, description="LLM calls made for this request")
    repairs: list[PlanNote] = Field(description="One entry per local fix applied to the plan")
    warnings: list[PlanNote] = Field(description="What the caller may want to know")
    latency_ms: float = Field(ge=0)
    prompt_version: str
    cached_plan_id: str | None = Field(
        None,
        description="The plan_id of the answer this one repeats (a cache hit, or a request "
        "that shared another's planning)",
    )


class PlanResponse(BaseModel):
    """Complete execution plan."""

    plan: list[PlanStep]
    rationale: str = Field(min_length=1, description="Why this approach")
    confidence: float = Field(ge=0.0, le=1.0)
    total_estimated_duration: int
    complexity_score: float = Field(ge=0.0, le=1.0)
    plan_id: str
    request_id: str
    parallel_stages: list[list[int]] = Field(
        description="Stages in order; the steps of one stage may run at the same time"
    )
    critical_path_duration: int = Field(description="Seconds along the longest dependency chain")
    estimated_cost: EstimatedCost
    metadata: PlanMetadata


class ErrorResponse(BaseModel):
    """The one error shape of every endpoint."""

    error: str = Field(description="A stable, machine-readable code")
    detail: str | list[dict[str, Any]] = Field(description="What went wrong, for a person")
    request_id: str


class HealthResponse(BaseModel):
    status: Literal["healthy"]
    version: str
    model: str
    timestamp: str
    uptime_seconds: float
    llm: Literal["configured", "degraded", "disabled"] = Field(
        description="degraded: some model's circuit is open, so it is being skipped"
    )
    circuits: dict[str, str] = Field(
        description="Circuit state per model: closed, half_open or open"
    )


class ReadyResponse(BaseModel):
    status: Literal["ready", "starting", "stopping"]


class ArmInfo(BaseModel):
    id: str
    capabilities: list[str]
    description: str


class CapabilitiesResponse(BaseModel):
    arm_id: Literal["planner"]
    capabilities: list[str]
    cost_tier: int
    average_latency_ms: float = Field(
        description="Mean latency of the recent plan requests that were planned (by the model "
        "or the fallback); repeats from the cache are left out"
    )
    model_latency_ms: float | None = Field(
        description="Mean latency of the recent plans the model made; null until one is made"
    )
    success_rate: float = Field(ge=0, le=1)
    measured: bool = Field(description="False until this process has served a plan request")
    plans_by_source: dict[str, int]
    arms: list[ArmInfo]
    min_steps: int
    max_steps: int
    models: list[str]
    llm: Literal["configured", "disabled"]
    timeout_seconds: float = Field(
        description="The planning deadline: a plan request is answered within about this long"
    )
