"""A tool step's arguments by rule (no model), over schemas written the everyday way: pydantic
parameters (`$defs`, enums by reference, optional values as `anyOf` with null, `Annotated`
descriptions, `format: email`). Each argument takes the value its step's own words give (an
e-mail address, an id after its noun or by its prefix, a title next to its noun, what a
search looks for), never one another part of the goal gives to another step."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import jsonschema
import pytest
from pydantic import Field, create_model

from planner_arm.plan.schemas import PlanStep
from planner_arm.plan.tool_inputs import ToolSchema, tool_schema
from planner_arm.tools.arguments import rule_tool_input

Email = Annotated[str, Field(json_schema_extra={"format": "email"})]


class Language(StrEnum):
    ENGLISH = "English"
    FRENCH = "French"
    GERMAN = "German"


class LanguageCode(StrEnum):
    EN = "en"
    FR = "fr"


class Specialty(StrEnum):
    CARDIOLOGY = "cardiology"
    DERMATOLOGY = "dermatology"
    PEDIATRICS = "pediatrics"


def params(**fields: Any) -> dict[str, Any]:
    """The input schema FastMCP gives a function with these parameters."""
    return create_model("Arguments", **fields).model_json_schema()


LIBRARY = {
    "search_books": params(
        query=(Annotated[str, Field(description="Title, author or keyword")], ...),
        limit=(int, 10),
    ),
    "get_book": params(book_id=(str, ...)),
    "find_member": params(email=(Email, ...)),
    "place_hold": params(book_id=(str, ...), member_id=(str, ...)),
    "list_loans": params(member_id=(str, ...)),
    "check_availability": params(
        book_id=(str, ...), branch=(Annotated[str, Field(description="Branch name")], ...)
    ),
    "translate_text": params(text=(str, ...), target_language=(Language, ...)),
    "translate_summary": params(book_id=(str, ...), target=(LanguageCode, ...)),
}
CLINIC = {
    "find_patient": params(
        contact=(Annotated[str, Field(description="The patient's e-mail address")], ...)
    ),
    "get_patient": params(patient_id=(str, ...)),
    "search_doctors": params(
        specialty=(Specialty, ...), city=(Annotated[str | None, Field(description="City")], None)
    ),
    "book_appointment": params(patient_id=(str, ...), doctor_id=(str, ...), reason=(str, ...)),
    "send_reminder": params(
        phone=(Annotated[str, Field(description="Mobile phone number")], ...),
        message=(str, ...),
        language=(Language | None, None),
    ),
}
SHOP = {
    "search_products": params(q=(str, ...), max_price=(float | None, None)),
    "get_order": params(id=(str, ...)),
    "add_to_cart": params(
        product_id=(str, ...),
        quantity=(Annotated[int, Field(description="How many items", ge=1)], 1),
    ),
    "track_parcel": params(
        tracking_url=(Annotated[str, Field(json_schema_extra={"format": "uri"})], ...)
    ),
    "find_store": params(name=(str, ...)),
}


def step(tool: str, action: str, depends_on: list[int] | None = None, number: int = 3) -> PlanStep:
    return PlanStep(
        step=number,
        action=action,
        required_arm=tool,
        acceptance_criteria=["done"],
        depends_on=depends_on or [],
    )


def filled(
    schemas: dict[str, dict[str, Any]],
    tool: str,
    action: str,
    goal: str,
    depends_on: list[int] | None = None,
    earlier: list[PlanStep] | None = None,
) -> dict[str, Any]:
    checked = tool_schema(schemas[tool])
    assert isinstance(checked, ToolSchema)
    value = rule_tool_input(step(tool, action, depends_on), checked, goal, {}, earlier or [])
    if "needs" not in value:
        jsonschema.validate(value, schemas[tool])
    return value


HOLD = "Find the book Dune and place a hold on it for the member alice@example.com"


def test_the_search_gets_what_is_searched_for_and_the_lookup_the_address() -> None:
    assert filled(LIBRARY, "search_books", "Find the book Dune with search_books", HOLD) == {
        "query": "Dune"
    }
    # A step added to find the member: what it looks up follows the tool's description.
    lookup = "Look up a library member by e-mail address: alice@example.com"
    assert filled(LIBRARY, "find_member", lookup, HOLD) == {"email": "alice@example.com"}


def test_a_value_of_another_part_of_the_goal_is_never_taken() -> None:
    # A lookup by e-mail given the book's part of the goal: the address belongs to the other
    # part, so the argument is asked for, not guessed.
    value = filled(LIBRARY, "find_member", "Find the book Dune with find_member", HOLD)
    assert value["missing"] == ["email"]
    assert value["arguments"] == {}


def test_each_id_comes_from_the_step_whose_tool_is_about_its_noun() -> None:
    earlier = [
        step("search_books", "Find the book Dune with search_books", number=1),
        step("find_member", "Look up a library member by e-mail address: alice@...", number=2),
    ]
    action = "Place a hold on it for the member alice@example.com with place_hold"
    assert filled(LIBRARY, "place_hold", action, HOLD, [1, 2], earlier) == {
        "book_id": "{{steps.1.output}}",
        "member_id": "{{steps.2.output}}",
    }


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        # After its noun, whatever the order.
        (
            "Place a hold on book B-300 for member M-7 with place_hold",
            {"book_id": "B-300", "member_id": "M-7"},
        ),
        (
            "Place a hold for member id M-7 on book #B-300 with place_hold",
            {"book_id": "B-300", "member_id": "M-7"},
        ),
        # Next to nothing: by the letters its noun opens with.
        ("Place a hold on B-300 for M-7 with place_hold", {"book_id": "B-300", "member_id": "M-7"}),
    ],
)
def test_ids_written_in_the_goal_fill_the_argument_of_their_noun(
    action: str, expected: dict[str, str]
) -> None:
    assert filled(LIBRARY, "place_hold", action, action) == expected


def test_an_id_never_fills_the_wrong_nouns_argument() -> None:
    # "member M-2" is no book's id, and "M" opens no "book": the book id is asked for.
    value = filled(LIBRARY, "get_book", "Get the book of member M-2 with get_book", "")
    assert value["missing"] == ["book_id"]
    value = filled(LIBRARY, "get_book", "Get the details of M-2 with get_book", "")
    assert value["missing"] == ["book_id"]
    assert filled(LIBRARY, "list_loans", "List the loans of member M-2 with list_loans", "") == {
        "member_id": "M-2"
    }


def test_a_title_next_to_the_arguments_noun_fills_it() -> None:
    goal = "Check whether The Hobbit is on the shelf at the Central branch, and list my loans"
    action = (
        "Check whether The Hobbit is on the shelf at the Central branch with check_availability"
    )
    assert filled(LIBRARY, "check_availability", action, goal, [1]) == {
        "book_id": "{{steps.1.output}}",
        "branch": "Central",
    }
    quoted = "Check whether The Hobbit is on the shelf at 'Central branch' with check_availability"
    assert filled(LIBRARY, "check_availability", quoted, quoted, [1])["branch"] == "Central"


@pytest.mark.parametrize(
    ("action", "query"),
    [
        ('Search for "The Left Hand of Darkness" with search_books', "The Left Hand of Darkness"),
        ("Search the catalogue by title, author or keyword: The Hobbit", "The Hobbit"),
        ("Find books by Ursula K. Le Guin with search_books", "Ursula K. Le Guin"),
        # Nothing named: the object words, not the verb.
        ("Search for books about dragons with search_books", "books about dragons"),
    ],
)
def test_a_search_query_is_what_is_searched_for_not_the_sentence(action: str, query: str) -> None:
    # The optional `limit` is not written anywhere: it is left to its default.
    assert filled(LIBRARY, "search_books", action, action) == {"query": query}


def test_a_name_of_another_thing_is_left_out_of_the_search() -> None:
    goal = "Check whether The Hobbit is on the shelf at the Central branch"
    action = "Search the catalogue by title, author or keyword: The Hobbit, Central"
    assert filled(LIBRARY, "search_books", action, goal) == {"query": "The Hobbit"}


@pytest.mark.parametrize(
    ("action", "query"),
    [
        ("Place a hold on Dune for alice@example.com", "Dune"),
        ("Search for Dune Messiah, then tell bob@example.org", "Dune Messiah"),
        # An address is what is searched for when the piece names nothing else.
        ("Search the catalogue for alice@example.com", "alice@example.com"),
    ],
)
def test_an_address_is_searched_for_only_when_nothing_else_is_named(
    action: str, query: str
) -> None:
    assert filled(LIBRARY, "search_books", action, action) == {"query": query}


def test_an_enum_argument_takes_the_value_the_text_names_and_only_that() -> None:
    goal = "Get the details of book B-300 and translate its summary into French"
    action = "Translate its summary into French with translate_text"
    # The text to translate is what the step it depends on gave.
    assert filled(LIBRARY, "translate_text", action, goal, [1]) == {
        "text": "{{steps.1.output}}",
        "target_language": "French",
    }
    # "French" is not written among ("en", "fr"): the rule does not guess the code.
    coded = filled(
        LIBRARY,
        "translate_summary",
        "Translate the summary of book B-300 into French with translate_summary",
        goal,
    )
    assert coded["missing"] == ["target"]
    assert coded["arguments"] == {"book_id": "B-300"}


def test_clinic_values_by_description_and_enum() -> None:
    goal = "Find the patient jo@clinic.example and book her with a dermatology doctor in Boston"
    lookup = "Find the patient jo@clinic.example with find_patient"
    assert filled(CLINIC, "find_patient", lookup, goal) == {"contact": "jo@clinic.example"}
    search = "Book her with a dermatology doctor in Boston with search_doctors"
    # The optional city is not said to be one ("in Boston" names no city): left out.
    assert filled(CLINIC, "search_doctors", search, goal) == {"specialty": "dermatology"}
    assert filled(
        CLINIC, "get_patient", "Get the record of patient P-1042 with get_patient", ""
    ) == {"patient_id": "P-1042"}


def test_clinic_phone_and_quoted_message() -> None:
    action = 'Text +1 555-123-4567 "Your appointment is at 9" in French with send_reminder'
    assert filled(CLINIC, "send_reminder", action, action) == {
        "phone": "+1 555-123-4567",
        "message": "Your appointment is at 9",
        "language": "French",
    }
    # No quoted words: the message is for a person or a model to write.
    unsaid = filled(CLINIC, "send_reminder", "Remind +1 555-123-4567 with send_reminder", "")
    assert unsaid["missing"] == ["message"]
    assert unsaid["arguments"] == {"phone": "+1 555-123-4567"}


def test_a_required_argument_no_text_gives_is_named() -> None:
    goal = "Book patient P-7 with doctor D-12 for a check-up"
    value = filled(CLINIC, "book_appointment", f"{goal} with book_appointment", goal)
    assert value["missing"] == ["reason"]
    assert value["arguments"] == {"patient_id": "P-7", "doctor_id": "D-12"}


def test_shop_values() -> None:
    assert filled(
        SHOP, "search_products", "Search for wireless headphones with search_products", ""
    ) == {"q": "wireless headphones"}
    assert filled(SHOP, "get_order", "Find out where my order #A-1 is with get_order", "") == {
        "id": "A-1"
    }
    cart = "Add 3 items of product SKU-77 to the cart with add_to_cart"
    assert filled(SHOP, "add_to_cart", cart, cart) == {"product_id": "SKU-77", "quantity": 3}
    url = "https://parcels.example/t/ZX81"
    assert filled(SHOP, "track_parcel", f"Track the parcel at {url}. with track_parcel", "") == {
        "tracking_url": url
    }
    # A finder's name argument is what it looks for.
    assert filled(SHOP, "find_store", "Find the Riverside Mall store with find_store", "") == {
        "name": "Riverside Mall"
    }


def test_a_value_that_breaks_the_schema_is_not_taken() -> None:
    # `quantity` is at least 1: "0 items" is no quantity the tool takes, so it is left out.
    cart = "Add 0 items of product SKU-77 to the cart with add_to_cart"
    assert filled(SHOP, "add_to_cart", cart, cart) == {"product_id": "SKU-77"}


def test_a_required_enum_value_may_come_from_the_steps_own_part_of_the_goal() -> None:
    goal = "Find a dermatology doctor for patient P-7, and send her a reminder"
    # A model's action names no specialty; its part of the goal does, the other part's not.
    assert filled(CLINIC, "search_doctors", "look up doctors", goal) == {"specialty": "dermatology"}
