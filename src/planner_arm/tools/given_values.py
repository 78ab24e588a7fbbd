"""The values a request's words give a tool step, and which words are the step's own.

A step's *piece* is the part of the request it does: its action without "with <tool>" (or
the quoted part of `Use <tool> for "..."`), or, for a step added to find something, what it
looks up (after the last ": "). Its *own part* of the goal is the clause of the goal the
piece comes from, so that a value another clause gives ("... and place a hold for
alice@example.com") is never taken for it. A value is an e-mail address, a URL, a phone
number, an id ("M-2", "#A-17"), a number, or a title: quoted ("Dune", 'Central branch') or
capitalised ("The Hobbit", "Walt Disney"), each with the words next to it ("book" in "the
book Dune", "branch" in "the Central branch"), which say what it is of.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from planner_arm.text import STOPWORDS, stem, word_set
from planner_arm.tools.traits import ID_WORDS
from planner_arm.tools.words import VERB_STEMS

Kind = Literal["email", "url", "phone", "id", "number", "title"]

_EMAIL = re.compile(r"(?<![\w.+-])[\w.%+-]+@[\w-]+(?:\.[\w-]+)+")
_URL = re.compile(r"(?:\b[a-z][a-z0-9+.-]*://|\bwww\.)[^\s<>\"'`{}|\\^]+", re.IGNORECASE)
_PHONE = re.compile(r"(?<![\w-])(?:\+\d[\d ().-]{5,}\d|\(?\d{3}\)?[ .-]\d{3}[ .-]\d{4})(?![\w-])")
_QUOTED = re.compile(
    r"\"([^\"\n]{1,200})\"|“([^”\n]{1,200})”|‘([^’\n]{1,200})’|(?<!\w)'([^'\n]{1,200}?)'(?!\w)"
)
# An id or a number: "M-2", "B-300", "#A-17", "ORD_2024", "603".
_ID = re.compile(r"(?<![\w@/.#-])#?([A-Za-z]{0,8}[-_]?\d[\w-]*)(?![\w@-])")
# A capitalised run: "The Hobbit", "The Left Hand of Darkness", "Walt Disney".
_NAME_WORD = r"(?:[A-Z]\.(?=\s+[A-Z])|[A-Z][\w'’-]*)"  # "Le", "Guin", an initial "K."
_TITLE = re.compile(
    rf"{_NAME_WORD}(?:\s+(?:(?:of|the|de|la|le|von|van|der|du|da|del)\s+)*{_NAME_WORD})*"
)
_WORD = re.compile(r"[\w'’-]+")
# Words between a noun and its value that say nothing of what the value is.
_JOINERS = word_set("id ids identifier number no # : the a an called named titled")
_NOT_TITLE_START = word_set(
    "i what which who whom whose where when why how please then and also can could would "
    "will should is are was were do does did my our your their his her its it this that these "
    "those there here if"
)
_NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}  # fmt: skip
_NUMBER_WORD = re.compile(r"\b(" + "|".join(_NUMBER_WORDS) + r")\b", re.IGNORECASE)
# Where a goal's clauses meet: punctuation, "and", "then", "also".
_CLAUSE_BREAK = re.compile(
    r"\s*(?:[;,!?]|\.(?=\s|$)|\band then\b|\bthen\b|\band\b|\balso\b)\s*", re.IGNORECASE
)
_MIN_OVERLAP = 1
# What one text is read for: a request's values are in its first lines, and a text of
# thousands of values would cost milliseconds for each step.
MAX_READ_CHARS = 2_000
MAX_VALUES = 100
MAX_PARTS = 30
# How far from a value the words that say what it is are looked for.
_NEAR_CHARS = 80
# Words before what a sentence is about: "please find me", "search for", "find out".
_FILLERS = STOPWORDS | _NOT_TITLE_START | word_set("me us out")


@dataclass(frozen=True)
class Given:
    """One value a text gives, with the words just before and after it (lower case)."""

    text: str
    kind: Kind
    before: str = ""
    after: str = ""
    quoted: bool = False

    def next_to(self, nouns: frozenset[str]) -> bool:
        """Whether a word next to it is one of `nouns` (stems): "book" for "the book Dune",
        "branch" for "the Central branch" and for 'Central branch'."""
        parts = self.text.lower().split()
        ends = {parts[0], parts[-1]} if len(parts) > 1 else set()
        return bool({stem(word) for word in {self.before, self.after, *ends}} & nouns - {""})

    def without(self, nouns: frozenset[str]) -> str:
        """The text without a leading or trailing noun of `nouns`: 'Central branch' ->
        "Central" for a branch."""
        parts = self.text.split()
        if len(parts) > 1 and stem(parts[-1].lower()) in nouns:
            parts = parts[:-1]
        elif len(parts) > 1 and stem(parts[0].lower()) in nouns:
            parts = parts[1:]
        return " ".join(parts)


def step_piece(action: str, tool: str) -> str:
    """The part of the request a step with `action` over `tool` does (see the module)."""
    text = action.strip()
    quoted = re.fullmatch(rf"Use {re.escape(tool)} for \"(.*)\"", text, re.DOTALL)
    if quoted:
        return quoted.group(1)
    suffix = f" with {tool}"
    if text.endswith(suffix):
        return text[: -len(suffix)]
    if ": " in text:  # a step added to find something: what it looks up
        return text.rsplit(": ", 1)[1]
    return re.sub(rf"\s*\b(?:with|using|via)\s+{re.escape(tool)}\b", "", text).replace(tool, " ")


def own_part(piece: str, goal: str) -> str:
    """The clauses of `goal` that `piece` comes from (by the values and words they share);
    the whole goal when it shares nothing with any."""
    parts = goal_parts(goal)
    if len(parts) < 2:
        return goal
    texts = {value.text for value in values_in(piece)}
    stems = _content_stems(piece)
    scores = [_overlap(piece, texts, stems, part) for part in parts]
    best = max(scores)
    if best < _MIN_OVERLAP:
        return goal
    return " ; ".join(part for part, score in zip(parts, scores, strict=True) if score == best)


def goal_parts(goal: str) -> list[str]:
    """The clauses of a goal, split where a quote, an address or a URL does not hold the
    break."""
    masked = _masked(goal)
    parts, start = [], 0
    for found in _CLAUSE_BREAK.finditer(masked):
        parts.append(goal[start : found.start()])
        start = found.end()
    parts.append(goal[start:])
    parts = [part.strip() for part in parts if part.strip()]
    if len(parts) > MAX_PARTS:  # a goal of that many clauses: the rest read as one
        parts[MAX_PARTS - 1 :] = [" ; ".join(parts[MAX_PARTS - 1 :])]
    return parts


def _overlap(piece: str, texts: set[str], stems: set[str], part: str) -> int:
    """How much of `part` the piece (its value `texts`, its word `stems`) shares."""
    lower, part_lower = piece.strip().lower(), part.strip().lower()
    if lower and (lower in part_lower or part_lower in lower):
        return 1_000
    shared = texts & {value.text for value in values_in(part)}
    return 10 * len(shared) + len(stems & _content_stems(part))


def _content_stems(text: str) -> set[str]:
    return {stem(word) for word in re.findall(r"\w+", text.lower())} - STOPWORDS


def _masked(text: str) -> str:
    """`text` with its quotes, e-mail addresses and URLs blanked out (same length)."""
    for pattern in (_QUOTED, _EMAIL, _URL):
        text = pattern.sub(lambda found: "_" * len(found.group()), text)
    return text


# Where a value stands, what it is: (start, end, value, kind, quoted).
_Span = tuple[int, int, str, Kind, bool]


def values_in(text: str) -> list[Given]:
    """The values `text` gives, in the order it gives them: of a long text, those of its
    first `MAX_READ_CHARS` (cut at a space), at most `MAX_VALUES` of them."""
    if len(text) > MAX_READ_CHARS:
        text = text[: MAX_READ_CHARS + 1].rsplit(None, 1)[0]
    spans: list[_Span] = []
    masked = text
    looks: tuple[tuple[re.Pattern[str], Kind], ...] = (
        (_EMAIL, "email"),
        (_URL, "url"),
        (_PHONE, "phone"),
    )
    for pattern, kind in looks:
        for match in pattern.finditer(masked):
            value = match.group().rstrip(".,;:!?)]")
            spans.append((match.start(), match.end(), value, kind, False))
        masked = pattern.sub(lambda match: " " * len(match.group()), masked)
    for match in _QUOTED.finditer(masked):
        value = next(group for group in match.groups() if group is not None).strip()
        spans.append((match.start(), match.end(), value, "title", True))
    masked = _QUOTED.sub(lambda match: " " * len(match.group()), masked)
    spans += _ids(masked)
    masked = _ID.sub(lambda match: " " * len(match.group()), masked)
    spans += _titles(text, masked)
    spans.sort(key=lambda span: span[0])
    return [_given(text, *span) for span in spans[:MAX_VALUES]]


def _ids(masked: str) -> list[_Span]:
    found: list[_Span] = []
    for match in _ID.finditer(masked):
        value = re.sub(r"['’]s$", "", match.group(1))
        kind: Kind = "number" if value.isdigit() else "id"
        found.append((match.start(), match.end(), value, kind, False))
    for match in _NUMBER_WORD.finditer(masked):
        number = str(_NUMBER_WORDS[match.group(1).lower()])
        found.append((match.start(), match.end(), number, "number", False))
    return found


def _titles(text: str, masked: str) -> list[_Span]:
    found: list[_Span] = []
    for match in _TITLE.finditer(masked):
        words = [
            (word.start() + match.start(), word.end() + match.start())
            for word in re.finditer(r"\S+", match.group())
        ]
        while words and _not_opening(masked, words):
            words = words[1:]
        while words and _not_a_name(masked[words[-1][0] : words[-1][1]]):
            words = words[:-1]
        if words:
            start, end = words[0][0], words[-1][1]
            name = re.sub(r"['’]s$", "", text[start:end])
            found.append((start, end, name, "title", False))
    return found


def _not_opening(masked: str, words: list[tuple[int, int]]) -> bool:
    """Whether the first of `words` opens no name: a verb that opens a sentence ("Find"),
    a question word, a pronoun, an id word, a word in lower case; a lone "The"."""
    word = masked[words[0][0] : words[0][1]]
    if word.islower():  # a joining word left by a word dropped before it: "Find the Dune"
        return True
    word = word.lower()
    if word == "the":
        return len(words) == 1
    opens = _starts_sentence(masked, words[0][0])
    return (opens and stem(word) in VERB_STEMS) or _not_a_name(word)


def _starts_sentence(text: str, at: int) -> bool:
    before = text[max(0, at - _NEAR_CHARS) : at].rstrip()
    return not before or before[-1] in ".!?:;\"'“("


def _not_a_name(word: str) -> bool:
    lower = word.lower()
    return lower in ID_WORDS or lower in STOPWORDS or lower in _NOT_TITLE_START


def _given(text: str, start: int, end: int, value: str, kind: Kind, quoted: bool = False) -> Given:
    # The words next to a value within its clause: a comma ends what they can say of it.
    near = text[max(0, start - _NEAR_CHARS) : start].lower()
    before = _WORD.findall(re.split(r"[,;!?()]|\.\s", near)[-1])[-3:]
    after = _WORD.findall(re.split(r"[,;!?()]|\.\s", text[end : end + _NEAR_CHARS].lower())[0])[:1]
    while before and before[-1] in _JOINERS:
        before.pop()
    return Given(value, kind, before[-1] if before else "", after[0] if after else "", quoted)


def search_terms(
    piece: Sequence[Given], goal: Sequence[Given], about: frozenset[str], taken: set[str]
) -> str | None:
    """What a search whose piece gives `piece` looks for: its quoted titles, else its names
    and ids (its addresses only when it names nothing else; none in `taken`), joined; a
    name just before a noun other than one of `about` (the tool's nouns: "the Central
    branch" for a book search) is of another thing, left out while another remains. None
    when the piece names nothing."""
    values = [value for value in piece if value.text not in taken]
    quoted = [value for value in values if value.quoted]
    chosen = quoted or [value for value in values if value.kind != "number"]
    others = _of_other_things([*chosen, *goal], about)
    kept = _searched([value for value in chosen if value.text not in others] or chosen)
    texts = [value.text for value in kept]
    return " ".join(dict.fromkeys(texts)) if texts else None


def _searched(values: list[Given]) -> list[Given]:
    """`values` without the addresses, while a name remains: an address is whom the request
    is for, not what is searched ("a hold on Dune for alice@example.com" searches "Dune")."""
    return [value for value in values if value.kind not in _ADDRESS_KINDS] or values


_ADDRESS_KINDS = frozenset({"email", "url", "phone"})


def _of_other_things(values: Iterable[Given], about: frozenset[str]) -> set[str]:
    """The names written, anywhere in `values`, just before a noun other than `about`."""
    return {value.text for value in values if _a_noun(value.after, about)}


def _a_noun(word: str, about: frozenset[str]) -> bool:
    """Whether `word`, after a name, is a noun the name is of, other than one of `about`."""
    if not word.isalpha() or word in STOPWORDS | _NOT_TITLE_START or stem(word) in VERB_STEMS:
        return False
    return stem(word) not in about


def object_words(piece: str) -> str:
    """The piece without its opening verb and the little words after it: "Find late
    orders" -> "late orders"."""
    words = _without_fillers(piece.split())
    if words and stem(words[0].lower()) in VERB_STEMS:
        words = _without_fillers(words[1:])
    return " ".join(words).rstrip(" .?!") or piece.strip()


def _without_fillers(words: list[str]) -> list[str]:
    while words and words[0].lower() in _FILLERS:
        words = words[1:]
    return words
