"""The API contract of POST /plan: its request, the plan it answers, and the error body.

`PlanStep` and the core fields of `PlanResponse` are the original plan contract, unchanged;
the rest are additions a caller can ignore. The request fields whose limits come from the
configuration (goal, constraints, context) are built from it (`request_model_for`), so the
checks and the OpenAPI schema say the same.
"""

from __future__ import annotations

import json
from functools import cached_property
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from planner_arm.limits import ArmSpec, LimitsSettings, WorkedExample
from planner_arm.plan.tools import ToolItem, arm_specs, tool_set_key, undescribed


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


def limited_fields(limits: LimitsSettings, goal_required: bool = True) -> dict[str, Any]:
    """The fields whose limits come from config, so the checks and the schema agree. A
    request that may leave its goal out (a replan of a stored plan) has "" for none."""
    kib = limits.max_context_bytes / 1024
    return {
        "goal": (
            str,
            Field(
                ... if goal_required else "",
                min_length=1,
                max_length=limits.max_goal_chars,
                description=f"What to accomplish: not blank, at most {limits.max_goal_chars} "
                "characters"
                + ("" if goal_required else "; leave it out to keep the plan's own goal"),
                # Documented for clients; enforced by _goal_not_blank with a clearer message.
                json_schema_extra={"pattern": r"\S"},
            ),
        ),
        "constraints": (
            list[str],
            Field(
                default_factory=list,
                max_length=limits.max_constraints,
                description=f"Rules the plan must respect: at most {limits.max_constraints}, "
                f"each at most {limits.max_constraint_chars} characters",
                # Enforced by _constraints_short, which names the constraint that is too long.
                json_schema_extra={
                    "items": {"type": "string", "maxLength": limits.max_constraint_chars}
                },
            ),
        ),
        "context": (
            dict[str, Any],
            Field(
                default_factory=dict,
                description=f"Anything the planner should know: at most {kib:g} KiB as JSON, "
                f"nested at most {limits.max_context_depth} levels deep",
            ),
        ),
    }


MAX_REQUEST_ID_CHARS = 128
REQUEST_ID_PATTERN = r"^[\x20-\x7e]+$"

# The one rule for a caller's request id, in the body or the X-Request-ID header: printable
# ASCII only, since it is echoed in a response header.
RequestId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_REQUEST_ID_CHARS,
        pattern=REQUEST_ID_PATTERN,
        description="Your id for this request, echoed in the answer and in every log line "
        f"(printable ASCII, at most {MAX_REQUEST_ID_CHARS} characters)",
    ),
]

# validated: an edited plan checked by POST /plan/validate, never planned by a model.
PlanSource = Literal["llm", "fallback", "cache", "validated"]
# How deep to plan: one list of steps; phases each expanded into a sub-plan; the next stage
# only, the rest after the orchestrator reports back through /replan.
Strategy = Literal["flat", "hierarchical", "iterative"]
DEFAULT_MAX_DEPTH = 2
MAX_DEPTH = 3


class PlanOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    use_cache: bool = Field(
        True, description="False: plan afresh even if an identical request was just answered"
    )


class Budget(BaseModel):
    """What the caller will spend on a plan: its size, its wall-clock time, the model calls."""

    model_config = ConfigDict(extra="forbid")

    max_steps: int | None = Field(None, ge=1, le=50, description="At most this many steps")
    max_duration_seconds: int | None = Field(
        None, ge=1, description="Bounds the critical path (the wall-clock time of the plan)"
    )
    max_llm_usd: float | None = Field(
        None, ge=0, description="Model calls stop once their spend would pass this"
    )


_DEFAULT_FIELDS = limited_fields(LimitsSettings())


