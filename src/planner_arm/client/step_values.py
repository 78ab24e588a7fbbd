"""What flows between the steps of a run, without I/O: a tool's result read as a value, and a
step's input resolved against the results of the steps before it into the arguments of its
call, or the reason it cannot be called.

A string that is exactly one reference (`{{steps.2.output}}`, `{{steps.2.output.books[0].
book_id}}`) takes the value it names, whatever its type; a reference inside longer text is
replaced by the value as text (a string as it is, anything else as compact JSON). A whole-output
reference given to an argument whose schema wants a scalar, where the value is an object or a
list, takes the one value of the field named like the argument. Nothing that still holds `{{`
or a `needs` object ever comes out as arguments.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from planner_arm.client.calls import tool_json
from planner_arm.limits import ArmSpec
from planner_arm.plan.inputs import Reference, path_text, references_in, whole_reference
from planner_arm.plan.schemas import PlanStep
from planner_arm.tool_schema import SchemaProblem, reference_targets

# FastMCP's mark on an output schema whose tool returns a bare value as {"result": value}.
WRAP_MARK = "x-fastmcp-wrap-result"
WRAP_KEY = "result"
TEMPLATE_OPENING = "{{"
# How far a field named like an argument is looked for inside a result, and how many of its
# parts are looked at: a result is the tool's data, its size is not the runner's to choose.
MAX_SEARCH_DEPTH = 32
MAX_SEARCHED = 10_000
_SCHEMA_HOPS = 16
_SCALAR_TYPES = frozenset({"string", "integer", "number", "boolean", "null"})
_LOOSE = re.compile(r"[_\-\s]")


@dataclass(frozen=True)
class Tool:
    """What a run reads of one of the tools a plan was made over."""

    name: str
    input_schema: Mapping[str, Any] = field(default_factory=dict)
    output_schema: Mapping[str, Any] | None = None
    hints: Mapping[str, Any] = field(default_factory=dict)
    targets: Mapping[str, Any] = field(default_factory=dict)

    @property
    def writes(self) -> bool:
        """Annotated as one that changes something: `destructiveHint` true or `readOnlyHint`
        false (a contradicting pair is read as a write: asking costs less than not asking)."""
        return self.hints.get("destructiveHint") is True or self.hints.get("readOnlyHint") is False

    @property
    def required(self) -> list[str]:
        """The arguments its input schema requires."""
        names = self._schema().get("required")
        return [name for name in names if isinstance(name, str)] if isinstance(names, list) else []

    def argument_schema(self, name: str) -> Mapping[str, Any] | None:
        """The schema of argument `name`, its reference followed; None when it declares none."""
        properties = self._schema().get("properties")
        if not isinstance(properties, Mapping) or name not in properties:
            return None
        found = self._followed(properties[name])
        return found if isinstance(found, Mapping) else None

    def takes(self, name: str) -> bool:
        """Whether `name` is one of its declared arguments."""
        properties = self._schema().get("properties")
        return isinstance(properties, Mapping) and name in properties

    def wants_scalar(self, name: str) -> bool:
        """Argument `name` is declared and no branch of its schema is an object or a list."""
        schema = self.argument_schema(name)
        return schema is not None and not (self._types(schema, 0) - _SCALAR_TYPES)

    def _schema(self) -> Mapping[str, Any]:
        found = self._followed(self.input_schema)
        return found if isinstance(found, Mapping) else {}

    def _followed(self, schema: Any) -> Any:
        for _ in range(_SCHEMA_HOPS):
            if not isinstance(schema, Mapping) or not isinstance(schema.get("$ref"), str):
                break
            schema = self.targets.get(schema["$ref"])
        return schema

    def _types(self, schema: Any, depth: int) -> set[str]:
        """The JSON types a schema admits, as far as its own keywords and branches say."""
        schema = self._followed(schema)
        if not isinstance(schema, Mapping) or depth > _SCHEMA_HOPS:
            return set()
        kinds = schema.get("type")
        found = (
            {kinds}
            if isinstance(kinds, str)
            else {kind for kind in kinds or [] if isinstance(kind, str)}
        )
        if "properties" in schema:
            found.add("object")
        if "items" in schema or "prefixItems" in schema:
            found.add("array")
        for keyword in ("anyOf", "oneOf", "allOf"):
            for branch in schema.get(keyword) or []:
                found |= self._types(branch, depth + 1)
        return found


def read_tools(tools: Sequence[object]) -> dict[str, Tool]:
    """The tools by name, read as the service reads them (any shape `tool_json` takes); a
    tool the service would refuse (no name, a schema that refers outside itself) is a
    ValueError that names it."""
    read: dict[str, Tool] = {}
    for index, item in enumerate(tools):
        data = tool_json(item)
        try:
            spec = ArmSpec.model_validate(data)
            input_schema = spec.input_schema or {}
            targets = {**reference_targets(input_schema)}
        except (ValueError, SchemaProblem) as error:
            name = data.get("name") or data.get("id") or data.get("function", {}).get("name")
            raise ValueError(f"tool {index} ({str(name)[:60]!r}) cannot be read: {error}") from None
        read[spec.id] = Tool(
            name=spec.id,
            input_schema=input_schema,
            output_schema=spec.output_schema,
            hints=spec.annotations or {},
            targets=targets,
        )
    return read


@dataclass(frozen=True)
class Output:
    """A completed step's result; `wrapped` when it came as FastMCP's {"result": value}."""

    value: Any
    wrapped: bool = False


def _field(result: object, *names: str) -> Any:
    """MCP's result fields, by the 1.x or the 2.x name, of a model, an object or its JSON."""
    for name in names:
        if isinstance(result, Mapping):
            if name in result:
                return result[name]
        elif hasattr(result, name):
            return getattr(result, name)
    return None


