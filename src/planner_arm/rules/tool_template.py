"""A worked example as the template of a plan: a request that reads like one the examples
solve is planned as that example was (its tools and links), with the new request's words.

Two requests read alike when most of their words are the same once the values are set
aside: names, numbers, quotes and addresses (`specifics`) differ from one request to the
next ("Find the book Dune and place a hold for alice@example.com", "Find the book Emma and
place a hold for bob@example.com"); the words that say what is wanted do not. The likeness is
the overlap of the two sets of word stems (shared / all, Jaccard); the nearest example at or
above `MIN_LIKENESS` is the template. Each templated step's action is the piece of the new
request that names its tool most strongly (a step no piece names, such as a producer, says
what it finds for the step that waits for it), so the step inputs are filled from the new
request's values.

No I/O; the examples are the tool set's (configured, then the request's own).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from planner_arm.limits import WorkedExample
from planner_arm.plan.lexicon import STOPWORDS, stem, words
from planner_arm.plan.tools import goal_pieces
from planner_arm.rules.tool_actions import specifics

# How alike a request and an example's must read for the example to be the template.
MIN_LIKENESS = 0.7
# A request of fewer words (values aside) is too short to read as alike.
_MIN_WORDS = 3


@dataclass(frozen=True)
class Template:
    """The nearest example, and how alike it reads (0..1)."""

    example: WorkedExample
    likeness: float


def request_words(text: str) -> frozenset[str]:
    """The stems of the words a request says what it wants with: no values, no stopwords."""
    values = {word for value in specifics(text) for word in words(value)}
    return frozenset(
        stem(word) for word in words(text) if word not in STOPWORDS and word not in values
    )


def nearest(goal: str, examples: Sequence[WorkedExample]) -> Template | None:
    """The example whose request reads most like `goal`, if one reads alike enough."""
    mine = request_words(goal)
    if len(mine) < _MIN_WORDS:
        return None
    best: Template | None = None
    for example in examples:
        theirs = request_words(example.request)
        if not theirs:
            continue
        likeness = len(mine & theirs) / len(mine | theirs)
        if likeness >= MIN_LIKENESS and (best is None or likeness > best.likeness):
            best = Template(example, likeness)
    return best


def pieces_of(goal: str) -> list[str]:
    """The texts of the request's pieces of work, the whole request when it has one."""
    return [piece.text for piece in goal_pieces(goal)] or [goal]
