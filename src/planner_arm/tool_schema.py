"""What a tool's JSON Schema may hold, read as data before anything checks a value against it.

A caller's schema (`inputSchema`, `outputSchema`, `input_schema`, `parameters`) is untrusted
input. Its references stay inside it: `#`, a JSON pointer (`#/$defs/Unit`) or an anchor
(`#name`), resolved against the schema document itself (`$id` does not move them), and each
points at a schema; nothing a reference names is ever retrieved. No reference cycle applies to
one value without reaching into it (`{"$ref": "#"}` at the top), and the schema stays small:
at most `MAX_SCHEMA_NODES` subschemas, `MAX_UNFOLDED` of them met through references by one
value, `MAX_NESTING` deep once references are followed. A schema past one of these is refused
when the tool is read (`schema_problem`), with the reference or the bound it breaks.

The standard library only: the Python client reads tools with it too.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

MAX_SCHEMA_NODES = 5_000
MAX_UNFOLDED = 5_000
MAX_NESTING = 48
_REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
# The keywords whose value holds subschemas (the drafts' own, 3 to 2020-12): one, a list or a
# map of them, and whether they apply to the value itself ("same"), to a part of it ("inner")
# or are only held for references ("held"). Every other keyword's value is data (`enum`,
# `const`, `default`, `examples`), never read for references.
_KEYWORDS: dict[str, tuple[str, str]] = {
    **dict.fromkeys(("not", "if", "then", "else"), ("one", "same")),
    **dict.fromkeys(("allOf", "anyOf", "oneOf", "extends"), ("list", "same")),
    **dict.fromkeys(("dependentSchemas", "dependencies"), ("map", "same")),
    **dict.fromkeys(
        (
            "additionalProperties",
            "additionalItems",
            "contains",
            "propertyNames",
            "unevaluatedItems",
            "unevaluatedProperties",
        ),
        ("one", "inner"),
    ),
    "items": ("one or list", "inner"),
    "prefixItems": ("list", "inner"),
    **dict.fromkeys(("properties", "patternProperties"), ("map", "inner")),
    **dict.fromkeys(("$defs", "definitions"), ("map", "held")),
}


class SchemaProblem(ValueError):
    """Why a tool's schema is refused, in a sentence that names the reference or the bound."""


@dataclass
class _Node:
    schema: Mapping[str, Any]
    parent: _Node | None
    step: str
    same: list[int] = field(default_factory=list)
    inner: list[int] = field(default_factory=list)

    @property
    def where(self) -> str:
        """The node's place as a JSON pointer (written only for a problem's sentence)."""
        steps: list[str] = []
        node: _Node | None = self
        while node is not None:
            steps.append(node.step)
            node = node.parent
        return "/".join(reversed(steps))


@dataclass
class _Reading:
    root: Any
    nodes: dict[int, _Node] = field(default_factory=dict)
    anchors: dict[str, Any] = field(default_factory=dict)
    refs: list[tuple[int, str]] = field(default_factory=list)
    targets: dict[str, Any] = field(default_factory=dict)


def schema_problem(schema: Any) -> str | None:
    """Why `schema` cannot be a tool's schema (a reference that leaves it, points nowhere or
    loops on one value; a bound it breaks), or None when it can."""
    try:
        reference_targets(schema)
    except SchemaProblem as problem:
        return str(problem)
    return None


def reference_targets(schema: Any) -> dict[str, Any]:
    """Every reference of `schema` with the subschema it points at; SchemaProblem when one
    cannot be followed or the schema breaks a bound."""
    reading = _Reading(schema)
    if not isinstance(schema, Mapping):
        return reading.targets
    deepest = _read(reading, schema, None, "#")
    if not reading.refs:
        # A tree: it unfolds to its own size, as deep as it nests.
        _check_nesting(deepest)
        return reading.targets
    _link(reading)
    _check_loops(reading)
    _check_unfolding(reading)
    return reading.targets


def _subschemas(node: Mapping[str, Any]) -> Iterator[tuple[str, Any, str]]:
    """(keyword path, subschema, kind) of each of one schema's subschemas."""
    for name, value in node.items():
        shape, kind = _KEYWORDS.get(name, ("", ""))
        if not shape:
            continue
        if "one" in shape and isinstance(value, dict | bool):
            yield name, value, kind
        elif "list" in shape and isinstance(value, list):
            for index, item in enumerate(value):
                yield f"{name}/{index}", item, kind
        elif shape == "map" and isinstance(value, dict):
            for key, item in value.items():
                yield f"{name}/{_escape(str(key))}", item, kind


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _read(reading: _Reading, top: Mapping[str, Any], parent: _Node | None, step: str) -> int:
    """Every subschema under `top`, its anchors and references, without recursion; how deep
    they nest."""
    pending: list[tuple[Mapping[str, Any], _Node | None, str, int]] = [(top, parent, step, 1)]
    deepest = 0
    while pending:
        node, above, at, depth = pending.pop()
        if id(node) in reading.nodes:
            continue
        if len(reading.nodes) >= MAX_SCHEMA_NODES:
            raise SchemaProblem(f"the schema holds more than {MAX_SCHEMA_NODES} subschemas")
        read = reading.nodes[id(node)] = _Node(node, above, at)
        deepest = max(deepest, depth)
        if "$anchor" in node or "$dynamicAnchor" in node:
            _anchors(reading, node)
        if "$ref" in node or "$dynamicRef" in node or "$recursiveRef" in node:
            _refs(reading, read)
        for path, sub, _ in _subschemas(node):
            if isinstance(sub, dict):
                pending.append((sub, read, path, depth + 1))
    return deepest


