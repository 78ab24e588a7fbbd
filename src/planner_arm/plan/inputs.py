"""What each arm takes as input (stage 2), and the references between steps' inputs and outputs.

One pydantic model per built-in arm, defined once: the input schema /capabilities shows and
the check a model's input must pass. An input may name another step's output as
`{{steps.N.output}}` in a string value (or a field of it: `{{steps.N.output.books[0].book_id}}`,
dotted names and `[index]`), or in an `inputs_from` step list; a step may only read a step it
depends on, directly or not, so an orchestrator that runs the plan in order always has the
output at hand.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from planner_arm.errors import PlanValidationError
from planner_arm.plan.output_fields import OutputFields

# Anything that looks like a template; the strict form below is the only valid one.
_TEMPLATE = re.compile(r"\{\{(.*?)\}\}", re.S)
# A field of an output: `.name` (letters, digits, `_`, `-`; not opening with a digit or `-`)
# or `[index]`, as many as the value nests.
_PART = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\[(\d{1,9})\]")
_REFERENCE = re.compile(r"\s*steps\.(\d+)\.output((?:\.[A-Za-z_][A-Za-z0-9_-]*|\[\d{1,9}\])*)\s*")
STEP_LIST_FIELDS = ("inputs_from",)
MAX_PATH_PARTS = 32

PathPart = str | int


@dataclass(frozen=True)
class Reference:
    """`{{steps.N.output<path>}}` read: the step and the path into its output (names of
    fields, indexes of list items); an empty path is the whole output."""

    step: int
    path: tuple[PathPart, ...] = ()

    @property
    def text(self) -> str:
        return reference(self.step, self.path)


def reference(step: int, path: Sequence[PathPart] = ()) -> str:
    """The text that names step `step`'s output (or the field `path` of it) inside an input
    value: `{{steps.2.output}}`, `{{steps.2.output.books[0].book_id}}`."""
    return f"{{{{steps.{step}.output{path_text(path)}}}}}"


def path_text(path: Sequence[PathPart]) -> str:
    """`("books", 0, "book_id")` as `.books[0].book_id`."""
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path)


def parse_reference(inner: str) -> Reference | None:
    """The reference `inner` (the text between `{{` and `}}`) makes, or None when it is none."""
    found = _REFERENCE.fullmatch(inner)
    if found is None:
        return None
    parts = [name if name else int(index) for name, index in _PART.findall(found.group(2))]
    if len(parts) > MAX_PATH_PARTS:
        return None
    return Reference(int(found.group(1)), tuple(parts))


def references_in(text: str) -> list[tuple[str, Reference | None]]:
    """Each template in `text`, as written, and the reference it makes (None: not one)."""
    return [(match.group(0), parse_reference(match.group(1))) for match in _TEMPLATE.finditer(text)]


def whole_reference(text: str) -> Reference | None:
    """The reference `text` is, when it is exactly one (spaces around it aside): its value
    then stands for the text whole, of whatever type it is."""
    stripped = text.strip()
    found = _TEMPLATE.fullmatch(stripped)
    return None if found is None else parse_reference(found.group(1))


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


# The output schemas of the earlier steps' tools, by step number: what a path is checked
# against (a step whose tool has none is not in it).
StepOutputs = Mapping[int, OutputFields]


def reference_problems(
    value: dict[str, Any], earlier: frozenset[int], outputs: StepOutputs | None = None
) -> list[str]:
    """Each reference in an input that a step with these `earlier` steps may not make, and
    each path into an earlier output that its tool's output schema (`outputs`) says names
    nothing ("steps.2.output has no field 'isbn' (it has books)")."""
    problems: list[str] = []
    for text in _strings(value):
        for written, found in references_in(text):
            if found is None:
                problems.append(
                    f"'{written[:60]}' is not a reference: use {{{{steps.N.output}}}} or a "
                    "field of it, {{steps.N.output.name[0].field}}"
                )
            elif found.step not in earlier:
                problems.append(
                    f"{written[:60]} names step {found.step}, which this step does not depend on"
                )
            elif found.path and outputs and found.step in outputs:
                wrong = outputs[found.step].problem(found.path, f"steps.{found.step}.output")
                problems += [wrong] if wrong else []
    for field in STEP_LIST_FIELDS:
        for number in value.get(field) or []:
            if number not in earlier:
                problems.append(f"{field} names step {number}, which this step does not depend on")
    return problems


MAX_TEXT_CHARS = 4_000
MAX_ITEM_CHARS = 500
MAX_ITEMS = 50
# A final check may read every step of a large plan.
MAX_INPUTS_FROM = 1_000


# What a rule writes for a step whose action has no text left.
NO_TEXT = "Carry out the step as planned"
_BRACE_PAIR = re.compile(r"\{(?=\{)")


def clipped(text: str, limit: int) -> str:
    """`text` on one line, at most `limit` characters. A template in the step's own text is
    not a reference a rule made: its braces are kept apart."""
    text = " ".join(_BRACE_PAIR.sub("{ ", text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def instruction_text(action: str) -> str:
    """A step's action as an input's instruction (never empty)."""
    return clipped(action, MAX_TEXT_CHARS) or NO_TEXT


def real_dependencies(depends_on: Iterable[int]) -> list[int]:
    """The steps a step depends on (`depends_on`), once each: a plan sent whole may name any
    number, and only a real step's output is read."""
    return [number for number in dict.fromkeys(depends_on) if number >= 1]


