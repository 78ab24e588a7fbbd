"""A caller's JSON Schema read as data, and values checked against it at a cost the caller
cannot choose: references within the schema only (pointers, anchors, escaped names), no
reference loop on one value, bounded size, unfolding and nesting; no regular expression of the
caller's run, `uniqueItems` in one pass, every check within one request's budget, and no
schema or value, however odd, that makes a check raise."""

from __future__ import annotations

import re
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from planner_arm.config import ConfigError, load_settings
from planner_arm.limits import ArmSpec
from planner_arm.plan.tool_inputs import (
    MAX_VALUE_DEPTH,
    CheckBudget,
    ToolSchema,
    check_tool_input,
    tool_schema,
)
from planner_arm.strategies.specialize import tool_schemas
from planner_arm.tool_schema import MAX_NESTING, MAX_SCHEMA_NODES, schema_problem


def checkable(schema: dict[str, Any], budget: CheckBudget | None = None) -> ToolSchema:
    checked = tool_schema(schema, budget)
    assert checked is not None
    return checked


@pytest.mark.parametrize(
    "schema",
    [
        {"$defs": {"a/b~c": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/a~1b~0c"}}},
        {
            "$defs": {"with space": {"type": "string"}},
            "properties": {"x": {"$ref": "#/$defs/with%20space"}},
        },
        {
            "$defs": {"U": {"$anchor": "unit", "enum": ["c"]}},
            "properties": {"x": {"$ref": "#unit"}},
        },
        {"properties": {"x": {"$dynamicRef": "#node"}}, "$dynamicAnchor": "node"},
        {
            "definitions": {"U": {"type": "integer"}},
            "properties": {"x": {"$ref": "#/definitions/U"}},
        },
        {"properties": {"x": {"type": "array", "items": {"$ref": "#"}}}},
        # $id names the schema; references still point into this document.
        {
            "$id": "https://tools.example/weather",
            "$defs": {"U": {}},
            "properties": {"u": {"$ref": "#/$defs/U"}},
        },
        # A reference into a place no keyword reads as a schema is followed all the same.
        {"x-parts": {"U": {"type": "string"}}, "properties": {"u": {"$ref": "#/x-parts/U"}}},
        # A reference written as data (a default, an example) is data.
        {"properties": {"u": {"default": {"$ref": "https://elsewhere.example/u"}}}},
    ],
)
def test_references_within_the_schema_are_followed(schema: dict[str, Any]) -> None:
    assert schema_problem(schema) is None
    assert tool_schema(schema) is not None


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ({"$ref": "https://schemas.example/tool.json"}, "points outside the schema"),
        ({"$ref": "/etc/passwd"}, "points outside the schema"),
        ({"$ref": "#/$defs/Missing"}, "points at nothing"),
        ({"$ref": "#/properties/x/type", "properties": {"x": {"type": "string"}}}, "not a schema"),
        ({"$ref": 7}, "$ref at # is not a string"),
        ({"$ref": "#"}, "a reference cycle never reaches into the value"),
        ({"$defs": {"A": {"not": {"$ref": "#/$defs/A"}}}, "$ref": "#/$defs/A"}, "reference cycle"),
        # A reference inside a definition nobody uses is refused too: it is the caller's data.
        ({"$defs": {"Unused": {"$ref": "http://127.0.0.1:9/x"}}}, "points outside the schema"),
    ],
)
def test_a_reference_that_leaves_points_nowhere_or_loops_is_refused(
    schema: dict[str, Any], says: str
) -> None:
    problem = schema_problem(schema)
    assert problem is not None
    assert says in problem
    assert tool_schema(schema) is None


def test_the_size_unfolding_and_nesting_of_a_schema_are_bounded() -> None:
    wide = {"type": "object", "properties": {f"p{n}": {} for n in range(MAX_SCHEMA_NODES)}}
    assert "more than 5000 subschemas" in (schema_problem(wide) or "")
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(MAX_NESTING + 1):
        deep = {"type": "object", "properties": {"x": deep}}
    assert "nests more than" in (schema_problem(deep) or "")


def test_a_tool_or_a_configured_arm_with_a_remote_reference_is_refused_when_read() -> None:
    remote = {"type": "object", "properties": {"u": {"$ref": "http://127.0.0.1:9/u.json"}}}
    with pytest.raises(ValidationError, match="points outside the schema"):
        ArmSpec.model_validate({"name": "weather", "outputSchema": remote})
    with pytest.raises(ConfigError, match=r"arms\.0\.input_schema: \$ref .* points outside"):
        load_settings(arms=[{"id": "weather", "description": "Weather", "input_schema": remote}])


def test_a_property_is_checked_where_it_stands_in_the_whole_schema() -> None:
    schema = {
        "$defs": {"Unit": {"enum": ["c", "f"], "type": "string"}},
        "type": "object",
        "properties": {"unit": {"$ref": "#/$defs/Unit"}, "parent": {"$ref": "#"}},
    }
    checked = checkable(schema)
    assert checked.fits(schema["properties"]["unit"], "c")
    assert not checked.fits(schema["properties"]["unit"], "k")
    assert checked.fits(schema["properties"]["parent"], {"unit": "f", "parent": {}})
    assert checked.resolved(schema["properties"]["unit"])["enum"] == ["c", "f"]


def test_no_regular_expression_of_the_callers_is_run(monkeypatch: pytest.MonkeyPatch) -> None:
    evil = "^(a+)+$"
    ran: list[str] = []
    search = re.search

    def spy(pattern: Any, text: Any, *args: Any) -> Any:
        ran.append(str(pattern))
        return search(pattern, text, *args)

    monkeypatch.setattr(re, "search", spy)
    schema = {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": evil}},
        "patternProperties": {evil: {"type": "integer"}},
        "propertyNames": {"pattern": evil},
        "additionalProperties": False,
        "unevaluatedProperties": False,
    }
    problems = checkable(schema).problems({"code": "a" * 40 + "b", "a" * 40 + "b": 1})
    assert problems == []
    assert not [pattern for pattern in ran if evil in pattern]


