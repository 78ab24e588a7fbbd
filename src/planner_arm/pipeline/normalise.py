"""JSON value -> DraftPlan: find the steps, map field synonyms, coerce value shapes, pick arms.

No plan rule is enforced here (validation does that). Each fix is recorded in `repairs`, one
entry per code with the distinct details of every occurrence (`cost_word: medium -> 3, high ->
4`, five at most): a fix made on every step reads as one line and counts once in the metric.

Most answers of a capable model are in exactly the shape the prompt asks for; for them the
normaliser finds nothing to fix, so `as_asked` builds the same draft directly, without the
synonym search (a property test holds the two equal), and returns None for anything else.
"""

from __future__ import annotations

import math
import re
from typing import Any

from planner_arm.errors import PlanParseError
from planner_arm.pipeline import fields, parsing
from planner_arm.pipeline.fields import (
    STEP_FIELDS,
    STEP_LIST_KEYS,
    TOP_FIELDS,
    WRAPPER_KEYS,
    Found,
    collect_fields,
    keyed_steps,
    normalised_key,
)
from planner_arm.plan.arms import ArmResolver
from planner_arm.plan.draft import DraftPlan, DraftStep, repair

# Placeholders that say nothing about when a step is done; rating words are caught too.
_NOT_CRITERIA = {"none", "n/a", "na", "tbd", "todo", "yes", "no", "true", "false", "ok"}

_ASKED_TOP = frozenset(("plan", "rationale", "confidence", "complexity_score"))
_ASKED_STEP = frozenset((
    "step", "action", "required_arm", "acceptance_criteria", "depends_on",
    "estimated_cost_tier", "estimated_duration_seconds",
))  # fmt: skip


def usable_criterion(text: str) -> bool:
    """Says when a step is done: not empty, not a rating word, not a placeholder."""
    rating = len(text) < 20 and fields.parse_cost_word(text.rstrip(".!")) is not None
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
    rows = data["plan"]
    if not all(_step_as_asked(row) for row in rows):
        return None
    # Every step's arm in one call, then the steps: the answer is read in one pass each.
    choices = arms.resolve_all([(row["required_arm"], row["action"]) for row in rows])
    steps = []
    for row, arm in zip(rows, choices, strict=True):
        if arm.repair is not None or arm.arm != row["required_arm"]:
            return None  # not one of our arm ids as it stands
        steps.append(
            DraftStep(
                action=row["action"],
                required_arm=arm.arm,
                acceptance_criteria=list(row["acceptance_criteria"]),
                depends_on=list(row["depends_on"]),
                step=row["step"],
                estimated_cost_tier=row["estimated_cost_tier"],
                estimated_duration_seconds=row["estimated_duration_seconds"],
            )
        )
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


def _step_as_asked(row: Any) -> bool:
    """Whether the step has the asked fields, each already clean (its arm is checked after)."""
    return type(row) is dict and row.keys() == _ASKED_STEP and _step_values_clean(row)


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


_MAX_DETAILS = 5
_MAX_DEPTH = 6

_NONE_WORDS = {"", "none", "n/a", "na", "null", "nil", "-", "no", "nothing", "[]"}

_DEP_SPLIT = re.compile(r"[,;&/\n]|\band\b", re.I)


def normalise_plan(data: Any, arms: ArmResolver) -> DraftPlan:
    """The draft plan in a decoded answer. Raises PlanParseError `no_steps` or `wrong_shape`."""
    return as_asked(data, arms) or _Normaliser(arms).plan(data)


