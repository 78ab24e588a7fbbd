"""The rule-based plan over a caller's tools: the tools the request calls for
(`tools/pieces.py`), each after the steps that make its inputs, linked by what each
needs; or, when the request reads like a worked example of the set, that example's plan.

1. Pieces and their tools: `PieceMatcher`.
2. Producers. A step whose tool needs an id (`ToolGraph.traits`) that no step before it
   yields, is about or was given, and that the request does not give itself ("movie 603"),
   gets, before it, a step of the tool that yields it (never one that writes): the one the
   examples most often show before this tool, else one that needs nothing itself, the piece
   naming it or finding that entity first; and so on for that step's own needs,
   `MAX_PRODUCER_DEPTH` deep. With no such need, the tool the examples usually show it
   waiting for (`ToolGraph.usual_producer`) is added the same way. A step that yields what an
   earlier one needs is moved before it.
3. Links. Each step waits for the nearest earlier step that yields what it needs, for the
   nearest earlier step the examples usually show it waiting for, and for the piece before
   when the request puts it after that piece ("then"), refers back to it ("it", "the
   result") or delivers it (a tool that sends, posts or notifies, after one that does not).
   A step with none of these waits for the step before only when the worked examples mostly
   chain their steps; otherwise it is independent, and runs in parallel.
4. A template. A request that reads like a worked example (`tools/examples.py`) is
   planned as that example was: its tools and links, with the request's own words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from graphlib import CycleError

from planner_arm.config import PlanningSettings
from planner_arm.limits import WorkedExample
from planner_arm.plan.arms import ArmResolver, typical_cost_tier, typical_duration_seconds
from planner_arm.plan.budget import BudgetedPlanner
from planner_arm.plan.dag import stable_topological_order
from planner_arm.plan.draft import DraftPlan, DraftStep, repair
from planner_arm.plan.schemas import PlanRequest
from planner_arm.plan.tools import goal_pieces
from planner_arm.plan.weighed import BuildLane, Lazy
from planner_arm.tools.actions import (
    clip,
    producer_action,
    step_action,
)
from planner_arm.tools.examples import Template, nearest
from planner_arm.tools.graph import ToolGraph
from planner_arm.tools.index import ToolIndex
from planner_arm.tools.pieces import (
    MIN_STRENGTH,
    PieceMatcher,
    PlannedCall,
    gives,
)
from planner_arm.tools.traits import ID_WORDS, ToolTraits, entity_key

# How deep producers of producers are added.
MAX_PRODUCER_DEPTH = 2
_WARNING_CHARS = 80
_CRITERION_CHARS = 120


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
        index = _index_of(self.resolver)
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
        """`goal` planned as the worked example it reads like (`examples.py`):
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
        index = _index_of(self.resolver)
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


@dataclass
class ToolSetPlanner(BudgetedPlanner):
    """The rule-based planner of a caller's tool set, as a toolbox holds it: its graph is
    built on first use (in `lane`), weighed, with the configured worked examples. The
    pieces of the goal and the tools decide the plan; the context's values are the steps'
    inputs."""

    resolver: ArmResolver
    examples: Sequence[WorkedExample] = ()
    lane: BuildLane | None = None
    graph: Lazy[ToolGraph] = field(init=False)

    def __post_init__(self) -> None:
        self.graph = Lazy(partial(ToolGraph.build, self.resolver.arms, self.examples), self.lane)

    @property
    def index(self) -> ToolIndex:
        """The tool set's search index (its resolver's)."""
        return _index_of(self.resolver)

    @property
    def tools(self) -> ToolPlanner:
        """The tool planner (its graph built on first use)."""
        return ToolPlanner(self.resolver, self.graph.get())

    def draft(self, request: PlanRequest, planning: PlanningSettings) -> DraftPlan:
        return self.tools.plan(request.goal, planning.max_steps, request.examples or ())


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
        if key not in made and not gives(goal, graph.noun(key)) and not graph.doubts(step.tool, key)
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


def _index_of(resolver: ArmResolver) -> ToolIndex:
    """The tool set's index: the resolver's own, else one built for the tools."""
    index = resolver.index
    return index if isinstance(index, ToolIndex) else ToolIndex(resolver.arms)
