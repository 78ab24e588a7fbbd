"""What one tool needs and what it yields, read from the tool alone.

A tool *needs* an entity when it takes that entity's id as input, and *yields* one when it
gives ids out. Read, strongest first:

- what it declares: `consumes` and `produces` (a declared type that is not an id, `text`,
  `image`, links steps but is something a caller can give, so no step is added to make it);
- its input schema: a required property `movie_id` (or `movieId`) is a movie id it needs; a
  property `id` is an id of what the tool's name is about. Local `$ref`s are followed
  (pydantic puts nested models under `$defs`); nothing outside the schema is read;
- its output schema (an MCP tool's `outputSchema`): the ids it holds, at any level of its
  objects and lists, are yielded (`{"books": [{"book_id": ...}]}` yields books), and its
  property names are the fields its result holds (`author`, `due_date`);
- its description: an id mentioned after "by", "for", "given", "with", "based on" ... is
  needed ("Get the cast of a movie by its movie id"), one after "return", "yield", "get" ...
  is yielded ("Search movies by title and return their ids"); "its" and "their" (and a bare
  "by id") stand for the noun before them that the tool's name puts first, else the nearest
  noun, skipping the "by title" kind of phrase that says how the tool is asked. A schema
  outranks the words: when the input schema lists its properties, the tool needs the ids
  those name and no other, and an id the description names that the inputs do not is one
  the tool gives out ("returns matching books with their book_id");
- its name: a tool that searches, finds, lists or queries (`SearchCollection`,
  `flight_search`, or a description that opens so: "Look up a member by e-mail") yields what
  it is about; a tool named for plural things (`GetTrendingMovies`) lists them.

A tool *writes* when it changes something: annotated `destructiveHint: true` or
`readOnlyHint: false`, or, with no hint (most tools), when its name's verb (or, for a name
with no verb, its description's first word) creates, places, renews, cancels, deletes,
updates, sends, orders, books or pays (`WRITE_VERBS`); `readOnlyHint: true` says it does not.
A write tool is planned when a request asks for it, and never added to make what another
step needs.

Entities are keyed by their noun's stem (`movies` and `movie` are one entity), so what one
tool yields is found as what another needs. Only the tool's own text is read here; the tool
graph (`graph.py`) relates the tools of a set.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from planner_arm.limits import ArmSpec
from planner_arm.text import STOPWORDS, stem, word_set
from planner_arm.tool_schema import SchemaProblem, reference_targets

ID_WORDS = word_set("id ids identifier identifiers")
# Words of a tool name (as stems) that say it looks things up: it yields what it finds.
FIND_WORDS = frozenset(
    stem(word)
    for word in word_set(
        "search searching find finder lookup look list listing query queries discover browse locate"
    )
)
# Words of a tool name (as stems) that say it books, reserves, buys or rents something.
ACQUIRE_WORDS = frozenset(
    stem(word)
    for word in word_set("book booking reserve reservation buy purchase rent rental hire")
)
# Verbs (as stems) of tools that change something: a tool whose name acts so writes.
WRITE_VERBS = frozenset(
    stem(word)
    for word in word_set(
        "create add insert register update edit modify change set delete del remove cancel "
        "cancelling cancellation refund post send notify share book booking reserve "
        "reservation order place pay buy purchase sell transfer submit approve reject assign "
        "rent rental hire issue renew schedule reschedule rescheduling upload save write apply "
        "invite subscribe unsubscribe archive move rename reset mark enroll enrol charge "
        "deposit withdraw publish reply forward close lock unlock enable disable deploy start "
        "stop restart checkout"
    )
)
# Action words of tool names, so what a name is about can be told from what it does.
ACTION_WORDS = (
    frozenset(
        stem(word)
        for word in word_set(
            "get fetch retrieve read show view describe create add new make build generate update "
            "edit modify change set delete del remove cancel cancelling cancellation refund post "
            "send notify share book booking reserve order place pay buy purchase sell transfer "
            "check verify validate track tracking run start stop open close schedule reschedule "
            "rescheduling upload download export import convert translate summarize summarise "
            "analyze analyse count calculate compute predict recommend compare play record save "
            "write apply submit approve reject assign login log sign register rent issue merge "
            "changing modification inquiry request query search find lookup look list listing "
            "reservation rental hire discover browse locate"
        )
    )
    | WRITE_VERBS
)
# Before an id: the id is asked for ("by its id", "for a customer id", "given the order id").
_NEED_CUES = word_set(
    "by for given using use with from on via per require requires required need needs take "
    "takes accept accepts input based provided specified whose belonging about to in into"
)
# Before an id: the id is given out ("return their ids", "returns the customer_id").
_YIELD_CUES = word_set(
    "return returns returned returning yield yields give gives output outputs produce "
    "produces provide provides get gets obtain obtains fetch fetches retrieve retrieves find "
    "finds search searches list lists lookup"
)
# Cues that read as "holding" after a word that gives out: "returns books with their ids".
_WEAK_NEED_CUES = word_set("with including")
# Words that give out whatever follows them in the sentence.
_GIVING_CUES = word_set(
    "return returns returned returning yield yields give gives output outputs produce produces "
    "provide provides"
)
_PRONOUNS = word_set("its their his her")
# Words before an id that are not its noun ("by its id", "return ids").
_NOT_ID_NOUNS = STOPWORDS | _PRONOUNS | _NEED_CUES | _YIELD_CUES
# Words that are not the noun an "its" stands for.
_NOT_NOUNS = STOPWORDS | ID_WORDS | _PRONOUNS
# Words of a tool name that do not say what it is about.
_NOT_ABOUT = STOPWORDS | ID_WORDS | word_set("api tool tools service")
# How a tool is asked ("by title", "with a name"): not what an "its" stands for.
_ASKED_BY = word_set("by with using via")
_CUE_WINDOW = 6
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_E_MAIL = re.compile(r"\be-mail", re.IGNORECASE)
_TOKEN = re.compile(r"[^\W_]+|[.;:!?]")
_SENTENCE_END = frozenset(".;:!?")


@dataclass(frozen=True)
class ToolTraits:
    """What a tool needs and yields (entity keys, most essential first)."""

    needs: tuple[str, ...] = ()
    yields: tuple[str, ...] = ()
    # The needs a step may be added for: ids, which a caller rarely has (not a declared
    # type such as `text`, which the caller gives).
    fetched: frozenset[str] = frozenset()
    # It looks things up (its name searches, finds, lists or queries).
    finder: bool = False
    # What its name is about, as entity keys, in the name's order ("GetMovieCredit": movie,
    # credit).
    about: tuple[str, ...] = ()
    # The entities its schema, description or declarations name with an id ("movie_id",
    # "by its collection id"): what the tool set identifies by ids.
    identified: frozenset[str] = frozenset()
    # Its name says it books, reserves, buys or rents something.
    acquires: bool = False
    # The needs only its name suggests (the tool graph adds them): weaker evidence, which
    # worked examples can overrule.
    guessed: frozenset[str] = frozenset()
    # It changes something (see the module's docstring).
    writes: bool = False
    # The stems of the field names its result holds (its output schema's properties).
    fields: frozenset[str] = frozenset()
    # Its arguments' names, as words ("book_id" -> "book id"), the input schema's order.
    arguments: tuple[str, ...] = ()

    def fetched_needs(self) -> list[str]:
        """The needs a step may be added for, most essential first."""
        return [key for key in self.needs if key in self.fetched]


def tokens(text: str) -> list[str]:
    """Lower-case words and sentence ends; `snake_case` and `camelCase` split apart."""
    spaced = _CAMEL.sub(" ", _E_MAIL.sub("email", text).replace("_", " ").replace("-", " "))
    return _TOKEN.findall(spaced.lower())


def entity_key(word: str) -> str:
    """The key an entity is matched by: its noun's stem ("movies", "movie" -> one key)."""
    return stem(word.lower())


