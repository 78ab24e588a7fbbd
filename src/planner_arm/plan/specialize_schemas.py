"""POST /plan/specialize: the request (a plan, or its id, and a step) and the step's input."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner_arm.plan.schemas import PlanNote, PlanResponse, RequestId

MAX_GOAL_CHARS = 8_000


class SpecializeRequest(BaseModel):
    """Exactly one of `previous` (a whole /plan or /replan answer) and `plan_id` (a stored
    plan), and the number of the step whose input to fill."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"plan_id": "5d0c2b0b6c9e4d7f9a0f3e1b2c4d6e8f", "step": 2},
            ]
        },
    )

    previous: PlanResponse | None = Field(None, description="The plan, whole")
    plan_id: str | None = Field(
        None, min_length=1, max_length=128, description="Or the id of a stored plan"
    )
    step: int = Field(ge=1, le=10_000, description="The step whose input to fill")
    goal: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_GOAL_CHARS,
        description="The plan's goal, for the model; with plan_id the stored request's goal "
        "is used when this is left out",
    )
    request_id: RequestId | None = None

    @model_validator(mode="after")
    def _one_plan(self) -> SpecializeRequest:
        if (self.previous is None) == (self.plan_id is None):
            raise ValueError("give exactly one of previous and plan_id")
        return self


class SpecializeResponse(BaseModel):
    """The step's input, valid against its arm's `input_schema` in /capabilities."""

    plan_id: str
    step: int
    required_arm: str
    input: dict[str, Any] = Field(description="The arm's input; may name earlier outputs as "
                                  "{{steps.N.output}}")  # fmt: skip
    source: Literal["llm", "rule"] = Field(
        description="llm: the model wrote it; rule: derived from the step by rule"
    )
    model: str | None = Field(None, description="The model that wrote it, if one did")
    request_id: str
    warnings: list[PlanNote] = Field(
        default_factory=list, description="input_by_rule: why the model's input was not used"
    )
