"""Text as the rule-based choosers read it: words, a light stemmer, and a phrase lexicon.

Shared by the arm resolver (`arms.py`) and the rule-based planner, which both match words and
phrases of free text against weighted tables (`vocabulary.py` holds the built-in ones).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache


def word_set(text: str) -> frozenset[str]:
    """The words of `text`, as a set: word lists are written as one string."""
    return frozenset(text.split())


def phrases(text: str) -> tuple[str, ...]:
    return tuple(phrase.strip() for phrase in text.split(","))


# A word that matches only after stemming ("tests" against "test") counts a little less, so
# the arm that named the exact form wins a tie between two arms that share a stem.
STEM_ONLY = 0.85

_IRREGULAR = {
    "ran": "run",
    "built": "build",
    "wrote": "write",
    "written": "write",
    "found": "find",
    "chose": "choose",
    "chosen": "choose",
    "sent": "send",
    "made": "make",
    "began": "begin",
}
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    """Lower-case words of any script; `snake_case`, `camelCase` and hyphens split apart."""
    return _WORD.findall(_CAMEL.sub(" ", text).lower())


@lru_cache(maxsize=8192)
def stem(word: str) -> str:
    """A light suffix stripper: "deployed", "deploys", "deploying" and "deploy" agree.

    It only has to map the forms of one word together, not to produce a real word.
    """
    word = _IRREGULAR.get(word, word)
    for suffix, replacement in (
        ("ies", "y"),
        ("ied", "y"),
        ("ing", ""),
        ("ed", ""),
        ("es", ""),
        ("s", ""),
    ):
        if word.endswith(suffix) and len(word) - len(suffix) + len(replacement) >= 3:
            if suffix == "s" and word[-2] in "siu":
                break  # "class", "analysis", "status"
            word = word[: len(word) - len(suffix)] + replacement
            break
    if word.endswith(("tion", "sion")) and len(word) >= 7:
        word = word[:-3]  # "validation" -> "validat", as "validate" becomes below
    if word.endswith("e") and len(word) >= 4:
        word = word[:-1]
    if len(word) >= 4 and word[-1] == word[-2] and word[-1] not in "lsz":
        word = word[:-1]  # "running" -> "runn" -> "run"
    if len(word) >= 6 and word.endswith(("is", "ys")):
        word = word[:-1] + "z"  # British and American spellings: "summarise", "summarize"
    return word


@dataclass(frozen=True)
class _Term:
    stems: tuple[str, ...]
    exact: tuple[str, ...]
    label: int
    weight: float


class Lexicon:
    """Words and phrases that each point at a label (an arm, a kind of goal) with a weight.

    Matching is by stems, longest phrase first; a match of the stem but not the exact words
    counts `STEM_ONLY` as much. Build it once, then `scan` each text.
    """

    def __init__(self) -> None:
        self._terms: dict[tuple[int, tuple[str, ...]], _Term] = {}
        self._index: dict[str, list[_Term]] | None = None

    def add(self, label: int, text: str, weight: float) -> None:
        exact = tuple(words(text))
        if not exact:
            return
        term = _Term(tuple(stem(w) for w in exact), exact, label, weight)
        key = (label, term.stems)
        if key in self._terms and self._terms[key].weight >= weight:
            return
        self._terms[key] = term
        self._index = None

    def _build(self) -> dict[str, list[_Term]]:
        index: dict[str, list[_Term]] = {}
        for term in self._terms.values():
            index.setdefault(term.stems[0], []).append(term)
        for terms in index.values():
            terms.sort(key=lambda term: -len(term.stems))
        self._index = index
        return index

    def scan(self, tokens: list[str], stems: list[str]) -> Iterator[tuple[int, dict[int, float]]]:
        """Each match in the text: its position and each label's weight, left to right.

        At each position the longest phrase wins and the words inside it are not matched again.
        """
        i = 0
        while i < len(stems):
            length, hits = self.match(tokens, stems, i)
            if length:
                yield i, hits
                i += length
            else:
                i += 1

    def match(self, tokens: list[str], stems: list[str], i: int) -> tuple[int, dict[int, float]]:
        """The longest phrase starting at `i` (its length in words) and each label's weight."""
        index = self._index if self._index is not None else self._build()
        length = 0
        hits: dict[int, float] = {}
        for term in index.get(stems[i], ()):
            size = len(term.stems)
            if size < length:
                break
            if tuple(stems[i : i + size]) != term.stems:
                continue
            length = size
            weight = term.weight
            if tuple(tokens[i : i + size]) != term.exact:
                weight *= STEM_ONLY
            hits[term.label] = max(hits.get(term.label, 0.0), weight)
        return length, hits
