"""Stage 2, specialize: each step's arm `input`, from the model or by rule.

For one step: a prompt (the goal, the step, the steps it may read, the arm's input schema;
structured output where the model is configured for it) -> the one attempt loop -> the input
checked against the schema and the step references -> else the rule-based input, with the
reason. For a whole plan (`"specialize": true`, a replan's or an expansion's new steps):
steps are filled at most `specialize.max_concurrency` at a time, within the request's
deadline and `max_llm_usd`. Only pending steps get an input: a step the caller reported
finished (completed, running, failed, skipped) comes back exactly as it was sent. A step
that already has a valid input keeps it; one whose input breaks its arm's schema or refers to
a step it does not depend on gets a new one (`input_replaced`). A step the model could not
fill in time, or at all, gets the rule-based input (`input_by_rule`). The calls are added to
the answer's `metadata.attempts` and `estimated_cost`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Literal

from anyio import to_thread

from planner_arm.errors import PlanValidationError, RequestRejected
from planner_arm.limits import ArmSpec
from planner_arm.llm.chain import ModelAnswer, Question
from planner_arm.llm.client import AnswerSchema, Completion
from planner_arm.llm.usage import Usage
from planner_arm.metrics import PlannerMetrics
from planner_arm.pipeline.assembly import notes as notes_of
from planner_arm.pipeline.parsing import extract_json
from planner_arm.plan.dag import ancestors, ancestors_of_each
from planner_arm.plan.edited import check_sent_back
from planner_arm.plan.endpoint_schemas import SpecializeResponse
from planner_arm.plan.inputs import StepOutputs, check_input, input_schema
from planner_arm.plan.output_fields import output_fields, step_outputs
from planner_arm.plan.schemas import EstimatedCost, PlanNote, PlanResponse, PlanStep
from planner_arm.plan.tool_inputs import CheckBudget, ToolSchema, check_tool_input, tool_schema
from planner_arm.plan.unsourced import Sources, texts_of, unsourced_values
from planner_arm.rules.inputs import rule_input
from planner_arm.strategies.answer_schemas import decoding_schema
from planner_arm.strategies.answering import Answers
from planner_arm.strategies.job import Job
from planner_arm.strategies.prompts.specialize import (
    SpecializeBrief,
    specialize_messages,
    specialize_repair,
)
from planner_arm.tools.arguments import rule_tool_input

InputSource = Literal["llm", "rule"]


@dataclass(frozen=True)
class FilledInput:
    """A step's input, who wrote it, (by rule while a model was configured) why, and what
    in the model's deserves a warning (`unsourced`)."""

    input: dict[str, Any]
    source: InputSource
    model: str | None = None
    reason: str | None = None
    warnings: tuple[PlanNote, ...] = ()


@dataclass(frozen=True)
class StepToFill:
    """What a filler needs to know about one step: it, the plan's goal, the steps it may
    read (those it depends on, directly or not), for a tool that has one, the JSON Schema of
    its arguments (None: the arm's own input model), and the fields of the results of the
    steps it may read whose tools have an output schema (`outputs`, by step number)."""

    step: PlanStep
    brief: SpecializeBrief
    earlier: Sequence[PlanStep]
    tool_schema: ToolSchema | None = None
    outputs: StepOutputs = field(default_factory=dict)

    @property
    def earlier_ids(self) -> frozenset[int]:
        return frozenset(item.step for item in self.earlier)

    def checked(self, data: object) -> dict[str, Any]:
        """`data` as this step's input, or PlanValidationError `invalid_input`."""
        if self.tool_schema is not None:
            return check_tool_input(self.tool_schema, data, self.earlier_ids, self.outputs)
        return check_input(self.step.required_arm, data, self.earlier_ids, self.outputs)

    def by_rule(self) -> dict[str, Any]:
        if self.tool_schema is None:
            return rule_input(self.step)
        brief = self.brief
        return rule_tool_input(
            self.step, self.tool_schema, brief.goal, brief.context, self.earlier, self.outputs
        )


def tool_schemas(arms: Iterable[ArmSpec], used: Collection[str]) -> dict[str, ToolSchema]:
    """The input schema of each arm of `used` that has a usable one (a caller's tools), their
    checks sharing one request's budget; the other arms' schemas are not read (a set may hold
    500 tools, a plan a few of them)."""
    budget = CheckBudget()
    schemas = {arm.id: tool_schema(arm.input_schema, budget) for arm in arms if arm.id in used}
    return {arm: schema for arm, schema in schemas.items() if schema is not None}


