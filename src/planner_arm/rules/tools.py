"""The rule-based plan over a caller's tools: the tools the request calls for, each after the
steps that make its inputs, linked by what each needs.

1. Pieces. The request is cut into pieces of work (`goal_pieces`: sentences, then "and",
   "then", "after that", a comma before a verb).
2. A tool per piece, only a strong one. The candidates are the piece's best BM25 matches
   (over the tools' names, descriptions and the requests of the worked examples that call
   them) and the tools it names most strongly by their own words (`ToolWords.strength`). The
   best candidate by its BM25 match, its own words, how often the examples call it after the
   tool before and how well the whole request matches it is taken only when the piece names
   it strongly enough (`MIN_STRENGTH`; `UNLED_FACTOR` times that for a piece that opens with
   no verb, a detail such as "the check-out date on Monday"), or when it is the piece's best
   BM25 match and worked examples call it (their requests' words are then the evidence). A
   piece with no such tool adds no step; when it asks for work (opens with a verb or asks a
   question), the warning `goal_part_unplanned` names it. A tool is used once, unless two
   pieces ask it for different things (other names, numbers, quotes).
3. Producers. A step whose tool needs an id (`ToolGraph.traits`) that no step before it
   yields and the request does not give itself ("movie 603") gets, before it, a step of the
   tool that yields it: the one the examples most often show before this tool, else one that
   needs nothing itself (finders first), else the best match for the piece; and so on for that
   step's own needs, `MAX_PRODUCER_DEPTH` deep. With no such need, the tool the examples
   usually show it waiting for (`ToolGraph.usual_producer`) is added the same way. A step
   that yields what an earlier one needs is moved before it.
4. Links. Each step waits for the nearest earlier step that yields what it needs, for the
   nearest earlier step the examples usually show it waiting for, and for the piece before
   when the request puts it after that piece ("then"), refers back to it ("it", "the
   result") or delivers it (a tool that sends, posts or notifies, after one that does not).
   A step with none of these waits for the step before only when the worked examples mostly
   chain their steps; otherwise it is independent, and runs in parallel.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from graphlib import CycleError
from typing import Any

from planner_arm.limits import WorkedExample
from planner_arm.plan.arms import ArmResolver, typical_cost_tier, typical_duration_seconds
from planner_arm.plan.dag import stable_topological_order
from planner_arm.plan.draft import DraftPlan, DraftStep, repair
from planner_arm.plan.example_finder import Template, nearest
from planner_arm.plan.lexicon import specifics, stem, word_set
from planner_arm.plan.tool_graph import ToolGraph
from planner_arm.plan.tool_index import ToolIndex
from planner_arm.plan.tool_traits import ID_WORDS, ToolTraits, entity_key, tokens
from planner_arm.plan.tool_words import (
    asks_to_read,
    known_action,
    leading_verb,
    same_action,
)
from planner_arm.plan.tools import GoalPiece, goal_pieces, name_words
from planner_arm.rules.tool_actions import (
    clip,
    is_question,
    producer_action,
    step_action,
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
GIVEN_WEIGHT = 0.5
GIVEN_STRENGTH = 0.25
NUMBER_WEIGHT = 0.3
# How deep producers of producers are added.
MAX_PRODUCER_DEPTH = 2
_WARNING_CHARS = 80
_CRITERION_CHARS = 120

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


@dataclass(frozen=True)
class ToolPlanner:
    """The rule-based planner over one tool set: its resolver (with the BM25 index) and its
    tool graph (built once, with the configured worked examples)."""

    resolver: ArmResolver
    graph: ToolGraph

    @classmethod
    def over(cls, resolver: ArmResolver, examples: Sequence[WorkedExample] = ()) -> ToolPlanner:
        return cls(resolver, ToolGraph.build(resolver.arms, examples))

    def plan(self, goal: str, max_steps: int, examples: Sequence[WorkedExample] = ()) -> DraftPlan:
        """A plan of tool calls for `goal`, at most `max_steps` of them; `examples`: the
        request's own worked examples, counted with the configured ones."""
        graph = self.graph.with_examples(examples)
        template = nearest(goal, graph.finders)
        if template is not None:
            return self._templated(goal, template, graph, max_steps)
        index = self.resolver.index or ToolIndex(self.resolver.arms)
        chosen, unplanned = self.matcher(goal, graph).chosen()
        if not chosen:  # a plan has a step: the best match for the whole request
            ranked = index.ranked(goal)
            chosen = [PlannedCall(ranked[0][0] if ranked else self.resolver.arm_ids[0], goal, 0)]
        steps = _linked(_ordered(_with_producers(chosen, graph, goal), graph), graph)
        steps = _trimmed(steps, max_steps)
        warnings = [repair("goal_part_unplanned", clip(text, _WARNING_CHARS)) for text in unplanned]
        drafts = [draft_step(step, number, graph) for number, step in enumerate(steps, 1)]
        return DraftPlan(drafts, _rationale(steps, unplanned), warnings=warnings)

    def _templated(
        self, goal: str, template: Template, graph: ToolGraph, max_steps: int
    ) -> DraftPlan:
        """`goal` planned as the worked example it reads like (`rules/tool_template.py`):
        its tools and links, each step with the piece of `goal` that names its tool most
        strongly, or, named by none, made for the step that waits for it."""
        pieces = [piece.text for piece in goal_pieces(goal)] or [goal]
        steps = [
            _template_call(number, template, pieces, graph)
            for number in range(1, 1 + len(template.example.steps))
        ]
        steps = _trimmed(steps, max_steps)
        tools = {step.tool for step in steps}
        undone = self.matcher(goal, graph).undone(tools)
        warnings = [repair("goal_part_unplanned", clip(text, _WARNING_CHARS)) for text in undone]
        drafts = [draft_step(step, number, graph) for number, step in enumerate(steps, 1)]
        called = ", ".join(dict.fromkeys(step.tool for step in steps))
        rationale = (
            "Rule-based tool plan after the worked example most like the request "
            f"(likeness {template.likeness:.2f}): {called}."
        )
        return DraftPlan(drafts, rationale, warnings=warnings)

    def matcher(self, goal: str, graph: ToolGraph) -> PieceMatcher:
        """The pieces of `goal`, matched to this set's tools with `graph` (this planner's
        graph, or it with a request's own examples)."""
        index = self.resolver.index or ToolIndex(self.resolver.arms)
        # The configured examples' requests describe their tools in the BM25 index.
        return PieceMatcher(index, graph, goal, self.graph.counts.calls)