Text = Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS)]
Item = Annotated[str, Field(min_length=1, max_length=MAX_ITEM_CHARS)]
StepNumber = Annotated[int, Field(ge=1)]


class ArmInput(BaseModel):
    """Base of every arm's input: unknown fields are not part of the schema."""

    model_config = ConfigDict(extra="forbid")


class RetrieverInput(ArmInput):
    """Find information."""

    query: Text = Field(description="What to search for")
    sources: list[Item] = Field(
        default_factory=list,
        max_length=MAX_ITEMS,
        description="Where to search (paths, URLs, index names); empty: the arm's own default",
    )
    top_k: int = Field(5, ge=1, le=50, description="How many results to return")


class CoderInput(ArmInput):
    """Write or change code."""

    instruction: Text = Field(description="What to write or change")
    language: str | None = Field(
        None, min_length=1, max_length=40, description="The programming language, if known"
    )
    files: list[Item] = Field(
        default_factory=list, max_length=MAX_ITEMS, description="Files to read or change"
    )


class ExecutorInput(ArmInput):
    """Run a command; or, when none could be written, say that one is still needed."""

    command: Text | None = Field(
        None, description="The shell command to run; null when `needs` is set"
    )
    needs: Literal["human_or_model"] | None = Field(
        None,
        description="Set when no command could be written (a rule-based input whose step "
        "names none): a person or a model must write it. Never run such a step as it is",
    )
    instruction: Text | None = Field(None, description="With `needs`: what the command must do")
    working_dir: Item = Field(".", description="Where to run it, relative to the workspace")
    timeout_seconds: int = Field(300, ge=1, le=3_600, description="Stop the command after this")
    expect_exit_code: int = Field(0, ge=0, le=255, description="The exit code that is success")

    @model_validator(mode="after")
    def _command_or_needs(self) -> Self:
        if (self.command is None) == (self.needs is None):
            raise ValueError("give exactly one of command and needs")
        return self


class JudgeInput(ArmInput):
    """Judge earlier steps' outputs against criteria."""

    criteria: list[Item] = Field(
        min_length=1, max_length=MAX_ITEMS, description="What the outputs must satisfy"
    )
    inputs_from: list[StepNumber] = Field(
        default_factory=list,
        max_length=MAX_INPUTS_FROM,
        description="The steps whose outputs are judged (earlier steps this one depends on)",
    )


class GuardianInput(ArmInput):
    """Check safety and policy."""

    checks: list[Item] = Field(
        min_length=1, max_length=MAX_ITEMS, description="The safety or policy checks to run"
    )
    target: Text | None = Field(
        None, description="What to check: an earlier output ({{steps.N.output}}) or a description"
    )


class PlannerInput(ArmInput):
    """Plan a sub-goal."""

    goal: Text = Field(description="The sub-goal to plan")


class GenericInput(ArmInput):
    """The input of a configured arm that has no model of its own."""

    instruction: Text = Field(description="What the arm should do")
    inputs_from: list[StepNumber] = Field(
        default_factory=list,
        max_length=MAX_INPUTS_FROM,
        description="The steps whose outputs this step reads",
    )


INPUT_MODELS: Mapping[str, type[ArmInput]] = {
    "retriever": RetrieverInput,
    "coder": CoderInput,
    "executor": ExecutorInput,
    "judge": JudgeInput,
    "guardian": GuardianInput,
    "planner": PlannerInput,
}


def input_model(arm: str) -> type[ArmInput]:
    """The input model of `arm`: its own, or GenericInput for an arm configured by name only."""
    return INPUT_MODELS.get(arm, GenericInput)


@cache
def _schema(model: type[ArmInput]) -> dict[str, Any]:
    return model.model_json_schema()


def input_schema(arm: str) -> dict[str, Any]:
    """The JSON Schema of `arm`'s input (a fresh copy: callers may change it)."""
    return copy.deepcopy(_schema(input_model(arm)))


def check_input(
    arm: str, data: object, earlier: frozenset[int], outputs: StepOutputs | None = None
) -> dict[str, Any]:
    """`data` as a valid input of `arm` (defaults filled, unknown fields dropped, a null given
    for a field that has a default read as that default), or PlanValidationError
    `invalid_input` listing every problem. `earlier` holds the steps this step depends on,
    directly or not: the only outputs it may refer to; `outputs` what their tools' results
    hold, for the paths into them."""
    if not isinstance(data, dict):
        detail = f"the input must be a JSON object, not {type(data).__name__}"
        raise PlanValidationError(detail, code="invalid_input", errors=[detail])
    model = input_model(arm)
    fields = model.model_fields
    known = {
        key: value
        for key, value in data.items()
        if key in fields and not (value is None and not fields[key].is_required())
    }
    try:
        value: dict[str, Any] = model.model_validate(known).model_dump(mode="json")
    except ValidationError as error:
        problems = [
            f"{'.'.join(str(part) for part in item['loc']) or 'input'}: {item['msg']}"
            for item in error.errors()
        ]
        raise PlanValidationError(
            "; ".join(problems), code="invalid_input", errors=problems
        ) from None
    problems = reference_problems(value, earlier, outputs)
    if problems:
        raise PlanValidationError("; ".join(problems), code="invalid_input", errors=problems)
    return value
