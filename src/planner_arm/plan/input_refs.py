"""References between steps' inputs and outputs: `{{steps.N.output}}` in a string value, and
`inputs_from` step lists. A step may only read a step it depends on, directly or not, so an
orchestrator that runs the plan in order always has the output at hand."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

# Anything that looks like a template; the strict form below is the only valid one.
_TEMPLATE = re.compile(r"\{\{(.*?)\}\}", re.S)
_REFERENCE = re.compile(r"\s*steps\.(\d+)\.output\s*")
STEP_LIST_FIELDS = ("inputs_from",)


class StepLike(Protocol):
    @property
    def step(self) -> int: ...

    @property
    def depends_on(self) -> list[int]: ...


def reference(step: int) -> str:
    """The text that names step `step`'s output inside an input value."""
    return f"{{{{steps.{step}.output}}}}"


def ancestors_of_each(steps: Sequence[StepLike]) -> dict[int, frozenset[int]]:
    """For each step, every step it depends on, directly or through others."""
    direct = {step.step: list(step.depends_on) for step in steps}
    return {number: _walk(direct, number) for number in direct}


def ancestors(steps: Sequence[StepLike], number: int) -> frozenset[int]:
    """Every step that step `number` depends on, directly or through others."""
    return _walk({step.step: list(step.depends_on) for step in steps}, number)


def _walk(direct: dict[int, list[int]], number: int) -> frozenset[int]:
    # A walk, not a recursion: a plan sent by a caller may be long, have cycles or name
    # missing steps (validation reports those; here they only end the walk).
    seen: set[int] = set()
    todo = list(direct.get(number, []))
    while todo:
        parent = todo.pop()
        if parent in seen or parent == number or parent not in direct:
            continue
        seen.add(parent)
        todo.extend(direct[parent])
    return frozenset(seen)


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def reference_problems(value: dict[str, Any], earlier: frozenset[int]) -> list[str]:
    """Each reference in an input that a step with these `earlier` steps may not make."""
    problems: list[str] = []
    for text in _strings(value):
        for match in _TEMPLATE.finditer(text):
            strict = _REFERENCE.fullmatch(match.group(1))
            if strict is None:
                text = match.group(0)[:60]
                problems.append(f"'{text}' is not a reference: use {{{{steps.N.output}}}}")
            elif int(strict.group(1)) not in earlier:
                problems.append(
                    f"{match.group(0)} names step {strict.group(1)}, which this step does not "
                    "depend on"
                )
    for field in STEP_LIST_FIELDS:
        for number in value.get(field) or []:
            if number not in earlier:
                problems.append(f"{field} names step {number}, which this step does not depend on")
    return problems
