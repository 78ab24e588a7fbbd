"""One step of an edited plan as the caller sent it: each field read without guessing, a
missing or wrongly typed one reported as `invalid_step` naming the field."""

from __future__ import annotations

from collections.abc import Callable
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
    ignored = sorted(str(key) for key in item if key not in _FIELDS)
    if ignored:
        warnings.append(repair("ignored_step_fields", f"{row.name}: {', '.join(ignored)}"))
    # The step number comes first: the errors about the other fields name the step by it.
    for spec in _ROW_FIELDS:
        wanted = _read_field(row, item, spec, fix)
        if wanted is not None:
            value = item.get(spec.key)
            got = "missing" if spec.key not in item else f"a JSON {json_type(value)}"
            message = f"{step_label(row)}: {spec.key} must be {wanted}, got {got}"
            errors.append(EditError("invalid_step", row.number, message, pos))
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


@dataclass(frozen=True)
class _Field:
    """How one field of a step is read into its StepRow attribute."""

    key: str
    attribute: str
    accepts: Callable[[Any], bool]
    wanted: str
    # Under `fix` a step may leave it out: validate_plan numbers the step by position or
    # fills in the arm's typical value. The row then holds what `absent` makes.
    fixable: bool = False
    absent: Callable[[], Any] = lambda: None
    # Optional: null or left out when there is none.
    nullable: bool = False


def _read_field(row: StepRow, item: dict[str, Any], spec: _Field, fix: bool) -> str | None:
    """Set the row's attribute from the item; what the field must be when it cannot be read."""
    value = item.get(spec.key)
    if spec.accepts(value):
        setattr(row, spec.attribute, value)
        return None
    if fix and spec.fixable and spec.key not in item:
        setattr(row, spec.attribute, spec.absent())
        return None
    if spec.nullable and value is None:
        return None
    return spec.wanted


def _is_step_number(value: Any) -> bool:
    return is_int(value) and value >= 1


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _is_texts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(text, str) for text in value)


def _is_step_numbers(value: Any) -> bool:
    return isinstance(value, list) and all(is_int(dep) for dep in value)


def _is_object(value: Any) -> bool:
    return isinstance(value, dict)


_ROW_FIELDS = (
    _Field("step", "number", _is_step_number, "a positive integer", fixable=True),
    _Field("action", "action", _is_text, "a string"),
    _Field("required_arm", "arm", _is_text, "a string"),
    _Field("acceptance_criteria", "criteria", _is_texts, "a list of strings"),
    _Field(
        "depends_on", "deps", _is_step_numbers, "a list of step numbers", fixable=True, absent=list
    ),
    _Field("estimated_cost_tier", "cost", is_int, "an integer", fixable=True),
    _Field("estimated_duration_seconds", "duration", is_int, "an integer", fixable=True),
    # The node a step details, and its arm's input.
    _Field("parent", "parent", _is_text, "a string or null", nullable=True),
    _Field("input", "input", _is_object, "an object or null", nullable=True),
)
