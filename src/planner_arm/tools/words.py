"""How strongly a piece of a request names a tool by the tool's own words.

Each word a piece shares with a tool's name or description counts its rarity among the
tools (BM25's idf scaled to 1 for a word only one tool has, about 0 for one every tool has),
a word only of the description `DESCRIPTION` as much as one of the name. A piece that opens
with a verb is read as a verb frame: the word after the verb, its object, counts `OBJECT`
times; the verb adds `VERB_MATCH` when it asks for the action of the tool's name ("cancel"
and `train_ticket_cancelling`, "find" and a tool that searches: verbs of one class in
`_VERB_CLASSES`) and counts `SAME_ACTION` times as a shared word; a verb that is only another
word of a tool whose name has a specific verb counts `OTHER_ACTION` times: "order a pizza"
asks to order, which `refund_order` does not do. Any other verb counts `HEAD` times.

Domain only, no I/O; built once per tool set, with the tool graph.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from planner_arm.limits import ArmSpec
from planner_arm.plan.tools import DETERMINER_WORDS, NOT_VERB_WORDS, REQUEST_VERBS
from planner_arm.text import STOPWORDS, stem, word_set, words
from planner_arm.tools.related_words import related_stems
from planner_arm.tools.traits import ACTION_WORDS, name_parts, output_words

HEAD, OBJECT = 1.5, 1.5
VERB_MATCH, SAME_ACTION, OTHER_ACTION = 1.0, 1.0, 0.5
READ_VERB_MATCH = 0.5
DESCRIPTION = 0.6
# A word of a tool's result only (a field name of its output schema: `author`).
FIELD = 0.8
# A word a piece does not have but relates to one it has ("wrote": author), as a share of
# what the word it has counts.
RELATED = 0.8
VERB_STEMS = frozenset(stem(verb) for verb in REQUEST_VERBS) | ACTION_WORDS
# Verbs that ask for the same action: one class a line (a verb may be in two: one orders a
# pizza and a taxi).
_VERB_CLASSES = (
    "search find look lookup query locate discover browse seek list",
    "get show view display fetch retrieve read see",
    "change modify update edit adjust alter amend reschedule rebook",
    "cancel delete del remove drop revoke",
    "create add new make open register write generate compose draft",
    "book reserve booking reservation order hire rent",
    "buy purchase order",
    "send email mail text message post notify tell inform forward share remind",
    "check verify confirm validate",
    "pay repay settle",
    "start run launch execute",
    "restart reboot",
    "refund reimburse",
    "track trace follow monitor",
    "renew extend",
    "translate",
    "summarize summarise",
    "convert",
    "transfer move",
    "hold lock",
)
_CLASSES_OF: dict[str, frozenset[int]] = {}
for _row, _verbs in enumerate(_VERB_CLASSES):
    for _verb in _verbs.split():
        _CLASSES_OF[stem(_verb)] = _CLASSES_OF.get(stem(_verb), frozenset()) | {_row}
# Verbs of a request that ask to be told or shown something: any tool that reads may do them.
_READ_CLASSES = frozenset().union(
    *(_CLASSES_OF[stem(verb)] for verb in ("find", "get", "check", "track"))
)
_READ_VERBS = frozenset(
    stem(verb)
    for verb in word_set("know see show let help describe explain inquire ask learn understand")
)
# Verbs of tool names that say little about the action: their object does (`send_email`).
_ANY_ACTION = frozenset(
    stem(verb) for verb in word_set("send get set make do run use handle manage process")
)
# Words of a request that say nothing about which tool.
_NOT_CONTENT = STOPWORDS | word_set(
    "me my us our i we you your please help want need would like what which who whom whose how "
    "does do did was were can could will should"
)
# Values a request gives (e-mail addresses, links, ids with digits): they say which thing,
# never which tool.
VALUES = re.compile(
    r"(?<![\w.+-])[\w.+-]+@[\w-]+\.[\w.]+|https?://\S+|(?<![\w.])[A-Za-z]*[-_#]?\d[\w.:/-]*"
)
_FILLER_OPENING = re.compile(r"^\s*(?:please|kindly|also|then|and)\s+", re.IGNORECASE)
_TELL_ME = re.compile(
    r"^\s*(?:please\s+)?(?:tell|give|show|inform|notify|update)\s+(?:me|us)\b"
    r"|^\s*(?:please\s+)?let\s+(?:me|us)\s+know\b",
    re.IGNORECASE,
)
# Question words that ask for a kind of thing ("when": a date), read through the groups.
_QUESTION_WORDS = word_set("when where")


class ToolWords:
    """The words of each tool of a set, and how rare each is among them."""

    def __init__(self, specs: Sequence[ArmSpec]) -> None:
        self._words = {spec.id: _word_stems(spec) for spec in specs}
        # Each tool's place in its set: of tools a piece names equally, the earlier comes first,
        # the same in every process (a set's order changes with the hash seed).
        self._place = {spec.id: place for place, spec in enumerate(specs)}
        self._verbs = {
            spec.id: stem(verb) for spec in specs if (verb := name_parts(spec.id)[0]) is not None
        }
        having: dict[str, list[str]] = {}
        for tool, stems in self._words.items():
            for word in stems:
                having.setdefault(word, []).append(tool)
        # Tuples of strings, which the garbage collector stops tracking: a set keeps one per
        # distinct word, and a full collection would walk them all, holding the interpreter.
        self._having = {word: tuple(tools) for word, tools in having.items()}
        top = math.log(1 + (len(specs) - 0.5) / 1.5)
        self._weight = {
            word: math.log(1 + (len(specs) - len(tools) + 0.5) / (len(tools) + 0.5)) / top
            for word, tools in self._having.items()
        }

    def strength(self, piece: str, tool: str) -> float:
        """How strongly `piece` names `tool` (see the module's docstring)."""
        own = self._words.get(tool, {})
        weighed, related = _weighed_stems(piece)
        head = next((word for word, factor in weighed.items() if factor == HEAD), None)
        verb = self._verbs.get(tool)
        specific = verb is not None and verb not in _ANY_ACTION
        same = specific and same_action(head, verb)
        total = 0.0
        for word, factor in weighed.items():
            if word in own:
                counted = factor
                if word == head and specific:
                    counted = SAME_ACTION if same else OTHER_ACTION
                    if same and asks_to_read(head):
                        # "Find" asks for any finder: the word in `find_member` says no more.
                        counted = 0.0
                total += self._weight[word] * counted * own[word]
        total += sum(self._best_related(others, own) for others in related.values())
        if not same:
            return total
        # A verb that asks to be shown something fits every tool that finds or shows: alone,
        # it names none strongly ("tell me the weather" is no rider search).
        return total + (READ_VERB_MATCH if asks_to_read(head) else VERB_MATCH)

    def _best_related(self, others: dict[str, float], own: dict[str, float]) -> float:
        """What a word counts once more through the best of its related words a tool has
        ("performing": the description's "concerts, theatre" count as one)."""
        counted = [self._weight[word] * factor * own[word] for word, factor in others.items()
                   if word in own]  # fmt: skip
        return max(counted, default=0.0)

    def verb(self, tool: str) -> str | None:
        """The stem of the action word of `tool`'s name, if it has one."""
        return self._verbs.get(tool)

    def says(self, tool: str, word: str) -> bool:
        """Whether `tool`'s name or description has the word (a stem)."""
        return word in self._words.get(tool, {})

    def strongest(self, piece: str, count: int) -> list[str]:
        """The `count` tools `piece` names most strongly (none that shares no word with it)."""
        weighed, related = _weighed_stems(piece)
        said = [*weighed, *(word for others in related.values() for word in others)]
        tools = {tool for word in said for tool in self._having.get(word, ())}
        return sorted(tools, key=lambda tool: (-self.strength(piece, tool), self._place[tool]))[
            :count
        ]


def same_action(first: str | None, second: str | None) -> bool:
    """Whether two verbs' stems ask for one action (the same stem, or a class in common)."""
    if first is None or second is None:
        return False
    return first == second or bool(_CLASSES_OF.get(first, set()) & _CLASSES_OF.get(second, set()))


def known_action(verb: str) -> bool:
    """Whether a verb's stem is in a class of actions."""
    return verb in _CLASSES_OF


def asks_to_read(verb: str | None) -> bool:
    """Whether a request's verb (a stem) asks to be told or shown something, which any tool
    that reads may do ("find", "show", "tell me", "check")."""
    return verb is None or verb in _READ_VERBS or bool(_CLASSES_OF.get(verb, set()) & _READ_CLASSES)


def leading_verb(piece: str) -> str | None:
    """The verb a piece of a request opens with ("please book a flight": book), None when it
    opens otherwise ("the check-out date on Monday"); "tell me", "inform me", "let me know"
    and "give me" ask to find out."""
    content = [word for word in words(_asked(piece)) if word not in _NOT_CONTENT]
    if content and stem(content[0]) in VERB_STEMS:
        return content[0]
    return _unlisted_verb(piece)


def _unlisted_verb(piece: str) -> str | None:
    """A verb no list has that a piece opens with: a word that is no preposition, no
    conjunction and no name, then a determiner or a pronoun ("fax the refill", "diagnose her
    rash")."""
    opening = words(_FILLER_OPENING.sub("", piece))[:2]
    if len(opening) < 2 or len(opening[0]) < 3 or not opening[0].isalpha():
        return None
    first, then = opening
    if first in NOT_VERB_WORDS or first in _NOT_CONTENT or then not in DETERMINER_WORDS:
        return None
    return first


def _asked(piece: str) -> str:
    """A piece with a leading "tell me", "let us know" or "give me" read as "find"."""
    return _TELL_ME.sub("find ", piece, count=1)


def _weighed_stems(piece: str) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """The stems of a piece's words; when it opens with a verb, the verb weighs HEAD and the
    next word (its object) OBJECT. And for each of those (and each "when" or "where"), the
    words related to it (`related_words.py`: "wrote", author) RELATED (a question word's
    whole: "when" asks for a date)."""
    content = [
        stem(word) for word in words(VALUES.sub(" ", _asked(piece))) if word not in _NOT_CONTENT
    ]
    led = bool(content) and content[0] in VERB_STEMS
    weighed: dict[str, float] = {}
    for position, word in enumerate(content):
        factor = (HEAD if position == 0 else OBJECT if position == 1 else 1.0) if led else 1.0
        weighed[word] = max(weighed.get(word, 0.0), factor)
    related: dict[str, dict[str, float]] = {}
    for word in weighed:
        others = related_stems([word]) - weighed.keys()
        if others:
            related[word] = dict.fromkeys(sorted(others), RELATED)
    for word in {stem(word) for word in words(piece) if word in _QUESTION_WORDS}:
        related[word] = dict.fromkeys(sorted(related_stems([word]) - weighed.keys()), 1.0)
    return weighed, related


def _word_stems(spec: ArmSpec) -> dict[str, float]:
    """A tool's word stems, each with how much it says: a word of the name says what the tool
    is, a word only of the description less, a field name of its result less again."""
    own = {stem(word): FIELD for word in output_words(spec)}
    own.update(
        {stem(word): DESCRIPTION for word in words(spec.description) if word not in STOPWORDS}
    )
    own.update({stem(word): 1.0 for word in words(spec.id) if word not in STOPWORDS})
    return own