def _template_call(
    number: int, template: Template, pieces: list[str], graph: ToolGraph
) -> PlannedCall:
    """Step `number` of the template: its tool and links, with the piece that names its tool
    most strongly; named by none, it is made for the step that waits for it."""
    example = template.example.steps
    step = example[number - 1]
    strengths = [graph.words.strength(piece, step.tool) for piece in pieces]
    best = max(range(len(pieces)), key=lambda at: strengths[at])
    call = PlannedCall(step.tool, pieces[best], best)
    call.depends_on = [dep for dep in step.depends_on if 0 < dep < number]
    if strengths[best] >= MIN_STRENGTH:
        return call
    consumer = next((later for later in example[number:] if number in later.depends_on), None)
    if consumer is not None and consumer.tool != step.tool:
        wanted = set(graph.traits[consumer.tool].needs)
        call.makes = next((key for key in graph.traits[step.tool].yields if key in wanted), None)
        call.for_tool = consumer.tool
    return call


def tool_plan(
    goal: str,
    context: Mapping[str, Any],
    resolver: ArmResolver,
    max_steps: int,
    planner: ToolPlanner | None = None,
    examples: Sequence[WorkedExample] = (),
) -> DraftPlan:
    """A plan of tool calls for `goal` (the tool set's planner, or one built on the spot)."""
    del context  # the pieces and the tools decide; the context's values are the steps' inputs
    return (planner or ToolPlanner.over(resolver)).plan(goal, max_steps, examples)


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
                + GIVEN_WEIGHT * self._ids_at_hand(tool, made)
                + NUMBER_WEIGHT * self._agrees(tool, piece)
            )

        tool = max(candidates, key=worth)
        # A piece that gives the very ids the tool takes ("doctor D-7") names it more.
        named = strengths[tool] + GIVEN_STRENGTH * self._ids_at_hand(tool, made)
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
        for that tool's action; a piece whose verb names an action ("translate", "buy") is
        never given a tool whose own verb names another and whose words lack that one."""
        words, verb = self.graph.words, leading_verb(piece)
        asked = stem(verb) if verb is not None else None
        own = words.verb(tool)
        if self.graph.traits[tool].writes:
            reads = is_question(piece) or (asked is not None and asks_to_read(asked))
            if reads and not same_action(asked, own):
                return False
        if asked is None or asks_to_read(asked) or not known_action(asked):
            return True
        if own is None or not known_action(own):
            return True
        return same_action(asked, own) or words.says(tool, asked)

    def _ids_at_hand(self, tool: str, made: set[str]) -> bool:
        """Whether `tool` takes ids and the request gives each ("doctor D-7") or an earlier
        step yields it: it can be called as it is."""
        needs = self.graph.traits[tool].fetched_needs()
        return bool(needs) and all(
            key in made or _gives(self.goal, self.graph.noun(key)) for key in needs
        )

    def _agrees(self, tool: str, piece: str) -> bool:
        """Whether the piece names what the tool's name is about in the same number: "what
        appointments" asks for `list_appointments`, "the appointment A-2" for
        `get_appointment`."""
        noun = self.graph.name_noun(tool)
        if noun is None:
            return False
        key = entity_key(noun)
        written = [word for word in tokens(piece) if word.isalpha() and entity_key(word) == key]
        return bool(written) and any(_plural(word) == _plural(noun) for word in written)

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


def _plural(word: str) -> bool:
    return word.endswith("s") and not word.endswith(("ss", "us", "is"))


def _unled(piece: str) -> str:
    """A piece without the verb it opens with when that verb asks to be told or shown
    something, for the BM25 match: such a verb's evidence is its action (`ToolWords`: "find"
    asks for any finder), not the word "find" in a tool's name (`find_member` for "find the
    book Dune"). A verb of another action ("message Tom") is kept: it names the tool."""
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


