"""The words of a rule-based tool plan: each step's action, an instruction that names its tool.

- A piece of the request that opens with a verb is already an instruction: it keeps its words
  and names the tool ("Find the movie Titanic with search_movie").
- A question becomes one: "How many rows does each table have?" -> "Find out how many rows
  each table has with list_tables"; "When was Meryl Streep born?" -> "Find out when Meryl
  Streep was born with SearchPerson".
- Any other piece (a noun phrase, a statement) is quoted: `Use list_orders for "the orders
  of customer 4412"`.
- A step added to make what another needs says what it looks for, after its tool's
  description when that is an instruction ("Search movies by title and return their ids:
  Titanic"), else as "Find the movie id for GetMovieCredit with search_movie: Titanic".
"""

from __future__ import annotations

import re

from planner_arm.text import specifics, stem, word_set
from planner_arm.tools.traits import ACTION_WORDS
from planner_arm.tools.words import VERB_STEMS

_MAX_ACTION_CHARS = 300
_SUBJECT_CHARS = 120
_QUESTION_WORDS = word_set("what which who whom whose where when why how")
_AUXILIARIES = word_set("is are was were am does do did has have had can could will would should")
# "give me", "show us": what follows is what is wanted.
_TO_ME = re.compile(r"^(give|show|tell|send|get|find|bring)\s+(?:me|us)\s+", re.IGNORECASE)
# The rest of a clause (a dot inside a word, as in an address, does not end it).
_CLAUSE_REST = r"(?:[^,;!?.]|\.(?=\w))*"
_DETERMINER = re.compile(r"\b(?:the|a|an|my|our|their|his|her|its|this|that)\s", re.IGNORECASE)
# The verbs a "does ... <verb>" question puts after its subject.
_BASE_VERBS = word_set(
    "have contain cost take need use mean play show include say hold run make get go come know "
    "want like work belong start end own weigh last pay earn live star feature appear release "
    "support return list allow require mention produce direct write"
)
_THIRD_PERSON = {"have": "has", "do": "does", "go": "goes"}
# A word that reads as a participle ("acted", "born", "written", "done").
_PARTICIPLE = re.compile(r"(?:ed|en|wn|rn|ne)$", re.IGNORECASE)


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def is_question(text: str) -> bool:
    """Whether a piece of a request is a question ("How many rows does each table have?")."""
    words = text.lower().split()
    return text.rstrip().endswith("?") or (bool(words) and words[0] in _QUESTION_WORDS)


def step_action(tool: str, piece: str) -> str:
    """The action of a step that does a piece of the request with `tool`."""
    text = _TO_ME.sub(lambda match: f"{match.group(1)} ", piece.strip().rstrip(" .!;:,"))
    first = text.split()[0].lower() if text.split() else ""
    if is_question(text):
        question = text.rstrip("?").strip()
        phrase = f"Find out {_embedded(question[:1].lower() + question[1:])}"
    elif stem(first) in VERB_STEMS:
        phrase = text[:1].upper() + text[1:]
    else:
        return clip(f'Use {tool} for "{text}"', _MAX_ACTION_CHARS)
    return clip(f"{phrase} with {tool}", _MAX_ACTION_CHARS)


def producer_action(
    tool: str, noun: str | None, for_tool: str, piece: str, description: str
) -> str:
    """The action of a step added to make the `noun` (id) that `for_tool` needs for `piece`
    (no noun: what the examples show it making for that tool)."""
    subject = _subject(piece, noun)
    instruction = _instruction(description)
    if instruction:
        return clip(f"{instruction}: {subject}", _MAX_ACTION_CHARS)
    what = f"the {noun} id" if noun else "what it needs"
    return clip(f"Find {what} for {for_tool} with {tool}: {subject}", _MAX_ACTION_CHARS)


def _subject(piece: str, noun: str | None) -> str:
    """What a step that looks `noun` up for `piece` looks for: the names, numbers, quotes and
    addresses after the noun in the piece ("the collection Star Wars": Star Wars), else the
    words that lead to it ("the billing service"), else those of the piece, else the piece."""
    mention = re.search(rf"\b{re.escape(noun)}s?\b({_CLAUSE_REST})", piece, re.I) if noun else None
    if mention is not None:
        after = specifics(mention.group(1))
        if after:
            return ", ".join(after)
        before = piece[: mention.end() - len(mention.group(1))]
        leads = list(_DETERMINER.finditer(before))
        if leads and len(before[leads[-1].start() :].split()) > 2:
            return before[leads[-1].start() :]
    return ", ".join(specifics(piece)) or clip(piece.strip(), _SUBJECT_CHARS)


def _instruction(description: str) -> str | None:
    """A description's first sentence when it is an instruction ("Search movies by title")."""
    sentence = re.split(r"(?<=[.!?;])\s", description.strip(), maxsplit=1)[0].rstrip(" .;!")
    first = sentence.split()[0].lower() if sentence.split() else ""
    if stem(first) not in ACTION_WORDS or first.endswith("ing") or len(sentence) > 150:
        return None
    return sentence[:1].upper() + sentence[1:]


def _embedded(question: str) -> str:
    """A direct question as the object of "find out": "how many rows does each table have"
    -> "how many rows each table has"; "what is the weather" -> "what the weather is"; a
    question that asks yes or no is quoted."""
    words = question.split()
    lower = [word.lower() for word in words]
    at = next((pos for pos, word in enumerate(lower) if word in _AUXILIARIES), -1)
    if at < 0 or lower[0] not in _QUESTION_WORDS:
        return f'"{question}?"' if at == 0 else question
    head, aux, rest = words[:at], lower[at], words[at + 1 :]
    if aux in ("does", "do", "did"):
        return " ".join([*head, *_done(aux, rest)])
    verb = next((pos for pos, word in enumerate(rest) if pos and _PARTICIPLE.search(word)), -1)
    if verb > 0:  # "when was X born": the subject comes before the verb
        return " ".join([*head, *rest[:verb], aux, *rest[verb:]])
    if len(head) == 1 and rest:  # "what is the weather": it asks for what follows
        return " ".join([*head, *rest, aux])
    return " ".join([*head, aux, *rest])  # "which tables are the largest": already in order


def _done(aux: str, rest: list[str]) -> list[str]:
    """The words after "does", "do" or "did" with the verb after its subject in its own form:
    "each table have" (after "does") -> "each table has"."""
    verb = next((pos for pos, word in enumerate(rest) if pos and word.lower() in _BASE_VERBS), -1)
    if verb < 0:
        return rest
    if aux == "did":
        return [*rest[:verb], "did", *rest[verb:]]
    base = rest[verb].lower()
    form = _THIRD_PERSON.get(base, base + "s") if aux == "does" else base
    return [*rest[:verb], form, *rest[verb + 1 :]]