def _answer_schema_name(arm: str) -> str:
    # A response format's name is letters, digits, `_` and `-`, at most 64 of them.
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"{arm}_input")[:64]


@dataclass
class Specializer:
    answers: Answers
    _: KW_ONLY
    max_concurrency: int
    metrics: PlannerMetrics

    async def specialize(
        self,
        job: Job[Any],
        response: PlanResponse,
        brief: SpecializeBrief,
        finished: frozenset[int] = frozenset(),
    ) -> PlanResponse:
        """`response` (the job's answer so far) with an input on every pending step, and what
        that took; the steps in `finished` (reported done, running, failed or skipped) are left
        exactly as they are. The inputs' calls are a bill of their own, which starts where the
        job's stands, so the caller's max_llm_usd bounds the whole; nobody watches them."""
        steps = response.plan
        by_id = {step.step: step for step in steps}
        earlier = ancestors_of_each(steps)
        used = {step.required_arm for step in steps}
        arms = job.toolbox.box.arms
        schemas = await to_thread.run_sync(tool_schemas, arms, used)
        fields = await to_thread.run_sync(output_fields, arms, used)
        work = job.beside()
        slots = asyncio.Semaphore(self.max_concurrency)
        notes: list[tuple[int, PlanNote]] = []
        started_ms = job.deadline.elapsed_ms()

        async def fill(step: PlanStep) -> PlanStep:
            if step.step in finished:
                return step
            before = [by_id[number] for number in sorted(earlier.get(step.step, ()))]
            target = StepToFill(
                step,
                brief,
                before,
                schemas.get(step.required_arm),
                step_outputs(before, fields),
            )
            if step.input is not None:
                try:
                    checked = await to_thread.run_sync(target.checked, step.input)
                    return step.model_copy(update={"input": checked})
                except PlanValidationError as problem:
                    detail = f"step {step.step}: {problem.detail}"[:500]
                    notes.append((step.step, PlanNote(code="input_replaced", detail=detail)))
            async with slots:
                filled = await self.fill(work, target)
            notes.extend((step.step, note) for note in filled.warnings)
            if filled.reason is not None:
                notes.append((step.step, _by_rule_note(step, filled)))
            return step.model_copy(update={"input": filled.input})

        filled_steps = await asyncio.gather(*(fill(step) for step in steps))
        warnings = [note for _, note in sorted(notes, key=lambda item: item[0])]
        known = response.metadata.warnings
        warnings += [note for note in notes_of(work.warnings()) if note not in known]
        took_ms = job.deadline.elapsed_ms() - started_ms
        return _with_inputs(response, list(filled_steps), work.usage, warnings, took_ms)

    async def one_step(
        self,
        job: Job[Any],
        plan: PlanResponse,
        number: int,
        brief: SpecializeBrief,
        tools: Sequence[ArmSpec] | None = None,
    ) -> SpecializeResponse:
        """The input of step `number` of `plan` (POST /plan/specialize), over `tools` (the
        request's; None: the job's arms); InvalidPrevious for a plan that is not one to work
        on (the check /replan and /plan/expand make, over the same arms), RequestRejected
        `unknown_step` when the plan has no such step."""
        arms = job.toolbox.box.arms if tools is None else tools
        check_sent_back(plan.plan, [arm.id for arm in arms])
        by_id = {step.step: step for step in plan.plan}
        step = by_id.get(number)
        if step is None:
            detail = f"the plan has no step {number} (its steps are {sorted(by_id)})"
            raise RequestRejected(detail, code="unknown_step")
        before = [by_id[item] for item in sorted(ancestors(plan.plan, number))]
        schemas = await to_thread.run_sync(tool_schemas, arms, {step.required_arm})
        fields = await to_thread.run_sync(output_fields, arms, {i.required_arm for i in before})
        schema = schemas.get(step.required_arm)
        target = StepToFill(step, brief, before, schema, step_outputs(before, fields))
        filled = await self.fill(job.quiet(), target)
        return SpecializeResponse(
            plan_id=plan.plan_id,
            step=number,
            required_arm=step.required_arm,
            input=filled.input,
            source=filled.source,
            model=filled.model,
            request_id=job.request_id,
            warnings=[
                *filled.warnings,
                *([] if filled.reason is None else [_by_rule_note(step, filled)]),
            ],
        )

    async def fill(self, job: Job[Any], target: StepToFill) -> FilledInput:
        """The step's input within the job's deadline and bill: the model's when it gives a
        valid one, else the rule's."""
        if not self.answers.configured:
            return self._counted(FilledInput(await to_thread.run_sync(target.by_rule), "rule"))
        outcome = await self.answers.ask(job, self._question(target))
        if isinstance(outcome, ModelAnswer):
            warnings = tuple(unsourced(target, outcome.value))
            return self._counted(FilledInput(outcome.value, "llm", outcome.model, None, warnings))
        # An answer that broke the schema is an invalid input, not an invalid plan.
        reason = "invalid_input" if outcome.reason == "invalid_plan" else outcome.reason
        why = f"{reason}: {outcome.detail}"
        if outcome.errors:
            why += f": {'; '.join(outcome.errors)}"[:300]
        by_rule = await to_thread.run_sync(target.by_rule)
        return self._counted(FilledInput(by_rule, "rule", None, why))

    def _question(self, target: StepToFill) -> Question[dict[str, Any]]:
        step = target.step
        tool = target.tool_schema
        schema = input_schema(step.required_arm) if tool is None else tool.schema
        fields = _field_names(schema)

        def read(completion: Completion) -> dict[str, Any]:
            data, _ = extract_json(completion.content, truncated=completion.truncated)
            # A model that wraps the object ({"input": {...}}, {"arguments": {...}}) said the
            # right thing.
            if isinstance(data, dict) and len(data) == 1:
                ((key, inner),) = data.items()
                if key in _WRAPPERS and isinstance(inner, dict) and key not in fields:
                    data = inner
            return target.checked(data)

        return Question(
            specialize_messages(
                step.required_arm, schema, target.brief, step, target.earlier, target.outputs
            ),
            read,
            specialize_repair,
            answer_schema=AnswerSchema(
                _answer_schema_name(step.required_arm), decoding_schema(schema)
            ),
            light=True,
        )

    def _counted(self, filled: FilledInput) -> FilledInput:
        self.metrics.child(self.metrics.specializations, filled.source).inc()
        return filled