def _with_producers(chosen: list[PlannedCall], graph: ToolGraph, goal: str) -> list[PlannedCall]:
    """The chosen steps, each after the steps that make what it needs."""
    planned = {step.tool for step in chosen}
    steps: list[PlannedCall] = []
    for step in chosen:
        steps += producers(step, steps, planned, graph, goal, 0)
        steps.append(step)
    return steps


def producers(
    step: PlannedCall,
    before: list[PlannedCall],
    planned: set[str],
    graph: ToolGraph,
    goal: str,
    depth: int,
) -> list[PlannedCall]:
    """The producer steps `step` needs, each after its own (none already planned)."""
    if depth >= MAX_PRODUCER_DEPTH:
        return []
    added: list[PlannedCall] = []
    for key, producer in _missing(step, before, planned, graph, goal):
        planned.add(producer)
        made = PlannedCall(producer, step.piece, step.piece_index, makes=key, for_tool=step.tool)
        added += producers(made, [*before, *added], planned, graph, goal, depth + 1)
        added.append(made)
    return added


def _missing(
    step: PlannedCall, before: list[PlannedCall], planned: set[str], graph: ToolGraph, goal: str
) -> list[tuple[str | None, str]]:
    """(entity, producer) for each id `step` needs that nothing before it yields, the goal
    does not give and the examples do not overrule; with none, the examples' usual producer
    of the tool when nothing before it is linked to it in the examples."""
    made = _at_hand(before, graph)
    needed = [
        key
        for key in graph.traits[step.tool].fetched_needs()
        if key not in made
        and not _gives(goal, graph.noun(key))
        and not graph.doubts(step.tool, key)
    ]
    missing: list[tuple[str | None, str]] = []
    for key in needed:
        producer = _producer_of(key, step, graph)
        if producer is not None and producer not in planned:
            missing.append((key, producer))
    usual = graph.usual_producer(step.tool)
    linked = any(graph.usually_linked(other.tool, step.tool) for other in before)
    if not needed and usual is not None and usual not in planned and not linked:
        missing.append((None, usual))
    return missing


def _at_hand(before: list[PlannedCall], graph: ToolGraph) -> set[str]:
    """The entities whose ids the steps `before` have: what an earlier step yields, is about
    or was given ("the movie's keywords" after "the movie Heat" was found)."""
    return {
        key
        for other in before
        for traits in [graph.traits[other.tool]]
        for key in (*traits.yields, *traits.about, *traits.needs)
    }


def _gives(goal: str, noun: str) -> bool:
    """Whether the goal gives the entity's id itself ("movie 603", "customer id 42")."""
    return re.search(rf"\b{re.escape(noun)}s?{_ID_VALUE}", goal, re.IGNORECASE) is not None


def _producer_of(key: str, step: PlannedCall, graph: ToolGraph) -> str | None:
    """The tool that makes entity `key` for `step`: the one the examples show before it most,
    else, of those that need no id themselves (a chain as short as can be), one the piece
    names ("the cast of this week's trending movie": the trending list), else one about that
    entity (`search_events` for an event, not `find_orders`, whose orders hold events), else
    a finder (it looks up what the request names: "the cast of Titanic"), else the best
    match for the piece. Never one that writes (`ToolGraph.makers`)."""
    makers = [tool for tool in graph.makers(key) if tool != step.tool]
    return max(
        makers,
        key=lambda tool: (
            graph.link_count(tool, step.tool),
            not graph.traits[tool].fetched,
            graph.words.strength(step.piece, tool) >= MIN_STRENGTH,
            key in graph.traits[tool].about,
            graph.traits[tool].finder,
            graph.words.strength(step.piece, tool),
            -makers.index(tool),
        ),
        default=None,
    )