_MCP_RESULT_KEYS = ("content", "structuredContent", "structured_content", "isError", "is_error")


def is_tool_error(result: object) -> bool:
    """An MCP result that says the call failed (`isError`, 2.x: `is_error`)."""
    return _field(result, "isError", "is_error") is True


def _texts(result: object) -> list[str]:
    content = _field(result, "content")
    if not isinstance(content, Sequence) or isinstance(content, str):
        return []
    return [
        text
        for item in content
        if _field(item, "type") == "text" and isinstance(text := _field(item, "text"), str)
    ]


def error_text(result: object) -> str:
    """What a failed MCP result says (its text content)."""
    return "\n".join(_texts(result)).strip() or "the tool reported an error"


def read_output(result: object, tool: Tool | None) -> Output:
    """A successful call's result as a value: MCP's structured content (FastMCP's
    {"result": value} unwrapped), else the JSON of its text content (several items: a list),
    else its text; a result that is no MCP result is taken as it is."""
    if isinstance(result, Mapping):
        if not any(key in result for key in _MCP_RESULT_KEYS):
            return Output(dict(result))
    elif not any(hasattr(result, key) for key in _MCP_RESULT_KEYS):
        return Output(result)
    structured = _field(result, "structuredContent", "structured_content")
    if isinstance(structured, Mapping):
        return _unwrapped(dict(structured), tool)
    texts = _texts(result)
    if not texts:
        return Output(None)
    values = [_json_or_text(text) for text in texts]
    return Output(values[0] if len(values) == 1 else values)


def _unwrapped(value: dict[str, Any], tool: Tool | None) -> Output:
    schema = tool.output_schema if tool else None
    marked = bool(schema and schema.get(WRAP_MARK) is True)
    if WRAP_KEY in value and (marked or list(value) == [WRAP_KEY]):
        return Output(value[WRAP_KEY], wrapped=True)
    return Output(value)


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def compact_json(value: Any) -> str:
    """A value as text for a person or a model: a string as it is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


@dataclass(frozen=True)
class Blocked:
    """Why a step cannot be called: the arguments it lacks and what is wrong."""

    missing: list[str]
    error: str


class _Unresolved(Exception):
    pass


def call_arguments(
    step: PlanStep, tool: Tool | None, outputs: Mapping[int, Output]
) -> dict[str, Any] | Blocked:
    """The arguments of `step`'s call, its references resolved against `outputs` (the
    completed steps' results by number), or why it cannot be called."""
    written = step.input
    required = tool.required if tool else []
    if written is None:
        if required:
            return Blocked(required, "the step has no input: plan it with specialize")
        return {}
    if "needs" in written and not (tool and tool.takes("needs")):
        return _needs(written)
    arguments, missing, errors = _resolved_arguments(written, tool, outputs)
    missing += [name for name in required if name not in written]
    if not errors and missing:
        errors.append(f"required {'argument' if len(missing) == 1 else 'arguments'} not given")
    if not errors and (held := _template_in(arguments)):
        missing.append(held)
        errors.append(f"argument {held} still holds '{TEMPLATE_OPENING}'")
    if errors:
        return Blocked(list(dict.fromkeys(missing)), "; ".join(errors))
    return arguments


