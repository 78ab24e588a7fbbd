"""An edited plan, checked as POST /plan/validate checks it: every problem at once, each
naming its step, and with `fix` the /plan pipeline's own local repairs applied.

Each step is first read as the caller sent it, each field without guessing: a missing or
wrongly typed one is an `invalid_step` error naming the field. Without `fix` a valid plan keeps
the caller's step numbers (a replanned plan's need not be consecutive); steps listed before a
step they depend on are put in dependency order. With `fix`, the steps go through
`validate_plan`, as a model's answer would: arm aliases resolved and unknown arms chosen again
by rule (as /plan does), steps renumbered 1..n in dependency order, dangling and self
dependencies dropped, values clamped, a missing final check appended; each repair is listed
in `warnings`, and so are the ones `fix` would make when other problems leave the plan
invalid. Wrong value types are never guessed at: they stay
`invalid_step` errors.

A plan sent back (`previous` of /replan, /plan/expand, /plan/specialize) is held to the same
step checks by `check_sent_back`: the one check every endpoint that starts from an earlier
plan runs, so none of them works on (or fails on) a plan /plan/validate calls broken.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from graphlib import CycleError, TopologicalSorter
from typing import Any, TypeGuard

from planner_arm.errors import InvalidPrevious, PlanValidationError
from planner_arm.plan.arms import ArmResolver
from planner_arm.plan.dag import JUDGE_ARM, stable_topological_order
from planner_arm.plan.draft import DraftPlan, DraftStep, repair
from planner_arm.plan.schemas import PlanStep
from planner_arm.plan.validation import (
    MAX_COST_TIER,
    MAX_DURATION_SECONDS,
    MIN_COST_TIER,
    MIN_DURATION_SECONDS,
    PlanRules,
    validate_plan,
)

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


EDIT_ERROR_CODES = frozenset(
    {
        "empty_plan",
        "step_count",
        "duplicate_step",
        "dangling_dependency",
        "self_dependency",
        "cycle",
        "unknown_arm",
        "empty_action",
        "empty_acceptance_criteria",
        "bad_cost_tier",
        "bad_duration",
        "no_final_check",
        "invalid_step",
        # Over a request's tools: arguments its tool refuses, a reference or a path that names
        # nothing.
        "invalid_input",
    }
)
# What validate_plan mends, so `fix` leaves these to it instead of reporting them.
FIXABLE_CODES = frozenset(
    {
        "duplicate_step",
        "dangling_dependency",
        "self_dependency",
        "bad_cost_tier",
        "bad_duration",
        "no_final_check",
    }
)
# Warnings that change nothing in the plan (the rest are repairs `fix` made).
NOTE_CODES = frozenset({"ignored_step_fields", "reordered", "duplicate_dependency"})
# validate_plan's error codes in this module's words (its messages name the step already).
_FROM_VALIDATION = {
    "missing_criteria": "empty_acceptance_criteria",
    "wrong_step_count": "step_count",
}


@dataclass
class EditCheck:
    """The verdict: `steps` (in dependency order) only when `valid`."""

    valid: bool
    errors: list[EditError]
    warnings: list[str]
    steps: list[PlanStep] | None


def check_edited_plan(
    raw_steps: Sequence[Any], rules: PlanRules, resolver: ArmResolver, *, fix: bool = False
) -> EditCheck:
    """Check `raw_steps` (steps in the /plan shape) against `rules`; see the module docstring."""
    if not raw_steps:
        return EditCheck(False, [EditError("empty_plan", None, "the plan has no steps")], [], None)
    errors: list[EditError] = []
    warnings: list[str] = []
    rows = [read_step_row(item, pos, fix, errors, warnings) for pos, item in enumerate(raw_steps)]
    if fix:
        _resolve_arm_aliases(rows, resolver, warnings)
    errors += _rule_errors(rows, rules, fix)
    mendable: list[EditError] = []
    if fix:
        mendable = [error for error in errors if error.code in FIXABLE_CODES]
        errors = [error for error in errors if error.code not in FIXABLE_CODES]
    errors = _in_plan_order(errors)
    if errors:
        # What `fix` mends is still said: once the rest is corrected, it will be mended.
        warnings += [repair(error.code, error.message) for error in mendable]
        return EditCheck(False, errors, warnings, None)
    if fix:
        return _fixed(rows, rules, warnings)
    return EditCheck(True, [], warnings, rules.marked(_as_given(rows, warnings)))


# How many problems the detail of an `invalid_previous` names; `errors` lists them all.
_PROBLEMS_IN_DETAIL = 3


def sent_back_problems(
    steps: Sequence[PlanStep], arm_ids: Collection[str] | None = None
) -> list[EditError]:
    """Every problem of `steps`, a plan sent back, by /plan/validate's step checks: an empty
    action or acceptance criterion, a value out of range, a repeated number, a dependency on
    itself, on a missing step or in a cycle, and (given `arm_ids`) an arm not among them.
    Not the rules of a new plan (its length, the final check), which a replanned, expanded,
    iterative or tool plan may rightly break. Empty when the plan is one to work on."""
    if not steps:
        return [EditError("empty_plan", None, "the plan has no steps")]
    rows = [_row_of(step, position) for position, step in enumerate(steps)]
    own_arms = dict.fromkeys(step.required_arm for step in steps)
    known = tuple(own_arms if arm_ids is None else arm_ids)
    rules = PlanRules(1, len(rows), False, known)
    return _in_plan_order(_rule_errors(rows, rules, fix=False))


def check_sent_back(steps: Sequence[PlanStep], arm_ids: Collection[str] | None = None) -> None:
    """Raise InvalidPrevious (422 `invalid_previous`) naming each of `sent_back_problems`."""
    problems = sent_back_problems(steps, arm_ids)
    if not problems:
        return
    detail = "; ".join(problem.message for problem in problems[:_PROBLEMS_IN_DETAIL])
    more = len(problems) - _PROBLEMS_IN_DETAIL
    if more > 0:
        detail += f" (and {more} more, listed in errors)"
    errors: list[dict[str, object]] = [
        {"code": problem.code, "step": problem.step, "message": problem.message}
        for problem in problems
    ]
    raise InvalidPrevious(f"the plan sent back is not one to work on: {detail}", errors=errors)


def _row_of(step: PlanStep, position: int) -> StepRow:
    """A step of a typed plan as the checks read a sent one: every field present."""
    return StepRow(
        position,
        number=step.step,
        action=step.action,
        arm=step.required_arm,
        criteria=list(step.acceptance_criteria),
        deps=list(step.depends_on),
        cost=step.estimated_cost_tier,
        duration=step.estimated_duration_seconds,
        parent=step.parent,
        input=step.input,
    )


def _in_plan_order(errors: list[EditError]) -> list[EditError]:
    """The problems of the whole plan first, then each step's in the order sent."""
    return sorted(errors, key=lambda error: (error.position is not None, error.position or 0))


