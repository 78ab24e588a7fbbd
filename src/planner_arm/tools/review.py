"""What the tool graph says about a model's tool plan, and the plan mended by it.

A model's plan over a caller's tools is read, checked (plan/validation.py), then reviewed
with the set's tool graph (`ToolGraph`: what each tool needs and yields, what the worked
examples do), by the same rules the rule-based planner plans with:

1. Repeats. The same tool for the same purpose twice (the same names, numbers and quotes,
   and the words of one action among the other's) is one call: the later step is merged
   into the earlier (`repeat_merged`), its dependants wait for the earlier one. A repeat for
   other things ("credits of Heat", "credits of Alien") is kept.
2. Producers. A step that waits for no earlier step, whose tool needs an id no earlier step
   yields or is about and the goal does not give, gets the step that yields it before it
   (`producer_added`), chosen as the rule-based planner chooses it (tools/planner.py), within
   the plan's step bound. A step the model has wait for earlier steps gets none: what it
   waits for (a list, a search, a detail result) is where its input comes from.
3. Links. A step waits for the nearest earlier step that yields what it needs, and for the
   nearest earlier step the examples usually show it waiting for (`link_added`), unless it
   already waits for that step through others, or for another step that yields the same.
4. Warnings. A step whose action names another tool of the set strongly and its own tool
   weakly, or its own tool not at all (`action_unlike_tool`), and a piece of the goal that
   asks for work no tool does and no step's tool is named by (`goal_part_unplanned`).

A plan most of whose own steps are unlike their tools (`mostly_unlike`) maps some other
habit onto the tools ("Generate a code patch" on `find_member`): it is not a plan of them.

No I/O; the graph is the tool set's, built once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from planner_arm.plan.draft import DraftStep, repair, repair_code
from planner_arm.plan.estimation import MOSTLY_UNLIKE_SHARE
from planner_arm.plan.schemas import PlanStep
from planner_arm.text import STOPWORDS, specifics, stem, words
from planner_arm.tools.actions import clip
from planner_arm.tools.graph import ToolGraph
from planner_arm.tools.pieces import MIN_STRENGTH, PlannedCall
from planner_arm.tools.planner import ToolPlanner, draft_step, fed_by, producers

# A step's action is unlike its tool when another tool is named at least `MIN_STRENGTH` by
# it and its own tool less than this share as strongly.
UNLIKE_SHARE = 0.5
# Below this an action names its own tool not at all: the words it shares with the tool, if
# any, are words nearly every tool of the set has, which weigh about 0.
UNRELATED_STRENGTH = 0.1
# Tools weighed as the one an action names.
_RIVALS = 3
_QUOTED_CHARS = 60
_WARNING_CHARS = 80


@dataclass(frozen=True)
class ReviewedPlan:
    """A model's tool plan after the review: its steps (numbered 1..n, each after what it
    waits for), what was mended and what was found."""

    steps: list[DraftStep]
    repairs: list[str]
    warnings: list[str]
    # How many steps the model wrote (before merges and added producers).
    model_steps: int = 0

    @property
    def unlike(self) -> list[str]:
        """The `action_unlike_tool` warnings: one per model step unlike its tool."""
        return [entry for entry in self.warnings if repair_code(entry) == "action_unlike_tool"]

    @property
    def mostly_unlike(self) -> bool:
        """More than `MOSTLY_UNLIKE_SHARE` of the model's steps are unlike their tools."""
        return len(self.unlike) > MOSTLY_UNLIKE_SHARE * self.model_steps


@dataclass(eq=False)
class _Call:
    """One step under review: the call, the model's step it comes from (None: added), and
    the calls it waits for."""

    planned: PlannedCall
    source: PlanStep | None
    after: list[_Call] = field(default_factory=list)


def review_tool_plan(
    steps: Sequence[PlanStep],
    goal: str,
    planner: ToolPlanner,
    graph: ToolGraph,
    max_steps: int,
) -> ReviewedPlan:
    """`steps` (a checked plan: numbered in order, each after its dependencies) reviewed with
    `graph` (the planner's, with the request's own examples) for `goal`."""
    repairs: list[str] = []
    calls = _merged(steps, repairs)
    calls = _with_producers(calls, graph, goal, max_steps)
    linked = _linked(calls, graph)
    numbers = {id(call): number for number, call in enumerate(calls, 1)}
    drafts = []
    for number, call in enumerate(calls, 1):
        after = sorted(numbers[id(other)] for other in call.after)
        drafts.append(_drafted(call, number, after, graph))
        if call.source is None:
            made = f"{call.planned.tool} for step {numbers[id(_consumer(call, calls))]}"
            repairs.append(repair("producer_added", f"step {number}: {made}"))
    repairs += [
        repair("link_added", f"step {numbers[id(first)]} -> step {numbers[id(then)]}")
        for first, then in linked
    ]
    warnings = _unlike(calls, numbers, graph)
    undone = planner.matcher(goal, graph).undone({call.planned.tool for call in calls})
    warnings += [repair("goal_part_unplanned", clip(text, _WARNING_CHARS)) for text in undone]
    return ReviewedPlan(drafts, repairs, warnings, model_steps=len(steps))


def _purpose(action: str) -> tuple[frozenset[str], frozenset[str]]:
    """What an action is for: the things it names, and its words."""
    named = frozenset(text.lower() for text in specifics(action))
    return named, frozenset(stem(word) for word in words(action) if word not in STOPWORDS)


def _same_purpose(first: str, second: str) -> bool:
    """The same names, numbers and quotes, and one action's words among the other's."""
    (named, said), (other_named, other_said) = _purpose(first), _purpose(second)
    return named == other_named and (said <= other_said or other_said <= said)


