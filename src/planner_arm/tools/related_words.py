"""Words that ask for the same thing in other words: "who wrote" asks for an author, "when
was it published" for a year or a date, "directed" and "lead actor" for credits.

A request rarely uses a tool's own words for what it wants from it; a tool's name, its
description and its result's field names (`author`, `release_date`) say it one way, people
another. Each row below is a group of words that name one thing or one relation, in plain
English, general enough for any domain (no tool set's names): a word of a request adds the
other words of its groups, counted less than the words it has itself (`tool_words.py`).
Words are compared by their stems (`text.stem`), so "directed", "directs" and "director"
need one form each at most.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

from planner_arm.text import stem

# One group a line: words that name one thing, or a question word and what it asks for.
GROUPS = (
    # who made it
    "wrote written write writer author authored novelist",
    "directed direct director directing filmmaker credit credits crew",
    "cast actor actress star starring starred lead role played act acted acting credit credits",
    "sang sing singer artist band performer",
    "perform performing performs performed performer performers lineup",
    "painted painter artist",
    "founded founder founders",
    "created creator maker made",
    # when and where
    "when date time day year",
    "published publish publication release released year",
    "born birth birthday birthdate age",
    "where location located venue site",
    "due deadline",
    # how much and how many
    "cost price fee fees charge much expensive cheap pay paid amount total",
    "owe owed balance outstanding",
    "how many count number total",
    "long duration length runtime minutes",
    # what it is like
    "summary synopsis overview plot description describe",
    "background biography bio profile career",
    "specialise specialize specialises specializes specialty speciality specialism",
    "review reviews rating ratings rated score stars opinion",
    "popular trending top best",
    "similar like related recommend recommendation recommendations",
    "weather forecast temperature rain snow sunny",
    "available availability stock shelf copies free vacancy vacancies",
    "where status state progress track tracking",
    "picture image photo poster logo icon",
    "keyword keywords tag tags topic topics genre genres",
    "translate translation language",
    # how to reach someone
    "email mail inbox",
    "phone telephone mobile call",
    "message notice reminder remind notify notification",
    # everyday things with several names
    "movie film",
    "show series tv television season episode",
    "song track tune music",
    "book title novel",
    "company business firm organization organisation corporation studio",
    "customer client buyer member patron user account",
    "employee staff worker colleague",
    "doctor physician clinician dentist specialist dermatologist paediatrician pediatrician "
    "cardiologist surgeon gynaecologist gynecologist psychiatrist neurologist optician gp",
    "appointment visit slot consultation",
    "trip journey travel",
    "hotel room stay accommodation lodging",
    "flight plane airline fly",
    "car vehicle ride taxi cab",
    "shop store",
    "buy purchase order",
    "meal dish recipe",
    "ingredient ingredients grocery groceries",
    "loan borrow borrowed lend lent",
    "error bug failure fault",
    "bill invoice",
    "event concert gig show ballet opera theatre theater play musical performance match "
    "game festival",
)


@cache
def _related_by_stem() -> dict[str, frozenset[str]]:
    related: dict[str, set[str]] = {}
    for row in GROUPS:
        stems = {stem(word) for word in row.split()}
        for one in stems:
            related.setdefault(one, set()).update(stems - {one})
    return {one: frozenset(others) for one, others in related.items()}


def related_stems(stems: Iterable[str]) -> set[str]:
    """The stems the groups relate to `stems`, less `stems` themselves."""
    given = set(stems)
    table = _related_by_stem()
    return {other for one in given for other in table.get(one, ())} - given