def _resolved_arguments(
    written: Mapping[str, Any], tool: Tool | None, outputs: Mapping[int, Output]
) -> tuple[dict[str, Any], list[str], list[str]]:
    """Each argument resolved; the names of those that could not be, and why not."""
    arguments: dict[str, Any] = {}
    missing, errors = [], []
    for name, value in written.items():
        scalar = name if tool and tool.wants_scalar(name) else None
        try:
            arguments[name] = _resolved(value, outputs, scalar)
        except _Unresolved as why:
            missing.append(name)
            errors.append(str(why))
    return arguments, missing, errors


def _needs(written: Mapping[str, Any]) -> Blocked:
    """An input that says what it still needs (`needs`, `missing`, `instruction`)."""
    missing = written.get("missing")
    names = [str(name) for name in missing] if isinstance(missing, list) else []
    instruction = written.get("instruction")
    why = f": {instruction}" if isinstance(instruction, str) and instruction else ""
    return Blocked(names, f"needs {written['needs']}{why}"[:500])


def _resolved(value: Any, outputs: Mapping[int, Output], scalar_name: str | None) -> Any:
    """`value` with every reference in it replaced; `scalar_name`: the argument it is, when
    that argument wants a scalar (a whole-output object then gives its field of that name)."""
    if isinstance(value, dict):
        return {key: _resolved(item, outputs, None) for key, item in value.items()}
    if isinstance(value, list):
        return [_resolved(item, outputs, None) for item in value]
    if not isinstance(value, str) or TEMPLATE_OPENING not in value:
        return value
    whole = whole_reference(value)
    if whole is not None:
        found = _looked_up(whole, outputs)
        if scalar_name is not None and not whole.path and isinstance(found, dict | list):
            return _named_field(found, scalar_name, f"steps.{whole.step}.output")
        return found
    text = value
    for written, reference in references_in(value):
        if reference is None:
            raise _Unresolved(f"'{written[:60]}' is not a reference")
        text = text.replace(written, compact_json(_looked_up(reference, outputs)))
    return text


def _looked_up(reference: Reference, outputs: Mapping[int, Output]) -> Any:
    output = outputs.get(reference.step)
    if output is None:
        raise _Unresolved(f"steps.{reference.step}.output is not available: step "
                          f"{reference.step} has not completed")  # fmt: skip
    path = reference.path
    # A path written from the output schema names the wrapper's field; the value is unwrapped.
    if output.wrapped and path[:1] == (WRAP_KEY,):
        path = path[1:]
    value = output.value
    for index, part in enumerate(path):
        found, value = _part(value, part)
        if not found:
            where = f"steps.{reference.step}.output{path_text(path[: index + 1])}"
            raise _Unresolved(f"{where} is not in step {reference.step}'s result")
    return value


def _part(value: Any, part: str | int) -> tuple[bool, Any]:
    """(True, the list item or field `part` of `value`), or (False, None) when it has none."""
    if isinstance(part, int):
        if isinstance(value, list) and part < len(value):
            return True, value[part]
    elif isinstance(value, dict) and part in value:
        return True, value[part]
    return False, None


def _loose(name: str) -> str:
    return _LOOSE.sub("", name).casefold()


def _named_field(value: dict[str, Any] | list[Any], name: str, where: str) -> Any:
    """The one value of the field named `name` (exactly, then ignoring case, `_` and `-`):
    at the top of `value` first, else anywhere inside its objects and lists."""
    for same in (lambda key: key == name, lambda key: _loose(key) == _loose(name)):
        top = [item for key, item in value.items() if same(key)] if isinstance(value, dict) else []
        found = top or list(_inner_fields(value, same))
        distinct = list({compact_json(item): item for item in found}.values())
        if len(distinct) == 1:
            return distinct[0]
        if distinct:
            raise _Unresolved(f"{where} has {len(distinct)} values named {name}")
    raise _Unresolved(f"{where} has no field named {name}")


def _inner_fields(value: Any, same: Any) -> Iterator[Any]:
    """The values of the fields `same` accepts, in the objects nested inside `value` (not at
    its top), breadth first and bounded."""
    level = list(value.values()) if isinstance(value, dict) else list(value)
    seen = 0
    for _ in range(MAX_SEARCH_DEPTH):
        deeper: list[Any] = []
        for item in level:
            seen += 1
            if seen > MAX_SEARCHED:
                return
            if isinstance(item, dict):
                yield from (inner for key, inner in item.items() if same(key))
                deeper.extend(item.values())
            elif isinstance(item, list):
                deeper.extend(item)
        if not deeper:
            return
        level = deeper


def _template_in(value: Any, name: str = "") -> str | None:
    """The argument (its top-level name) of the first string holding `{{`, if any."""
    if isinstance(value, str):
        return name if TEMPLATE_OPENING in value else None
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, item in items:
        found = _template_in(item, name or str(key))
        if found is not None:
            return found
    return None
