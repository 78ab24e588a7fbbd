"""The POST /replan request: the /plan fields, the previous plan (or its id), and what became
of its steps."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner_arm.plan.schemas import PlanRequest, PlanResponse

StepStatus = Literal["completed", "running", "failed", "pending", "skipped"]
# Kept exactly as they were by every replan.
FINISHED_STATUSES: frozenset[str] = frozenset({"completed", "running"})
MAX_STEP_TEXT_CHARS = 8_000


class StepState(BaseModel):
    """What became of one step: its status, and what it produced or why it failed."""

    model_config = ConfigDict(extra="forbid")

    status: StepStatus
    output: str | None = Field(None, max_length=MAX_STEP_TEXT_CHARS)
    error: str | None = Field(None, max_length=MAX_STEP_TEXT_CHARS)


class ReplanRequest(PlanRequest):
    """A revised plan for the same goal, keeping the work already done.

    Exactly one of `previous` (a whole /plan or /replan answer) and `plan_id` (looked up in
    the plan store). `step_states` is keyed by step number; a step without a state is pending.
    """

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "goal": "Fix authentication bug and add tests",
                    "plan_id": "5d0c2b0b6c9e4d7f9a0f3e1b2c4d6e8f",
                    "step_states": {
                        "1": {"status": "completed", "output": "auth/login.py:42"},
                        "2": {"status": "failed", "error": "patch breaks the session tests"},
                    },
                    "replan_steps": [3],
                    "reason": "The tests must not touch the database",
                }
            ]
        },
    )

    previous: PlanResponse | None = Field(None, description="The plan to revise, whole")
    plan_id: str | None = Field(
        None, min_length=1, max_length=128, description="Or the id of a stored plan to revise"
    )
    step_states: dict[str, StepState] = Field(default_factory=dict, max_length=200)
    replan_steps: list[int] = Field(
        default_factory=list, max_length=200, description="Steps marked for re-planning"
    )
    reason: str | None = Field(None, max_length=2_000, description="Why the plan must change")
    max_replans: int | None = Field(
        None, ge=0, le=100, description="Refuse once the plan was replanned this often"
    )

    @model_validator(mode="after")
    def _one_previous(self) -> ReplanRequest:
        if (self.previous is None) == (self.plan_id is None):
            raise ValueError("give exactly one of previous and plan_id")
        return self
