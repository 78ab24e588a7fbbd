"""Plans over a tool set nobody wrote examples for: tools read for what they take, give and
change; producers that find, never write; every piece of a goal planned or named; and a few
worked examples as templates.

The set is a library's MCP server written with FastMCP (tests/support/library_server.py):
pydantic schemas with `$defs`, docstrings, no annotations.
"""

from __future__ import annotations

from typing import Any

import pytest

from planner_arm.config import ArmSpec, PlanningSettings, WorkedExample
from planner_arm.plan.draft import DraftPlan, split_note
from planner_arm.plan.schemas import PlanStep
from planner_arm.plan.tools import AnthropicTool, McpTool, arm_specs
from planner_arm.plan.validation import PlanRules, validate_plan
from planner_arm.tools.graph import ToolGraph
from planner_arm.tools.index import tool_resolver
from planner_arm.tools.planner import ToolPlanner
from planner_arm.tools.review import review_tool_plan
from planner_arm.tools.traits import read_traits
from support.library_server import listed_tools


@pytest.fixture(scope="module")
def library() -> list[ArmSpec]:
    return arm_specs([McpTool.model_validate(tool) for tool in listed_tools()])


def planner_for(specs: list[ArmSpec], examples: list[dict[str, Any]] = ()) -> ToolPlanner:  # type: ignore[assignment]
    worked = [WorkedExample.model_validate(example) for example in examples]
    return ToolPlanner.over(tool_resolver(specs), worked)


def plan(planner: ToolPlanner, goal: str, examples: list[dict[str, Any]] = ()) -> DraftPlan:  # type: ignore[assignment]
    worked = [WorkedExample.model_validate(example) for example in examples]
    draft = planner.plan(goal, max_steps=10, examples=worked)
    ids = tuple(arm.id for arm in planner.resolver.arms)
    validate_plan(draft, PlanRules.for_arms(PlanningSettings(), ids))
    return draft


def steps(draft: DraftPlan) -> list[tuple[str, list[int]]]:
    return [(step.required_arm, step.depends_on) for step in draft.steps]


def unplanned(draft: DraftPlan) -> list[str]:
    return [text for code, text in map(split_note, draft.warnings) if code == "goal_part_unplanned"]


WRITES = {"renew_loan", "place_hold", "notify_member"}


# --- reading the tools -------------------------------------------------------------------


def test_the_schemas_say_what_a_tool_takes_and_gives(library: list[ArmSpec]) -> None:
    traits = {spec.id: read_traits(spec) for spec in library}
    # "returns matching books with their book_id": given out, not asked for ("with" after
    # "returns"), and the output schema's `books[].book_id` behind a `$ref` says so too.
    assert traits["search_books"].needs == ()
    assert "book" in traits["search_books"].yields
    assert traits["get_book"].needs == ("book",)
    assert set(traits["place_hold"].needs) == {"book", "member"}
    # A result's field names are read through `$defs`.
    assert {"author", "titl"} <= traits["search_books"].fields
    assert "loan" in traits["list_loans"].yields


def test_writes_are_told_by_name_and_description_when_nothing_is_annotated(
    library: list[ArmSpec],
) -> None:
    assert {spec.id for spec in library if read_traits(spec).writes} == WRITES


def test_hints_outrank_the_words() -> None:
    def spec(name: str, hints: dict[str, bool]) -> ArmSpec:
        return ArmSpec(id=name, description="Does a thing", annotations=hints)

    assert read_traits(spec("renew_loan", {"readOnlyHint": True})).writes is False
    assert read_traits(spec("get_report", {"destructiveHint": True})).writes is True
    assert read_traits(spec("get_report", {"readOnlyHint": False})).writes is True
    assert read_traits(ArmSpec(id="report", description="Delete old rows")).writes is True


