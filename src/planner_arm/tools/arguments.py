"""A tool step's arguments by rule (`rule_tool_input`): valid against the tool's own schema,
from the request's context by name, else from what the step's piece of the goal (or its own
part of the goal) clearly gives, else from the output of the step it depends on; else the
`needs` input naming what is missing. No model needed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from planner_arm.errors import PlanValidationError
from planner_arm.plan.inputs import (
    MAX_TEXT_CHARS,
    PathPart,
    StepOutputs,
    clipped,
    instruction_text,
    real_dependencies,
    reference,
)
from planner_arm.plan.output_fields import OutputField, OutputFields
from planner_arm.plan.schemas import PlanStep
from planner_arm.plan.tool_inputs import ToolSchema, check_tool_input, needs_input
from planner_arm.plan.unsourced import Kind, field_kind
from planner_arm.text import STOPWORDS, stem, word_set
from planner_arm.tools.given_values import (
    Given,
    object_words,
    own_part,
    search_terms,
    step_piece,
    values_in,
)
from planner_arm.tools.traits import FIND_WORDS, ID_WORDS, tokens

# Arguments that say what to look for: what the step's piece names fills one.
_SEARCH_ARGUMENTS = word_set(
    "query q search searchquery searchterm searchterms searchtext keywords keyword term terms "
    "lookup"
)
# Arguments that name a thing: of a finder, what it looks for; else a name the text gives.
_NAME_ARGUMENTS = word_set("name title fullname displayname label")
# Arguments that say what to do: the step's action fills one.
_INSTRUCTION_ARGUMENTS = word_set("prompt question instruction instructions task")
# Arguments that hold the text to work on: what an earlier step gave when the piece points
# back to it ("translate its summary"), else the quoted text, else the piece.
_CONTENT_ARGUMENTS = word_set("text content input")
# Arguments that hold words to send or keep: only the quoted text of the piece.
_MESSAGE_ARGUMENTS = word_set("message body note comment")
_POINTS_BACK = word_set("it its them their this that these those result results output above")
_ABSENT = object()


@dataclass(frozen=True)
class _Step:
    """A tool step as its arguments are read: its piece and own part of the goal (and their
    values), its tool's nouns and id arguments, the steps it depends on."""

    action: str
    piece: str
    part: str  # its own part of the goal ("" without a goal)
    values: tuple[tuple[Given, ...], ...]  # the piece's, then its own part of the goal's
    tool_nouns: frozenset[str]
    finds: bool
    id_nouns: dict[str, frozenset[str]]  # each id argument's nouns (raw words)
    deps: list[int]
    # Of each step it depends on that is known: the stems of its tool's name, of its action.
    dep_words: dict[int, tuple[frozenset[str], frozenset[str]]]
    # Of the earlier steps whose tools have an output schema: the fields of their results.
    outputs: StepOutputs

    def source_of(self, nouns: frozenset[str]) -> int:
        """The nearest step it depends on whose tool is about one of `nouns` (stems), else
        whose action names one, else the nearest."""
        for which in (0, 1):
            for number in reversed(self.deps):
                words = self.dep_words.get(number)
                if words is not None and words[which] & nouns:
                    return number
        return self.deps[-1]

    def output(self, number: int, name: str, nouns: Iterable[str] = ()) -> str:
        """The reference to step `number`'s output that argument `name` takes: the field of
        that name when the step's tool has an output schema with exactly one (an id argument:
        the id of its noun, one of `nouns`), else the whole output."""
        return reference(number, _field_path(name, nouns, self.outputs.get(number)))

    @property
    def own(self) -> tuple[Given, ...]:
        return self.values[0]

    def everywhere(self) -> list[Given]:
        return [value for values in self.values for value in values]


