"""One step of an edited plan as the caller sent it: each field read without guessing, a
missing or wrongly typed one reported as `invalid_step` naming the field."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeGuard

from planner_arm.plan.draft import repair
from planner_arm.plan.schemas import PlanStep

# The fields of a /plan step: anything else in an edited step is noted and ignored.
_FIELDS = frozenset(PlanStep.model_fields)


@dataclass(frozen=True)
class EditError:
    """One problem: its code, the step it is about (None: the whole plan), a sentence."""

    code: str
    step: int | None
    message: str
    position: int | None = None  # 0-based index in the list the caller sent

    def as_dict(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"code": self.code, "step": self.step, "message": self.message}
        if self.position is not None:
            entry["loc"] = ["plan", self.position]
        return entry


@dataclass
class StepRow:
    """One step as sent; a field is None when it was missing or of the wrong type."""

    position: int
    number: int | None = None
    action: str | None = None
    arm: str | None = None
    criteria: list[str] | None = None
    deps: list[int] | None = None
    cost: int | None = None
    duration: int | None = None
    parent: str | None = None
    input: dict[str, Any] | None = None
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = f"plan[{self.position}]"


def read_step_row(
    item: Any, pos: int, fix: bool, errors: list[EditError], warnings: list[str]
) -> StepRow:
    row = StepRow(pos)
    if not isinstance(item, dict):
        message = f"{row.name}: a step is an object, not a JSON {json_type(item)}"
        errors.append(EditError("invalid_step", None, message, pos))
        return row
    number = item.get("step")
    row.number = number if is_int(number) and number >= 1 else None
    ignored = sorted(str(key) for key in item if key not in _FIELDS)
    if ignored:
        warnings.append(repair("ignored_step_fields", f"{row.name}: {', '.join(ignored)}"))

    def bad(name: str, wanted: str) -> None:
        value = item.get(name)
        got = "missing" if name not in item else f"a JSON {json_type(value)}"
        message = f"{step_label(row)}: {name} must be {wanted}, got {got}"
        errors.append(EditError("invalid_step", row.number, message, pos))

    # Without a number a step can still be repaired (numbered by position) under `fix`.
    if row.number is None and not (fix and "step" not in item):
        bad("step", "a positive integer")
    for name, attribute in (("action", "action"), ("required_arm", "arm")):
        value = item.get(name)
        if isinstance(value, str):
            setattr(row, attribute, value)
        else:
            bad(name, "a string")
    criteria = item.get("acceptance_criteria")
    if isinstance(criteria, list) and all(isinstance(text, str) for text in criteria):
        row.criteria = criteria
    else:
        bad("acceptance_criteria", "a list of strings")
    deps = item.get("depends_on", [] if fix else None)
    if isinstance(deps, list) and all(is_int(dep) for dep in deps):
        row.deps = deps
    else:
        bad("depends_on", "a list of step numbers")
    for name, attribute in (
        ("estimated_cost_tier", "cost"),
        ("estimated_duration_seconds", "duration"),
    ):
        value = item.get(name)
        if is_int(value):
            setattr(row, attribute, value)
        elif not (fix and name not in item):  # validate_plan fills in the arm's typical one
            bad(name, "an integer")
    # Optional: the node a step details, and its arm's input (null or left out when none).
    for name, kind, wanted in (("parent", str, "a string"), ("input", dict, "an object")):
        value = item.get(name)
        if isinstance(value, kind):
            setattr(row, name, value)
        elif value is not None:
            bad(name, f"{wanted} or null")
    return row


def step_label(row: StepRow) -> str:
    return f"step {row.number}" if row.number is not None else f"the step at {row.name}"


def is_int(value: Any) -> TypeGuard[int]:
    return type(value) is int  # a bool is an int subclass, never a step number


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return {int: "number", float: "number", str: "string", list: "array", dict: "object"}.get(
        type(value), type(value).__name__
    )
