"""The stream cutter: step objects cut out of a plan answer while the model is still writing it,
and the checks one such step can pass on its own.

`StepCutter.feed(chunk)` returns each step object of the plan's step list (under `plan`,
`steps` or another step-list key, or a bare top-level list) whose closing brace is in the
chunk, decoded. Each character is looked at once: the cutter keeps its place in the JSON
(container stack, string and escape state) between chunks and holds only the text of the step
being written, so the cost of a chunk grows with the chunk, never with the answer. Text before
the first `{` or `[` (a code fence, a sentence) is skipped; text after the top-level value has
closed is ignored. A step that is not valid JSON on its own is skipped (the final pipeline
reads the whole answer, more tolerantly).

A step is sent early (`checked_step`) only when it reads the same way alone as inside the whole
answer: its number is its position, its arm resolves (by id, alias or the selector), it has an
action and a non-empty acceptance criterion, and it depends only on steps already sent. Its
estimates are filled exactly as validation fills them. Anything else waits for the final plan,
which stays the authority: a step sent early that the final checks change is withdrawn then.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from planner_arm.errors import PlanParseError, PlanValidationError
from planner_arm.pipeline.fields import STEP_LIST_KEYS, normalised_key
from planner_arm.pipeline.normalise import normalise_plan
from planner_arm.plan.arms import ArmResolver
from planner_arm.plan.draft import DraftPlan, repair_code
from planner_arm.plan.schemas import PlanStep
from planner_arm.plan.validation import PlanRules, validate_plan

# Outside a string only these characters change the cutter's state.
_STRUCTURE = re.compile(r'[{}\[\]":]')
# Inside a string, only the end of it or an escape.
_STRING_STOP = re.compile(r'["\\]')
# A key longer than this is not a step-list key: stop collecting its text.
_MAX_KEY_CHARS = 40


class StepCutter:
    """One answer's incremental reader; feed it the answer's text in order, chunk by chunk."""

    def __init__(self, step_list_keys: tuple[str, ...] = STEP_LIST_KEYS) -> None:
        self._keys = frozenset(step_list_keys)
        self._stack: list[str] = []  # "{" and "[" of the open containers
        self._in_string = False
        self._escape = False  # the last character read was a backslash inside a string
        self._string_parts: list[str] = []  # the current string's text, while short
        self._string_length = 0
        self._last_string: str | None = None  # the last string closed: a key when ":" follows
        self._key: str | None = None  # the key whose value comes next
        self._steps_depth: int | None = None  # stack depth inside the step list
        self._step_parts: list[str] = []  # the text of the step being written
        self._started = False
        self._done = False
        self.steps_seen = 0

    @property
    def done(self) -> bool:
        """The top-level value has closed: nothing more will come out."""
        return self._done

    def feed(self, chunk: str) -> list[Any]:
        """The step objects completed by `chunk`, decoded, in order."""
        found: list[Any] = []
        position = 0
        length = len(chunk)
        step_start = 0 if self._in_step() else -1
        while position < length and not self._done:
            if self._in_string:
                position = self._read_string(chunk, position)
                continue
            match = _STRUCTURE.search(chunk, position)
            if match is None:
                break
            position = match.end()
            char = match.group()
            if char == '"':
                self._open_string(chunk, position)
            elif char == ":":
                self._key = self._last_string
            elif char in "{[":
                step_start = self._open_container(char, position, step_start)
            elif self._started:  # "}" or "]"
                step_start = self._close_container(char, chunk, position, step_start, found)
        if step_start >= 0 and self._in_step():
            self._step_parts.append(chunk[step_start:])
        return found

    def _open_container(self, char: str, position: int, step_start: int) -> int:
        """Opens "{" or "[" ending at `position`; returns where the step in the chunk starts."""
        self._started = True
        opens_step = (
            char == "{" and self._steps_depth is not None and len(self._stack) == self._steps_depth
        )
        self._open(char)
        if not opens_step:
            return step_start
        self._step_parts = []
        return position - 1

    def _close_container(
        self, char: str, chunk: str, position: int, step_start: int, found: list[Any]
    ) -> int:
        """Closes "}" or "]" ending at `position`, adding a step it completes to `found`;
        returns where the step in the chunk starts (-1: none open)."""
        depth = self._steps_depth
        closes_step = char == "}" and depth is not None and len(self._stack) == depth + 1
        self._close()
        if not closes_step or step_start < 0:
            return step_start
        self._step_parts.append(chunk[step_start:position])
        step = self._decode_step()
        if step is not None:
            found.append(step)
        return -1

    def _in_step(self) -> bool:
        return self._steps_depth is not None and len(self._stack) > self._steps_depth

    def _open(self, char: str) -> None:
        key, self._key = self._key, None
        if self._steps_depth is None:
            bare_list = char == "[" and not self._stack
            keyed = char == "[" and key is not None and normalised_key(key) in self._keys
            if bare_list or keyed:
                self._steps_depth = len(self._stack) + 1
        self._stack.append(char)

    def _close(self) -> None:
        self._key = None
        if not self._stack:
            return
        self._stack.pop()
        if self._steps_depth is not None and len(self._stack) < self._steps_depth:
            self._steps_depth = -1  # the step list has closed; later lists are not steps
        if not self._stack:
            self._done = True

    def _open_string(self, chunk: str, position: int) -> None:
        if not self._started:
            return  # a quote in the prose before the JSON
        self._in_string = True
        self._key = None
        self._string_parts = []
        self._string_length = 0

    def _read_string(self, chunk: str, position: int) -> int:
        """Reads string text from `position`; returns where reading goes on."""
        if self._escape:
            self._escape = False
            self._keep(chunk[position : position + 1])
            return position + 1
        match = _STRING_STOP.search(chunk, position)
        end = match.start() if match else len(chunk)
        self._keep(chunk[position:end])
        if match is None:
            return end
        if match.group() == "\\":
            self._escape = True
            self._keep("\\")
            return end + 1
        self._in_string = False
        self._last_string = "".join(self._string_parts) if self._string_length else ""
        if self._string_length > _MAX_KEY_CHARS:
            self._last_string = None
        return end + 1

    def _keep(self, text: str) -> None:
        if self._string_length <= _MAX_KEY_CHARS:
            self._string_parts.append(text)
        self._string_length += len(text)

    def _decode_step(self) -> Any:
        text = "".join(self._step_parts)
        self._step_parts = []
        self.steps_seen += 1
        try:
            return json.loads(text)
        except ValueError:
            return None


# Repairs that depend on the rest of the plan (names of other steps, renumbering): such a
# step may read differently once the whole answer is known.
_PLAN_WIDE_REPAIRS = frozenset({"step_id_mapped", "dependency_dropped", "dependency_reference"})


def checked_step(
    raw: Any, position: int, sent: frozenset[int], arms: ArmResolver, rules: PlanRules
) -> PlanStep | None:
    """`raw` (the model's step object) as the /plan step numbered `position`, or None when it
    cannot be checked alone or depends on a step not sent yet."""
    if not isinstance(raw, dict):
        return None
    try:
        draft = normalise_plan({"plan": [raw]}, arms)
    except PlanParseError:
        return None
    if len(draft.steps) != 1 or any(
        repair_code(entry) in _PLAN_WIDE_REPAIRS for entry in draft.repairs
    ):
        return None
    step = draft.steps[0]
    if step.step not in (None, position) or not step.action.strip():
        return None
    if step.required_arm not in rules.arm_ids:
        return None
    if not any(text.strip() for text in step.acceptance_criteria):
        return None
    depends_on = step.depends_on
    if len(set(depends_on)) != len(depends_on) or not set(depends_on) <= sent:
        return None
    alone = DraftPlan(steps=[dataclasses.replace(step, step=1, depends_on=[])])
    one_step = dataclasses.replace(rules, min_steps=1, max_steps=1, require_validation_step=False)
    try:
        valid = validate_plan(alone, one_step)
    except PlanValidationError:
        return None
    return valid.steps[0].model_copy(update={"step": position, "depends_on": sorted(depends_on)})