def rule_tool_input(
    step: PlanStep,
    schema: ToolSchema,
    goal: str | None,
    context: Mapping[str, Any],
    earlier: Sequence[PlanStep] = (),
    outputs: StepOutputs | None = None,
) -> dict[str, Any]:
    """The arguments of a tool step by rule, valid against the tool's `schema`: each
    argument the request's context names (by name: `movie_id`, `movieId`), each other one a
    value the step's piece (else its own part of the goal) clearly gives (an id after its
    noun or by its prefix, an e-mail address, URL or phone number, a title next to the
    argument's noun, an enum value, what a search looks for); a required one also from a
    `const`, a single `enum` value or a `default`, or for an id the output of the step it
    depends on (of the `earlier` steps, the nearest whose tool is about the id's noun: the
    field of its result named like the argument when its tool's output schema, in `outputs`,
    has exactly one); else the `needs` input naming the required arguments missing."""
    required = schema.required
    reading = _read(step, schema, goal or "", earlier, outputs or {})
    given = _by_key(context)
    arguments: dict[str, Any] = {}
    for name in _in_filling_order(schema):
        fits = _Fits(schema, schema.properties[name])
        found = fits.first(_candidates(given[_key(name)])) if _key(name) in given else _ABSENT
        if found is _ABSENT:
            taken = {str(value) for value in arguments.values()}
            found = _by_rule(name, fits, reading, name in required, taken)
        if found is not _ABSENT:
            arguments[name] = found
    arguments = {name: arguments[name] for name in schema.properties if name in arguments}
    missing = [name for name in required if name not in arguments]
    if not missing:
        try:
            return check_tool_input(schema, arguments, frozenset(reading.deps), reading.outputs)
        except PlanValidationError:
            missing = required
    return needs_input(missing, arguments, instruction_text(step.action))


def _read(
    step: PlanStep,
    schema: ToolSchema,
    goal: str,
    earlier: Sequence[PlanStep],
    outputs: StepOutputs,
) -> _Step:
    tool = step.required_arm
    piece = step_piece(step.action, tool)
    own = tuple(values_in(piece))
    part = own_part(piece, goal) if goal else ""
    values = (own, tuple(values_in(part))) if part else (own,)
    tool_words = [word for word in tokens(tool) if word not in ID_WORDS]
    id_nouns = {
        name: frozenset(_id_nouns(tokens(name), tool_words))
        for name in schema.properties
        if tokens(name) and tokens(name)[-1] in ID_WORDS
    }
    finds = any(stem(word) in FIND_WORDS for word in tool_words)
    nouns = frozenset(stem(word) for word in tool_words if stem(word) not in FIND_WORDS)
    deps = real_dependencies(step.depends_on)
    dep_words = {
        item.step: (_stems(tokens(item.required_arm)), _stems(tokens(item.action)))
        for item in earlier
        if item.step in deps
    }
    return _Step(step.action, piece, part, values, nouns, finds, id_nouns, deps, dep_words, outputs)


def _field_path(
    name: str, nouns: Iterable[str], fields: OutputFields | None
) -> tuple[PathPart, ...]:
    """The path to the field of a result that argument `name` takes: the one field named
    like it (`bookId` is `book_id`); for an id argument also the one `<noun>_id`, else the
    one `id` of an object named for its noun (`books[0].id`). None found, or several: ()."""
    if fields is None:
        return ()
    keys = {_key(name), *(f"{_key(noun)}id" for noun in nouns)} - {"id"}
    stems = frozenset(stem(noun) for noun in nouns)

    def named(item: OutputField) -> bool:
        return _key(item.name) in keys

    def noun_id(item: OutputField) -> bool:
        parent = item.parent
        return _key(item.name) == "id" and parent is not None and stem(parent) in stems

    found = fields.paths_of(named)
    if not found and stems:
        found = fields.paths_of(noun_id)
    return found[0] if len(found) == 1 else ()


def _stems(words: Iterable[str]) -> frozenset[str]:
    return frozenset(stem(word) for word in words)


def _id_nouns(words: list[str], tool_words: list[str]) -> list[str]:
    # A bare `id` is an id of what the tool's name is about: its last noun.
    return words[:-1] or tool_words[-1:]


def _in_filling_order(schema: ToolSchema) -> list[str]:
    """The arguments, those that say what to look for last: a value another one takes is
    not looked for too."""
    names = list(schema.properties)
    return sorted(names, key=lambda name: _key(name) in _SEARCH_ARGUMENTS | _NAME_ARGUMENTS)


def _key(name: str) -> str:
    return re.sub(r"[^0-9a-z]", "", name.lower())


def _by_key(context: Mapping[str, Any]) -> dict[str, Any]:
    """The context's values by their key as an argument name reads (`movieId` is `movie_id`),
    the first of each."""
    found: dict[str, Any] = {}
    for key, value in context.items():
        if isinstance(key, str):
            found.setdefault(_key(key), value)
    return found


