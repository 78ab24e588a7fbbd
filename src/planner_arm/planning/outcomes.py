"""What the attempt loop answers with: the model's plan or why there is none; and what
another endpoint (replan) asks the loop, and the models' health."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from planner_arm.llm.client import Completion
from planner_arm.llm.prompts import Message
from planner_arm.plan.draft import DraftPlan
from planner_arm.plan.plan_quality import QualityProblem
from planner_arm.plan.validation import ValidPlan

# Why a plan came from the rules when no model is configured, in the answer's warning.
NO_MODEL_DETAIL = "no model is configured (set OPENAI_API_KEY or OPENAI_BASE_URL to use one)"


@dataclass
class ModelFailure:
    """Why the model produced no plan, for the fallback metric and the 5xx mapping."""

    # llm_disabled | llm_unavailable | invalid_plan | deadline | call_budget | circuit_open
    # | saturated | spend_budget
    reason: str
    detail: str
    errors: list[str]


@dataclass
class ModelPlan:
    model: str
    draft: DraftPlan
    valid: ValidPlan


@dataclass(frozen=True)
class QualityKept:
    """A usable model plan with quality problems, each a warning in the answer, kept while
    the model is asked to mend them."""

    plan: ModelPlan
    problems: int

    @staticmethod
    def better(
        kept: QualityKept | None, answer: ModelPlan, problems: Sequence[QualityProblem]
    ) -> QualityKept:
        """`answer` with its problems as warnings, unless `kept` has fewer problems."""
        if kept is not None and kept.problems <= len(problems):
            return kept
        warnings = [*answer.draft.warnings, *(f"{p.code}: {p.message}" for p in problems)]
        draft = replace(answer.draft, warnings=warnings)
        return QualityKept(ModelPlan(answer.model, draft, answer.valid), len(problems))


# What another endpoint (replan) asks the same attempt loop: its own first messages, and its
# own reading of an answer (raising PlanParseError or PlanValidationError for a repair prompt).
AnswerReader = Callable[[Completion], tuple[DraftPlan, ValidPlan]]


@dataclass(frozen=True)
class Conversation:
    messages: list[Message]
    read: AnswerReader


@dataclass(frozen=True)
class ModelHealth:
    """The models as /health reports them: each circuit, and whether any is not closed."""

    circuits: dict[str, str]

    @property
    def degraded(self) -> bool:
        return any(state != "closed" for state in self.circuits.values())