def _anchors(reading: _Reading, node: Mapping[str, Any]) -> None:
    for keyword in ("$anchor", "$dynamicAnchor"):
        if isinstance(node.get(keyword), str):
            reading.anchors.setdefault("#" + node[keyword], node)


def _refs(reading: _Reading, read: _Node) -> None:
    for keyword in _REF_KEYWORDS:
        ref = read.schema.get(keyword)
        if isinstance(ref, str):
            reading.refs.append((id(read.schema), ref))
        elif keyword in read.schema:
            raise SchemaProblem(f"{keyword} at {read.where} is not a string")


def _link(reading: _Reading) -> None:
    """Each reference to the subschema it names, and every subschema's edges."""
    for _, ref in list(reading.refs):
        if ref in reading.targets:
            continue
        target = _resolve(reading, ref)
        reading.targets[ref] = target
        if isinstance(target, Mapping) and id(target) not in reading.nodes:
            # A pointer into a place no keyword reads as a schema: read it as one.
            _read(reading, target, None, ref)
    for edges in reading.nodes.values():
        node = edges.schema
        for _, sub, kind in _subschemas(node):
            if isinstance(sub, Mapping) and kind != "held":
                (edges.same if kind == "same" else edges.inner).append(id(sub))
        for keyword in _REF_KEYWORDS:
            named = node.get(keyword)
            target = reading.targets.get(named) if isinstance(named, str) else None
            if isinstance(target, Mapping):
                edges.same.append(id(target))


def _resolve(reading: _Reading, ref: str) -> Any:
    if not ref.startswith("#"):
        raise SchemaProblem(
            f"$ref {_quoted(ref)} points outside the schema: only references within it "
            "(#/$defs/...) are followed, and nothing is ever retrieved"
        )
    if ref == "#":
        return reading.root
    if not ref.startswith("#/"):
        target = reading.anchors.get(ref)
        if target is None:
            raise SchemaProblem(f"$ref {_quoted(ref)} names no anchor of the schema")
        return target
    node: Any = reading.root
    for token in ref[2:].split("/"):
        key = unquote(token).replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            raise SchemaProblem(f"$ref {_quoted(ref)} points at nothing in the schema")
    if not isinstance(node, Mapping | bool):
        raise SchemaProblem(f"$ref {_quoted(ref)} points at a {type(node).__name__}, not a schema")
    return node


def _quoted(ref: str) -> str:
    return repr(ref if len(ref) <= 80 else ref[:79] + "…")


def _check_loops(reading: _Reading) -> None:
    """No cycle of references and combinators that applies to one value and never reaches
    into it: a check of any value would go round it for ever."""
    state: dict[int, int] = {}  # 1: on the path being walked, 2: done
    for start in reading.nodes:
        if start in state:
            continue
        path = [start]
        stack = [iter(reading.nodes[start].same)]
        state[start] = 1
        while stack:
            step = next(stack[-1], None)
            if step is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(step) == 1:
                loop = [reading.nodes[node].where for node in path[path.index(step) :]]
                raise SchemaProblem(
                    "a reference cycle never reaches into the value: "
                    + " -> ".join([*loop, reading.nodes[step].where])[:300]
                )
            elif step not in state:
                state[step] = 1
                path.append(step)
                stack.append(iter(reading.nodes[step].same))


def _check_unfolding(reading: _Reading) -> None:
    """How many subschemas one value may meet, and how deep, with references followed
    (a reference back to a schema on the way counts once: it repeats only as deep as the
    value goes)."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()
    root = id(reading.root)
    pending: list[tuple[int, bool]] = [(root, False)]
    while pending:
        node_id, children_done = pending.pop()
        edges = [*reading.nodes[node_id].same, *reading.nodes[node_id].inner]
        if not children_done:
            if node_id in size or node_id in on_path:
                continue
            on_path.add(node_id)
            pending.append((node_id, True))
            pending.extend((child, False) for child in edges if child not in size)
            continue
        on_path.discard(node_id)
        below = [child for child in edges if child in size]
        size[node_id] = min(MAX_UNFOLDED + 1, 1 + sum(size[child] for child in below))
        size[node_id] += len(edges) - len(below)
        depth[node_id] = 1 + max((depth[child] for child in below), default=0)
    if size.get(root, 0) > MAX_UNFOLDED:
        raise SchemaProblem(
            f"the schema unfolds to more than {MAX_UNFOLDED} subschemas through its references"
        )
    _check_nesting(depth.get(root, 0))


def _check_nesting(depth: int) -> None:
    if depth > MAX_NESTING:
        raise SchemaProblem(
            f"the schema nests more than {MAX_NESTING} levels deep through its references"
        )
