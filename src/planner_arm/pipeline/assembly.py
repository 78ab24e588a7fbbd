"""The answer reader and the answer: a model's text read into a checked plan (parse, normalise,
then the caller's check), and a checked plan with what it cost turned into `PlanResponse`."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Protocol

from planner_arm.pipeline.normalise import normalise_plan
from planner_arm.pipeline.parsing import extract_json
from planner_arm.plan.arms import ArmResolver
from planner_arm.plan.draft import DraftPlan, repair, repair_code, split_note
from planner_arm.plan.edited import NOTE_CODES, EditCheck
from planner_arm.plan.estimation import (
    FILLED_IN_TOOL_PLANS,
    complexity_score,
    critical_path_duration,
    parallel_stages,
    plan_confidence,
    tool_plan_confidence,
    total_duration,
)
from planner_arm.plan.schemas import (
    EstimatedCost,
    PlanMetadata,
    PlanNote,
    PlanResponse,
    PlanSource,
)
from planner_arm.plan.validation import ValidPlan

_RATIONALE_GOAL_CHARS = 120


class Bill(Protocol):
    """What an answer's model calls took (llm/usage.py's `Usage`): its attempts and cost."""

    @property
    def calls(self) -> int: ...

    @property
    def prompt_tokens(self) -> int: ...

    @property
    def completion_tokens(self) -> int: ...

    @property
    def usd(self) -> float: ...


class _NoCalls:
    calls = prompt_tokens = completion_tokens = 0
    usd = 0.0


NO_CALLS: Bill = _NoCalls()


def read_plan_answer(
    content: str | None,
    truncated: bool,
    resolver: ArmResolver,
    check: Callable[[DraftPlan], ValidPlan],
) -> tuple[DraftPlan, ValidPlan]:
    """Every plan answer of every strategy, read one way: the JSON found in the text, the
    steps normalised (arms resolved), then `check` (validation, a merge onto the previous
    plan, ...), which raises PlanValidationError for what the model must mend."""
    data, parse_repairs = extract_json(content, truncated=truncated)
    draft = normalise_plan(data, resolver)
    draft.repairs[:0] = parse_repairs
    return draft, check(draft)


def notes(entries: list[str]) -> list[PlanNote]:
    """The pipeline's "code: detail" strings as the API's {code, detail} objects."""
    return [PlanNote(code=code, detail=detail) for code, detail in map(split_note, entries)]


def assemble_response(
    *,
    draft: DraftPlan,
    valid: ValidPlan,
    goal: str,
    source: PlanSource,
    model: str | None,
    usage: Bill,
    request_id: str,
    latency_ms: float,
    prompt_version: str,
    fixed_confidence: float | None = None,
    warnings: Sequence[str] = (),
    tools: bool = False,
) -> PlanResponse:
    """`fixed_confidence` replaces the computed one (the fallback's, so callers can tell);
    `warnings` are said after the draft's own. `tools`: a plan of the caller's tools, whose
    fields filled by design are not repairs, and whose confidence is `tool_plan_confidence`."""
    repairs = [*draft.repairs, *valid.repairs]
    rationale = (draft.rationale or "").strip()
    if not rationale:
        rationale = f"A {len(valid.steps)}-step plan for: {goal.strip()[:_RATIONALE_GOAL_CHARS]}"
        repairs.append(repair("default_rationale"))
    complexity = draft.complexity_score
    if complexity is None or not 0.0 <= complexity <= 1.0:
        if complexity is not None:
            repairs.append(repair("complexity_recomputed", f"{complexity!r} is outside 0-1"))
        complexity = complexity_score(valid.steps)
    said = [*draft.warnings, *warnings]
    if tools:
        repairs = [entry for entry in repairs if repair_code(entry) not in FILLED_IN_TOOL_PLANS]
    if fixed_confidence is not None:
        confidence = fixed_confidence
    elif tools:
        confidence = tool_plan_confidence(
            draft.confidence,
            repairs=repairs,
            warnings=said,
            llm_calls=usage.calls,
            steps=len(valid.steps),
        )
    else:
        confidence = plan_confidence(draft.confidence, repairs=len(repairs), llm_calls=usage.calls)
    return PlanResponse(
        plan=valid.steps,
        rationale=rationale,
        confidence=round(confidence, 4),
        total_estimated_duration=total_duration(valid.steps),
        complexity_score=round(complexity, 4),
        plan_id=uuid.uuid4().hex,
        request_id=request_id,
        parallel_stages=parallel_stages(valid.steps),
        critical_path_duration=critical_path_duration(valid.steps),
        estimated_cost=EstimatedCost(
            llm_usd=round(usage.usd, 8),
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
        ),
        metadata=PlanMetadata(
            source=source,
            model=model,
            attempts=usage.calls,
            repairs=notes(repairs),
            warnings=notes(said),
            latency_ms=round(latency_ms, 3),
            prompt_version=prompt_version,
        ),
    )


VALIDATED_RATIONALE = "A plan edited by the caller and checked against the plan rules"


def validated_response(check: EditCheck, *, request_id: str, prompt_version: str) -> PlanResponse:
    """The full /plan answer for an edited plan that passed the checks: no model, no cost.
    What `fix` mended is in `metadata.repairs`, what was only noted in `metadata.warnings`."""
    if check.steps is None:
        raise ValueError("an edited plan with errors has no /plan answer")
    repairs = [entry for entry in check.warnings if repair_code(entry) not in NOTE_CODES]
    noted = [entry for entry in check.warnings if repair_code(entry) in NOTE_CODES]
    return assemble_response(
        draft=DraftPlan(steps=[], rationale=VALIDATED_RATIONALE, repairs=repairs, warnings=noted),
        valid=ValidPlan(steps=check.steps, repairs=[]),
        goal="",
        source="validated",
        model=None,
        usage=NO_CALLS,
        request_id=request_id,
        latency_ms=0.0,
        prompt_version=prompt_version,
    )


def with_warning(response: PlanResponse, code: str, detail: str) -> PlanResponse:
    """`response` with one more warning: something around the plan (the store) went wrong."""
    metadata = response.metadata
    warnings = [*metadata.warnings, PlanNote(code=code, detail=detail)]
    return response.model_copy(
        update={"metadata": metadata.model_copy(update={"warnings": warnings})}
    )
