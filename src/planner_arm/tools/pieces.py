"""A request's pieces of work, each matched to the tool of a set that does it, or to none.

1. Pieces. The request is cut into pieces of work (`goal_pieces`: sentences, then "and",
   "then", "after that", a comma before a verb); a piece that only names a thing after a
   piece with a verb takes that verb ("... and the cast of Titanic").
2. A tool per piece, only a strong one. The candidates are the piece's best BM25 matches
   (over the tools' names, descriptions and the requests of the configured worked examples
   that call them) and the tools it names most strongly by their own words
   (`ToolWords.strength`), less those that cannot do what it asks (`PieceMatcher._does`: a
   tool that writes for a piece that asks to be shown something; a tool whose verb names
   another action). The best candidate by its BM25 match, its own words, how often the
   examples call it after the tool before, how well the whole request matches it, whether
   the request gives the ids it takes and whether the piece names its noun in the same number
   is taken only when the piece names it strongly enough (`MIN_STRENGTH`; `UNLED_FACTOR`
   times that for a piece that opens with no verb, a detail such as "the check-out date on
   Monday"), or when it is the piece's best BM25 match and configured worked examples call
   it (their requests' words are then the evidence). A piece with no such tool adds no step;
   when it asks for work (opens with a verb or asks a question), the warning
   `goal_part_unplanned` names it. A tool is used once, unless two pieces ask it for
   different things (other names, numbers, quotes).

No I/O; the tool graph is the set's (`tools/graph.py`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace

from planner_arm.plan.tools import GoalPiece, goal_pieces, name_words
from planner_arm.text import specifics, stem, word_set
from planner_arm.tools.actions import is_question
from planner_arm.tools.graph import ToolGraph
from planner_arm.tools.index import ToolIndex
from planner_arm.tools.traits import entity_key, is_plural, tokens
from planner_arm.tools.words import (
    VALUES,
    VERB_STEMS,
    asks_to_read,
    known_action,
    leading_verb,
    same_action,
)

# The tool's own words a piece must name, as `ToolWords.strength` counts them: about one word
# that few other tools have ("order" alone, in four tools of ten, is not enough to call
# `refund_order` for "order a pizza").
MIN_STRENGTH = 0.6
# A piece that opens with no verb (a detail) must name its tool this many times as strongly.
UNLED_FACTOR = 2.0
# Tools weighed for a piece: its best BM25 matches and the tools it names most strongly.
CANDIDATES = 8
# How a candidate is weighed: its BM25 match (as a share of the piece's best), its own words
# (as a share of the strongest candidate's; with worked examples the BM25 match carries
# their requests' words and the own words count less), the share of the previous tool's
# calls in the examples that it follows, and the whole request's match ("change it to 8 am"
# after "set an alarm" is about the alarm).
MATCH_WEIGHT = 1.0
OWN_WORDS_WEIGHT = 2.0
OWN_WORDS_WEIGHT_WITH_EXAMPLES = 0.2
FOLLOW_WEIGHT = 0.5
CONTEXT_WEIGHT = 1.0
# A tool whose ids the request gives or an earlier step yields (it can be called as it is),
# and one whose name's noun the piece writes in the same number ("what appointments").
GIVEN_WEIGHT = 1.0
GIVEN_STRENGTH = 0.25
NUMBER_WEIGHT = 0.3
# A piece that refers back to what the piece before produced.
_BACK_REFERENCE = re.compile(
    r"\b(?:it|its|them|this|these|those|the results?|the same|the (?:best |first |last )?ones?)"
    r"\b",
    re.IGNORECASE,
)
# Words of a tool's name that say it delivers something (a message, a notice, a page).
_DELIVERY_WORDS = word_set(
    "send email mail text message post notify tell inform share report reply forward publish "
    "announce page alert"
)
# A piece that only names a thing: a determiner, then no verb.
_NAMES_A_THING = re.compile(
    r"^(?:(?:at|for|in|to|from|on|with|of)\s+)?(?:the|its|their|his|her|all|every|a|an|some"
    r"|my|our)\s",
    re.IGNORECASE,
)
_OPENS_WITH_VERB = re.compile(r"^[A-Za-z]+\b")
# An id the request gives itself, after the entity's noun: "movie 603", "order #A-1",
# "ticket T-4471", "customer id 42".
_ID_VALUE = r"(?:\s+(?:id|ids|number|no\.?|#))?\s*[:#]?\s*[\"']?[A-Za-z]*[-_]?\d[\w-]*"


@dataclass
class PlannedCall:
    tool: str
    # The piece of the request it is for (a producer: its consumer's piece).
    piece: str
    piece_index: int
    # It waits for the piece before ("then", "it", a delivery).
    waits: bool = False
    # A producer: the entity it yields (None: the examples' usual producer) and for whom.
    makes: str | None = None
    for_tool: str | None = None
    depends_on: list[int] = field(default_factory=list)


class PieceMatcher:
    """Each piece of one request matched to its tool."""

    def __init__(
        self, index: ToolIndex, graph: ToolGraph, goal: str, noted: Mapping[str, int]
    ) -> None:
        self.index = index
        self.graph = graph
        self.goal = goal
        self.pieces = _with_verbs(goal_pieces(goal))
        self.rankings = [
            index.ranked(_unled(piece.text)) if index.ids else [] for piece in self.pieces
        ]
        whole = index.ranked(_unled(goal)) if index.ids and len(self.pieces) > 1 else []
        self.context = {
            tool: score / whole[0][1] for tool, score in whole[:CANDIDATES] if score > 0
        }
        # With configured worked examples, the BM25 index describes the tools by the requests
        # of the examples that call them too: its match then counts more than the own words.
        self.own_words = OWN_WORDS_WEIGHT_WITH_EXAMPLES if noted else OWN_WORDS_WEIGHT
        self.noted = noted
        self.mentioned = {entity_key(word) for word in tokens(goal)}

    def chosen(self) -> tuple[list[PlannedCall], list[str]]:
        """Each piece's step (none for a piece no tool does well, nor for a repeat), the
        tools the request names, and the pieces of work no tool does."""
        chosen: list[PlannedCall] = []
        unplanned: list[str] = []
        for position, piece in enumerate(self.pieces):
            previous = chosen[-1].tool if chosen else None
            asks = leading_verb(piece.text) is not None or is_question(piece.text)
            made = {key for step in chosen for key in self.graph.traits[step.tool].yields}
            tool = self._tool(position, previous, asks, made)
            if tool is None:
                if asks:
                    unplanned.append(piece.text)
            elif not _repeats(tool, piece, chosen):
                waits = piece.after_previous or _refers_back(piece.text, tool, previous)
                chosen.append(PlannedCall(tool, piece.text, position, waits))
        for named in self.index.named_in(self.goal):  # a tool the request names is wanted
            if all(step.tool != named for step in chosen):
                chosen.append(PlannedCall(named, self.goal, len(self.pieces)))
        return chosen, unplanned

    def undone(self, tools: Collection[str]) -> list[str]:
        """The pieces of work (that open with a verb or ask a question) no tool does strongly
        and that name none of `tools` strongly: what no tool of the set can do."""
        undone = []
        for position, piece in enumerate(self.pieces):
            asks = leading_verb(piece.text) is not None or is_question(piece.text)
            if not asks or self._tool(position, None, asks, set()) is not None:
                continue
            if all(self.graph.words.strength(piece.text, tool) < MIN_STRENGTH for tool in tools):
                undone.append(piece.text)
        return undone

    def _tool(self, position: int, previous: str | None, asks: bool, made: set[str]) -> str | None:
        """The tool of piece `position`, None when no candidate is strong enough; a tool
        whose declared input (an `image`) neither the request mentions nor an earlier step
        yields is a candidate only when no other is."""
        piece, ranking = self.pieces[position].text, self.rankings[position]
        best = ranking[0][1] if ranking else 0.0
        matched = {tool: score / best for tool, score in ranking[:CANDIDATES] if score > 0}
        candidates = self._candidates(piece, matched, made)
        if not candidates:
            return None
        strengths = {tool: self.graph.words.strength(piece, tool) for tool in candidates}
        strongest = max(strengths.values()) or 1.0

        def worth(tool: str) -> float:
            follows = self.graph.follow_share(previous, tool) if previous is not None else 0.0
            return (
                MATCH_WEIGHT * matched.get(tool, 0.0)
                + self.own_words * strengths[tool] / strongest
                + FOLLOW_WEIGHT * follows
                + CONTEXT_WEIGHT * self.context.get(tool, 0.0)
                + GIVEN_WEIGHT * self._ids_at_hand(tool, piece)
                + NUMBER_WEIGHT * self._agrees(tool, piece)
            )

        tool = max(candidates, key=worth)
        # A piece that gives the very ids the tool takes ("doctor D-7") names it more.
        named = strengths[tool] + GIVEN_STRENGTH * self._ids_at_hand(tool, piece)
        if named >= MIN_STRENGTH * (1.0 if asks else UNLED_FACTOR):
            return tool
        # The BM25 match is the evidence of the configured examples that call the tool (a
        # request's own examples are not in the index).
        called = self.noted.get(tool, 0) > 0
        return tool if called and matched.get(tool) == 1.0 else None

    def _candidates(self, piece: str, matched: dict[str, float], made: set[str]) -> list[str]:
        """The tools weighed for a piece: its best BM25 matches and the tools it names most
        strongly, those that can do what it asks (`_does`), and of those the ones whose
        declared inputs are at hand when there are any."""
        found = dict.fromkeys([*matched, *self.graph.words.strongest(piece, CANDIDATES)])
        able = [tool for tool in found if self._does(tool, piece)]
        fed = [tool for tool in able if self._inputs_at_hand(tool, made)]
        return fed or able

    def _does(self, tool: str, piece: str) -> bool:
        """Whether `tool` can do what the piece asks by its verb: a piece that asks to be told
        or shown something (or a question) is never given a tool that writes, unless it asks
        for that tool's action; a piece whose verb names an action ("translate", "buy", "fax")
        is never given a tool that finds or shows, nor one whose own verb names another known
        action, unless the tool's words have that verb."""
        words, verb = self.graph.words, leading_verb(piece)
        asked = stem(verb) if verb is not None else None
        own = words.verb(tool)
        if self.graph.traits[tool].writes:
            reads = is_question(piece) or (asked is not None and asks_to_read(asked))
            if reads and not same_action(asked, own):
                return False
        if asked is None or asks_to_read(asked):
            return True
        if own is None or not known_action(own):
            return True
        if same_action(asked, own) or words.says(tool, asked):
            return True
        # A tool that finds or shows does nothing else ("fax the due dates" is no listing); a
        # common verb of no class may be another acting tool's ("arrange" a reservation), a
        # verb of no list only a tool that says it.
        return not asks_to_read(own) and not known_action(asked) and asked in VERB_STEMS

    def _ids_at_hand(self, tool: str, piece: str) -> bool:
        """Whether `tool` takes ids and the piece gives each ("doctor D-7"): it can be called
        as it is, with what the piece names."""
        needs = self.graph.traits[tool].fetched_needs()
        return bool(needs) and all(gives(piece, self.graph.noun(key)) for key in needs)

    def _agrees(self, tool: str, piece: str) -> bool:
        """Whether the piece names what the tool's name is about in the same number: "what
        appointments" asks for `list_appointments`, "the appointment A-2" for
        `get_appointment`."""
        noun = self.graph.name_noun(tool)
        if noun is None:
            return False
        key = entity_key(noun)
        written = [word for word in tokens(piece) if word.isalpha() and entity_key(word) == key]
        return bool(written) and any(is_plural(word) == is_plural(noun) for word in written)

    def _inputs_at_hand(self, tool: str, made: set[str]) -> bool:
        traits = self.graph.traits[tool]
        given = [key for key in traits.needs if key not in traits.fetched]
        return all(key in self.mentioned or key in made for key in given)