def _resolve_arm_aliases(rows: list[StepRow], resolver: ArmResolver, warnings: list[str]) -> None:
    """Each arm as /plan reads a model's: a known arm kept, an alias or a near spelling
    mended, an unknown one chosen again by rule from the step's action."""
    for row in rows:
        if row.arm is None or row.arm in resolver.arm_ids:
            continue
        choice = resolver.resolve(row.arm, row.action or "", row.criteria or ())
        if choice.repair:
            warnings.append(f"{choice.repair} ({step_label(row)})")
        row.arm = choice.arm


def _rule_errors(rows: list[StepRow], rules: PlanRules, fix: bool) -> list[EditError]:
    errors: list[EditError] = []
    for row in rows:
        errors += _step_errors(row, rules, fix)
    errors += _duplicate_numbers(rows)
    by_number = {row.number: row for row in reversed(rows) if row.number is not None}
    errors += _dependency_errors(rows, by_number)
    graph = _dependency_graph(by_number)
    cycle = _find_cycle(graph)
    if cycle:
        message = "dependency cycle: " + " -> ".join(map(str, cycle))
        errors.append(EditError("cycle", min(cycle), message))
    needs_judge = rules.require_validation_step and not cycle and _last_arm(rows) != JUDGE_ARM
    if needs_judge:
        message = f"the last step must be a {JUDGE_ARM} step that checks the results"
        errors.append(EditError("no_final_check", None, message))
    elif rules.require_validation_step and rules.require_dependency_check and not cycle and not fix:
        errors += _final_check_waits(rows, graph)
    errors += _step_count(len(rows), needs_judge and fix, rules)
    return errors