def test_a_write_is_never_made_a_producer() -> None:
    # The only tool that yields a ticket id creates tickets: a step that needs one is not
    # given a ticket created for it.
    specs = [
        ArmSpec(id="create_ticket", description="Create a ticket; returns its ticket id"),
        ArmSpec(id="get_ticket_status", description="Get the status of a ticket by its ticket id"),
    ]
    graph = ToolGraph.build(specs)
    assert graph.makers("ticket") == ()
    assert [
        tool for tool, _ in steps(plan(planner_for(specs), "What is the status of my ticket?"))
    ] == ["get_ticket_status"]


# --- the goals of an everyday set ------------------------------------------------------------


def test_a_named_thing_is_found_before_it_is_acted_on(library: list[ArmSpec]) -> None:
    draft = plan(
        planner_for(library),
        "Find the book Dune and place a hold on it for the member alice@example.com",
    )
    assert steps(draft) == [("search_books", []), ("find_member", []), ("place_hold", [1, 2])]


def test_no_piece_is_dropped(library: list[ArmSpec]) -> None:
    draft = plan(
        planner_for(library),
        "Renew every loan of bob@example.com and then notify him of the new due dates",
    )
    tools = [tool for tool, _ in steps(draft)]
    assert tools[-2:] == ["renew_loan", "notify_member"]
    assert unplanned(draft) == []


def test_a_read_only_goal_gets_no_write(library: list[ArmSpec]) -> None:
    for goal in [
        "Check whether The Hobbit is on the shelf at the Central branch, and list the loans "
        "of member M-2",
        "What are the loans of carol@example.com?",
        "Find books by Ursula Le Guin",
    ]:
        tools = {tool for tool, _ in steps(plan(planner_for(library), goal))}
        assert not tools & WRITES, goal
    draft = plan(planner_for(library), "What are the loans of carol@example.com?")
    assert steps(draft) == [("find_member", []), ("list_loans", [1])]


def test_work_no_tool_does_is_named_not_given_to_a_near_tool(library: list[ArmSpec]) -> None:
    draft = plan(
        planner_for(library), "Get the details of book B-300 and translate its summary into French"
    )
    assert steps(draft) == [("get_book", [])]
    assert unplanned(draft) == ["translate its summary into French"]
    draft = plan(
        planner_for(library),
        "Tell me who wrote Neuromancer and buy a copy from the bookshop next door",
    )
    assert steps(draft) == [("search_books", [])]
    assert unplanned(draft) == ["buy a copy from the bookshop next door"]


def test_questions_reach_the_tool_whose_result_answers_them(library: list[ArmSpec]) -> None:
    # "published" asks for a year, which only get_book's result holds; it needs a book id,
    # which the search finds.
    draft = plan(planner_for(library), "When was The Left Hand of Darkness published?")
    assert steps(draft) == [("search_books", []), ("get_book", [1])]


def test_a_piece_that_only_names_a_thing_takes_the_verb_before_it() -> None:
    specs = [
        ArmSpec(id="SearchMovie", description="Search for movies by their titles"),
        ArmSpec(id="GetMovieDetails", description="Get the details of a movie by its id"),
        ArmSpec(id="SearchCollection", description="Search for collections by name"),
        ArmSpec(id="GetCollectionDetails", description="Get collection details by id"),
        ArmSpec(id="GetMovieCredits", description="Get the cast and crew of a movie"),
        ArmSpec(id="GetTrendingMovies", description="Get the daily or weekly trending movies"),
    ]
    draft = plan(
        planner_for(specs), "Get the details of the Harry Potter collection and the cast of Titanic"
    )
    assert steps(draft) == [
        ("SearchCollection", []),
        ("GetCollectionDetails", [1]),
        ("SearchMovie", []),
        ("GetMovieCredits", [3]),
    ]
    # A producer the piece names is preferred to a finder.
    draft = plan(planner_for(specs), "Show the cast of this week's top trending movie")
    assert steps(draft) == [("GetTrendingMovies", []), ("GetMovieCredits", [1])]


# --- worked examples as templates ------------------------------------------------------------