class PlanRequest(BaseModel):
    """What to plan for. Unknown fields are refused, so a typo is not silently ignored."""

    # The limits come from config: `request_model_for(limits)` makes the class an app uses;
    # this base carries the defaults.
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

    goal: str = _DEFAULT_FIELDS["goal"][1]
    constraints: list[str] = _DEFAULT_FIELDS["constraints"][1]
    context: dict[str, Any] = _DEFAULT_FIELDS["context"][1]
    request_id: RequestId | None = None
    options: PlanOptions = Field(default_factory=PlanOptions)
    budget: Budget | None = None
    strategy: Strategy = Field(
        "flat",
        description="flat: one list of steps; hierarchical: phases, each expanded into a "
        "sub-plan (see max_depth); iterative: only the steps that can start now",
    )
    max_depth: int = Field(
        DEFAULT_MAX_DEPTH,
        ge=1,
        le=MAX_DEPTH,
        description="hierarchical: levels of the tree (phases are level 1); other strategies "
        "ignore it",
    )
    specialize: bool = Field(
        False,
        description="Fill each step's `input`: the typed input of its arm, or the arguments "
        "of its tool's call, valid against the tool's input schema (stage 2)",
    )
    tools: list[ToolItem] | None = Field(
        None,
        min_length=1,
        description="The tools to plan over for this request, replacing the configured arms: "
        "each in the arm shape (id, description, optional input_schema, consumes, produces), "
        "the OpenAI function-tool shape, an MCP tool as tools/list gives it (name, title, "
        "description, inputSchema, outputSchema, annotations) or Anthropic's (name, "
        "description, input_schema)",
    )

    examples: list[WorkedExample] | None = Field(
        None,
        max_length=50,
        description="Worked examples for this request (a request and its tool calls), shown "
        "to the model when they are similar to the goal; they join the configured ones",
    )

    @field_validator("tools", mode="before")
    @classmethod
    def _tools_not_empty(cls, tools: Any) -> Any:
        # Before the schema's own minItems, so the message says what to do instead.
        if isinstance(tools, list) and not tools:
            raise ValueError("tools is empty: leave it out to plan over the configured arms")
        return tools

    @field_validator("tools")
    @classmethod
    def _tools_bounded(cls, tools: list[ToolItem] | None) -> list[ToolItem] | None:
        if tools is None:
            return None
        limits = cls.limits
        if len(tools) > limits.max_tools:
            raise ValueError(f"{len(tools)} tools; at most {limits.max_tools} are allowed")
        size = len(json.dumps([tool.model_dump(mode="json") for tool in tools]).encode())
        if size > limits.max_tools_bytes:
            raise ValueError(
                f"tools are {size} bytes as JSON; at most {limits.max_tools_bytes} are allowed"
            )
        arm_specs(tools)  # a repeated id is refused here
        return tools

    @cached_property
    def tool_set(self) -> tuple[str, list[ArmSpec]] | None:
        """The request's tools as arms with the digest of their content, made once per
        request (every strategy and the stream look them up); None for the configured arms."""
        if self.tools is None:
            return None
        specs = arm_specs(self.tools)
        return tool_set_key(specs), specs

    @property
    def tool_warnings(self) -> list[str]:
        """What the answer says of the request's tools: those sent without a description."""
        names = undescribed(self.tools or [])
        if not names:
            return []
        listed = ", ".join(names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")
        return [f"tool_without_description: planned from name and parameters: {listed}"]

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


RequestModel = TypeVar("RequestModel", bound=PlanRequest)


def request_model_for(
    limits: LimitsSettings,
    base: type[RequestModel] = PlanRequest,  # type: ignore[assignment]
) -> type[RequestModel]:
    """The request model (`base`, or a subclass such as the replan request) with these limits,
    so the checks and the OpenAPI schema agree."""
    if limits == base.limits:
        return base
    fields = limited_fields(limits, goal_required=base.model_fields["goal"].is_required())
    model = create_model(base.__name__, __base__=base, **fields)
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
    parent: str | None = Field(
        None,
        description="The tree node (hierarchical) or the replaced step (/plan/expand) this "
        "step details; null for a step planned at the top level",
    )
    input: dict[str, Any] | None = Field(
        None,
        description="Stage 2: the input of the step's arm, valid against that arm's "
        "input_schema in /capabilities; for a tool with an input schema, the arguments of its "
        "call, valid against that schema, or {needs, missing, arguments, instruction} when "
        "some cannot be given; null until specialised",
    )
    writes: bool | None = Field(
        None,
        description="Of a step over a caller's tool: true when the tool changes something "
        "(creates, places, sends, cancels, pays ...: annotated destructiveHint true or "
        "readOnlyHint false, else read "
        "so from its name and description), false when it only reads; null for a built-in "
        "arm's step. The service sets it, whatever a model or caller wrote: a runner calls a "
        "writing step only with a person's or a policy's yes",
    )


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


class PlanDiff(BaseModel):
    """A replan's changes, by step number against the previous plan."""

    kept: list[int] = Field(description="Steps of the previous plan kept as they were")
    removed: list[int] = Field(description="Steps of the previous plan no longer planned")
    added: list[int] = Field(description="New steps, numbered above the previous plan's")


class PlanTreeNode(BaseModel):
    """One node of a hierarchical plan: a phase or sub-task, or a primitive step of `plan`."""

    id: str = Field(description='A path: "2" is the second phase, "2.3" its third sub-task')
    action: str
    required_arm: str
    step: int | None = Field(
        description="The number of this node's step in `plan`; null for "
        "a node that was expanded into children"
    )
    children: list[PlanTreeNode] = Field(default_factory=list)


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
    version: int = Field(1, ge=1, description="1 for /plan; one more with each replan")
    parent_plan_id: str | None = Field(None, description="The plan this one replans, if any")
    replan_count: int = Field(
        0,
        ge=0,
        description="Replans in this plan's chain so far that count toward max_replans (an "
        "iterative round that only reports finished steps does not)",
    )
    diff: PlanDiff | None = Field(None, description="A replan's changes; null on /plan")
    strategy: Strategy = Field("flat", description="The strategy this plan was made with")
    complete: bool = Field(
        True,
        description="False for an iterative plan that holds only the next stage: run it, "
        "then /replan with the steps' states and strategy iterative for the next one; true "
        "when the plan's steps finish the goal (its final check is among them)",
    )
    tree: list[PlanTreeNode] | None = Field(
        None, description="hierarchical: the phases and their sub-tasks; null otherwise"
    )
    goal: str | None = Field(
        None,
        description="The goal of the request this plan answers (of a replan or an expansion: "
        "its own request's); null in a plan made before answers carried it",
    )
    constraints: list[str] = Field(
        default_factory=list, description="The constraints of that request, as it was read"
    )


class ErrorItem(BaseModel):
    """One problem of a request or of a plan."""

    code: str = Field(description="A stable, machine-readable code for this problem")
    message: str = Field(description="What is wrong, for a person")
    loc: list[str | int] | None = Field(
        None, description='Where in the request the problem is, e.g. ["body", "goal"]'
    )
    step: int | None = Field(None, description="The plan step the problem is about, if any")


class ErrorResponse(BaseModel):
    """The one error shape of every endpoint."""

    error: str = Field(description="A stable, machine-readable code")
    detail: str = Field(description="What went wrong, in one sentence for a person")
    request_id: str = Field(description="The id of the request, as in the X-Request-ID header")
    errors: list[ErrorItem] | None = Field(
        None, description="Each problem, when the request or the plan had one or more"
    )
    figures: dict[str, int | float] | None = Field(
        None,
        description="budget_exceeded: each limit and the value of the smallest plan found",
    )
