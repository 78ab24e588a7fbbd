"""The POST /plan/expand request: the /plan fields, the plan (or its id), and the step."""

from __future__ import annotations

from pydantic import ConfigDict, Field, model_validator

from planner_arm.plan.schemas import PlanRequest, PlanResponse


class ExpandRequest(PlanRequest):
    """Replace one step of a plan by a sub-plan for it. Exactly one of `previous` (a whole
    /plan, /replan or /plan/expand answer) and `plan_id` (looked up in the plan store)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "goal": "Fix authentication bug and add tests",
                    "plan_id": "5d0c2b0b6c9e4d7f9a0f3e1b2c4d6e8f",
                    "step": 2,
                }
            ]
        },
    )

    previous: PlanResponse | None = Field(None, description="The plan to expand, whole")
    plan_id: str | None = Field(
        None, min_length=1, max_length=128, description="Or the id of a stored plan to expand"
    )
    step: int = Field(ge=1, description="The number of the step to replace by its sub-plan")

    @model_validator(mode="after")
    def _one_previous(self) -> ExpandRequest:
        if (self.previous is None) == (self.plan_id is None):
            raise ValueError("give exactly one of previous and plan_id")
        return self