def _ordered(steps: list[PlannedCall], graph: ToolGraph) -> list[PlannedCall]:
    """The steps in the request's order, except that a step comes after the one that yields
    what it needs (the nearest before it, else the first after it)."""
    yielders = [set(graph.traits[step.tool].yields) for step in steps]
    deps: list[list[int]] = []
    for position, step in enumerate(steps):
        after = []
        for key in graph.traits[step.tool].needs:
            makers = [pos for pos, made in enumerate(yielders) if key in made and pos != position]
            earlier = [pos for pos in makers if pos < position]
            if makers:
                after.append(earlier[-1] if earlier else makers[0])
        deps.append(after)
    try:
        return [steps[pos] for pos in stable_topological_order(deps)]
    except CycleError:
        return steps


def _linked(steps: list[PlannedCall], graph: ToolGraph) -> list[PlannedCall]:
    """Each step with the earlier steps it waits for (numbered from 1)."""
    chains = graph.chains()
    for position, step in enumerate(steps):
        earlier = steps[:position]
        deps = set(fed_by(step, earlier, graph))
        learned = [
            n for n, other in enumerate(earlier, 1) if graph.usually_linked(other.tool, step.tool)
        ]
        deps.update(learned[-1:])
        if step.waits:
            last = _last_of_previous_piece(step, earlier)
            if last and not any(last in ancestors(dep, steps) for dep in deps):
                deps.add(last)
        if not deps and earlier and chains:
            deps.add(position)
        step.depends_on = sorted(deps)
    return steps


def fed_by(step: PlannedCall, earlier: list[PlannedCall], graph: ToolGraph) -> list[int]:
    """For each thing `step` needs, the nearest earlier step that yields it."""
    found = []
    for key in graph.traits[step.tool].needs:
        makers = [n for n, other in enumerate(earlier, 1) if key in graph.traits[other.tool].yields]
        found += makers[-1:]
    return found


def ancestors(number: int, steps: list[PlannedCall]) -> set[int]:
    """Step `number` and every step it waits for, directly or not."""
    seen = {number}
    pending = [number]
    while pending:
        for dep in steps[pending.pop() - 1].depends_on:
            if dep not in seen:
                seen.add(dep)
                pending.append(dep)
    return seen


def _last_of_previous_piece(step: PlannedCall, earlier: list[PlannedCall]) -> int:
    """The number of the last earlier step of an earlier piece (0: none)."""
    numbers = [n for n, other in enumerate(earlier, 1) if other.piece_index < step.piece_index]
    return numbers[-1] if numbers else 0


def _trimmed(steps: list[PlannedCall], max_steps: int) -> list[PlannedCall]:
    kept = steps[:max_steps]
    for step in kept:
        step.depends_on = [dep for dep in step.depends_on if dep <= len(kept)]
    return kept


def draft_step(step: PlannedCall, number: int, graph: ToolGraph) -> DraftStep:
    if step.for_tool is not None:
        noun = graph.noun(step.makes) if step.makes else None
        description = graph.description(step.tool)
        piece = _without_other_values(step.piece, step.makes, graph.traits[step.for_tool])
        action = producer_action(step.tool, noun, step.for_tool, piece, description)
        criterion = f"{step.tool} answered with what {step.for_tool} needs"
    else:
        action = step_action(step.tool, step.piece)
        criterion = f"{step.tool} answered for: {clip(step.piece, _CRITERION_CHARS)}"
    return DraftStep(
        action=action,
        required_arm=step.tool,
        acceptance_criteria=[criterion],
        depends_on=list(step.depends_on),
        step=number,
        estimated_cost_tier=typical_cost_tier(step.tool),
        estimated_duration_seconds=typical_duration_seconds(step.tool),
    )


def _without_other_values(piece: str, makes: str | None, consumer: ToolTraits) -> str:
    """A piece without the values its consumer's other arguments take ("at the Central
    branch" is `check_availability`'s branch, not the book a producer looks up for it)."""
    for argument in consumer.arguments:
        words = [word for word in argument.split() if word not in ID_WORDS]
        if not words or entity_key(words[-1]) == makes:
            continue
        name = re.escape(words[-1])
        piece = re.sub(
            rf"\b(?:the\s+)?[A-Z][\w-]*(?:\s+[A-Z][\w-]*)*\s+{name}s?\b"
            rf"|\b{name}s?\s+[\"']?[\w@.+-]*\d[\w@.+-]*|\b{name}s?\s+[\w.+-]+@[\w.-]+",
            "",
            piece,
        )
    return piece


def _rationale(steps: list[PlannedCall], unplanned: list[str]) -> str:
    called = ", ".join(dict.fromkeys(step.tool for step in steps if step.for_tool is None))
    added = ", ".join(dict.fromkeys(step.tool for step in steps if step.for_tool is not None))
    text = f"Rule-based tool plan: {called} for the pieces of work the request asks for"
    if added:
        text += f"; {added} added before them, to make what they need"
    if unplanned:
        text += f"; {len(unplanned)} piece(s) no tool does (goal_part_unplanned)"
    return text + "."