def name_parts(tool_id: str) -> tuple[str | None, list[str]]:
    """A tool name's action word (leading, trailing as in `flight_search`, else the first
    one inside, as in "Image Search (by Image)") and the other words, what it acts on."""
    words = [word for word in tokens(tool_id) if word not in _SENTENCE_END]
    if len(words) < 2:
        return None, words
    for at in dict.fromkeys([0, len(words) - 1, *range(1, len(words) - 1)]):
        if stem(words[at]) in ACTION_WORDS:
            return words[at], words[:at] + words[at + 1 :]
    return None, words


def read_traits(spec: ArmSpec) -> ToolTraits:
    """A tool's traits from what it declares, its schema, its description and its name."""
    verb, about = name_parts(spec.id)
    content = [word for word in about if word not in _NOT_ABOUT and not word.isdigit()]
    about_keys = tuple(dict.fromkeys(entity_key(word) for word in content))
    acting = stem(verb) if verb is not None else _opening_verb(spec.description)
    finder = acting is not None and acting in FIND_WORDS
    needs, fetched, yields, identified = _ids(spec, about_keys)
    # A finder yields what it finds; a tool named for plural things lists them.
    if about_keys and (finder or is_plural(content[-1])):
        yields.append(about_keys[-1])
    return ToolTraits(
        needs=tuple(dict.fromkeys(needs)),
        yields=tuple(dict.fromkeys(yields)),
        fetched=frozenset(fetched),
        finder=finder,
        about=about_keys,
        identified=frozenset(identified),
        acquires=verb is not None and stem(verb) in ACQUIRE_WORDS,
        writes=writes(spec, acting),
        fields=frozenset(stem(word) for word in output_words(spec)),
        arguments=tuple(
            " ".join(tokens(name))
            for name in _property_names(spec.input_schema, _Refs(spec.input_schema), False, 0)
        ),
    )