def unsourced(target: StepToFill, value: dict[str, Any]) -> list[PlanNote]:
    """The recipient-like values of a model's input for `target` that nothing the caller gave
    holds: its goal, constraints, context, worked examples and reports, the earlier steps."""
    brief = target.brief
    given = [brief.goal or "", *brief.constraints, *texts_of(dict(brief.context)), *brief.given]
    given += [text for item in target.earlier for text in texts_of(item.input)]
    tool = target.tool_schema
    schema = input_schema(target.step.required_arm) if tool is None else tool.schema
    return unsourced_values(target.step.step, value, schema, Sources.of(given))


# The keys a model wraps an input in.
_WRAPPERS = frozenset({"input", "arguments"})


def _field_names(schema: Mapping[str, Any]) -> frozenset[str]:
    properties = schema.get("properties")
    return frozenset(properties) if isinstance(properties, Mapping) else frozenset()


def _by_rule_note(step: PlanStep, filled: FilledInput) -> PlanNote:
    return PlanNote(code="input_by_rule", detail=f"step {step.step}: {filled.reason}"[:500])


def _with_inputs(
    response: PlanResponse,
    steps: list[PlanStep],
    usage: Usage,
    warnings: list[PlanNote],
    took_ms: float,
) -> PlanResponse:
    cost = response.estimated_cost
    metadata = response.metadata
    return response.model_copy(
        update={
            "plan": steps,
            "estimated_cost": EstimatedCost(
                llm_usd=round(usage.usd, 8),
                prompt_tokens=cost.prompt_tokens + usage.prompt_tokens,
                completion_tokens=cost.completion_tokens + usage.completion_tokens,
            ),
            "metadata": metadata.model_copy(
                update={
                    "attempts": metadata.attempts + usage.calls,
                    "latency_ms": round(metadata.latency_ms + took_ms, 3),
                    "warnings": [*metadata.warnings, *warnings],
                }
            ),
        }
    )
