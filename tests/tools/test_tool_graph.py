"""The tool graph: what each tool needs and yields (read from its declarations, schema,
description and name), what worked examples show, and how strongly a piece names a tool."""

from __future__ import annotations

from typing import Any

import pytest

from planner_arm.config import ArmSpec, WorkedExample
from planner_arm.tools.graph import ToolGraph
from planner_arm.tools.traits import entity_key, name_parts, read_traits, tokens
from planner_arm.tools.words import ToolWords


def key(word: str) -> str:
    return entity_key(word)


@pytest.mark.parametrize(
    ("tool", "description", "needs", "yields"),
    [
        ("GetMovieCredit", "Get the cast and crew of a movie by its movie id", ["movie"], []),
        ("search_movie", "Search movies by title and return their ids", [], ["movie"]),
        ("search_movie", "Search movies by title, return ids", [], ["movie"]),
        ("GetCollectionImage", "Get the images of a collection by its ID", ["collection"], []),
        ("GetCollectionDetails", "Get collection details by id", ["collection"], ["detail"]),
        ("lookup_customer", "Look up a customer by email and return its ID", [], ["customer"]),
        ("get_orders", "List a customer's orders, given the customer id; returns their order ids",
         ["customer"], ["order"]),
        ("get_dish_id", "Get the dish ID based on the dish name", [], ["dish"]),
        ("checkout", "Pay what the previous Place Order call gave: 'Order ID'", ["order"], []),
        ("list_tables", "List the tables of a database with their row counts", [], ["table"]),
    ],
)  # fmt: skip
def test_a_description_says_what_a_tool_needs_and_yields(
    tool: str, description: str, needs: list[str], yields: list[str]
) -> None:
    traits = read_traits(ArmSpec(id=tool, description=description))
    assert list(traits.needs) == [key(word) for word in needs]
    assert list(traits.yields) == [key(word) for word in yields]


@pytest.mark.parametrize(
    ("name", "verb", "about"),
    [
        ("GetMovieCredit", "get", ["movie", "credit"]),
        ("flight_search", "search", ["flight"]),
        ("Image Search (by Image)", "search", ["image", "by", "image"]),
        ("weather", None, ["weather"]),
    ],
)
def test_a_name_says_what_the_tool_does_and_to_what(
    name: str, verb: str | None, about: list[str]
) -> None:
    assert name_parts(name) == (verb, about)


def test_a_schema_says_which_ids_a_tool_needs_the_required_ones_only() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"page": {}, "person_id": {}, "movieId": {}, "language": {}},
        "required": ["movieId", "person_id"],
    }
    traits = read_traits(ArmSpec(id="movie_cast", description="The cast", input_schema=schema))
    assert list(traits.needs) == [key("movie"), key("person")]
    optional = read_traits(
        ArmSpec(id="movie_cast", description="x", input_schema={**schema, "required": ["page"]})
    )
    assert optional.needs == ()
    # A bare `id` is an id of what the name is about.
    bare = {"type": "object", "properties": {"id": {}}}
    assert read_traits(ArmSpec(id="get_customer", description="x", input_schema=bare)).needs == (
        key("customer"),
    )


def test_declared_types_are_needs_but_only_ids_are_fetched() -> None:
    caption = read_traits(
        ArmSpec(id="caption", description="Describe", consumes=["image"], produces=["text"])
    )
    assert caption.needs == (key("image"),)
    assert caption.fetched == frozenset()  # a caller gives the image; no step is added for it
    refund = read_traits(ArmSpec(id="refund", description="Refund", consumes=["order_id"]))
    assert refund.fetched == {key("order")}


def test_a_name_suggests_a_need_only_for_what_the_set_identifies_and_finds() -> None:
    graph = ToolGraph.build(
        [
            ArmSpec(id="SearchCollection", description="Search for collections by name"),
            ArmSpec(id="GetCollectionDetails", description="Collection details by id"),
            ArmSpec(id="GetCollectionImages", description="The images of a collection"),
            ArmSpec(id="list_tables", description="List the tables of a database"),
            ArmSpec(id="describe_table", description="The columns of a table"),
            ArmSpec(id="flight_search", description="Flight search tool"),
            ArmSpec(id="book_flight", description="Flight booking tool"),
        ]
    )
    assert graph.traits["GetCollectionImages"].needs == (key("collection"),)
    assert graph.makers(key("collection")) == ("SearchCollection",)
    # No tool takes a table id: describing a table needs its name, not a listing.
    assert graph.traits["describe_table"].needs == ()
    # One books a flight that was found.
    assert graph.traits["book_flight"].needs == (key("flight"),)


# --- worked examples --------------------------------------------------------------------------

TOOLS = [ArmSpec(id=name, description=f"The {name} tool") for name in ("a", "b", "c")]


def example(*steps: tuple[str, list[int]]) -> WorkedExample:
    return WorkedExample.model_validate(
        {"request": "x", "steps": [{"tool": tool, "depends_on": deps} for tool, deps in steps]}
    )


