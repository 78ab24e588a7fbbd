"""References into an earlier step's result: the rule-based input names the field an argument
takes (`{{steps.1.output.books[0].book_id}}`) when the producing tool's output schema has
exactly one of that name, else the whole output; and the input check refuses a path the
schema says names nothing."""

from __future__ import annotations

from typing import Any

import pytest

from planner_arm.errors import PlanValidationError
from planner_arm.limits import ArmSpec
from planner_arm.plan.inputs import check_input
from planner_arm.plan.output_fields import OutputFields
from planner_arm.plan.schemas import PlanStep
from planner_arm.plan.tool_inputs import ToolSchema, check_tool_input, tool_schema
from planner_arm.plan.tools import McpTool, arm_specs
from planner_arm.tools.arguments import rule_tool_input
from support.library_server import listed_tools


@pytest.fixture(scope="module")
def library() -> dict[str, ArmSpec]:
    specs = arm_specs([McpTool.model_validate(tool) for tool in listed_tools()])
    return {spec.id: spec for spec in specs}


def step(number: int, tool: str, action: str, depends_on: list[int] = ()) -> PlanStep:  # type: ignore[assignment]
    return PlanStep(
        step=number,
        action=action,
        required_arm=tool,
        acceptance_criteria=["done"],
        depends_on=list(depends_on),
        estimated_cost_tier=1,
        estimated_duration_seconds=5,
    )


def checkable(schema: Any) -> ToolSchema:
    checked = tool_schema(schema)
    assert checked is not None
    return checked


def fields(schema: dict[str, Any]) -> OutputFields:
    found = OutputFields.of(schema)
    assert found is not None
    return found


def filled(
    tool: dict[str, Any] | ArmSpec, earlier: list[tuple[PlanStep, dict[str, Any] | None]]
) -> dict[str, Any]:
    """The rule's arguments for a step of `tool` after the `earlier` steps (each with its
    tool's output schema, None: the tool has none)."""
    spec = tool if isinstance(tool, ArmSpec) else ArmSpec.model_validate(tool)
    steps = [item for item, _ in earlier]
    own = step(len(steps) + 1, spec.id, f"Use {spec.id}", [item.step for item in steps])
    outputs = {
        item.step: fields(schema) for item, schema in earlier if schema is not None
    }  # fmt: skip
    return rule_tool_input(own, checkable(spec.input_schema), None, {}, steps, outputs)


# An output with one `book_id`, two levels down, through `anyOf` and `$ref` as pydantic
# writes an optional nested model.
SHELF_OUTPUT = {
    "$defs": {
        "Copy": {"type": "object", "properties": {"book_id": {"type": "string"}}},
        "Shelf": {
            "type": "object",
            "properties": {"copy": {"anyOf": [{"$ref": "#/$defs/Copy"}, {"type": "null"}]}},
        },
    },
    "type": "object",
    "properties": {"shelf": {"allOf": [{"$ref": "#/$defs/Shelf"}]}, "label": {"type": "string"}},
}
BY_ID = {
    "name": "get_book",
    "description": "Get a book by its id",
    "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
}


def test_an_id_argument_names_the_field_of_that_name_in_the_list_a_search_gives(
    library: dict[str, ArmSpec],
) -> None:
    search = library["search_books"]
    member = library["find_member"]
    earlier = [
        (step(1, "search_books", "Search the catalogue for Dune"), search.output_schema),
        (step(2, "find_member", "Look up the member"), member.output_schema),
    ]
    arguments = filled(library["place_hold"], earlier)
    assert arguments == {
        "book_id": "{{steps.1.output.books[0].book_id}}",
        "member_id": "{{steps.2.output.member_id}}",
    }


def test_a_nested_field_is_named_through_refs_and_optional_branches() -> None:
    hold = {
        "name": "reserve_copy",
        "description": "Reserve a copy of a book",
        "inputSchema": {
            "type": "object",
            "properties": {"book_id": {"type": "string"}},
            "required": ["book_id"],
        },
    }
    earlier = [(step(1, "find_shelf", "Find the shelf of the book"), SHELF_OUTPUT)]
    assert filled(hold, earlier) == {"book_id": "{{steps.1.output.shelf.copy.book_id}}"}


def test_a_bare_id_takes_the_id_of_its_noun() -> None:
    listing = {
        "type": "object",
        "properties": {
            "books": {
                "type": "array",
                "items": {"type": "object", "properties": {"id": {"type": "string"}}},
            },
            "member": {"type": "object", "properties": {"id": {"type": "string"}}},
        },
    }
    earlier = [(step(1, "search_books", "Search the catalogue"), listing)]
    assert filled(BY_ID, earlier) == {"id": "{{steps.1.output.books[0].id}}"}