def output_words(spec: ArmSpec) -> list[str]:
    """The words of the field names a tool's result holds (its output schema's properties, a
    few levels down), in order, once each."""
    names = _property_names(spec.output_schema, _Refs(spec.output_schema), False, 3)
    found = (word for name in names for word in tokens(name))
    return list(dict.fromkeys(w for w in found if w not in _SENTENCE_END and w not in STOPWORDS))


def writing(tools: Sequence[ArmSpec]) -> dict[str, bool]:
    """Whether each of a caller's tools writes, by id."""
    return {tool.id: writes(tool) for tool in tools}


def writes(spec: ArmSpec, acting: str | None = None) -> bool:
    """Whether a tool changes something (see the module's docstring); `acting`: the stem of
    the verb its name (else its description) opens with, when already read."""
    hints = spec.annotations or {}
    if hints.get("readOnlyHint") is True:
        return False
    if spec.destructive() or hints.get("readOnlyHint") is False:
        return True
    if acting is None:
        verb = name_parts(spec.id)[0]
        acting = stem(verb) if verb is not None else _opening_verb(spec.description)
    return acting is not None and acting in WRITE_VERBS


def _opening_verb(description: str) -> str | None:
    """The stem of the action word a description opens with ("Look up a member": look)."""
    words = [word for word in tokens(description) if word not in _SENTENCE_END][:1]
    return stem(words[0]) if words and stem(words[0]) in ACTION_WORDS else None


def _ids(spec: ArmSpec, about: Sequence[str]) -> tuple[list[str], list[str], list[str], set[str]]:
    """What a tool's declarations, schema and description say it needs (all, and the ids
    among them) and yields, and the entities they name with an id."""
    declared = [_resource(resource) for resource in spec.consumes]
    produced = [_resource(resource) for resource in spec.produces]
    described_needs, described_yields = described_ids(spec.description, about)
    if _property_names(spec.input_schema, _Refs(spec.input_schema), False, 0):
        # The schema says what the tool takes; the words say more only of what it gives.
        described_needs = []
    fetched = [key for key, is_id in declared if is_id]
    fetched += [*_schema_ids(spec.input_schema, about, required_only=True), *described_needs]
    needs = [*(key for key, _ in declared), *fetched]
    # What its result holds (an MCP tool's outputSchema): the ids there, at any level.
    output_ids = _schema_ids(spec.output_schema, about, required_only=False)
    yields = [*(key for key, _ in produced), *described_yields, *output_ids]
    identified = {key for key, is_id in produced if is_id} | set(fetched) | set(described_yields)
    return needs, fetched, yields, identified


def is_plural(word: str) -> bool:
    """Whether a noun is written in the plural ("movies", not "address")."""
    return word.endswith("s") and not word.endswith(("ss", "us", "is"))


def _resource(resource: str) -> tuple[str, bool]:
    """A declared resource as an entity key, and whether it names an id (`movie_id`)."""
    words = tokens(resource)
    is_id = len(words) > 1 and words[-1] in ID_WORDS
    noun = words[-2] if is_id else (words[-1] if words else resource)
    return entity_key(noun), is_id


def _schema_ids(
    schema: Mapping[str, Any] | None, about: Sequence[str], *, required_only: bool
) -> list[str]:
    """The ids a schema's properties name (`movie_id`). An input schema's: only the required
    ones when it says which. An output schema's: every one, in its objects and the items of
    its lists too (a search yields `{"results": [{"movie_id": ...}]}`)."""
    names = _property_names(schema, _Refs(schema), required_only, 0 if required_only else 3)
    keys: list[str] = []
    for name in names:
        words = [word for word in tokens(name) if word not in _SENTENCE_END]
        if not words or words[-1] not in ID_WORDS:
            continue
        if len(words) > 1:
            keys.append(entity_key(words[-2]))
        elif about:
            keys.append(about[0])
    return keys


class _Refs:
    """The local references of one schema and what each points at (none for a schema whose
    references cannot be followed: a request's schemas were checked when they came in)."""

    def __init__(self, schema: Any) -> None:
        try:
            self.targets = reference_targets(schema) if _has_ref(schema) else {}
        except SchemaProblem:
            self.targets = {}

    def followed(self, schema: Any) -> Any:
        """`schema` with its reference followed (a few hops), and the one object or list
        branch of an `anyOf`/`oneOf` (an optional field: the value or null)."""
        for _ in range(4):
            if not isinstance(schema, Mapping):
                return schema
            ref = schema.get("$ref")
            if isinstance(ref, str) and ref in self.targets:
                schema = self.targets[ref]
                continue
            branches = [
                branch
                for keyword in ("anyOf", "oneOf", "allOf")
                if isinstance(schema.get(keyword), list)
                for branch in schema[keyword]
                if isinstance(branch, Mapping) and branch.get("type") != "null"
            ]
            if "properties" not in schema and "items" not in schema and len(branches) == 1:
                schema = branches[0]
                continue
            return schema
        return schema


