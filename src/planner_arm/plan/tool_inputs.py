"""A tool step's input (stage 2): the arguments of the call, valid against the tool's own JSON
Schema (`input_schema`, MCP's `inputSchema`), checked with `jsonschema` (imported on first use,
or by `load_checker` once the service is ready: only requests with tools need it, and it is
about 4 MiB of start-up); or, when they cannot be written, what is missing.

An input that cannot be a call yet keeps the contract of a built-in arm's: `needs`
(`human_or_model`: a person or a model must finish it; never call the tool with it as it is),
with `missing` naming the required arguments nobody gave, `arguments` those that were found
and `instruction` what the call is for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from planner_arm.errors import PlanValidationError
from planner_arm.limits import ArmSpec
from planner_arm.plan.dag import ancestors_of_each
from planner_arm.plan.inputs import (
    StepOutputs,
    check_input,
    input_schema,
    reference_problems,
    whole_reference,
)
from planner_arm.plan.output_fields import output_fields, step_outputs
from planner_arm.plan.schemas import PlanStep
from planner_arm.tool_schema import SchemaProblem, reference_targets

NEEDS = "human_or_model"
MAX_PROBLEMS = 20
_MAX_MESSAGE_CHARS = 200
# How much checking values against a caller's schemas one request may do, in keywords
# applied (2 to 3 µs each), and how deep a value checked may nest: the caller writes the
# schema, so the caller must not choose what a check costs.
CHECK_STEPS = 100_000
MAX_VALUE_DEPTH = 32
_REFERENCE_HOPS = 32


@dataclass
class CheckBudget:
    """The keywords the checks of one request may still apply; spent by every check of every
    tool schema of the request."""

    steps: int = CHECK_STEPS

    def spend(self) -> None:
        self.steps -= 1
        if self.steps < 0:
            raise _TooCostly


class _TooCostly(Exception):
    pass


@dataclass(frozen=True)
class _Check:
    targets: Mapping[str, Any]
    budget: CheckBudget


_CHECKING: ContextVar[_Check] = ContextVar("planner_arm_schema_check")


@dataclass
class ToolSchema:
    """A tool's input schema, read once for a request, to check values against: its own
    references only (`tool_schema.reference_targets`), no regular expression of the caller's
    run, every check within the request's `CheckBudget`."""

    schema: dict[str, Any]
    targets: Mapping[str, Any]
    budget: CheckBudget = field(default_factory=CheckBudget)
    _validator: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        cls = _validator_class(self.schema)
        self._validator = cls(self.schema, registry=_nothing_retrieved())

    @property
    def top(self) -> Mapping[str, Any]:
        """The schema of the arguments object, its references followed."""
        return self.resolved(self.schema)

    @property
    def properties(self) -> Mapping[str, Any]:
        found = self.top.get("properties")
        return found if isinstance(found, Mapping) else {}

    @property
    def required(self) -> list[str]:
        found = self.top.get("required")
        return [name for name in found if isinstance(name, str)] if isinstance(found, list) else []

    def resolved(self, spec: Any) -> Mapping[str, Any]:
        """`spec` with its reference followed (`{"$ref": "#/$defs/Unit"}` is Unit's schema;
        pydantic's `{"allOf": [{"$ref": ...}]}` too); {} for a spec that is no object."""
        for _ in range(_REFERENCE_HOPS):
            if not isinstance(spec, Mapping):
                return {}
            ref = spec.get("$ref")
            all_of = spec.get("allOf")
            if isinstance(ref, str) and ref in self.targets:
                spec = self.targets[ref]
            elif isinstance(all_of, list) and len(all_of) == 1 and "$ref" in all_of[0]:
                spec = all_of[0]
            else:
                return spec
        return {}

    def problems(self, value: Any) -> list[str]:
        """Each way `value` breaks the schema, as "where: what" (at most MAX_PROBLEMS); a
        string that is one step reference fits wherever it stands."""
        return self._run(self._validator, value)

    def fits(self, spec: Any, value: Any) -> bool:
        """Whether `value` is valid against `spec`, a subschema of this schema (its
        references point into this schema, as they do where it stands)."""
        if not isinstance(spec, Mapping | bool):
            return True
        return not self._run(self._validator.evolve(schema=spec), value)

    def _run(self, validator: Any, value: Any) -> list[str]:
        if _depth_over(value, MAX_VALUE_DEPTH):
            return [f"input: nests deeper than {MAX_VALUE_DEPTH} levels"]
        token = _CHECKING.set(_Check(self.targets, self.budget))
        try:
            return _problems(validator.iter_errors(value))
        except _TooCostly:
            return ["input: the tool's schema costs more to check than a request may spend"]
        except RecursionError:
            return ["input: the tool's schema nests too deep to check"]
        finally:
            _CHECKING.reset(token)


