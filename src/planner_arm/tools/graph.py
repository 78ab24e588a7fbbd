"""The tool graph of one tool set: which tool yields what another needs, and what worked
examples show about which tool follows which.

Two sources, both optional:

- the tools themselves: what each needs and yields (`traits.py`), matched across tools
  by entity (`GetCollectionImages` needs a collection id, `SearchCollection` yields one).
  A tool that names no input of its own gets the need its name suggests (`guessed`): what
  its name is first about, when the set identifies that by ids and a finder finds it; for a
  tool that books, reserves, buys or rents something, that thing when a finder finds it (one
  books a flight that was found);
- worked examples over these tools (an example over other tools is another set's): how many
  call each tool, how often one tool's step waits for another's (`links`), how often both
  are called close together, and how often a step waits for the one just before it.

Built once per tool set (with the rule-based tool planner), in one pass over the tools and
one over the examples: the work grows with their number and size, bounded by the limits on
both (pairs of steps are counted within `PAIR_WINDOW` of each other). A request's own
examples are counted on top (`with_examples`) without reading the tools again.

Domain only, no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

from planner_arm.limits import ArmSpec, WorkedExample
from planner_arm.text import STOPWORDS
from planner_arm.tools.examples import ExampleFinder
from planner_arm.tools.traits import ToolTraits, entity_key, name_parts, read_traits, tokens
from planner_arm.tools.words import ToolWords

# A tool the examples show waiting for one other in at least this share of its calls (and
# at least MIN_EVIDENCE times) has that one as its usual producer.
USUAL_SHARE = 0.5
MIN_EVIDENCE = 2
# A need guessed from a tool's name that the examples meet in fewer of its calls is dropped.
DOUBT_SHARE = 1 / 3
# Steps of an example further apart than this are not counted as called together.
PAIR_WINDOW = 4


@dataclass(frozen=True)
class ExampleCounts:
    """What worked examples over one tool set show, as counts."""

    examples: int = 0
    calls: Mapping[str, int] = field(default_factory=dict)
    # (a, b): b's step waits for a's step; `together`: a's step shortly before b's.
    links: Mapping[tuple[str, str], int] = field(default_factory=dict)
    together: Mapping[tuple[str, str], int] = field(default_factory=dict)
    # Steps after the first, and how many of them wait for the step just before.
    later_steps: int = 0
    chained: int = 0

    @classmethod
    def of(cls, examples: Iterable[WorkedExample], known: frozenset[str]) -> ExampleCounts:
        calls: Counter[str] = Counter()
        links: Counter[tuple[str, str]] = Counter()
        together: Counter[tuple[str, str]] = Counter()
        count = later = chained = 0
        for example in examples:
            tools = [step.tool for step in example.steps]
            if not set(tools) <= known:
                continue
            count += 1
            calls.update(set(tools))
            for number, step in enumerate(example.steps, 1):
                links.update((tools[dep - 1], step.tool) for dep in step.depends_on if dep < number)
                together.update(
                    (tool, step.tool)
                    for tool in tools[max(0, number - 1 - PAIR_WINDOW) : number - 1]
                )
            later += len(tools) - 1
            chained += sum(n - 1 in step.depends_on for n, step in enumerate(example.steps, 1))
        return cls(count, dict(calls), dict(links), dict(together), later, chained)

    def merged(self, other: ExampleCounts) -> ExampleCounts:
        """Both counts added up."""
        return ExampleCounts(
            self.examples + other.examples,
            dict(Counter(self.calls) + Counter(other.calls)),
            dict(Counter(self.links) + Counter(other.links)),
            dict(Counter(self.together) + Counter(other.together)),
            self.later_steps + other.later_steps,
            self.chained + other.chained,
        )


@dataclass(frozen=True)
class ToolSetFacts:
    """What the tools of a set say about themselves (no examples)."""

    traits: Mapping[str, ToolTraits]
    # Per entity, the tools that yield it, finders first.
    makers: Mapping[str, tuple[str, ...]]
    descriptions: Mapping[str, str]
    nouns: Mapping[str, str]
    words: ToolWords
    # The tools that write (`ToolTraits.writes`): called when asked for, never added to make
    # what another step needs.
    writes: frozenset[str] = frozenset()
    # The last noun of each tool's name, as written there.
    name_nouns: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, specs: Sequence[ArmSpec]) -> ToolSetFacts:
        traits = _with_name_needs({spec.id: read_traits(spec) for spec in specs})
        writes = frozenset(tool for tool, own in traits.items() if own.writes)
        makers: dict[str, list[str]] = {}
        for tool, own in traits.items():
            if tool in writes:
                continue
            for key in own.yields:
                makers.setdefault(key, []).append(tool)
        # A needed id is usually of something that exists, to be looked up: finders first.
        ordered = {
            key: tuple(sorted(tools, key=lambda tool: not traits[tool].finder))
            for key, tools in makers.items()
        }
        descriptions = {spec.id: spec.description for spec in specs}
        words = ToolWords(specs)
        name_nouns = {
            spec.id: nouns[-1]
            for spec in specs
            if (nouns := [w for w in name_parts(spec.id)[1] if w.isalpha() and w not in STOPWORDS])
        }
        return cls(traits, ordered, descriptions, _nouns(specs), words, writes, name_nouns)


class ToolGraph:
    """One tool set's facts, the counts of its worked examples, and those examples."""

    def __init__(
        self,
        facts: ToolSetFacts,
        counts: ExampleCounts,
        finders: Sequence[ExampleFinder] = (),
    ) -> None:
        self.facts = facts
        self.traits = facts.traits
        self.words = facts.words
        self.counts = counts
        # The worked examples over this set's tools only, read to be found by likeness (a
        # request's own first, then the configured ones).
        self.finders = tuple(finders)

    @classmethod
    def build(cls, specs: Sequence[ArmSpec], examples: Iterable[WorkedExample] = ()) -> ToolGraph:
        facts = ToolSetFacts.of(specs)
        known = frozenset(facts.traits)
        own = [example for example in examples if _over(example, known)]
        return cls(facts, ExampleCounts.of(own, known), (ExampleFinder(own),))

    def with_examples(self, examples: Sequence[WorkedExample]) -> ToolGraph:
        """This graph with more examples counted (a request's own); itself when none apply."""
        known = frozenset(self.traits)
        own = [example for example in examples if _over(example, known)]
        if not own:
            return self
        more = ExampleCounts.of(own, known)
        finders = (ExampleFinder(own), *self.finders)
        return ToolGraph(self.facts, self.counts.merged(more), finders)

    def description(self, tool: str) -> str:
        return self.facts.descriptions.get(tool, "")

    def name_noun(self, tool: str) -> str | None:
        """The last noun of `tool`'s name as written there ("appointments" of
        `list_appointments`), None for a name of no noun."""
        return self.facts.name_nouns.get(tool)

    def noun(self, key: str) -> str:
        """How the tools write entity `key` (its shortest form: "movie", not "movies")."""
        return self.facts.nouns.get(key, key)

    def makers(self, key: str) -> tuple[str, ...]:
        """The tools that yield entity `key`, finders first."""
        return self.facts.makers.get(key, ())

    def link_count(self, first: str, then: str) -> int:
        """How many examples have `then`'s step wait for `first`'s."""
        return self.counts.links.get((first, then), 0)

    def follow_share(self, first: str, then: str) -> float:
        """The share of `first`'s calls in the examples that `then`'s step waits for."""
        calls = self.counts.calls.get(first, 0)
        return self.link_count(first, then) / calls if calls else 0.0

    def usually_linked(self, first: str, then: str) -> bool:
        """Whether the examples that call both close together mostly have `then` wait for
        `first`."""
        linked = self.link_count(first, then)
        return linked > 0 and 2 * linked >= self.counts.together.get((first, then), 0)

    def usual_producer(self, tool: str) -> str | None:
        """The tool the examples usually show `tool` waiting for, if any."""
        return self._usual.get(tool)

    @cached_property
    def _usual(self) -> dict[str, str]:
        best: dict[str, tuple[int, str]] = {}
        for (first, then), linked in self.counts.links.items():
            if first != then and linked > best.get(then, (0, ""))[0]:
                best[then] = (linked, first)
        calls = self.counts.calls
        return {
            then: first
            for then, (linked, first) in best.items()
            if linked >= max(MIN_EVIDENCE, USUAL_SHARE * calls.get(then, 0))
            and first not in self.facts.writes
        }

    def doubts(self, tool: str, key: str) -> bool:
        """Whether the examples overrule a need only `tool`'s name suggests: they call the
        tool at least `MIN_EVIDENCE` times, and under `DOUBT_SHARE` of those after a tool that
        yields `key`."""
        calls = self.counts.calls.get(tool, 0)
        if key not in self.traits[tool].guessed or calls < MIN_EVIDENCE:
            return False
        fed = sum(self.link_count(maker, tool) for maker in self.makers(key))
        return fed < DOUBT_SHARE * calls

    def chains(self) -> bool:
        """Whether the examples mostly have a step wait for the one just before it."""
        later = self.counts.later_steps
        return later > 0 and 2 * self.counts.chained >= later


