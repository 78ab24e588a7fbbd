"""Answers in exactly the shape the prompt asks for, read without the synonym search.

Most answers of a capable model are in that shape; for them the full normaliser finds nothing
to fix, so `as_asked` builds the same draft directly (a property test holds the two equal)
and returns None for anything else.
"""

from __future__ import annotations

from typing import Any

from planner_arm.pipeline import value_text
from planner_arm.plan.arms import ArmResolver
from planner_arm.plan.draft import DraftPlan, DraftStep

# Placeholders that say nothing about when a step is done; rating words are caught too.
_NOT_CRITERIA = {"none", "n/a", "na", "tbd", "todo", "yes", "no", "true", "false", "ok"}

_ASKED_TOP = frozenset(("plan", "rationale", "confidence", "complexity_score"))
_ASKED_STEP = frozenset((
    "step", "action", "required_arm", "acceptance_criteria", "depends_on",
    "estimated_cost_tier", "estimated_duration_seconds",
))  # fmt: skip


def usable_criterion(text: str) -> bool:
    """Says when a step is done: not empty, not a rating word, not a placeholder."""
    rating = len(text) < 20 and value_text.parse_cost_word(text.rstrip(".!")) is not None
    return bool(text) and not rating and text.lower().rstrip(".!") not in _NOT_CRITERIA


def _clean_criteria(criteria: Any) -> bool:
    return (
        type(criteria) is list
        and bool(criteria)
        and all(type(c) is str and c == c.strip() and usable_criterion(c) for c in criteria)
    )


def _is_score(value: Any) -> bool:
    return type(value) in (int, float) and 0.0 <= value <= 1.0


def as_asked(data: Any, arms: ArmResolver) -> DraftPlan | None:
    """The answer exactly in the shape the prompt asks for, or None.

    Most answers of a capable model are; for them the field search of `_Normaliser` finds
    nothing to fix, so this builds the same draft directly (a test holds the two equal).
    """
    if not _top_as_asked(data):
        return None
    steps = []
    for row in data["plan"]:
        step = _step_as_asked(row, arms)
        if step is None:
            return None
        steps.append(step)
    return DraftPlan(
        steps=steps,
        rationale=data["rationale"].strip(),
        confidence=data["confidence"],
        complexity_score=data["complexity_score"],
    )


def _top_as_asked(data: Any) -> bool:
    """The asked top-level fields and no others: a non-empty step list, a rationale, scores."""
    if type(data) is not dict or data.keys() != _ASKED_TOP:
        return False
    rows, rationale = data["plan"], data["rationale"]
    if type(rows) is not list or not rows or type(rationale) is not str or not rationale.strip():
        return False
    return _is_score(data["confidence"]) and _is_score(data["complexity_score"])


def _step_as_asked(row: Any, arms: ArmResolver) -> DraftStep | None:
    """The step when it has the asked fields, each already clean, and names an arm id."""
    if type(row) is not dict or row.keys() != _ASKED_STEP or not _step_values_clean(row):
        return None
    action = row["action"]
    arm = arms.resolve(row["required_arm"], action)
    if arm.repair is not None or arm.arm != row["required_arm"]:
        return None  # not one of our arm ids as it stands
    return DraftStep(
        action=action,
        required_arm=arm.arm,
        acceptance_criteria=list(row["acceptance_criteria"]),
        depends_on=list(row["depends_on"]),
        step=row["step"],
        estimated_cost_tier=row["estimated_cost_tier"],
        estimated_duration_seconds=row["estimated_duration_seconds"],
    )


def _step_values_clean(row: dict[str, Any]) -> bool:
    action, after = row["action"], row["depends_on"]
    numbers = (row["step"], row["estimated_cost_tier"], row["estimated_duration_seconds"])
    return (
        type(action) is str
        and action == action.strip()
        and " " in action  # one word may be an identifier to make readable
        and type(row["required_arm"]) is str
        and all(type(number) is int for number in numbers)
        and _clean_criteria(row["acceptance_criteria"])
        and type(after) is list
        and all(type(number) is int for number in after)
    )