def _merged(steps: Sequence[PlanStep], repairs: list[str]) -> list[_Call]:
    """The steps as calls, each identical repeat merged into the first call of its kind."""
    calls: list[_Call] = []
    by_number: dict[int, _Call] = {}
    for step in steps:
        after = list({id(c): c for d in step.depends_on if (c := by_number.get(d))}.values())
        twin = next(
            (
                call
                for call in calls
                if call.source is not None
                and call.planned.tool == step.required_arm
                and _same_purpose(call.source.action, step.action)
            ),
            None,
        )
        if twin is None:
            call = _Call(PlannedCall(step.required_arm, step.action, len(calls)), step, after)
            calls.append(call)
            by_number[step.step] = call
            continue
        assert twin.source is not None
        detail = f"step {step.step} into step {twin.source.step} ({step.required_arm})"
        repairs.append(repair("repeat_merged", detail))
        by_number[step.step] = twin
        # What the repeat waited for, where that comes before the first call, it waits for.
        earlier = calls[: calls.index(twin)]
        twin.after += [c for c in after if any(c is e for e in earlier) and c not in twin.after]
    return calls


def _with_producers(calls: list[_Call], graph: ToolGraph, goal: str, max_steps: int) -> list[_Call]:
    """The calls, each after the producer calls it needs (as many as the step bound allows)."""
    planned = {call.planned.tool for call in calls}
    room = max_steps - len(calls)
    found: list[_Call] = []
    for call in calls:
        if call.after:
            # The model says which earlier steps feed this one (a list, a search, a detail
            # result): nothing is added in front of what it chose.
            found.append(call)
            continue
        made = producers(call.planned, [c.planned for c in found], planned, graph, goal, 0)
        found += [_Call(producer, None) for producer in made[: max(0, room)]]
        room -= len(made)
        found.append(call)
    return found


def _ancestors(call: _Call) -> list[_Call]:
    """The calls `call` waits for, directly or not."""
    seen: dict[int, _Call] = {}
    pending = list(call.after)
    while pending:
        other = pending.pop()
        if id(other) not in seen:
            seen[id(other)] = other
            pending += other.after
    return list(seen.values())


def _linked(calls: list[_Call], graph: ToolGraph) -> list[tuple[_Call, _Call]]:
    """Each call waits for the nearest earlier call that yields what it needs and for the
    nearest the examples usually show it waiting for; the links added between the model's
    own steps are returned (an added producer's links are part of adding it)."""
    added = []
    for position, call in enumerate(calls):
        earlier = calls[:position]
        # What the step already waits for a yielder of is fed (a search's book, not also the
        # availability check that echoes the book's id).
        had = {key for c in _ancestors(call) for key in graph.traits[c.planned.tool].yields}
        fed = [
            earlier[number - 1]
            for number in fed_by(call.planned, [c.planned for c in earlier], graph)
            if not set(graph.traits[earlier[number - 1].planned.tool].yields)
            & set(graph.traits[call.planned.tool].needs)
            <= had
        ]
        learned = [c for c in earlier if graph.usually_linked(c.planned.tool, call.planned.tool)]
        for source in [*fed, *learned[-1:]]:
            if any(source is other for other in _ancestors(call)):
                continue
            call.after.append(source)
            if call.source is not None and source.source is not None:
                added.append((source, call))
    return added


def _consumer(producer: _Call, calls: list[_Call]) -> _Call:
    """The call an added producer was added for: the first later call of its tool's step."""
    wanted = producer.planned.for_tool
    position = next(n for n, call in enumerate(calls) if call is producer)
    return next(
        (call for call in calls[position + 1 :] if call.planned.tool == wanted),
        calls[position + 1] if position + 1 < len(calls) else producer,
    )


def _drafted(call: _Call, number: int, after: list[int], graph: ToolGraph) -> DraftStep:
    step = call.source
    if step is None:
        drafted = draft_step(call.planned, number, graph)
        drafted.depends_on = after
        return drafted
    return DraftStep(
        action=step.action,
        required_arm=step.required_arm,
        acceptance_criteria=list(step.acceptance_criteria),
        depends_on=after,
        step=number,
        estimated_cost_tier=step.estimated_cost_tier,
        estimated_duration_seconds=step.estimated_duration_seconds,
        parent=step.parent,
        input=step.input,
    )


def _unlike(calls: list[_Call], numbers: dict[int, int], graph: ToolGraph) -> list[str]:
    """A warning for each of the model's steps whose action names another tool strongly and
    its own weakly, or its own not at all (an action with no word to judge is let be)."""
    warnings = []
    for call in calls:
        if call.source is None:
            continue
        action, tool = call.source.action, call.planned.tool
        if not any(word not in STOPWORDS for word in words(action)):
            continue
        own = graph.words.strength(action, tool)
        strengths = {
            rival: graph.words.strength(action, rival)
            for rival in graph.words.strongest(action, _RIVALS)
            if rival != tool
        }
        rival = max(strengths, key=strengths.__getitem__, default=None)
        said = f"step {numbers[id(call)]} ({tool}): {clip(action, _QUOTED_CHARS)!r}"
        if rival is not None and strengths[rival] >= MIN_STRENGTH:
            if own < UNLIKE_SHARE * strengths[rival]:
                warnings.append(repair("action_unlike_tool", f"{said} reads like {rival}"))
        elif own < UNRELATED_STRENGTH:
            warnings.append(repair("action_unlike_tool", f"{said} names nothing {tool} does"))
    return warnings