class _Fits:
    """Which values one argument's schema takes, read within the whole tool schema."""

    def __init__(self, schema: ToolSchema, spec: Any) -> None:
        self.schema = schema
        self.spec = spec
        self.resolved = schema.resolved(spec)

    def first(self, values: Iterable[Any]) -> Any:
        return next((value for value in values if self.schema.fits(self.spec, value)), _ABSENT)

    def choices(self) -> list[Any]:
        """The values an `enum` allows, of the argument or of one of its `anyOf` branches
        (pydantic's optional enum)."""
        found: list[Any] = []
        for spec in [self.resolved, *_branches(self.resolved)]:
            enum = self.schema.resolved(spec).get("enum")
            found += enum if isinstance(enum, list) else []
        return found


def _branches(spec: Mapping[str, Any]) -> list[Any]:
    branches = spec.get("anyOf") or spec.get("oneOf") or []
    return branches if isinstance(branches, list) else []


def _candidates(value: Any) -> list[Any]:
    """A value as given, and as the other type a caller often means (42 and "42")."""
    if isinstance(value, bool):
        return [value]
    if isinstance(value, int | float):
        return [value, str(value)]
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,18}", value.strip()):
        return [value, int(value.strip())]
    return [value]


def _by_rule(name: str, fits: _Fits, step: _Step, required: bool, taken: set[str]) -> Any:
    fixed = _fixed(fits.resolved)
    if required and fixed is not _ABSENT:
        return fixed
    named = _named_choice(fits, step, required)
    if named is not _ABSENT or name in step.id_nouns:
        return _id_argument(name, fits, step, required) if named is _ABSENT else named
    if required and "default" in fits.resolved:
        return fits.resolved["default"]
    kind = field_kind(name, fits.resolved)
    if kind is not None:
        return fits.first(_addresses(kind, step, required))
    return _by_words(name, fits, step, required, taken)


def _fixed(spec: Mapping[str, Any]) -> Any:
    """The one value the schema allows or offers: `const`, a single `enum`, a `default`."""
    if "const" in spec:
        return spec["const"]
    enum = spec.get("enum")
    if isinstance(enum, list) and len(enum) == 1:
        return enum[0]
    return _ABSENT


def _named_choice(fits: _Fits, step: _Step, required: bool) -> Any:
    """The `enum` value the piece (a required argument's: else its own part of the goal)
    names as a word, whatever its case."""
    choices = [value for value in fits.choices() if isinstance(value, str)]
    choices = [value for value in choices if len(value) > 1 and value.lower() not in STOPWORDS]
    texts = [step.piece, step.part] if required else [step.piece]
    for text in texts:
        for value in choices:
            if re.search(rf"(?<!\w){re.escape(value)}(?!\w)", text, re.IGNORECASE):
                return fits.first([value])
    return _ABSENT


def _id_argument(name: str, fits: _Fits, step: _Step, required: bool) -> Any:
    """An id the texts give after its noun ("member M-2", "order #A-17"), else one shaped
    with its noun's prefix ("B-300" for a book) that fits no other id argument of the tool;
    for a required argument, else the output of the step it depends on that finds it."""
    nouns = step.id_nouns[name]
    stems = frozenset(stem(noun) for noun in nouns)
    for values in step.values:
        tagged = [v.text for v in values if v.kind in ("id", "number") and stem(v.before) in stems]
        found = fits.first(item for value in tagged for item in _candidates(value))
        if found is _ABSENT:
            found = fits.first(_shaped_ids(name, values, step))
        if found is not _ABSENT:
            return found
    if required and step.deps:
        return fits.first([step.output(step.source_of(stems), name, nouns)])
    return _ABSENT


def _shaped_ids(name: str, values: Iterable[Given], step: _Step) -> list[str]:
    """The ids, next to no other id argument's noun, whose prefix opens the noun of `name`
    and of no other id argument."""
    others = [words for other, words in step.id_nouns.items() if other != name]
    other_stems = {stem(noun) for words in others for noun in words}
    return [
        value.text
        for value in values
        if value.kind == "id"
        and stem(value.before) not in other_stems
        and _prefix_fits(value.text, step.id_nouns[name])
        and not any(_prefix_fits(value.text, words) for words in others)
    ]


