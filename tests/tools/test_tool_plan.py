"""The rule-based plan over a caller's tools: the right tools for the pieces of a goal, the
steps that make what they need, links where one needs another, parallel pieces, and the
pieces no tool does named in a warning.

The tool sets are the hand-made ones of `benchmarks/data` (a support desk, a movie API, a
database and operations set), with no worked examples unless a test gives some.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner_arm.config import ArmSpec, PlanningSettings, WorkedExample
from planner_arm.plan.draft import DraftPlan, split_note
from planner_arm.plan.validation import PlanRules, validate_plan
from planner_arm.tools.index import ExampleIndex, tool_resolver
from planner_arm.tools.planner import ToolPlanner

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"


def tool_set(name: str) -> list[ArmSpec]:
    nodes = json.loads((DATA / name / "tools.json").read_text(encoding="utf-8"))["nodes"]
    return [ArmSpec(id=node["id"], description=node["desc"]) for node in nodes]


def planner_for(specs: Sequence[ArmSpec], examples: Sequence[dict[str, Any]] = ()) -> ToolPlanner:
    """The tool planner as a toolbox builds it: the examples' requests in the BM25 index and
    the examples counted in the tool graph."""
    worked = [WorkedExample.model_validate(example) for example in examples]
    notes = ExampleIndex(worked).notes([spec.id for spec in specs])
    resolver = tool_resolver(specs, notes=notes)
    return ToolPlanner.over(resolver, worked)


def plan(planner: ToolPlanner, goal: str) -> DraftPlan:
    draft = planner.plan(goal, max_steps=10)
    ids = tuple(arm.id for arm in planner.resolver.arms)
    rules = PlanRules.for_arms(PlanningSettings(), ids)
    validate_plan(draft, rules)  # every rule-based tool plan is a valid plan
    return draft


def steps(draft: DraftPlan) -> list[tuple[str, list[int]]]:
    return [(step.required_arm, step.depends_on) for step in draft.steps]


def unplanned(draft: DraftPlan) -> list[str]:
    return [
        detail for code, detail in map(split_note, draft.warnings) if code == "goal_part_unplanned"
    ]


DESK_PLANNER = planner_for(tool_set("support-desk"))


@pytest.fixture(scope="module")
def desk() -> ToolPlanner:
    return DESK_PLANNER


@pytest.fixture(scope="module")
def movies() -> ToolPlanner:
    return planner_for(tool_set("movie-api"))


@pytest.fixture(scope="module")
def ops() -> ToolPlanner:
    return planner_for(tool_set("db-ops"))


# --- pieces no tool does -------------------------------------------------------------------


def test_a_piece_no_tool_does_is_named_not_mapped_to_a_weak_match(desk: ToolPlanner) -> None:
    draft = plan(
        desk, "Post the outage notice to #status and order a pizza for the on-call engineers"
    )
    # "order" is a word of refund_order, list_orders and track_shipment, but none orders.
    assert steps(draft) == [("post_slack_message", [])]
    assert unplanned(draft) == ["order a pizza for the on-call engineers"]


@pytest.mark.parametrize(
    ("goal", "tools", "impossible"),
    [
        (
            "Close ticket T-4471 with the note 'replacement sent' and book a flight to Berlin",
            ["close_ticket"],
            "book a flight to Berlin",
        ),
        (
            "Restart the cache service and order new keyboards for the team",
            ["find_service", "restart_service"],
            "order new keyboards for the team",
        ),
    ],
)
def test_each_impossible_piece_is_named_beside_the_possible_ones(
    desk: ToolPlanner, ops: ToolPlanner, goal: str, tools: list[str], impossible: str
) -> None:
    planner = desk if tools == ["close_ticket"] else ops
    draft = plan(planner, goal)
    assert [tool for tool, _ in steps(draft)] == tools
    assert unplanned(draft) == [impossible]


def test_a_long_impossible_piece_is_named_cut_short(desk: ToolPlanner) -> None:
    wish = "order " + "a very large pizza with extra cheese " * 6
    draft = plan(desk, f"Post the outage notice to #status and {wish}")
    (detail,) = unplanned(draft)
    assert len(detail) == 80
    assert detail.endswith("…")
    assert wish.startswith(detail[:-1])


# --- producers: the steps that make what a tool needs ----------------------------------------


def test_each_step_waits_for_the_step_that_yields_what_it_needs(desk: ToolPlanner) -> None:
    draft = plan(
        desk,
        "Find the customer jane.doe@example.com, list her orders and refund the most recent one",
    )
    assert steps(draft) == [("lookup_customer", []), ("list_orders", [1]), ("refund_order", [2])]
    assert unplanned(draft) == []


def test_a_missing_producer_is_added_before_the_step_that_needs_it(desk: ToolPlanner) -> None:
    # The goal names neither the customer lookup nor the list of orders: refund_order needs
    # an order id (its description), which list_orders yields; that needs a customer_id.
    draft = plan(desk, "Refund the latest order of the customer bob@example.com")
    assert steps(draft) == [("lookup_customer", []), ("list_orders", [1]), ("refund_order", [2])]
    # The added steps say what they look for, after their tool's description.
    assert draft.steps[0].action == (
        "Look up a customer by email address or name and return the customer_id: bob@example.com"
    )


def test_an_id_the_goal_gives_needs_no_producer(desk: ToolPlanner, movies: ToolPlanner) -> None:
    assert steps(plan(movies, "Show the details of movie 603")) == [("GetMovieDetails", [])]
    assert steps(plan(desk, "Track the shipment of order 55012")) == [("track_shipment", [])]


def test_the_search_step_comes_from_descriptions_and_names_alone(movies: ToolPlanner) -> None:
    # GetCollectionImages says nothing of an id; other collection tools take one ("by id")
    # and SearchCollection finds collections, so the collection is searched first.
    draft = plan(movies, "Give me an image of the collection Star Wars")
    assert steps(draft) == [("SearchCollection", []), ("GetCollectionImages", [1])]
    assert draft.steps[0].action == "Search for collections by name: Star Wars"


def test_the_search_step_comes_from_a_schema_alone() -> None:
    def function(name: str, description: str, **properties: str) -> ArmSpec:
        schema = {
            "type": "object",
            "properties": {key: {"type": kind} for key, kind in properties.items()},
            "required": list(properties),
        }
        return ArmSpec(id=name, description=description, input_schema=schema)

    specs = [
        function("search_collection", "Search for collections by name", query="string"),
        function("collection_images", "The pictures of a collection", collection_id="integer"),
        function("search_movie", "Search for movies by title", query="string"),
        function("movie_reviews", "What critics wrote", movie_id="integer", page="integer"),
    ]
    draft = plan(planner_for(specs), "Give me the pictures of the Alien collection")
    assert steps(draft) == [("search_collection", []), ("collection_images", [1])]


def test_a_tool_whose_declared_input_nothing_provides_is_not_taken() -> None:
    specs = [
        ArmSpec(id="search_movie", description="Search movies by title and return their ids"),
        ArmSpec(id="GetMovieCredit", description="Get the cast and crew of a movie by its id"),
        ArmSpec(
            id="Image Search (by Image)",
            description="Find images similar to an image",
            consumes=["image"],
        ),
    ]
    planner = planner_for(specs)
    # "find" is a word of the image search alone, but nothing gives it an image.
    assert steps(plan(planner, "Find the movie, then list its cast")) == [
        ("search_movie", []),
        ("GetMovieCredit", [1]),
    ]
    assert steps(plan(planner, "Find pictures like this image")) == [
        ("Image Search (by Image)", [])
    ]


# --- links and parallel pieces ---------------------------------------------------------------


def test_independent_pieces_run_in_parallel(desk: ToolPlanner, ops: ToolPlanner) -> None:
    draft = plan(
        desk,
        "Post the maintenance window to #ops and send an email to the finance team about the "
        "invoice delay",
    )
    assert steps(draft) == [("post_slack_message", []), ("send_email", [])]
    draft = plan(ops, "Back up the analytics database and show the columns of the events table")
    assert steps(draft) == [("create_backup", []), ("describe_table", [])]


def test_two_steps_that_need_one_lookup_share_it_and_run_in_parallel(desk: ToolPlanner) -> None:
    draft = plan(
        desk, "Open a ticket for alice@example.com about her damaged parcel and give her a coupon"
    )
    assert steps(draft) == [("lookup_customer", []), ("create_ticket", [1]), ("issue_coupon", [1])]


@pytest.mark.parametrize(
    ("goal", "expected"),
    [
        # "then": after the logs, and after the lookup whose id it needs.
        (
            "Show the latest logs of the payments service, then restart it",
            [("find_service", []), ("tail_logs", [1]), ("restart_service", [1, 2])],
        ),
        # "it" refers to the backup.
        (
            "Back up the orders database and restore it on staging",
            [("create_backup", []), ("restore_backup", [1])],
        ),
    ],
)
def test_a_piece_the_goal_puts_after_another_waits_for_it(
    ops: ToolPlanner, goal: str, expected: list[tuple[str, list[int]]]
) -> None:
    assert steps(plan(ops, goal)) == expected


def test_a_message_waits_for_the_work_it_reports(desk: ToolPlanner) -> None:
    draft = plan(
        desk,
        "Search the help centre for articles about password resets and post the best one to "
        "#support",
    )
    assert steps(draft) == [("search_help_articles", []), ("post_slack_message", [1])]


# --- what worked examples teach --------------------------------------------------------------

PANTRY = [
    ArmSpec(id="check_stock", description="Check how much of an item is left in the pantry"),
    ArmSpec(id="order_groceries", description="Order groceries for delivery"),
    ArmSpec(id="plan_meals", description="Plan the meals of a week"),
]
PANTRY_GOAL = "Plan the meals of next week and order groceries for delivery"


def test_the_examples_link_what_the_tools_alone_leave_parallel() -> None:
    assert steps(plan(planner_for(PANTRY), PANTRY_GOAL)) == [
        ("plan_meals", []),
        ("order_groceries", []),
    ]
    examples = [
        {
            "request": "Plan my meals for the week, then get what they need delivered",
            "steps": [{"tool": "plan_meals"}, {"tool": "order_groceries", "depends_on": [1]}],
        },
        {
            "request": "Order what I need to cook",
            "steps": [
                {"tool": "check_stock"},
                {"tool": "plan_meals"},
                {"tool": "order_groceries", "depends_on": [2]},
            ],
        },
    ]
    assert steps(plan(planner_for(PANTRY, examples), PANTRY_GOAL)) == [
        ("plan_meals", []),
        ("order_groceries", [1]),
    ]


def test_the_tool_the_examples_always_show_first_is_added() -> None:
    examples = [
        {
            "request": f"Order {item} for delivery",
            "steps": [{"tool": "check_stock"}, {"tool": "order_groceries", "depends_on": [1]}],
        }
        for item in ("milk", "eggs", "rice")
    ]
    goal = "Order coffee beans for delivery"
    assert steps(plan(planner_for(PANTRY), goal)) == [("order_groceries", [])]
    assert steps(plan(planner_for(PANTRY, examples), goal)) == [
        ("check_stock", []),
        ("order_groceries", [1]),
    ]


def test_a_requests_own_examples_count_like_the_configured_ones() -> None:
    own = [
        WorkedExample.model_validate(
            {
                "request": "Plan my meals, then order what they need",
                "steps": [{"tool": "plan_meals"}, {"tool": "order_groceries", "depends_on": [1]}],
            }
        )
    ]
    planner = planner_for(PANTRY)
    draft = planner.plan(PANTRY_GOAL, max_steps=10, examples=own)
    assert steps(draft) == [("plan_meals", []), ("order_groceries", [1])]
    assert steps(planner.plan(PANTRY_GOAL, max_steps=10)) == [
        ("plan_meals", []),
        ("order_groceries", []),
    ]


def test_a_requests_examples_do_not_weaken_the_tools_own_words(desk: ToolPlanner) -> None:
    # Only the configured examples describe the tools in the BM25 index; a request's own
    # examples count in the graph but leave the weight of the tools' own words as it is:
    # "open" asks for the ticket tool's action, not for a refund.
    own = [
        WorkedExample.model_validate(
            {"request": "Tell #ops", "steps": [{"tool": "post_slack_message"}]}
        )
    ]
    goal = "Open a note on the refund"
    expected = [("lookup_customer", []), ("create_ticket", [1])]
    assert steps(desk.plan(goal, max_steps=10)) == expected
    assert steps(desk.plan(goal, max_steps=10, examples=own)) == expected


def test_examples_that_chain_their_steps_chain_independent_pieces() -> None:
    examples = [
        {
            "request": "Check the rice and plan the week",
            "steps": [{"tool": "check_stock"}, {"tool": "plan_meals", "depends_on": [1]}],
        }
    ]
    goal = "Check how much rice is left and plan the meals of the week"
    assert steps(plan(planner_for(PANTRY), goal)) == [("check_stock", []), ("plan_meals", [])]
    chained = steps(plan(planner_for(PANTRY, examples), goal))
    assert chained == [("check_stock", []), ("plan_meals", [1])]


# --- one tool, once or for each thing --------------------------------------------------------


def test_a_tool_is_used_again_only_for_another_thing(movies: ToolPlanner) -> None:
    twice = plan(movies, "Find the movie Heat and find the movie Alien")
    assert [tool for tool, _ in steps(twice)] == ["SearchMovie", "SearchMovie"]
    once = plan(movies, "Find the movie Heat and look the movie up by its title")
    assert [tool for tool, _ in steps(once)] == ["SearchMovie"]


# --- actions ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("goal", "action"),
    [
        (
            "How many rows does each table have?",
            "Find out how many rows each table has with list_tables",
        ),
        (
            "What is the health of the search service?",
            "Find out what the health of the search service is with service_status",
        ),
        ("Restart the billing service", "Restart the billing service with restart_service"),
    ],
)
def test_actions_are_instructions_that_name_their_tool(
    ops: ToolPlanner, goal: str, action: str
) -> None:
    assert plan(ops, goal).steps[-1].action == action


def test_no_action_reads_call_x_to(desk: ToolPlanner, ops: ToolPlanner) -> None:
    drafts = [
        plan(desk, "Where is the last order of carol@example.com? Email her the tracking status"),
        plan(ops, "When was the billing service restarted?"),
    ]
    actions = [step.action for draft in drafts for step in draft.steps]
    assert actions
    assert not any(action.startswith("Call ") for action in actions)


# --- any goal ------------------------------------------------------------------------------

WORDS = st.sampled_from(
    [
        "find", "the", "customer", "and", "then", "refund", "it", "order", "a", "pizza", "post",
        "#status", "please", "42", "Bob", "?", ",", ".", "list", "orders", "of", "ticket",
        "T-1", "close", "email", "her", "I", "need", "to", "movie", "über", "données",
    ]
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    goal=st.one_of(st.text(min_size=1), st.lists(WORDS, min_size=1, max_size=40).map(" ".join)),
    max_steps=st.integers(1, 10),
)
def test_any_goal_gives_a_valid_tool_plan_within_the_bound(goal: str, max_steps: int) -> None:
    planner = DESK_PLANNER
    draft = planner.plan(goal, max_steps=max_steps)
    assert 1 <= len(draft.steps) <= max_steps
    ids = tuple(arm.id for arm in planner.resolver.arms)
    rules = PlanRules.for_arms(PlanningSettings(tool_max_steps=max_steps), ids)
    valid = validate_plan(draft, rules)
    assert [step.depends_on for step in valid.steps] == [step.depends_on for step in draft.steps]
    for code, detail in map(split_note, draft.warnings):
        assert code == "goal_part_unplanned"
        assert 0 < len(detail) <= 80
