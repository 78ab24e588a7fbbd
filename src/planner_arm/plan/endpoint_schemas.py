"""The contract of every endpoint after POST /plan: the requests about an earlier plan (/replan,
/plan/expand, /plan/specialize: each names exactly one of `previous`, the plan sent whole, and
`plan_id`, a stored plan), /plan/validate's edited plan and its problems, and the answers of
the probes and /capabilities (what an operator or an orchestrator reads about the service
itself, not about a plan).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, model_validator

from planner_arm.limits import LimitsSettings
from planner_arm.plan.schemas import (
    PlanNote,
    PlanRequest,
    PlanResponse,
    RequestId,
    limited_fields,
)
from planner_arm.plan.tools import ToolItem

StepStatus = Literal["completed", "running", "failed", "pending", "skipped"]
# Kept exactly as they were by every replan.
FINISHED_STATUSES: frozenset[str] = frozenset({"completed", "running"})
MAX_STEP_TEXT_CHARS = 8_000


def _closed_with_examples(*examples: dict[str, Any]) -> ConfigDict:
    """A request body that refuses unknown fields, with its examples for the API reference."""
    return ConfigDict(extra="forbid", json_schema_extra={"examples": list(examples)})


class OfAPlan(BaseModel):
    """A request about an earlier plan: exactly one of `previous` (a whole /plan, /replan or
    /plan/expand answer) and `plan_id` (a plan the service stored)."""

    previous: PlanResponse | None = Field(None, description="The plan, sent whole")
    plan_id: str | None = Field(
        None, min_length=1, max_length=128, description="Or the id of a stored plan"
    )

    @model_validator(mode="after")
    def _one_plan(self) -> Self:
        if (self.previous is None) == (self.plan_id is None):
            raise ValueError("give exactly one of previous and plan_id")
        return self


class StepState(BaseModel):
    """What became of one step: its status, and what it produced or why it failed."""

    model_config = ConfigDict(extra="forbid")

    status: StepStatus
    output: str | None = Field(None, max_length=MAX_STEP_TEXT_CHARS)
    error: str | None = Field(None, max_length=MAX_STEP_TEXT_CHARS)


def _state_shorthand(value: object) -> object:
    # "completed" says what {"status": "completed"} says: the client and the CLI take both.
    return {"status": value} if isinstance(value, str) else value


StepStateOrStatus = Annotated[
    StepState,
    BeforeValidator(_state_shorthand, json_schema_input_type=StepState | StepStatus),
]


class ReplanRequest(PlanRequest, OfAPlan):
    """A revised plan for the same goal, keeping the work already done.

    Exactly one of `previous` (a whole /plan or /replan answer) and `plan_id` (looked up in
    the plan store). `step_states` is keyed by step number; a state is an object or just its
    status (`{"1": "completed"}`); a step without a state is pending. `goal` may be left out
    when the plan names it: a stored plan's goal is its own (the service reads it), a plan
    sent whole gives the one it carries.
    """

    model_config = _closed_with_examples(
        {
            "goal": "Fix authentication bug and add tests",
            "plan_id": "5d0c2b0b6c9e4d7f9a0f3e1b2c4d6e8f",
            "step_states": {
                "1": {"status": "completed", "output": "auth/login.py:42"},
                "2": {"status": "failed", "error": "patch breaks the session tests"},
            },
            "replan_steps": [3],
            "reason": "The tests must not touch the database",
        },
        {
            "goal": "Fix authentication bug and add tests",
            "plan_id": "5d0c2b0b6c9e4d7f9a0f3e1b2c4d6e8f",
            "step_states": {"1": "completed", "2": "failed"},
        },
        {
            "goal": "Fix authentication bug and add tests",
            "plan_id": "5d0c2b0b6c9e4d7f9a0f3e1b2c4d6e8f",
            "reason": "The deadline moved: ship without the refactor",
        },
    )

    goal: str = limited_fields(LimitsSettings(), goal_required=False)["goal"][1]
    step_states: dict[str, StepStateOrStatus] = Field(default_factory=dict, max_length=200)
    replan_steps: list[int] = Field(
        default_factory=list, max_length=200, description="Steps marked for re-planning"
    )
    reason: str | None = Field(None, max_length=2_000, description="Why the plan must change")
    max_replans: int | None = Field(
        None,
        ge=0,
        le=100,
        description="Refuse once the plan was replanned this often; may lower the service's "
        "planning.max_replans, never raise it",
    )

    @model_validator(mode="after")
    def _goal_of_the_plan(self) -> Self:
        # "" is no goal given: a stored plan's own is read by the service; a plan sent whole
        # names its own, unless it was made before answers carried it.
        if self.goal or self.plan_id is not None:
            return self
        if self.previous is not None and self.previous.goal:
            self.goal = self.previous.goal
            return self
        raise ValueError("goal is required: the plan sent in `previous` names no goal")


class ExpandRequest(PlanRequest, OfAPlan):
    """Replace one step of a plan by a sub-plan for it. Exactly one of `previous` (a whole
    /plan, /replan or /plan/expand answer) and `plan_id` (looked up in the plan store)."""

    model_config = _closed_with_examples(
        {
            "goal": "Fix authentication bug and add tests",
            "plan_id": "5d0c2b0b6c9e4d7f9a0f3e1b2c4d6e8f",
            "step": 2,
        }
    )

    step: int = Field(ge=1, description="The number of the step to replace by its sub-plan")


MAX_GOAL_CHARS = 8_000
_SPECIALIZE_FIELDS = limited_fields(PlanRequest.limits)


class SpecializeRequest(OfAPlan):
    """Exactly one of `previous` (a whole /plan or /replan answer) and `plan_id` (a stored
    plan), and the number of the step whose input to fill. The caller's stored record of the
    plan (by `plan_id`, or `previous.plan_id`) wins: its goal, constraints and context go to
    the model, the body's constraints and other context keys added; `goal`, `constraints`
    and `context` alone describe a plan the store does not hold."""

    model_config = _closed_with_examples(
        {"plan_id": "5d0c2b0b6c9e4d7f9a0f3e1b2c4d6e8f", "step": 2},
        {
            "plan_id": "5d0c2b0b6c9e4d7f9a0f3e1b2c4d6e8f",
            "step": 2,
            "goal": "Fix authentication bug and add tests",
            "constraints": ["Python 3.11 only"],
            "context": {"repository": "acme/auth"},
        },
    )

    step: int = Field(ge=1, le=10_000, description="The step whose input to fill")
    goal: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_GOAL_CHARS,
        description="The plan's goal, for the model, when the store holds no record of the "
        "plan; a stored request's goal wins",
    )
    constraints: list[str] | None = Field(
        None,
        max_length=PlanRequest.limits.max_constraints,
        description="Rules the input must respect, as /plan takes them; added after a stored "
        "request's, never replacing them",
        json_schema_extra=_SPECIALIZE_FIELDS["constraints"][1].json_schema_extra,
    )
    context: dict[str, Any] | None = Field(
        None,
        description="Anything the model should know, as /plan takes it; a stored request's "
        "keys win, the others are added",
    )
    request_id: RequestId | None = None
    tools: list[ToolItem] | None = Field(
        None,
        min_length=1,
        description="The tools the plan is over, as /plan takes them, when they are not the "
        "configured arms: a tool step's input is then the arguments its input schema takes",
    )

    @model_validator(mode="after")
    def _as_plan_request_takes_them(self) -> Self:
        # The limits of /plan's fields, checked by /plan's own validators.
        fields = {"constraints": self.constraints, "context": self.context, "tools": self.tools}
        given = {key: value for key, value in fields.items() if value is not None}
        if given:
            checked = PlanRequest.model_validate({"goal": "-", **given})
            for key in given:
                setattr(self, key, getattr(checked, key))
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


# A plan far past any step limit is still read whole, so every problem is listed; this bounds
# the work one request can ask for (the body size limit bounds the bytes).
MAX_EDITED_STEPS = 200


class ValidateRequest(BaseModel):
    """An edited plan: steps in the /plan step shape, checked as they are (or mended: `fix`),
    over the configured arms or the caller's `tools`; the plan's `goal`, `constraints` and
    `context` are carried by the validated plan, so it can be replanned as `previous`."""

    model_config = _closed_with_examples(
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
    )

    # Items are read field by field by the checker, so a wrongly typed step is reported as
    # `invalid_step` naming its field, not refused as a malformed body.
    plan: list[Any] = Field(max_length=MAX_EDITED_STEPS, description="The steps to check")
    fix: bool = Field(
        False, description="Mend what the /plan pipeline mends locally and list it in warnings"
    )
    request_id: RequestId | None = None
    tools: list[ToolItem] | None = Field(
        None,
        min_length=1,
        description="The tools the plan is over, as /plan takes them, when they are not the "
        "configured arms: each step's tool must be one of them, its input the arguments its "
        "input schema takes (references to earlier steps' outputs checked too), and each step "
        "says whether it writes",
    )
    goal: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_GOAL_CHARS,
        description="The plan's goal: the validated plan carries it, so it can be replanned "
        "as `previous`",
    )
    constraints: list[str] | None = Field(
        None,
        max_length=PlanRequest.limits.max_constraints,
        description="The plan's constraints, as /plan takes them; carried by the validated plan",
        json_schema_extra=_SPECIALIZE_FIELDS["constraints"][1].json_schema_extra,
    )
    context: dict[str, Any] | None = Field(
        None, description="The plan's context, as /plan takes it"
    )
    # The fields above as /plan reads them (its limits, its tool shapes): what the tools are
    # built from, as a /plan request's are.
    _as_planned: PlanRequest | None = PrivateAttr(None)

    @model_validator(mode="after")
    def _as_plan_request_takes_them(self) -> Self:
        fields = {"constraints": self.constraints, "context": self.context, "tools": self.tools}
        given = {key: value for key, value in fields.items() if value is not None}
        if given or self.goal is not None:
            checked = PlanRequest.model_validate({"goal": self.goal or "-", **given})
            for key in given:
                setattr(self, key, getattr(checked, key))
            self._as_planned = checked
        return self

    @property
    def as_planned(self) -> PlanRequest | None:
        """The request's goal, constraints, context and tools as a /plan request; None when
        it gives none of them."""
        return self._as_planned


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
    warnings: list[PlanNote] = Field(
        description="What `fix` mended (one code per kind of mend), and notes that change nothing"
    )
    plan: PlanResponse | None = Field(
        None, description="The whole /plan answer for a valid plan (source 'validated'); else null"
    )


class ModelFailureNote(BaseModel):
    """A model's failed call, as /health keeps the last one."""

    model: str
    code: str = Field(description="connection, timeout, server_error, auth_failed, ...")
    detail: str
    at: str = Field(description="When it failed: UTC, ISO 8601")