def _with_verbs(pieces: list[GoalPiece]) -> list[GoalPiece]:
    """The pieces, each that only names a thing ("the cast of Titanic" in "Get the details of
    the Harry Potter collection and the cast of Titanic") with the verb of the piece before:
    it asks for the same work on another thing, and is planned or named unplanned as such."""
    read: list[GoalPiece] = []
    verb: str | None = None
    for piece in pieces:
        own = leading_verb(piece.text)
        if own is None and verb is not None and _NAMES_A_THING.match(piece.text):
            piece = replace(piece, text=f"{verb} {piece.text}")
        elif own is not None:
            verb = piece.text.split()[0] if _OPENS_WITH_VERB.match(piece.text) else None
        read.append(piece)
    return read


def _unled(piece: str) -> str:
    """A piece without its values (they say which thing, never which tool) and without the
    verb it opens with when that verb asks to be told or shown something, for the BM25
    match: such a verb's evidence is its action (`ToolWords`: "find"
    asks for any finder), not the word "find" in a tool's name (`find_member` for "find the
    book Dune"). A verb of another action ("message Tom") is kept: it names the tool."""
    piece = VALUES.sub(" ", piece)
    verb = leading_verb(piece)
    if verb is None or not asks_to_read(stem(verb)):
        return piece
    rest = re.sub(rf"^.*?\b{re.escape(verb)}\b", "", piece, count=1, flags=re.IGNORECASE)
    return rest if rest.strip() else piece


def _refers_back(piece: str, tool: str, previous: str | None) -> bool:
    """Whether a piece works on what the piece before produced: it refers back to it ("it",
    "the result"), or its tool delivers (sends, posts, notifies) after one that does not (two
    messages in a row are two messages)."""
    if _BACK_REFERENCE.search(piece) is not None:
        return True
    return _delivers(tool) and previous is not None and not _delivers(previous)


def _delivers(tool: str) -> bool:
    return any(word in _DELIVERY_WORDS for word in name_words(tool).split())


def _repeats(tool: str, piece: GoalPiece, chosen: list[PlannedCall]) -> bool:
    """Whether `tool` is already chosen for the same things: a piece that names other
    things (names, numbers, quotes) asks for the tool again."""
    earlier = [step for step in chosen if step.tool == tool]
    if not earlier:
        return False
    mine = {text.lower() for text in specifics(piece.text)}
    return not mine or any(
        {text.lower() for text in specifics(step.piece)} >= mine for step in earlier
    )


def gives(goal: str, noun: str) -> bool:
    """Whether the goal gives the entity's id itself ("movie 603", "customer id 42")."""
    return re.search(rf"\b{re.escape(noun)}s?{_ID_VALUE}", goal, re.IGNORECASE) is not None