def tool_schema(schema: Any, budget: CheckBudget | None = None) -> ToolSchema | None:
    """`schema` ready to check a tool's arguments against, when it is a JSON Schema of an
    object of arguments; None for a missing or broken one (the step then gets the generic
    input)."""
    if not isinstance(schema, Mapping) or not schema:
        return None
    if schema.get("type", "object") != "object":
        return None
    from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped]

    try:
        targets = reference_targets(schema)
        # No format is checked: a `regex` format would compile the caller's patterns.
        _validator_class(schema).check_schema(schema, format_checker=None)
    except (SchemaProblem, SchemaError):
        return None
    return ToolSchema(dict(schema), targets, budget or CheckBudget())


def usable_schema(schema: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """`schema` when `tool_schema` can check values against it, else None."""
    checked = tool_schema(schema)
    return None if checked is None else checked.schema


def step_input_schema(arm: ArmSpec) -> dict[str, Any]:
    """What a step of `arm` takes as input: a tool's own schema, else the arm's input model's."""
    return usable_schema(arm.input_schema) or input_schema(arm.id)


def _problems(errors: Iterator[Any]) -> list[str]:
    found = []
    for error in errors:
        if isinstance(error.instance, str) and whole_reference(error.instance) is not None:
            # A value that is one reference stands for an earlier output, of whatever type
            # the argument takes: the runner puts the value there.
            continue
        where = ".".join(str(part) for part in error.path) or "input"
        found.append((list(error.path), f"{where}: {error.message[:_MAX_MESSAGE_CHARS]}"))
        if len(found) == MAX_PROBLEMS:
            break
    return [text for _, text in sorted(found, key=lambda item: [str(part) for part in item[0]])]


def _depth_over(value: Any, limit: int) -> bool:
    pending = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            pending.extend((inner, depth + 1) for inner in item.values())
        elif isinstance(item, list):
            pending.extend((inner, depth + 1) for inner in item)
    return False


def load_checker() -> None:
    """Imports what checking a tool's schema needs (`jsonschema`, `referencing`) and builds
    the checker of the default draft: run off the event loop once the service is ready, so
    the first request with tools does not do it on the loop."""
    _nothing_retrieved()
    _validator_class({})


@cache
def _nothing_retrieved() -> Any:
    """A registry that retrieves nothing (an unknown URI is NoSuchResource): references are
    the checker's own (`_reference`), and this stands behind them, so that no path of the
    library can fetch what a schema names."""
    import referencing

    return referencing.Registry()


def _validator_class(schema: Mapping[str, Any]) -> Any:
    # The draft the schema names (`$schema`), else 2020-12, which MCP's tools default to.
    import jsonschema  # type: ignore[import-untyped]

    return _guarded(
        jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    )


Keyword = Callable[[Any, Any, Any, Any], Any]


def _spent(keyword: Keyword) -> Keyword:
    def check(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        _CHECKING.get().budget.spend()
        return keyword(validator, value, instance, schema)

    return check


def _no_check(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
    return iter(())


def _reference(validator: Any, ref: Any, instance: Any, schema: Any) -> Iterator[Any]:
    target = _CHECKING.get().targets.get(ref) if isinstance(ref, str) else None
    if target is None:
        return iter(())  # refused when the tool was read; a schema built since is no caller's
    found: Iterator[Any] = validator.descend(instance, target)
    return found


def _additional_properties(validator: Any, extra: Any, instance: Any, schema: Any) -> Any:
    """`additionalProperties` without the caller's patterns: beside `patternProperties`,
    which keys a pattern takes is not known, so no key is taken as additional."""
    if not validator.is_type(instance, "object") or "patternProperties" in schema:
        return
    named = schema.get("properties") or {}
    extras = [key for key in instance if key not in named]
    if validator.is_type(extra, "object"):
        for key in extras:
            yield from validator.descend(instance[key], extra, path=key)
    elif extra is False and extras:
        listed = ", ".join(repr(key)[:40] for key in sorted(extras)[:10])
        from jsonschema.exceptions import ValidationError

        yield ValidationError(f"Additional properties are not allowed ({listed} unexpected)")


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """`uniqueItems` in one pass, whatever the items (the library's falls back on comparing
    every pair when they do not sort)."""
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[Any] = set()
    for item in instance:
        key = _comparable(item)
        if key in seen:
            from jsonschema.exceptions import ValidationError

            yield ValidationError(f"item {_cut(repr(item))} appears more than once")
            return
        seen.add(key)


def _comparable(value: Any) -> Any:
    """A hashable stand-in equal where JSON Schema calls two values equal (1 and 1.0 are,
    true and 1 are not; an object's keys have no order)."""
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list):
        return ("array", tuple(_comparable(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((key, _comparable(item)) for key, item in value.items()))
    return ("other", repr(value))


def _cut(text: str) -> str:
    return text if len(text) <= 60 else text[:59] + "…"


_REPLACED: dict[str, Keyword] = {
    "$ref": _reference,
    "$dynamicRef": _reference,
    "$recursiveRef": _reference,
    # A pattern such as `^(a+)+$` backtracks for minutes on a short string, and a check
    # runs where every caller's requests run: no regular expression of the caller's is run.
    "pattern": _no_check,
    "patternProperties": _no_check,
    "additionalProperties": _additional_properties,
    # The library's walk of what was evaluated runs patterns and re-checks every branch.
    "unevaluatedProperties": _no_check,
    "unevaluatedItems": _no_check,
    "uniqueItems": _unique_items,
}


@cache
def _guarded(cls: Any) -> Any:
    """`cls` as it checks a caller's schema: the keywords above replaced, every keyword
    applied spending the request's budget."""
    import jsonschema

    keywords = {name: _spent(_REPLACED.get(name, check)) for name, check in cls.VALIDATORS.items()}
    return jsonschema.validators.extend(cls, keywords)


def known_arguments(schema: ToolSchema, data: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments the schema names, when it names its properties: a key it does not know
    (a model's `inputs_from`) is left out of the call, as a built-in arm's input drops it."""
    properties = schema.top.get("properties")
    if not isinstance(properties, Mapping):
        return dict(data)
    return {key: value for key, value in data.items() if key in properties}


def check_tool_input(
    schema: ToolSchema,
    data: object,
    earlier: frozenset[int],
    outputs: StepOutputs | None = None,
) -> dict[str, Any]:
    """`data` as the arguments of a call of the tool whose input schema is `schema`: the keys
    the schema does not name dropped, the rest valid against it, its step references only to
    `earlier` steps and, into the result of one whose tool has an output schema (`outputs`),
    only to fields it has; else PlanValidationError `invalid_input` listing every problem."""
    if not isinstance(data, dict):
        detail = f"the input must be a JSON object, not {type(data).__name__}"
        raise PlanValidationError(detail, code="invalid_input", errors=[detail])
    arguments = known_arguments(schema, data)
    problems = schema.problems(arguments) or reference_problems(arguments, earlier, outputs)
    if problems:
        raise PlanValidationError("; ".join(problems), code="invalid_input", errors=problems)
    return arguments


def needs_input(
    missing: list[str], arguments: Mapping[str, Any], instruction: str
) -> dict[str, Any]:
    """The input of a call that cannot be made yet: what is missing, what was found."""
    return {
        "needs": NEEDS,
        "missing": missing,
        "arguments": dict(arguments),
        "instruction": instruction,
    }


def step_input_problems(
    steps: Sequence[PlanStep], tools: Sequence[ArmSpec]
) -> list[tuple[int, str]]:
    """Each problem of the inputs of `steps`, a plan over `tools`, by step number: arguments
    its tool's input schema refuses (a tool without one: the generic input's), a reference
    to a step it does not depend on or a path the producing tool's result lacks. A step
    without an input has none; one that says what it `needs` has only its `arguments`'
    references checked."""
    used = {step.required_arm for step in steps}
    budget = CheckBudget()
    schemas = {tool.id: tool_schema(tool.input_schema, budget) for tool in tools if tool.id in used}
    fields = output_fields(tools, used)
    by_id = {step.step: step for step in steps}
    earlier = ancestors_of_each(steps)
    problems: list[tuple[int, str]] = []
    for step in steps:
        if step.input is None:
            continue
        ids = earlier.get(step.step, frozenset())
        outputs = step_outputs([by_id[number] for number in sorted(ids)], fields)
        schema = schemas.get(step.required_arm)
        try:
            if step.input.get("needs") == NEEDS:
                arguments = step.input.get("arguments")
                given = arguments if isinstance(arguments, dict) else {}
                problems += [
                    (step.step, found) for found in reference_problems(given, ids, outputs)
                ]
            elif schema is not None:
                check_tool_input(schema, step.input, ids, outputs)
            else:
                check_input(step.required_arm, step.input, ids, outputs)
        except PlanValidationError as error:
            problems += [(step.step, problem) for problem in error.errors]
    return problems
