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
    if type(data) is not dict or data.keys() != _ASKED_TOP:
        return None
    rows, rationale = data["plan"], data["rationale"]
    if type(rows) is not list or not rows or type(rationale) is not str or not rationale.strip():
        return None
    if not (_is_score(data["confidence"]) and _is_score(data["complexity_score"])):
        return None
    steps = []
    for row in rows:
        if type(row) is not dict or row.keys() != _ASKED_STEP:
            return None
        action, criteria, after = row["action"], row["acceptance_criteria"], row["depends_on"]
        numbers = (row["step"], row["estimated_cost_tier"], row["estimated_duration_seconds"])
        if (
            type(action) is not str
            or action != action.strip()
            or " " not in action  # one word may be an identifier to make readable
            or type(row["required_arm"]) is not str
            or any(type(number) is not int for number in numbers)
            or not _clean_criteria(criteria)
            or type(after) is not list
            or any(type(number) is not int for number in after)
        ):
            return None
        arm = arms.resolve(row["required_arm"], action)
        if arm.repair is not None or arm.arm != row["required_arm"]:
            return None  # not one of our arm ids as it stands
        steps.append(
            DraftStep(
                action=action,
                required_arm=arm.arm,
                acceptance_criteria=list(criteria),
                depends_on=list(after),
                step=numbers[0],
                estimated_cost_tier=numbers[1],
                estimated_duration_seconds=numbers[2],
            )
        )
    return DraftPlan(
        steps=steps,
        rationale=rationale.strip(),
        confidence=data["confidence"],
        complexity_score=data["complexity_score"],
    )