def _prefix_fits(value: str, nouns: Iterable[str]) -> bool:
    """Whether an id's letters before its number ("B" of "B-300", "ORD" of "ORD-7") open
    one of `nouns` and follow its letters, as "B" does "book"."""
    found = re.match(r"#?([A-Z]{1,5}[-_]?|[A-Za-z]{1,5}[-_])\d", value)
    if found is None:
        return False
    letters = found.group(1).rstrip("-_").lower()
    return any(_in_order(letters, noun.lower()) for noun in nouns)


def _in_order(letters: str, word: str) -> bool:
    if not word or letters[:1] != word[:1]:
        return False
    rest = iter(word)
    return all(letter in rest for letter in letters)


def _addresses(kind: Kind, step: _Step, required: bool) -> list[str]:
    """The e-mail addresses, URLs or phone numbers the texts give, for an argument of
    `kind` (a recipient: an address, else a phone number)."""
    kinds = ("email", "phone") if kind == "recipient" else (kind,)
    values = step.everywhere() if required else list(step.own)
    return [value.text for want in kinds for value in values if value.kind == want]


def _by_words(name: str, fits: _Fits, step: _Step, required: bool, taken: set[str]) -> Any:
    key = _key(name)
    if key in _SEARCH_ARGUMENTS or (key in _NAME_ARGUMENTS and step.finds):
        return _search(fits, step, required, taken)
    if key in _INSTRUCTION_ARGUMENTS:
        return fits.first([clipped(step.action, MAX_TEXT_CHARS)]) if required else _ABSENT
    if key in _CONTENT_ARGUMENTS:
        return _content(name, fits, step, required)
    quoted = [value.text for value in step.own if value.quoted]
    if key in _MESSAGE_ARGUMENTS:
        return fits.first(quoted[:1])
    if _takes_numbers(fits.resolved):
        return fits.first(_quantities(_argument_words(name, fits), step))
    return _named(name, fits, step, required, taken)


def _search(fits: _Fits, step: _Step, required: bool, taken: set[str]) -> Any:
    """What the step's piece searches for: what it names, else (required) its object words,
    not its verb."""
    goal = step.values[1] if len(step.values) > 1 else ()
    terms = search_terms(step.own, goal, step.tool_nouns, taken)
    if terms is None and required:
        terms = object_words(step.piece)
    return _ABSENT if terms is None else fits.first([clipped(terms, MAX_TEXT_CHARS)])


def _content(name: str, fits: _Fits, step: _Step, required: bool) -> Any:
    if step.deps and _POINTS_BACK & set(tokens(step.piece)):
        return fits.first([step.output(step.deps[-1], name)])
    quoted = [value.text for value in step.own if value.quoted]
    if quoted:
        return fits.first(quoted[:1])
    return fits.first([clipped(step.piece, MAX_TEXT_CHARS)]) if required else _ABSENT


def _takes_numbers(spec: Mapping[str, Any]) -> bool:
    kinds = spec.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    return bool({"integer", "number"} & set(kinds)) and "string" not in kinds


def _argument_words(name: str, fits: _Fits) -> frozenset[str]:
    """The stems of what an argument is, by its name and description."""
    words = tokens(name)
    description = fits.resolved.get("description")
    if isinstance(description, str):
        words += tokens(description)
    return frozenset(stem(word) for word in words) - STOPWORDS - ID_WORDS - {""}


def _quantities(nouns: frozenset[str], step: _Step) -> list[Any]:
    """The numbers written just before the argument's noun ("2 seats" for `seats`)."""
    found = [value for value in step.own if value.kind == "number" and stem(value.after) in nouns]
    return [int(value.text) for value in found]


def _named(name: str, fits: _Fits, step: _Step, required: bool, taken: set[str]) -> Any:
    """A title or quoted name next to the argument's noun (from its name or description:
    "the Central branch" for `branch`, 'Central branch' too), else, for a required
    `name`/`title`, the first title of the piece that no other argument took."""
    nouns = _argument_words(name, fits)
    if _key(name) in _NAME_ARGUMENTS:
        nouns |= step.tool_nouns
    for values in step.values:
        titles = [value for value in values if value.kind == "title" and value.next_to(nouns)]
        found = fits.first(value.without(nouns) for value in titles)
        if found is not _ABSENT:
            return found
    if required and _key(name) in _NAME_ARGUMENTS:
        return fits.first(v.text for v in step.own if v.kind == "title" and v.text not in taken)
    return _ABSENT