class _Normaliser:
    """One answer's normalisation: the repairs so far and how dependencies name steps."""

    def __init__(self, arms: ArmResolver) -> None:
        self.arms = arms
        self.repairs: dict[str, list[str]] = {}  # code -> distinct details, first seen first
        self.ignored: dict[str, None] = {}
        self.names: dict[str, int] | None = None  # a step's id or action -> its number
        self.rows: list[tuple[Found, int | None]] = []
        self.renumber: dict[int, int] = {}  # a given number -> its position, when renumbered
        # The names the prompt itself asks for: a tool plan's step names its arm `tool`.
        self.asked = {"required_arm": "tool"} if arms.index is not None else {}

    def add(self, code: str, detail: str | None = None) -> None:
        details = self.repairs.setdefault(code, [])
        if detail and (detail := detail.strip()[:80]) not in details:  # bounded: model text
            details.append(detail)

    def plan(self, data: Any) -> DraftPlan:
        containers, entries = self.find_steps(data)
        top: Found = {}
        for container in containers:  # innermost first, so its fields win
            for field, options in collect_fields(container, TOP_FIELDS, {}).items():
                top.setdefault(field, options)
        steps = self.steps(entries)
        rationale = self.value(top, "rationale")
        if rationale is not None and not isinstance(rationale, str):
            self.add("value_dropped", f"rationale {rationale!r}")
        warnings = ", ".join(list(self.ignored)[:8])
        return DraftPlan(
            steps=steps,
            rationale=(rationale.strip() or None) if isinstance(rationale, str) else None,
            confidence=self.score(self.value(top, "confidence"), "confidence"),
            complexity_score=self.score(self.value(top, "complexity_score"), "complexity_score"),
            repairs=self.entries(),
            warnings=[repair("ignored_step_fields", warnings)] if warnings else [],
        )

    def entries(self) -> list[str]:
        entries = []
        for code, details in self.repairs.items():
            more = f" (+{len(details) - _MAX_DETAILS} more)" if len(details) > _MAX_DETAILS else ""
            entries.append(repair(code, ", ".join(details[:_MAX_DETAILS]) + more))
        return entries

    def find_steps(self, data: Any) -> tuple[list[dict[str, Any]], list[tuple[Any, Any]]]:
        """The dicts around the steps (innermost first) and (number from a key, step) pairs."""
        containers: list[dict[str, Any]] = []
        value = data
        for _ in range(_MAX_DEPTH):
            value = self.decoded(value)
            if isinstance(value, list):
                if not containers:
                    self.add("bare_step_list")
                return containers, [(None, item) for item in value]
            if not isinstance(value, dict):
                detail = f"a JSON {type(value).__name__} is not a plan"
                raise PlanParseError(detail, code="wrong_shape")
            containers.insert(0, value)
            if (keyed := keyed_steps(value)) is not None:
                self.add("steps_keyed_by_number")
                return containers, keyed
            value = value[self.inner_key(value)]
        raise PlanParseError("the plan is nested too deeply", code="wrong_shape")

    def decoded(self, value: Any) -> Any:
        """A string value decoded as the JSON it holds; any other value as it is."""
        if not isinstance(value, str):
            return value
        try:
            decoded, repairs = parsing.extract_json(value)
        except PlanParseError as error:
            detail = f"text where a plan belongs: {value[:80]!r}"
            raise PlanParseError(detail, code="wrong_shape") from error
        self.add("double_encoded", "JSON inside a string value")
        for entry in repairs:
            self.add(*entry.split(":", 1))
        return decoded

    def inner_key(self, value: dict[str, Any]) -> Any:
        """The key of `value` the steps are under: a step list's name, else a wrapper's."""
        keys = {normalised_key(str(key)): key for key in value}
        key = next((keys[name] for name in STEP_LIST_KEYS if name in keys), None)
        if key is None:
            return self.wrapper_key(value, keys)
        if key != "plan":
            self.add("field_synonym", f"{key} -> plan")
        if value[key] in (None, [], {}, ""):
            raise PlanParseError(f"'{key}' holds no steps", code="no_steps")
        if isinstance(value[key], dict) and keyed_steps(value[key]) is None:
            self.add("wrapper_unwrapped", str(key))
        return key

    def wrapper_key(self, value: dict[str, Any], keys: dict[str, Any]) -> Any:
        found = (keys[n] for n in WRAPPER_KEYS if n in keys)
        key = next((k for k in found if isinstance(value[k], dict | list | str)), None)
        only = next(iter(value.values()), None)
        if key is None and len(value) == 1 and isinstance(only, dict | list):
            key = next(iter(value))  # an unknown wrapper: {"execution_plan": {...}}
        if key is None and (not value or any(name in keys for name in TOP_FIELDS)):
            raise PlanParseError("the answer has no steps", code="no_steps")
        if key is None:
            detail = f"no steps under the keys {list(value)[:8]}"
            raise PlanParseError(detail, code="wrong_shape")
        self.add("wrapper_unwrapped", str(key))
        return key

    def value(self, found: Found, field: str) -> Any:
        options = found.get(field)
        if not options:
            return None
        _, key, value = options[0]
        if key != field and key != self.asked.get(field):
            self.add("field_synonym", f"{key} -> {field}")
        return value

    def steps(self, entries: list[tuple[Any, Any]]) -> list[DraftStep]:
        rows = self.step_fields(entries)
        numbers: list[int | None] = []
        text_ids: list[str | None] = []
        for found, key_number in rows:
            number, text_id = self.step_number(self.value(found, "step"))
            numbers.append(key_number if number is None and text_id is None else number)
            text_ids.append(text_id)
        if any(text_ids):  # a step known by a name: number every step by its position
            numbers = self.by_position(numbers, text_ids)
        self.rows = [(found, number) for (found, _), number in zip(rows, numbers, strict=True)]
        kept = []
        for found, number in self.rows:
            if self.arms.names_no_tool(self.value(found, "required_arm")):
                # A tool plan's "no tool" step is not work to run: dropped, not invented.
                self.add("no_tool_step_dropped", f"step {number}")
                continue
            kept.append(self.step(found, number))
        return kept

    def step_fields(self, entries: list[tuple[Any, Any]]) -> list[tuple[Found, Any]]:
        """Each usable step's fields, with the number its key gave it; the rest dropped."""
        rows: list[tuple[Found, Any]] = []
        for key_number, item in entries:
            if isinstance(item, str) and item.strip():
                self.add("step_from_text")
                item = {"action": item}
            if isinstance(item, dict):
                rows.append((collect_fields(item, STEP_FIELDS, self.ignored), key_number))
            else:
                self.add("step_dropped", f"a {type(item).__name__} is not a step")
        if not rows:
            raise PlanParseError("the plan has no usable steps", code="no_steps")
        return rows

    def by_position(
        self, numbers: list[int | None], text_ids: list[str | None]
    ) -> list[int | None]:
        """1..n, remembering each given number's position for the dependencies on it."""
        for position, (number, text_id) in enumerate(zip(numbers, text_ids, strict=True), 1):
            if number is not None:
                self.renumber.setdefault(number, position)
            if text_id is not None or number not in (None, position):
                self.add("step_id_mapped", f"{text_id or number!r} -> {position}")
        return list(range(1, len(numbers) + 1))

    def step_number(self, value: Any) -> tuple[int | None, str | None]:
        """A step's number, or the name it goes by when that is not a number."""
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return value, None
        if isinstance(value, float) and value.is_integer():
            return int(value), None
        if isinstance(value, str) and value.strip():
            if (number := fields.parse_step_reference(value)) is None:
                return None, value.strip()
            self.add("number_from_string", f"{value!r} -> {number}")
            return number, None
        self.add("value_dropped", f"step {value!r}")
        return None, None

    def step(self, found: Found, number: int | None) -> DraftStep:
        action = self.action(found)
        arm = self.value(found, "required_arm")
        if isinstance(arm, list):
            arm = next((name for name in arm if isinstance(name, str)), None)
        if arm is not None and not isinstance(arm, str):
            self.add("value_dropped", f"required_arm {arm!r}")
        criteria = self.criteria(self.value(found, "acceptance_criteria"))
        given = arm.strip() or None if isinstance(arm, str) else None
        choice = self.arms.resolve(given, action, criteria)
        if choice.repair:
            self.add(*choice.repair.split(":", 1))
        if not criteria:
            self.add("default_criteria")
            criteria = [f"Completed: {action.rstrip('.') or 'the step'}; the outcome is recorded"]
        duration = self.duration(self.value(found, "estimated_duration_seconds"))
        return DraftStep(
            action=action,
            required_arm=choice.arm,
            acceptance_criteria=criteria,
            depends_on=self.dependencies(self.value(found, "depends_on")),
            step=number,
            estimated_cost_tier=self.cost_tier(self.value(found, "estimated_cost_tier")),
            estimated_duration_seconds=duration,
            compound=self.value(found, "compound") is True,
        )

    def action(self, found: Found) -> str:
        """The first non-empty action text; an identifier such as `check_login` made readable."""
        for _, key, value in found.get("action", ()):
            text = value.strip() if isinstance(value, str) else ""
            if not text:
                continue
            if key != "action":
                self.add("field_synonym", f"{key} -> action")
            if (readable := fields.readable_identifier(text)) is None:
                return text
            self.add("action_from_identifier", f"{text} -> {readable}")
            return readable
        return ""

    def criteria(self, value: Any) -> list[str]:
        if value is None:
            return []
        items = value if isinstance(value, list) else [value]
        if isinstance(value, str):
            self.add("criteria_from_string")
            items = fields.split_list_text(value)
        elif isinstance(value, dict):
            self.add("criteria_from_mapping")
            texts = [text for text in value.values() if isinstance(text, str)]
            items = texts or [str(key) for key, flag in value.items() if flag]
        criteria = []
        for item in items:
            text = item.strip() if isinstance(item, str) else ""
            if usable_criterion(text):
                criteria.append(text)
            else:
                self.add("criteria_dropped", repr(text or item))
        return criteria

    def dependencies(self, value: Any) -> list[int]:
        if value is None or value == []:
            return []
        if isinstance(value, str) and value.strip().lower() in _NONE_WORDS:
            self.add("dependency_reference", f"{value!r} -> none")
            return []
        items = value if isinstance(value, list) else [value]
        if isinstance(value, str):
            items = [part.strip() for part in _DEP_SPLIT.split(value) if part.strip()]
        listed = isinstance(value, list)
        numbers = [n for item in items if (n := self.dependency(item, listed)) is not None]
        if not listed and numbers:  # one number, or several in one string
            self.add("dependency_reference", f"{value!r} -> {numbers}")
        return numbers

    def dependency(self, item: Any, listed: bool) -> int | None:
        """The step one dependency names; a list item not given as that number is recorded."""
        number = self.reference(item)
        if number is None:
            self.add("dependency_dropped", repr(item))
            return None
        if listed and (type(item) is not int or item != number):
            self.add("dependency_reference", f"{item!r} -> {number}")
        return number

    def reference(self, item: Any) -> int | None:
        if isinstance(item, float) and item.is_integer():
            item = int(item)
        if isinstance(item, int) and not isinstance(item, bool):
            return self.renumber.get(item, item)
        if not isinstance(item, str):
            return None
        if self.names is None:  # built on the first reference by text, most plans have none
            self.names = {}
            for found, step_number in self.rows:
                for _, _, value in (*found.get("step", ()), *found.get("action", ())):
                    if step_number is not None and type(value) in (str, int):
                        self.names.setdefault(str(value).strip().lower(), step_number)
        if (named := self.names.get(item.strip().lower())) is not None:
            return named
        number = fields.parse_step_reference(item)
        return None if number is None else self.renumber.get(number, number)

    def number(self, value: Any, field: str, *, quiet: bool = False) -> float | None:
        """A finite number from a number or a numeric string; None (unrecorded) otherwise."""
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value) if math.isfinite(value) else None
        try:
            number = float(value.strip()) if isinstance(value, str) else math.nan
        except ValueError:
            number = math.nan
        if math.isfinite(number) and not quiet:
            self.add("number_from_string", f"{field} {value!r} -> {number:g}")
        return number if math.isfinite(number) else None

    def whole(self, number: float, field: str) -> int:
        whole = math.floor(number + 0.5)
        if whole != number:
            self.add("value_rounded", f"{field} {number:g} -> {whole}")
        return whole

    def cost_tier(self, value: Any) -> int | None:
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        if (number := self.number(value, "estimated_cost_tier")) is not None:
            return self.whole(number, "estimated_cost_tier")
        if isinstance(value, str) and (tier := fields.parse_cost_word(value)) is not None:
            self.add("cost_word", f"{value.strip().lower()} -> {tier}")
            return tier
        self.add("value_dropped", f"estimated_cost_tier {value!r}")
        return None

    def duration(self, value: Any) -> int | None:
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        number = self.number(value, "estimated_duration_seconds")
        if number is None and isinstance(value, str):
            number = fields.parse_duration(value)
            if number is not None:
                self.add("duration_text", f"{value.strip()!r} -> {math.floor(number + 0.5)}")
        if number is None:
            self.add("value_dropped", f"estimated_duration_seconds {value!r}")
            return None
        return self.whole(number, "estimated_duration_seconds")

    def score(self, value: Any, field: str) -> float | None:
        """A 0-1 score. Above 1, confidence is read as a percentage; complexity as a 0-10
        scale up to 10 and a percentage above. Anything else out of range is dropped."""
        if value is None:
            return None
        percent = isinstance(value, str) and value.strip().endswith("%")
        number = self.number(value.strip()[:-1] if percent else value, field, quiet=percent)
        if number is not None and (percent or 1 < number <= 100):
            scale = 10 if field == "complexity_score" and not percent and number <= 10 else 100
            code = "confidence_percent" if field == "confidence" else "complexity_rescaled"
            self.add(code, f"{value!r} -> {number / scale:g}")
            number /= scale
        if number is None or not 0 <= number <= 1:
            self.add("value_dropped", f"{field} {value!r}")
            return None
        return number