def _has_ref(schema: Any) -> bool:
    return isinstance(schema, Mapping) and "$ref" in str(schema)


def _property_names(schema: Any, refs: _Refs, required_only: bool, depth: int) -> list[str]:
    """The property names of an object schema, and (`depth` levels down) of the objects it
    holds and the items of its lists, references followed."""
    schema = refs.followed(schema)
    if not isinstance(schema, Mapping):
        return []
    if isinstance(schema.get("items"), Mapping):
        schema = refs.followed(schema["items"])
        if not isinstance(schema, Mapping):
            return []
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return []
    names = [name for name in properties if isinstance(name, str)]
    required = schema.get("required")
    if required_only and isinstance(required, list):
        names = [name for name in required if name in names]
    if depth > 0:
        for name in list(properties):
            names += _property_names(properties[name], refs, required_only, depth - 1)
    return names


def described_ids(description: str, about: Sequence[str]) -> tuple[list[str], list[str]]:
    """The ids a description says the tool needs, and those it says the tool yields."""
    words = tokens(description)
    needs: list[str] = []
    yields: list[str] = []
    for at, word in enumerate(words):
        if word not in ID_WORDS:
            continue
        noun, start = _id_noun(words, at, about)
        key = entity_key(noun) if noun else (about[0] if about else None)
        if key is None:
            continue
        (yields if _yielded(words, start) else needs).append(key)
    return needs, yields


def _id_noun(words: list[str], at: int, about: Sequence[str]) -> tuple[str | None, int]:
    """The noun an id at `at` belongs to, and where its phrase starts: "movie id", "its id",
    "the id of the movie"."""
    before = words[at - 1] if at > 0 else ""
    if before.isalpha() and before not in _NOT_ID_NOUNS:
        return before, at - 1
    if words[at + 1 : at + 2] == ["of"]:
        after = [word for word in words[at + 2 : at + 5] if word not in STOPWORDS]
        if after and after[0].isalpha():
            return after[0], at - 1 if before in _PRONOUNS or before in STOPWORDS else at
    start = at - 1 if before in _PRONOUNS or before in ("the", "a", "an") else at
    return _referent(words[:start], plural=before == "their", about=about), start


def _referent(before: list[str], *, plural: bool, about: Sequence[str]) -> str | None:
    """What "its" or "their" (or a bare "by id") stands for: of the nouns of the sentence
    before it, the one the tool's name puts first ("GetCollectionImages": the collection),
    else the nearest (a plural one for "their")."""
    candidates = _nouns_before(before, about)
    if plural:
        candidates = [word for word in candidates if is_plural(word)] or candidates
    named = [word for word in candidates if entity_key(word) in about]
    if named:
        return min(named, key=lambda word: about.index(entity_key(word)))
    return candidates[0] if candidates else None


def _nouns_before(before: list[str], about: Sequence[str]) -> list[str]:
    """The words of the sentence that ends `before` that may be nouns, nearest first, but
    not those that say how the tool is asked ("by title"); an action word is one when the
    tool's name is about it (`get_book`: "book")."""
    nouns: list[str] = []
    for index in range(len(before) - 1, -1, -1):
        word = before[index]
        if word in _SENTENCE_END:
            break
        asked_by = index > 0 and before[index - 1] in _ASKED_BY
        if asked_by or not word.isalpha() or len(word) < 3 or word in _NOT_NOUNS:
            continue
        if stem(word) not in ACTION_WORDS or entity_key(word) in about:
            nouns.append(word)
    return nouns


def _yielded(words: list[str], start: int) -> bool:
    """Whether the id whose phrase starts at `start` is given out rather than asked for: the
    nearest cue word before it, within the sentence, says which (none: asked for). "With"
    says so only when no word before it in the sentence gives out: "returns matching books
    with their book_id" gives ids out, "Get a book with its id" asks for one."""
    weak = False
    for index in range(start - 1, -1, -1):
        word = words[index]
        if word in _SENTENCE_END:
            break
        if word in (_GIVING_CUES if weak else _YIELD_CUES):
            return True
        if weak:
            continue
        if word in _WEAK_NEED_CUES:
            weak = True
        elif word in _NEED_CUES and index >= start - 1 - _CUE_WINDOW:
            return False
    return False
