"""The POST /plan/validate contract: an edited plan in, every problem with it out."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from planner_arm.plan.schemas import PlanResponse, RequestId

# A plan far past any step limit is still read whole, so every problem is listed; this bounds
# the work one request can ask for (the body size limit bounds the bytes).
MAX_EDITED_STEPS = 200


class ValidateRequest(BaseModel):
    """An edited plan: steps in the /plan step shape, checked as they are (or mended: `fix`)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "plan": [
                        {
                            "step": 1,
                            "action": "Reproduce the login failure",
                            "required_arm": "executor",
                            "acceptance_criteria": ["The failure is reproduced by a test"],
                            "depends_on": [],
                        },
                        {
                            "step": 2,
                            "action": "Check the fix against the constraints",
                            "required_arm": "judge",
                            "acceptance_criteria": ["Every constraint is met"],
                            "depends_on": [1],
                        },
                    ],
                    "fix": False,
                }
            ]
        },
    )

    # Items are read field by field by the checker, so a wrongly typed step is reported as
    # `invalid_step` naming its field, not refused as a malformed body.
    plan: list[Any] = Field(max_length=MAX_EDITED_STEPS, description="The steps to check")
    fix: bool = Field(
        False, description="Mend what the /plan pipeline mends locally and list it in warnings"
    )
    request_id: RequestId | None = None


class ValidationProblem(BaseModel):
    code: str = Field(description="empty_plan, step_count, duplicate_step, cycle, ...")
    step: int | None = Field(description="The step it is about; null for the whole plan")
    message: str
    loc: list[str | int] | None = Field(
        None, description="Where in the request: ['plan', index] for a step's problem"
    )


class ValidateResponse(BaseModel):
    valid: bool
    errors: list[ValidationProblem]
    warnings: list[str] = Field(description="What `fix` mended, and notes that change nothing")
    plan: PlanResponse | None = Field(
        None, description="The whole /plan answer for a valid plan (source 'validated'); else null"
    )