def _over(example: WorkedExample, known: frozenset[str]) -> bool:
    """Whether an example calls only tools of the set (another set's example is not its)."""
    return all(step.tool in known for step in example.steps)


def _with_name_needs(read: Mapping[str, ToolTraits]) -> dict[str, ToolTraits]:
    """Each tool's traits, with the need its name suggests when it names no input (see the
    module's docstring)."""
    found = {key for traits in read.values() if traits.finder for key in traits.yields}
    identified = found & {key for traits in read.values() for key in traits.identified}
    traits = dict(read)
    for tool, own in read.items():
        key = _name_need(own, found, identified)
        if key is not None:
            traits[tool] = replace(
                own, needs=(key,), fetched=frozenset({key}), guessed=frozenset({key})
            )
    return traits


def _name_need(own: ToolTraits, found: set[str], identified: set[str]) -> str | None:
    """The need a tool's name suggests, if it names no input of its own."""
    if own.needs or own.finder or not own.about:
        return None
    if own.acquires:
        key = next((key for key in own.about if key in found), None)
    else:
        key = own.about[0] if own.about[0] in identified else None
    return key if key not in own.yields else None


def _nouns(specs: Sequence[ArmSpec]) -> dict[str, str]:
    """Each entity key as the tools write it: its shortest form."""
    nouns: dict[str, str] = {}
    for spec in specs:
        for word in tokens(f"{spec.id} {spec.description}"):
            key = entity_key(word)
            if word.isalpha() and (key not in nouns or len(word) < len(nouns[key])):
                nouns[key] = word
    return nouns
