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
from collections.abc import Sequence

from planner_arm.limits import ArmSpec
from planner_arm.plan.lexicon import STOPWORDS, stem, word_set, words
from planner_arm.plan.tool_traits import ACTION_WORDS, name_parts
from planner_arm.plan.tools import REQUEST_VERBS

HEAD, OBJECT = 1.5, 1.5
VERB_MATCH, SAME_ACTION, OTHER_ACTION = 1.0, 1.0, 0.5
DESCRIPTION = 0.6
VERB_STEMS = frozenset(stem(verb) for verb in REQUEST_VERBS) | ACTION_WORDS
# Verbs that ask for the same action: one class a line.
_VERB_CLASSES = (
    "search find look lookup query locate discover browse seek list",
    "get show view display fetch retrieve read see",
    "change modify update edit adjust alter amend reschedule rebook",
    "cancel delete del remove drop revoke",
    "create add new make open register write generate compose draft",
    "book reserve booking reservation",
    "buy purchase order",
    "send email mail text message post notify tell inform forward share",
    "check verify confirm validate",
    "pay repay settle",
    "start run launch execute",
    "restart reboot",
    "refund reimburse",
    "track trace follow monitor",
)
_CLASS_OF = {stem(verb): row for row, verbs in enumerate(_VERB_CLASSES) for verb in verbs.split()}
# Verbs of tool names that say little about the action: their object does (`send_email`).
_ANY_ACTION = frozenset(
    stem(verb) for verb in word_set("send get set make do run use handle manage process")
)
# Words of a request that say nothing about which tool.
_NOT_CONTENT = STOPWORDS | word_set("me my us our i we you your please help want need would like")


class ToolWords:
    """The words of each tool of a set, and how rare each is among them."""

    def __init__(self, specs: Sequence[ArmSpec]) -> None:
        self._words = {spec.id: _word_stems(spec) for spec in specs}
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
        weighed = _weighed_stems(piece)
        head = next((word for word, factor in weighed.items() if factor == HEAD), None)
        verb = self._verbs.get(tool)
        specific = verb is not None and verb not in _ANY_ACTION
        same = specific and _verb_class(head) == _verb_class(verb)
        total = 0.0
        for word, factor in weighed.items():
            if word in own:
                counted = factor
                if word == head and specific:
                    counted = SAME_ACTION if same else OTHER_ACTION
                total += self._weight[word] * counted * own[word]
        return total + (VERB_MATCH if same else 0.0)

    def strongest(self, piece: str, count: int) -> list[str]:
        """The `count` tools `piece` names most strongly (none that shares no word with it)."""
        tools = {tool for word in _weighed_stems(piece) for tool in self._having.get(word, ())}
        return sorted(tools, key=lambda tool: -self.strength(piece, tool))[:count]


def _verb_class(verb: str | None) -> str | int | None:
    """The class of a verb's stem (the stem itself when it is in none)."""
    return _CLASS_OF.get(verb, verb) if verb is not None else None


def leading_verb(piece: str) -> str | None:
    """The verb a piece of a request opens with ("please book a flight": book), None when it
    opens otherwise ("the check-out date on Monday")."""
    content = [word for word in words(piece) if word not in _NOT_CONTENT]
    return content[0] if content and stem(content[0]) in VERB_STEMS else None


def _weighed_stems(piece: str) -> dict[str, float]:
    """The stems of a piece's words; when it opens with a verb, the verb weighs HEAD and the
    next word (its object) OBJECT."""
    content = [stem(word) for word in words(piece) if word not in _NOT_CONTENT]
    led = bool(content) and content[0] in VERB_STEMS
    weighed: dict[str, float] = {}
    for position, word in enumerate(content):
        factor = (HEAD if position == 0 else OBJECT if position == 1 else 1.0) if led else 1.0
        weighed[word] = max(weighed.get(word, 0.0), factor)
    return weighed


def _word_stems(spec: ArmSpec) -> dict[str, float]:
    """A tool's word stems, each with how much it says: a word of the name says what the tool
    is, a word only of the description less."""
    own = {stem(word): DESCRIPTION for word in words(spec.description) if word not in STOPWORDS}
    own.update({stem(word): 1.0 for word in words(spec.id) if word not in STOPWORDS})
    return own
