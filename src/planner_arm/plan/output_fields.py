"""The fields of a tool's result that a reference may name, read from the tool's output schema
(MCP's `outputSchema`): `{{steps.2.output.books[0].book_id}}` names the field `book_id` of the
first item of the list `books`.

Local references are followed (`#/$defs/Book`, pydantic's `allOf` of one reference), and so is
the one object or list branch of an `anyOf`/`oneOf` (an optional field: the value or null).
Nothing outside the schema is read, and the walk is bounded (`MAX_DEPTH` levels, `MAX_FIELDS`
fields), whatever the schema holds.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from planner_arm.limits import ArmSpec
from planner_arm.plan.schemas import PlanStep
from planner_arm.tool_schema import SchemaProblem, reference_targets

MAX_DEPTH = 6
MAX_FIELDS = 200
_HOPS = 32
# How many of an object's fields a problem names.
_FIELDS_NAMED = 10


@dataclass(frozen=True)
class OutputField:
    """One field of a result: its name, the path to it (a list's first item stands for its
    items) and that path as a prompt lists it (`books[].book_id`)."""

    name: str
    path: tuple[str | int, ...]
    listed: str
    parent: str | None  # the field that holds it (None at the top)


class OutputFields:
    """A tool's output schema, read for the fields its result holds."""

    def __init__(self, schema: Mapping[str, Any], targets: Mapping[str, Any]) -> None:
        self.schema = schema
        self.targets = targets

    @classmethod
    def of(cls, schema: Any) -> OutputFields | None:
        """The fields of `schema`; None for no schema, or one whose references cannot be
        followed."""
        if not isinstance(schema, Mapping) or not schema:
            return None
        try:
            return cls(schema, reference_targets(schema))
        except SchemaProblem:
            return None

    def node(self, spec: Any) -> Mapping[str, Any]:
        """`spec` with its references followed, and the one branch that is not null of an
        `anyOf`, `oneOf` or `allOf`; {} for a spec that is no object."""
        for _ in range(_HOPS):
            if not isinstance(spec, Mapping):
                return {}
            ref = spec.get("$ref")
            if isinstance(ref, str) and ref in self.targets:
                spec = self.targets[ref]
                continue
            branch = _one_branch(spec)
            if branch is None:
                return spec
            spec = branch
        return {}

    @cached_property
    def fields(self) -> tuple[OutputField, ...]:
        """Every field of the result, at every level of its objects and the items of its
        lists, in the order the schema lists them (breadth first, within the bounds)."""
        found: list[OutputField] = []
        level: list[tuple[Any, tuple[str | int, ...], str, str | None]] = [
            (self.schema, (), "", None)
        ]
        for _ in range(MAX_DEPTH):
            below: list[tuple[Any, tuple[str | int, ...], str, str | None]] = []
            for spec, path, listed, parent in level:
                node = self.node(spec)
                if _is(node, "array"):
                    node = self.node(node.get("items"))
                    path, listed = (*path, 0), f"{listed}[]"
                for name, inner in _properties(node).items():
                    if len(found) == MAX_FIELDS:
                        return tuple(found)
                    where = f"{listed}.{name}" if listed else name
                    found.append(OutputField(name, (*path, name), where, parent))
                    below.append((inner, (*path, name), where, name))
            level = below
        return tuple(found)

    def paths_of(self, fits: Callable[[OutputField], bool]) -> list[tuple[str | int, ...]]:
        """The paths to the fields that `fits`."""
        return [item.path for item in self.fields if fits(item)]

    def listing(self, limit: int) -> str:
        """The paths of the fields that hold no fields of their own, as many as fit in `limit`
        characters (`books[].book_id, books[].title, …`)."""
        holders = {item.path[: -2 if item.path[-2:-1] == (0,) else -1] for item in self.fields}
        text = ""
        for item in (item for item in self.fields if item.path not in holders):
            more = f"{text}, {item.listed}" if text else item.listed
            if len(more) > limit:
                return f"{text}, …" if text else ""
            text = more
        return text

    def problem(self, path: Sequence[str | int], where: str) -> str | None:
        """Why `path` names nothing in the result (`where`: how the result is written,
        `steps.2.output`), or None when it may: a field an object does not have when the
        object lists its fields or allows no other, an item of an object, a field of a list.
        What the schema does not say (no properties, no items) is not a problem."""
        spec: Any = self.schema
        for part in path:
            node = self.node(spec)
            if isinstance(part, int):
                if _is(node, "object"):
                    return f"{where} is an object, not a list: name one of its fields"
                if not _is(node, "array"):
                    return None
                spec = node.get("items")
            else:
                if _is(node, "array"):
                    return f"{where} is a list: name an item first ({where}[0].{part})"
                properties = _properties(node)
                closed = node.get("additionalProperties") is False
                if part in properties:
                    spec = properties[part]
                elif properties or closed:
                    return _no_field(where, part, list(properties))
                elif isinstance(node.get("additionalProperties"), Mapping):
                    spec = node["additionalProperties"]
                else:
                    return None
            where += f"[{part}]" if isinstance(part, int) else f".{part}"
        return None


def output_fields(arms: Iterable[ArmSpec], used: Collection[str]) -> dict[str, OutputFields]:
    """The fields of the result of each arm of `used` that has an output schema (a caller's
    MCP tools); the other arms' are not read."""
    found = {arm.id: OutputFields.of(arm.output_schema) for arm in arms if arm.id in used}
    return {arm: fields for arm, fields in found.items() if fields is not None}


def step_outputs(
    earlier: Sequence[PlanStep], fields: Mapping[str, OutputFields]
) -> dict[int, OutputFields]:
    """The fields of each of the `earlier` steps' results whose tool has an output schema."""
    return {item.step: fields[item.required_arm] for item in earlier if item.required_arm in fields}


def _no_field(where: str, name: str, names: list[str]) -> str:
    if not names:
        return f"{where} has no field {name!r} (it has none)"
    shown = ", ".join(names[:_FIELDS_NAMED])
    if len(names) > _FIELDS_NAMED:
        shown += f", ... ({len(names)} in all)"
    return f"{where} has no field {name!r} (it has {shown})"


def _one_branch(spec: Mapping[str, Any]) -> Any:
    """The one branch that is not null of a combinator, when `spec` is only that."""
    if "properties" in spec or "items" in spec:
        return None
    for keyword in ("anyOf", "oneOf", "allOf"):
        branches = spec.get(keyword)
        if not isinstance(branches, list):
            continue
        real = [item for item in branches if not (isinstance(item, Mapping) and _null(item))]
        if len(real) == 1:
            return real[0]
    return None


def _null(spec: Mapping[str, Any]) -> bool:
    return spec.get("type") == "null"


def _is(node: Mapping[str, Any], kind: str) -> bool:
    """Whether `node` says its value is of `kind` (and of no other kind but null)."""
    declared = node.get("type")
    kinds = declared if isinstance(declared, list) else [declared]
    kinds = [item for item in kinds if item != "null"]
    if kinds == [kind]:
        return True
    if declared is None:
        inferred = "array" if "items" in node else "object" if "properties" in node else None
        return inferred == kind
    return False


def _properties(node: Mapping[str, Any]) -> Mapping[str, Any]:
    found = node.get("properties")
    if not isinstance(found, Mapping):
        return {}
    return {name: spec for name, spec in found.items() if isinstance(name, str)}
