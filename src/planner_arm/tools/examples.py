"""The worked example a request reads like: the template of its rule-based tool plan (the
planner keeps the example's tools and links and writes the steps with the new request's
words: `tools/planner.py`).

Two requests read alike when most of their words are the same once the values are set
aside: names, numbers, quotes and addresses (`specifics`) differ from one request to the
next ("Find the book Dune and place a hold for alice@example.com", "Find the book Emma and
place a hold for bob@example.com"); the words that say what is wanted do not. The likeness is
the overlap of the two sets of word stems (shared / all, Jaccard); the nearest example at or
above `MIN_LIKENESS` is the template.

Domain only, no I/O; the examples are the tool set's (configured, then the request's own),
read once when its tool graph is built.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from planner_arm.limits import WorkedExample
from planner_arm.text import STOPWORDS, specifics, stem, words

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


class ExampleFinder:
    """The word sets of a tool set's examples, with the examples that have each word, to find
    the nearest to a request without reading them all: an example at least `MIN_LIKENESS`
    alike shares one of the request's rarest words (of n words, one of the first
    n - ceil(MIN_LIKENESS * n) + 1 by how few examples have them), so only the examples that
    have one of those are weighed."""

    def __init__(self, examples: Sequence[WorkedExample]) -> None:
        self.examples = tuple(examples)
        self._words = [request_words(example.request) for example in self.examples]
        having: dict[str, list[int]] = {}
        for at, found in enumerate(self._words):
            for word in found:
                having.setdefault(word, []).append(at)
        self._having = {word: tuple(ats) for word, ats in having.items()}

    def nearest(self, mine: frozenset[str]) -> Template | None:
        """The example that reads most like a request of the words `mine`, if one reads
        alike enough."""
        ranked = sorted(mine, key=lambda word: (len(self._having.get(word, ())), word))
        prefix = len(mine) - math.ceil(MIN_LIKENESS * len(mine)) + 1
        candidates = sorted({at for word in ranked[:prefix] for at in self._having.get(word, ())})
        best: Template | None = None
        for at in candidates:
            theirs = self._words[at]
            likeness = len(mine & theirs) / len(mine | theirs)
            if likeness >= MIN_LIKENESS and (best is None or likeness > best.likeness):
                best = Template(self.examples[at], likeness)
        return best


def nearest(goal: str, finders: Sequence[ExampleFinder]) -> Template | None:
    """The example of any of `finders` whose request reads most like `goal` (the first
    finder's on a tie), if one reads alike enough."""
    mine = request_words(goal)
    if len(mine) < _MIN_WORDS:
        return None
    best: Template | None = None
    for finder in finders:
        found = finder.nearest(mine)
        if found is not None and (best is None or found.likeness > best.likeness):
            best = found
    return best