def test_additional_properties_still_hold_without_patterns() -> None:
    schema = {"type": "object", "properties": {"a": {}}, "additionalProperties": False}
    assert checkable(schema).problems({"a": 1, "b": 2}) == [
        "input: Additional properties are not allowed ('b' unexpected)"
    ]
    typed = {"type": "object", "additionalProperties": {"type": "integer"}}
    assert checkable(typed).problems({"n": "x"}) == ["n: 'x' is not of type 'integer'"]


def test_unique_items_is_one_pass_over_items_that_do_not_sort(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compared = 0
    equal = jsonschema._utils.equal

    def counted(one: Any, two: Any) -> bool:
        nonlocal compared
        compared += 1
        assert compared < 100_000, "items compared pair by pair"
        return bool(equal(one, two))

    monkeypatch.setattr(jsonschema._utils, "equal", counted)
    schema = {"type": "object", "properties": {"xs": {"type": "array", "uniqueItems": True}}}
    checked = checkable(schema)
    distinct = [{"n": n, "tags": [n, str(n)]} for n in range(5_500)]
    assert checked.problems({"xs": distinct}) == []
    again = [*distinct, {"tags": [7, "7"], "n": 7.0}]
    assert checked.problems({"xs": again}) == [
        "xs: item {'tags': [7, '7'], 'n': 7.0} appears more than once"
    ]
    # As JSON Schema compares: true is not 1, an object's keys have no order.
    assert checked.problems({"xs": [True, 1, {"a": 1, "b": 2}, {"b": 2, "a": 1}]}) == [
        "xs: item {'b': 2, 'a': 1} appears more than once"
    ]


def _fan_out() -> dict[str, Any]:
    # Passes every bound when read (the reference back to N descends into the value), yet
    # doubles at each level of the value it checks.
    node = {"allOf": [{"$ref": "#/$defs/N"}, {"$ref": "#/$defs/N"}]}
    return {
        "type": "object",
        "$defs": {"N": {"type": "object", "properties": {"a": node}}},
        "properties": {"x": {"$ref": "#/$defs/N"}},
    }


def _nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"a": value}
    return value


def test_a_check_stops_at_the_requests_budget() -> None:
    checked = checkable(_fan_out())
    assert checked.problems({"x": _nested(3)}) == []
    assert checked.problems({"x": _nested(30)}) == [
        "input: the tool's schema costs more to check than a request may spend"
    ]
    assert checked.budget.steps < 0


def test_the_tools_of_one_request_share_one_budget() -> None:
    arms = [
        ArmSpec(id="fan", description="Fan out", input_schema=_fan_out()),
        ArmSpec(id="plain", description="Plain", input_schema={"type": "object"}),
    ]
    schemas = tool_schemas(arms, {"fan", "plain"})
    schemas["fan"].problems({"x": _nested(30)})
    assert schemas["plain"].problems({}) == [
        "input: the tool's schema costs more to check than a request may spend"
    ]
    with pytest.raises(Exception, match="costs more to check"):
        check_tool_input(schemas["plain"], {}, frozenset())


def test_a_value_nested_too_deep_is_a_problem_not_a_crash() -> None:
    checked = checkable({"type": "object", "properties": {"x": {"$ref": "#"}}})
    deep: dict[str, Any] = {}
    for _ in range(5_000):
        deep = {"x": deep}
    assert checked.problems(deep) == [f"input: nests deeper than {MAX_VALUE_DEPTH} levels"]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4)
    ),
    max_leaves=20,
)
_REFS = st.sampled_from(
    ["#", "#/$defs/a", "#/$defs/b", "#/$defs/zz", "#x", "http://h/x", "#/properties"]
)


def _schemas(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    keyword = st.sampled_from(
        ["type", "enum", "const", "minimum", "multipleOf", "maxLength", "minItems",
         "uniqueItems", "required", "additionalProperties", "items", "not", "pattern",
         "contains", "propertyNames", "dependentRequired", "if", "then", "else"]
    )  # fmt: skip
    values = _JSON | inner | st.sampled_from(["string", "object", "array", 0, -1, 0.5, 1e308])
    return st.one_of(
        st.dictionaries(keyword, values, max_size=4),
        st.fixed_dictionaries({"$ref": _REFS}),
        st.fixed_dictionaries({"allOf": st.lists(inner, max_size=3)}),
        st.fixed_dictionaries({"anyOf": st.lists(inner, max_size=3)}),
        st.fixed_dictionaries(
            {"properties": st.dictionaries(st.text(max_size=3), inner, max_size=3)}
        ),
        st.booleans(),
    )


_SCHEMA = st.recursive(st.fixed_dictionaries({"type": st.just("string")}), _schemas, max_leaves=12)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.fixed_dictionaries(
        {
            "type": st.just("object"),
            "properties": st.dictionaries(st.text(max_size=3), _SCHEMA, max_size=3),
        },
        optional={"$defs": st.fixed_dictionaries({"a": _SCHEMA, "b": _SCHEMA})},
    ),
    _JSON,
)
def test_no_schema_nor_value_makes_a_check_raise(schema: dict[str, Any], value: Any) -> None:
    checked = tool_schema(schema)
    if checked is None:
        return
    problems = checked.problems({"v": value, **(value if isinstance(value, dict) else {})})
    assert all(isinstance(problem, str) for problem in problems)
    for spec in checked.properties.values():
        assert checked.fits(spec, value) in (True, False)
