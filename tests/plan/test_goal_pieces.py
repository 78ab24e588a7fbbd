"""A request cut into the pieces of work it asks for (`goal_pieces`), which the rule-based
tool planner and the prompt's shortlist read."""

from __future__ import annotations

import pytest

from planner_arm.plan.tools import GoalPiece, goal_pieces, request_pieces


def test_a_comma_before_a_verb_starts_a_piece_but_not_one_before_a_detail() -> None:
    pieces = request_pieces(
        "Cancel my train ticket, ticket number T23456, reserve a table for two on Saturday"
    )
    assert pieces == [
        "Cancel my train ticket, ticket number T23456",
        "reserve a table for two on Saturday",
    ]


def test_then_puts_a_piece_after_the_one_before_and_does_not() -> None:
    pieces = goal_pieces(
        "Back up the orders database and then restore it on staging. After that, email the team"
        " and post a note to #ops"
    )
    assert pieces == [
        GoalPiece("Back up the orders database"),
        GoalPiece("restore it on staging", after_previous=True),
        GoalPiece("email the team", after_previous=True),
        GoalPiece("post a note to #ops"),
    ]


@pytest.mark.parametrize(
    "request_text",
    [
        "Please help me book a train ticket",
        "I need you to book a train ticket",
        "I would like to book a train ticket",
        "Could you book a train ticket",
    ],
)
def test_the_polite_opening_is_not_part_of_the_piece(request_text: str) -> None:
    assert request_pieces(request_text) == ["book a train ticket"]


def test_a_request_inside_a_sentence_of_circumstances_is_its_own_piece() -> None:
    pieces = request_pieces(
        "It was booked for Friday, but due to a conflict, please cancel it. I booked a seat"
        " last week and now I need to change the seat"
    )
    assert pieces == [
        "It was booked for Friday, but due to a conflict",
        "cancel it",
        "I booked a seat last week",
        "change the seat",
    ]