EXAMPLES = [
    {
        "request": "Find the book Emma and tell me whether it is on the shelf at the North branch",
        "steps": [{"tool": "search_books"}, {"tool": "check_availability", "depends_on": [1]}],
    },
    {
        "request": "Remind member M-4 that the book Ulysses is overdue",
        "steps": [{"tool": "notify_member"}],
    },
    {
        "request": "Show the loans of dan@example.com",
        "steps": [{"tool": "find_member"}, {"tool": "list_loans", "depends_on": [1]}],
    },
]


def test_a_request_that_reads_like_an_example_is_planned_as_it(library: list[ArmSpec]) -> None:
    goal = "Find the book Dune and tell me whether it is on the shelf at the Riverside branch"
    draft = plan(planner_for(library), goal, EXAMPLES)
    assert steps(draft) == [("search_books", []), ("check_availability", [1])]
    assert "Dune" in draft.steps[0].action
    assert "Emma" not in draft.steps[0].action
    assert "worked example" in draft.rationale


def test_a_request_unlike_every_example_is_planned_from_its_pieces(library: list[ArmSpec]) -> None:
    goal = "Get the details of book B-300"
    draft = plan(planner_for(library), goal, EXAMPLES)
    assert steps(draft) == [("get_book", [])]
    assert "worked example" not in draft.rationale


# --- the review of a model's plan ------------------------------------------------------------


def model_step(number: int, tool: str, action: str, after: list[int]) -> PlanStep:
    return PlanStep(
        step=number,
        action=action,
        required_arm=tool,
        acceptance_criteria=["done"],
        depends_on=after,
        estimated_cost_tier=1,
        estimated_duration_seconds=5,
    )


MOVIES = [
    ArmSpec(id="SearchMovie", description="Search for movies by their titles"),
    ArmSpec(id="GetMovieDetails", description="Get the details of a movie by its id"),
    ArmSpec(id="SearchCollection", description="Search for collections by name"),
    ArmSpec(id="GetCollectionDetails", description="Get collection details by id"),
    ArmSpec(id="GetMovieCredits", description="Get the cast and crew of a movie"),
]


def test_the_review_adds_no_producer_where_the_model_linked_one() -> None:
    # A collection's details list its movies: the credits step the model has wait for them
    # gets no movie search in front of it.
    planner = planner_for(MOVIES)
    goal = "Show the cast of the first movie of the Alien collection"
    linked = [
        model_step(1, "SearchCollection", "Search for the Alien collection", []),
        model_step(2, "GetCollectionDetails", "Get the collection's details", [1]),
        model_step(3, "GetMovieCredits", "Get the cast of its first movie", [2]),
    ]
    review = review_tool_plan(linked, goal, planner, planner.graph, 10)
    assert [step.required_arm for step in review.steps] == [
        "SearchCollection",
        "GetCollectionDetails",
        "GetMovieCredits",
    ]
    assert not [note for note in review.repairs if note.startswith("producer_added")]
    # Unlinked, the movie id comes from nowhere: the finder is added.
    alone = [model_step(1, "GetMovieCredits", "Get the cast of Alien", [])]
    review = review_tool_plan(alone, "Show the cast of Alien", planner, planner.graph, 10)
    assert [step.required_arm for step in review.steps] == ["SearchMovie", "GetMovieCredits"]


def test_the_richer_mcp_shape_plans_no_worse_than_the_anthropic_shape(
    library: list[ArmSpec],
) -> None:
    # The same tools without their output schemas, as Anthropic's shape sends them.
    anthropic = arm_specs(
        [
            AnthropicTool.model_validate(
                {
                    "name": t["name"],
                    "description": t["description"],
                    "input_schema": t["inputSchema"],
                }
            )
            for t in listed_tools()
        ]
    )
    goals = [
        "Find the book Dune and place a hold on it for the member alice@example.com",
        "Get the details of the book Dune",
        "Check whether The Hobbit is on the shelf at the Central branch",
    ]
    for goal in goals:
        rich = steps(plan(planner_for(library), goal))
        assert rich == steps(plan(planner_for(anthropic), goal)), goal
        assert rich[0] == ("search_books", []), goal