class HealthResponse(BaseModel):
    status: Literal["healthy"]
    version: str
    model: str | None = Field(description="The first model of the chain; null with no model")
    timestamp: str
    uptime_seconds: float
    llm: Literal["configured", "degraded", "disabled"] = Field(
        description="degraded: some model's circuit is open, so it is being skipped"
    )
    store: Literal["memory", "redis", "degraded"] = Field(
        "memory",
        description="Where plans are kept; degraded: Redis does not answer now",
    )
    store_eviction_policy: str | None = Field(
        None,
        description="Redis's maxmemory-policy (noeviction or volatile-* keep live plans; "
        "allkeys-* may evict them); unknown when Redis refuses CONFIG GET; null in memory "
        "or while the store does not answer",
    )
    circuits: dict[str, str] = Field(
        description="Circuit state per model: closed, half_open or open"
    )
    llm_last_error: ModelFailureNote | None = Field(
        None,
        description="The last model failure since start-up (one that counts toward its "
        "circuit), kept after the circuit opens or the model recovers, so an open circuit's "
        "cause is not lost; null while none failed",
    )
    auth: Literal["keys", "none"] | None = Field(
        None,
        description="keys: the planning endpoints ask for an API key; none: every caller is "
        "the one anonymous caller (null from a service too old to say)",
    )
    warnings: list[PlanNote] = Field(
        default_factory=list,
        description="What an operator should fix: serving_without_keys when the service "
        "listens beyond loopback with no API keys",
    )


class ReadyResponse(BaseModel):
    status: Literal["ready", "starting", "stopping"]


class ArmInfo(BaseModel):
    id: str
    capabilities: list[str]
    description: str
    input_schema: dict[str, Any] = Field(
        default_factory=dict,
        description="The JSON Schema of a step's `input` for this arm (stage 2); an arm "
        "configured without a model of its own takes {instruction, inputs_from}",
    )


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
    success_rate: float = Field(
        ge=0,
        le=1,
        description="The share of recent plan requests answered with a plan (a "
        "rule-based plan counts: the caller got one)",
    )
    model_success_rate: float | None = Field(
        None,
        ge=0,
        le=1,
        description="The share of recent requests a model was asked for that it answered with "
        "a usable plan (a fallback after a model failure counts against it); null until a "
        "model has been asked",
    )
    measured: bool = Field(description="False until this process has served a plan request")
    plans_by_source: dict[str, int]
    arms: list[ArmInfo]
    min_steps: int
    max_steps: int
    models: list[str]
    llm: Literal["configured", "degraded", "disabled"] = Field(
        description="As /health says: degraded while some model's circuit is open"
    )
    timeout_seconds: float = Field(
        description="The planning deadline: a plan request is answered within about this long"
    )