def _dependency_graph(by_number: dict[int, StepRow]) -> dict[int, list[int]]:
    """Each step number's dependencies, less those on itself or on steps not in the plan."""
    return {
        number: [dep for dep in row.deps or () if dep in by_number and dep != number]
        for number, row in by_number.items()
    }


def _duplicate_numbers(rows: list[StepRow]) -> list[EditError]:
    counts = Counter(row.number for row in rows if row.number is not None)
    return [
        EditError("duplicate_step", number, f"step number {number} is used by {count} steps")
        for number, count in sorted(counts.items())
        if count > 1
    ]


def _dependency_errors(rows: list[StepRow], by_number: dict[int, StepRow]) -> list[EditError]:
    errors = []
    for row in rows:
        for dep in row.deps or ():
            if dep == row.number:
                message = f"{step_label(row)} depends on itself"
                errors.append(EditError("self_dependency", row.number, message, row.position))
            elif dep not in by_number:
                message = f"{step_label(row)} depends on step {dep}, which is not in the plan"
                errors.append(EditError("dangling_dependency", row.number, message, row.position))
    return errors


def _step_count(listed: int, judge_appended: bool, rules: PlanRules) -> list[EditError]:
    total = listed + judge_appended
    if rules.min_steps <= total <= rules.max_steps:
        return []
    appended = " with the final check appended" if judge_appended else ""
    message = (
        f"the plan has {total} steps{appended}; between {rules.min_steps} and "
        f"{rules.max_steps} are allowed"
    )
    return [EditError("step_count", None, message)]


def _final_check_waits(rows: list[StepRow], graph: dict[int, list[int]]) -> list[EditError]:
    """The final check must depend, directly or through others, on every other step, or it
    may run before the work it checks (`fix` adds the missing dependencies instead)."""
    final = _last_row(rows)
    last = final.number if final is not None else None
    if final is None or last is None or last not in graph:
        return []
    reached: set[int] = set()
    todo = list(graph[last])
    while todo:
        dep = todo.pop()
        if dep not in reached:
            reached.add(dep)
            todo.extend(graph.get(dep, ()))
    missing = sorted(set(graph) - reached - {last})
    if not missing:
        return []
    message = (
        f"the final check (step {last}) does not depend on steps {missing}, so it may run "
        "before them"
    )
    return [EditError("no_final_check", last, message, final.position)]


def _step_errors(row: StepRow, rules: PlanRules, fix: bool) -> list[EditError]:
    found = [problem for rule in _STEP_RULES if (problem := rule(row, rules, fix))]
    return [
        EditError(code, row.number, f"{step_label(row)}: {message}", row.position)
        for code, message in found
    ]


def _empty_action(row: StepRow, rules: PlanRules, fix: bool) -> tuple[str, str] | None:
    if row.action is not None and not row.action.strip():
        return ("empty_action", "action is empty")
    return None


# An unknown arm's message names this many of the known ones (a tool set may hold hundreds).
_ARMS_NAMED = 12


def _unknown_arm(row: StepRow, rules: PlanRules, fix: bool) -> tuple[str, str] | None:
    if row.arm is not None and row.arm not in rules.arm_ids:
        known = ", ".join(rules.arm_ids[:_ARMS_NAMED])
        if len(rules.arm_ids) > _ARMS_NAMED:
            known += f", ... ({len(rules.arm_ids)} in all)"
        return ("unknown_arm", f"required_arm {row.arm!r} is not one of {known}")
    return None


def _blank_criteria(row: StepRow, rules: PlanRules, fix: bool) -> tuple[str, str] | None:
    if row.criteria is None:
        return None
    blank = sum(1 for text in row.criteria if not text.strip())
    if blank == len(row.criteria):
        return ("empty_acceptance_criteria", "no non-empty acceptance criterion")
    if blank and not fix:  # validate_plan drops blank ones beside real ones
        held = "an empty criterion" if blank == 1 else f"{blank} empty criteria"
        return ("empty_acceptance_criteria", f"acceptance_criteria holds {held}")
    return None