def test_examples_over_other_tools_are_not_counted() -> None:
    graph = ToolGraph.build(TOOLS, [example(("a", []), ("b", [1])), example(("a", []), ("z", [1]))])
    assert graph.counts.examples == 1
    assert graph.link_count("a", "b") == 1
    assert graph.counts.calls == {"a": 1, "b": 1}


def test_the_usual_producer_is_the_one_most_calls_wait_for() -> None:
    often = [example(("a", []), ("b", [1]))] * 3 + [
        example(
            ("b", []),
        )
    ]
    assert ToolGraph.build(TOOLS, often).usual_producer("b") == "a"
    once = [example(("a", []), ("b", [1]))] + [
        example(
            ("b", []),
        )
    ] * 2
    assert ToolGraph.build(TOOLS, once).usual_producer("b") is None


def test_usually_linked_weighs_links_against_calls_close_together() -> None:
    linked = ToolGraph.build(TOOLS, [example(("a", []), ("b", [1]))] * 2)
    assert linked.usually_linked("a", "b")
    assert not linked.usually_linked("b", "a")
    apart = [example(("a", []), ("b", [1]))] + [example(("a", []), ("b", []))] * 3
    assert not ToolGraph.build(TOOLS, apart).usually_linked("a", "b")


def test_the_examples_habit_of_chaining() -> None:
    assert ToolGraph.build(TOOLS, [example(("a", []), ("b", [1]), ("c", [2]))]).chains()
    # c waits for a, not for b just before it: one of two later steps chained is not most.
    assert not ToolGraph.build(TOOLS, [example(("a", []), ("b", []), ("c", [1]))]).chains()
    assert not ToolGraph.build(TOOLS).chains()


def test_a_requests_examples_are_counted_on_a_copy() -> None:
    graph = ToolGraph.build(TOOLS, [example(("a", []), ("b", [1]))])
    more = graph.with_examples([example(("a", []), ("b", [1]))])
    assert more.link_count("a", "b") == 2
    assert graph.link_count("a", "b") == 1
    assert (
        graph.with_examples(
            [
                example(
                    ("z", []),
                )
            ]
        )
        is graph
    )


def test_examples_overrule_a_need_only_the_name_suggests() -> None:
    specs = [
        ArmSpec(id="flight_search", description="Flight search tool"),
        ArmSpec(id="book_flight", description="Flight booking tool"),
        ArmSpec(id="flight_status", description="Flight status"),
    ]
    never = [
        example(
            ("book_flight", []),
        )
    ] * 3
    assert ToolGraph.build(specs, never).doubts("book_flight", key("flight"))
    usual = [example(("flight_search", []), ("book_flight", [1]))] * 3
    assert not ToolGraph.build(specs, usual).doubts("book_flight", key("flight"))


# --- how strongly a piece names a tool --------------------------------------------------------

DESK = ToolWords(
    [
        ArmSpec(id="refund_order", description="Refund an order by its order id"),
        ArmSpec(id="list_orders", description="List a customer's orders"),
        ArmSpec(id="track_shipment", description="Track the delivery of an order"),
        ArmSpec(id="lookup_customer", description="Look up a customer by email"),
        ArmSpec(id="post_slack_message", description="Post a message to a Slack channel"),
    ]
)


def test_a_verb_that_is_only_a_word_of_another_action_names_the_tool_weakly() -> None:
    assert DESK.strength("order a pizza for the team", "refund_order") < 0.6
    assert DESK.strength("refund the most recent one", "refund_order") > 1.5


def test_a_verb_of_the_same_action_names_the_tool() -> None:
    assert DESK.strongest("find the customer jane@example.com", 1) == ["lookup_customer"]
    assert DESK.strength("find the customer", "lookup_customer") > DESK.strength(
        "the customer", "lookup_customer"
    )


def test_names_and_descriptions_in_any_script_are_read_as_words() -> None:
    assert tokens("chercher_données par film_id") == ["chercher", "données", "par", "film", "id"]
    traits = read_traits(ArmSpec(id="détails_film", description="Détails d'un film, film_id"))
    assert traits.about == (key("détails"), key("film"))


TIED = (
    "car_rental_query",
    "hotel_query",
    "flight_query",
    "train_query",
    "cruise_query",
    "tour_query",
)


@pytest.mark.parametrize("order", [TIED, TIED[::-1]], ids=["given", "reversed"])
def test_tools_a_piece_names_equally_come_in_the_set_s_order(order: tuple[str, ...]) -> None:
    # A tie is settled by the tools' places in the set, not by a set's order (which changes
    # with the process's hash seed): the same request gets the same plan in every process.
    specs = [ArmSpec(id=tool, description="Query the bookings") for tool in order]
    assert ToolWords(specs).strongest("query the bookings", 6) == list(order)