def test_an_added_finder_looks_up_the_thing_not_another_arguments_value(
    library: list[ArmSpec],
) -> None:
    draft = plan(
        planner_for(library), "Check whether The Hobbit is on the shelf at the Central branch"
    )
    search = draft.steps[0]
    assert search.required_arm == "search_books"
    assert search.action.endswith(": The Hobbit")  # "Central" is the branch's, not the book's
    draft = plan(planner_for(library), "When was The Left Hand of Darkness published?")
    assert draft.steps[0].action.endswith(": The Left Hand of Darkness")


# --- reading requests ----------------------------------------------------------------------


def test_a_request_is_never_cut_inside_quotes() -> None:
    from planner_arm.plan.tools import request_pieces

    assert request_pieces("Is 'Pride and Prejudice' on the shelf at the Riverside branch?") == [
        "Is 'Pride and Prejudice' on the shelf at the Riverside branch?"
    ]
    assert request_pieces("If so, book it for patient P-3") == ["book it for patient P-3"]


def test_a_verb_no_list_has_is_told_by_what_follows_it(library: list[ArmSpec]) -> None:
    from planner_arm.tools.words import leading_verb

    assert leading_verb("fax the refill to his cardiologist") == "fax"
    assert leading_verb("Diagnose her rash from this photo") == "diagnose"
    assert leading_verb("tomorrow the weather") is None
    draft = plan(
        planner_for(library),
        "Look up the member carol@example.com, fax her the due dates and list her loans",
    )
    # A tool that lists does not fax, whatever words they share ("due dates").
    faxed = [step.required_arm for step in draft.steps if step.action.startswith("Fax")]
    assert "list_loans" not in faxed
    assert [tool for tool, _ in steps(draft)][-1] == "list_loans"


def test_a_read_verb_alone_names_no_tool(library: list[ArmSpec]) -> None:
    draft = plan(planner_for(library), "Find books by Ursula Le Guin and tell me the weather")
    assert steps(draft) == [("search_books", [])]
    assert unplanned(draft) == ["tell me the weather"]


def test_the_ids_a_piece_gives_choose_the_tool_that_takes_them() -> None:
    specs = [
        ArmSpec(id="search_doctors", description="Search doctors by specialty or city"),
        ArmSpec(
            id="get_doctor",
            description="A doctor's profile: specialty, languages and biography",
            input_schema={
                "type": "object",
                "properties": {"doctor_id": {"type": "string"}},
                "required": ["doctor_id"],
            },
        ),
        ArmSpec(
            id="get_appointment",
            description="An appointment: its doctor, place and time",
            input_schema={
                "type": "object",
                "properties": {"appointment_id": {"type": "string"}},
                "required": ["appointment_id"],
            },
        ),
    ]
    draft = plan(planner_for(specs), "What does doctor D-7 specialise in?")
    assert steps(draft) == [("get_doctor", [])]


def test_the_review_adds_no_second_link_for_what_a_step_is_already_fed(
    library: list[ArmSpec],
) -> None:
    # check_availability's result echoes the book id; place_hold already waits for the search.
    planner = planner_for(library)
    goal = "Find Dune, check it at the Eastside branch and put a hold on it for member M-3"
    model = [
        model_step(1, "search_books", "Find Dune", []),
        model_step(2, "check_availability", "Check it at the Eastside branch", [1]),
        model_step(3, "place_hold", "Put a hold on it for member M-3", [1]),
    ]
    review = review_tool_plan(model, goal, planner, planner.graph, 10)
    assert [step.depends_on for step in review.steps] == [[], [1], [1]]
    assert not [note for note in review.repairs if note.startswith("link_added")]
