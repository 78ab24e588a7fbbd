"""A tool step's input (stage 2): the arguments of the call, valid against the tool's own JSON
Schema (`input_schema`, MCP's `inputSchema`), checked with `jsonschema`; or, when they cannot
be written, what is missing.

An input that cannot be a call yet keeps the contract of a built-in arm's: `needs`
(`human_or_model`: a person or a model must finish it; never call the tool with it as it is),
with `missing` naming the required arguments nobody gave, `arguments` those that were found
and `instruction` what the call is for.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

import jsonschema  # type: ignore[import-untyped]
from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped]

from planner_arm.errors import PlanValidationError
from planner_arm.limits import ArmSpec
from planner_arm.plan.inputs import input_schema, reference_problems

NEEDS = "human_or_model"
MAX_PROBLEMS = 20
_MAX_MESSAGE_CHARS = 200


def usable_schema(schema: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """`schema` when it is a JSON Schema of an object of arguments a step input can follow;
    None for a missing or broken one (the step then gets the generic input)."""
    if not isinstance(schema, Mapping) or not schema:
        return None
    if schema.get("type", "object") != "object":
        return None
    try:
        _validator_class(schema).check_schema(schema)
    except SchemaError:
        return None
    return dict(schema)


def step_input_schema(arm: ArmSpec) -> dict[str, Any]:
    """What a step of `arm` takes as input: a tool's own schema, else the arm's input model's."""
    return usable_schema(arm.input_schema) or input_schema(arm.id)


def _validator_class(schema: Mapping[str, Any]) -> Any:
    # The draft the schema names (`$schema`), else 2020-12, which MCP's tools default to.
    return _without_regexes(
        jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    )


def _no_check(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
    return iter(())


@cache
def _without_regexes(cls: Any) -> Any:
    """`cls` that runs no regular expression of the caller's schema (`pattern`,
    `patternProperties`): a pattern such as `^(a+)+$` backtracks for minutes on a short
    string, and a check runs where every caller's requests run."""
    return jsonschema.validators.extend(cls, {"pattern": _no_check, "patternProperties": _no_check})


def schema_problems(schema: Mapping[str, Any], value: Any) -> list[str]:
    """Each way `value` breaks `schema`, as "where: what" (at most MAX_PROBLEMS)."""
    validator = _validator_class(schema)(schema)
    problems = []
    for error in sorted(validator.iter_errors(value), key=lambda item: list(item.path)):
        where = ".".join(str(part) for part in error.path) or "input"
        problems.append(f"{where}: {error.message[:_MAX_MESSAGE_CHARS]}")
        if len(problems) == MAX_PROBLEMS:
            break
    return problems


def known_arguments(schema: Mapping[str, Any], data: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments the schema names, when it names its properties: a key it does not know
    (a model's `inputs_from`) is left out of the call, as a built-in arm's input drops it."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return dict(data)
    return {key: value for key, value in data.items() if key in properties}


def check_tool_input(
    schema: Mapping[str, Any], data: object, earlier: frozenset[int]
) -> dict[str, Any]:
    """`data` as the arguments of a call of the tool whose input schema is `schema`: the keys
    the schema does not name dropped, the rest valid against it, its step references only to
    `earlier` steps; else PlanValidationError `invalid_input` listing every problem."""
    if not isinstance(data, dict):
        detail = f"the input must be a JSON object, not {type(data).__name__}"
        raise PlanValidationError(detail, code="invalid_input", errors=[detail])
    arguments = known_arguments(schema, data)
    problems = schema_problems(schema, arguments) or reference_problems(arguments, earlier)
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