def _bad_cost_tier(row: StepRow, rules: PlanRules, fix: bool) -> tuple[str, str] | None:
    if row.cost is not None and not MIN_COST_TIER <= row.cost <= MAX_COST_TIER:
        return (
            "bad_cost_tier",
            f"estimated_cost_tier {row.cost} is not {MIN_COST_TIER}-{MAX_COST_TIER}",
        )
    return None


def _bad_duration(row: StepRow, rules: PlanRules, fix: bool) -> tuple[str, str] | None:
    if row.duration is not None and not (
        MIN_DURATION_SECONDS <= row.duration <= MAX_DURATION_SECONDS
    ):
        return (
            "bad_duration",
            f"estimated_duration_seconds {row.duration} is not "
            f"{MIN_DURATION_SECONDS}-{MAX_DURATION_SECONDS}",
        )
    return None


# Each rule gives at most one problem with a step, in the order they are reported.
_STEP_RULES = (_empty_action, _unknown_arm, _blank_criteria, _bad_cost_tier, _bad_duration)


def _fixed(rows: list[StepRow], rules: PlanRules, warnings: list[str]) -> EditCheck:
    """The /plan pipeline's repairs, on steps whose only problems it can mend."""
    draft = DraftPlan(
        steps=[
            DraftStep(
                action=row.action or "",
                required_arm=row.arm or "",
                acceptance_criteria=list(row.criteria or ()),
                depends_on=list(row.deps or ()),
                step=row.number,
                estimated_cost_tier=row.cost,
                estimated_duration_seconds=row.duration,
                parent=row.parent,
                input=row.input,
            )
            for row in rows
        ]
    )
    try:
        valid = validate_plan(draft, rules)
    except PlanValidationError as problem:  # a rule the checks above missed: still reported
        code = _FROM_VALIDATION.get(problem.code, problem.code)
        errors = [EditError(code, None, message) for message in problem.errors]
        return EditCheck(False, errors, warnings, None)
    return EditCheck(True, [], [*warnings, *valid.repairs], valid.steps)


def _as_given(rows: list[StepRow], warnings: list[str]) -> list[PlanStep]:
    """The steps with the caller's numbers, in dependency order (listed order when it is one)."""
    position_of = {row.number: row.position for row in rows}
    order = stable_topological_order([[position_of[dep] for dep in row.deps or ()] for row in rows])
    if order != list(range(len(rows))):
        moved = ", ".join(str(rows[pos].number) for pos in order)
        warnings.append(repair("reordered", f"steps put in dependency order {moved}"))
    return [_given_step(rows[pos], warnings) for pos in order]


def _given_step(row: StepRow, warnings: list[str]) -> PlanStep:
    deps = list(dict.fromkeys(row.deps or ()))
    if len(deps) != len(row.deps or ()):
        warnings.append(repair("duplicate_dependency", f"{step_label(row)}: listed twice"))
    return PlanStep(
        step=row.number or 0,
        action=row.action or "",
        required_arm=row.arm or "",
        acceptance_criteria=list(row.criteria or ()),
        depends_on=deps,
        estimated_cost_tier=row.cost or MIN_COST_TIER,
        estimated_duration_seconds=row.duration or MIN_DURATION_SECONDS,
        parent=row.parent,
        input=row.input,
    )


def _find_cycle(graph: dict[int, list[int]]) -> list[int] | None:
    """One dependency cycle as step numbers, each depending on the next ('1 -> 3 -> 1'),
    starting at its lowest number so the message is stable; None when there is none."""
    if all(dep < number for number, deps in graph.items() for dep in deps):
        return None  # each step needs only lower numbers: the usual plan, no graph to build
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as exc:
        ring = list(reversed(exc.args[1][:-1]))
        start = ring.index(min(ring))
        ring = ring[start:] + ring[:start]
        return [*ring, ring[0]]
    return None


def _last_arm(rows: list[StepRow]) -> str | None:
    """The arm of the step that comes last in dependency order."""
    last = _last_row(rows)
    return last.arm if last is not None else None


def _last_row(rows: list[StepRow]) -> StepRow | None:
    """The step that comes last in dependency order: the final check, if there is one."""
    position_of = {row.number: row.position for row in rows if row.number is not None}
    deps = [
        [position_of[dep] for dep in row.deps or () if dep in position_of and dep != row.number]
        for row in rows
    ]
    try:
        order = stable_topological_order(deps)
    except CycleError:
        return None
    return rows[order[-1]] if order else None