@pytest.mark.parametrize(
    "output",
    [
        None,  # no output schema: nothing to read
        {"type": "object", "properties": {"title": {"type": "string"}}},  # no such field
        {  # two fields of the name: which one is not the rule's to guess
            "type": "object",
            "properties": {
                "book_id": {"type": "string"},
                "related": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"book_id": {"type": "string"}}},
                },
            },
        },
    ],
)
def test_without_exactly_one_field_of_the_name_the_whole_output_is_named(
    library: dict[str, ArmSpec], output: dict[str, Any] | None
) -> None:
    earlier = [(step(1, "search_books", "Search the catalogue for Dune"), output)]
    arguments = filled(library["get_book"], earlier)
    assert arguments == {"book_id": "{{steps.1.output}}"}


def test_a_path_the_output_schema_lacks_is_an_invalid_input(library: dict[str, ArmSpec]) -> None:
    schema = checkable(library["place_hold"].input_schema)
    outputs = {2: fields(library["search_books"].output_schema or {})}
    earlier = frozenset({2})

    def problems(book_id: str) -> list[str]:
        data = {"book_id": book_id, "member_id": "M-1"}
        try:
            check_tool_input(schema, data, earlier, outputs)
        except PlanValidationError as error:
            return error.errors
        return []

    assert problems("{{steps.2.output.books[0].book_id}}") == []
    assert problems("{{steps.2.output}}") == []
    assert problems("{{steps.2.output.isbn}}") == [
        "steps.2.output has no field 'isbn' (it has books)"
    ]
    assert problems("{{steps.2.output.books[0].isbn}}") == [
        "steps.2.output.books[0] has no field 'isbn' (it has book_id, title, author)"
    ]
    assert problems("{{steps.2.output.books.book_id}}") == [
        "steps.2.output.books is a list: name an item first (steps.2.output.books[0].book_id)"
    ]
    assert problems("{{steps.2.output[0]}}") == [
        "steps.2.output is an object, not a list: name one of its fields"
    ]
    # A step whose tool has no output schema: the path is only read for its syntax.
    assert check_tool_input(schema, {"book_id": "{{steps.2.output.isbn}}", "member_id": "M"},
                            earlier, {}) is not None  # fmt: skip


def test_an_open_object_takes_any_field_and_an_arm_input_is_checked_the_same_way() -> None:
    open_output = fields({"type": "object", "additionalProperties": {"type": "string"}})
    closed = fields({"type": "object", "additionalProperties": False})
    data = {"instruction": "Summarise {{steps.1.output.anything}}", "inputs_from": [1]}
    assert check_input("writer", data, frozenset({1}), {1: open_output})["inputs_from"] == [1]
    with pytest.raises(PlanValidationError) as refused:
        check_input("writer", data, frozenset({1}), {1: closed})
    assert refused.value.errors == ["steps.1.output has no field 'anything' (it has none)"]


def test_the_fields_are_listed_as_paths_within_a_length() -> None:
    found = fields(SHELF_OUTPUT)
    # The fields that hold others are not listed: the paths through them are.
    assert found.listing(200) == "label, shelf.copy.book_id"
    assert found.listing(14) == "label, …"
    listing = {
        "type": "object",
        "properties": {
            "books": {
                "type": "array",
                "items": {"$ref": "#/$defs/Book"},
            }
        },
        "$defs": {"Book": {"type": "object", "properties": {"book_id": {}, "title": {}}}},
    }
    assert fields(listing).listing(200) == "books[].book_id, books[].title"


def test_a_schema_that_refers_to_itself_is_read_within_the_bounds() -> None:
    tree = {
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                },
            }
        },
        "$ref": "#/$defs/Node",
    }
    found = fields(tree).fields
    assert 0 < len(found) <= 200
    assert max(len(item.path) for item in found) <= 12


def test_a_value_that_is_one_reference_stands_for_a_value_of_any_type() -> None:
    credits = {
        "name": "get_movie_credits",
        "description": "The cast of a movie, by its movie id",
        "inputSchema": {
            "type": "object",
            "properties": {"movie_id": {"type": "integer"}, "limit": {"type": "integer"}},
            "required": ["movie_id"],
        },
    }
    found = {"type": "object", "properties": {"results": {"type": "array", "items": {
        "type": "object", "properties": {"movie_id": {"type": "integer"}}}}}}  # fmt: skip
    earlier = [(step(1, "search_movie", "Search for Heat"), found)]
    assert filled(credits, earlier) == {"movie_id": "{{steps.1.output.results[0].movie_id}}"}
    schema = checkable(credits["inputSchema"])
    with pytest.raises(PlanValidationError) as refused:
        check_tool_input(schema, {"movie_id": "{{steps.1.output}} and more"}, frozenset({1}))
    assert refused.value.errors == [
        "movie_id: '{{steps.1.output}} and more' is not of type 'integer'"
    ]
