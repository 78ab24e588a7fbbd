"""What a planner plans over: the configured arms, or the tools a request brings.

A `Toolbox` is everything that depends on the set of arms: the rules (the agents or the tools
profile), the resolver that reads arm names, the rule-based planner, the opening (prompt) and the
answer's schema. `Toolboxes` builds the configured one once and one per tool set a request
brings, kept by content (a repeated tool set costs nothing). Past `planning.tool_shortlist`
tools, the prompt lists only the tools relevant to the request; the resolver still knows them
all. What a request plans with, its `RequestToolbox` (the prompt listing its shortlist, its
worked examples: every one there is when they all fit, else the most like the request; its
answer schema), is resolved once per request (`Toolboxes.for_request`).

A tool set's toolbox is light until it is used: its search index and tool graph (which
every request over the set uses, so they are built with it), its lexicon and its full prompt
are each built on first use (`Lazy`), and the words of each tool are shared with every other
set that has the same tool (`ToolMemo`). Every piece of tool-set work (a build, a part, the
ranking for one request) runs in a worker thread in a build slot (`BuildSlots`: a fair share
of `tool_sets.max_builds`, within the request's deadline), an identical build in flight is
awaited rather than repeated, the requests waiting for a build are bounded per principal, and
the sets kept are bounded by their measured bytes (`KeptToolSets`). A request holds its tool
set's toolbox while it plans (`Toolboxes.held`), and its job what it plans with
(`Toolboxes.for_request`).
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

from anyio import to_thread

from planner_arm.clock import Deadline
from planner_arm.config import ArmSpec, PlanningSettings, Settings, WorkedExample
from planner_arm.errors import ToolSetsBusy
from planner_arm.llm.client import AnswerSchema
from planner_arm.metrics import PlannerMetrics
from planner_arm.plan.arms import ArmResolver
from planner_arm.plan.budget import BudgetedPlanner
from planner_arm.plan.schemas import PlanRequest
from planner_arm.plan.validation import PlanRules, profile_of
from planner_arm.plan.weighed import BuildLane, Lazy, SharedWork, ToolMemo, deep_size
from planner_arm.rules.planner import RuleBasedPlanner
from planner_arm.strategies.answer_schemas import plan_json_schema, tools_json_schema
from planner_arm.strategies.build_slots import BUSY_RETRY_SECONDS, BuildSlots
from planner_arm.strategies.kept_tool_sets import KeptToolSets
from planner_arm.strategies.prompts.messages import Opening
from planner_arm.strategies.prompts.plans import plan_opening
from planner_arm.strategies.prompts.tools import tools_opening
from planner_arm.tools.index import ExampleIndex, tool_resolver
from planner_arm.tools.planner import ToolSetPlanner
from planner_arm.tools.traits import writing


@dataclass(frozen=True)
class Toolbox:
    arms: tuple[ArmSpec, ...]
    resolver: ArmResolver
    rules: PlanRules
    # The rule-based planner: a tool set's (`ToolSetPlanner`) or the configured agents'.
    rule_based: BudgetedPlanner
    prompt: Lazy[Opening]
    shortlist_size: int
    examples: ExampleIndex
    example_count: int = 0
    example_chars: int = 0
    # The bytes the toolbox holds before any part is built on first use (`weight`).
    base_weight: int = 0

    @property
    def opening(self) -> Opening:
        """The opening of a conversation listing every arm."""
        return self.prompt.get()

    @property
    def tool_set(self) -> ToolSetPlanner | None:
        """The rule-based planner of a caller's tool set; None for the configured agents."""
        return self.rule_based if isinstance(self.rule_based, ToolSetPlanner) else None

    @property
    def parts(self) -> tuple[Lazy[Any], ...]:
        """The parts built on first use: the full prompt, the lexicon; a tool set's search
        index and tool graph."""
        found: tuple[Lazy[Any], ...] = (self.prompt, self.resolver.lexicon)
        return (*found, *self.tool_parts)

    @property
    def tool_parts(self) -> tuple[Lazy[Any], ...]:
        """The parts every request over a tool set uses (the rule-based draft ranks its tools
        with the index and links them with the graph): none for the configured agents."""
        tool_set = self.tool_set
        if tool_set is None:
            return ()
        return (tool_set.index.retriever, tool_set.graph)

    @property
    def weight(self) -> int:
        """The bytes this toolbox holds now: its base and the parts built so far."""
        return self.base_weight + sum(part.weight for part in self.parts if part.built)

    def parts_for(self, *, streamed: bool) -> tuple[Lazy[Any], ...]:
        """The parts a request will use on the event loop, so they are built before: a tool
        set's index and graph; every part for a streamed answer, whose steps are checked as
        they are written."""
        return self.parts if streamed else self.tool_parts

    @property
    def shortlists(self) -> bool:
        """Whether the prompt lists only some of the tools (a large tool set)."""
        index = self.resolver.index
        return index is not None and 0 < self.shortlist_size < len(self.arms)

    def examples_for(self, request: PlanRequest) -> list[WorkedExample]:
        """The worked examples most like `request` over these tools (the request's own
        first), for a tool plan only."""
        if self.resolver.index is None or not self.example_count:
            return []
        own = ExampleIndex(request.examples or [])
        ids = [arm.id for arm in self.arms]
        found = own.similar(request.goal, ids, self.example_count, self.example_chars)
        left = self.example_chars - sum(len(example.model_dump_json()) for example in found)
        more = self.examples.similar(request.goal, ids, self.example_count - len(found), left)
        return [*found, *more]

    def every_example(self, request: PlanRequest) -> list[WorkedExample] | None:
        """Every worked example over these tools (the request's own first, each in the order
        given) when all of them fit `tool_examples` and `tool_examples_chars`: shown whatever
        the request, the same for every request that brings them; None when they must be
        chosen by the request."""
        if self.resolver.index is None or not self.example_count:
            return None
        known = {arm.id for arm in self.arms}
        found: list[WorkedExample] = []
        for example in [*(request.examples or ()), *self.examples.examples]:
            if any(step.tool not in known for step in example.steps):
                continue
            found.append(example)
            if len(found) > self.example_count:
                return None
        chars = sum(len(example.model_dump_json()) for example in found)
        return found if chars <= self.example_chars else None

    def listed(self, request: PlanRequest) -> tuple[ArmSpec, ...]:
        """The arms the prompt lists for `request`: all, or the tools relevant to it."""
        tool_set = self.tool_set
        if tool_set is None or not self.shortlists:
            return self.arms
        text = " ".join(
            [request.goal, *request.constraints, json.dumps(request.context, default=str)]
        )
        kept = set(tool_set.index.shortlist(text, self.shortlist_size))
        return tuple(arm for arm in self.arms if arm.id in kept)

    def prompt_for(self, listed: tuple[ArmSpec, ...]) -> Opening:
        """The opening listing `listed` (the one built once when it is every arm)."""
        if listed == self.arms:
            return self.opening
        return tools_opening(listed, self.rules.min_steps, self.rules.max_steps, shortlist=True)

    def answer_schema(self, listed: tuple[ArmSpec, ...]) -> AnswerSchema:
        """The answer's schema: a tool plan's, its tools those listed; else a plan's."""
        if self.resolver.index is None:
            return self.plain.answer_schema
        return AnswerSchema("tool_plan", tools_json_schema([arm.id for arm in listed]))

    @functools.cached_property
    def plain(self) -> RequestToolbox:
        """The toolbox as every request uses it when it lists every arm and shows no worked
        example (the agents' plans): built once."""
        schema = AnswerSchema("plan", plan_json_schema(self.resolver.arm_ids))
        return RequestToolbox(self, (), schema, self.opening)

    def resolved(self, request: PlanRequest) -> RequestToolbox:
        """What `request` plans with: the prompt listing the arms relevant to it, the worked
        examples most like it, the answer's schema. CPU work that grows with a tool set."""
        if self.resolver.index is None:
            return self.plain
        listed = self.listed(request)
        every = self.every_example(request)
        worked = tuple(every if every is not None else self.examples_for(request))
        # Every arm listed: the prompt built once for the set, when it is first used.
        prompt = None if listed == self.arms else self.prompt_for(listed)
        return RequestToolbox(self, worked, self.answer_schema(listed), prompt, every is not None)


@dataclass(frozen=True)
class RequestToolbox:
    """A toolbox as one request uses it: its rules, resolver and rule-based planner, the
    opening listing the arms relevant to the request, the worked examples shown with it, and
    the answer's schema."""

    box: Toolbox
    worked: tuple[WorkedExample, ...]
    answer_schema: AnswerSchema
    # The opening as this request has it; None: the toolbox's own, built when first used.
    listed_prompt: Opening | None = None
    # `worked` is every example there is over the tools, the same whatever the request.
    worked_fixed: bool = False

    @property
    def opening(self) -> Opening:
        return self.listed_prompt if self.listed_prompt is not None else self.box.opening

    @property
    def rules(self) -> PlanRules:
        return self.box.rules

    @property
    def resolver(self) -> ArmResolver:
        return self.box.resolver

    @property
    def rule_based(self) -> BudgetedPlanner:
        return self.box.rule_based

    @property
    def tool_set(self) -> ToolSetPlanner | None:
        return self.box.tool_set


def build_toolbox(
    arms: Sequence[ArmSpec],
    aliases: Mapping[str, str],
    planning: PlanningSettings,
    confidence: float,
    examples: ExampleIndex,
    shared: SharedWork | None = None,
    *,
    callers: bool = False,
) -> Toolbox:
    """The toolbox of `arms`, weighed (`base_weight`: what it holds of its own, not the
    settings, the examples or the work it shares with other tool sets). `callers`: the arms
    are a request's tools, whose steps say whether they write."""
    ids = [arm.id for arm in arms]
    rules = PlanRules.for_arms(planning, ids).with_resources(arms)
    if callers:
        rules = rules.with_writes(writing(arms))
    tools = profile_of(planning, ids) == "tools"
    lane = shared.lane if shared is not None else None
    not_its_own: tuple[object, ...] = (planning, examples, examples.examples)
    if shared is not None:
        not_its_own += (shared, shared.memo, shared.lane)
    rule_based: BudgetedPlanner
    if tools:
        resolver = tool_resolver(arms, aliases, notes=examples.notes(ids), shared=shared)
        planning = planning.model_copy(
            update={
                "min_steps": rules.min_steps,
                "max_steps": rules.max_steps,
                "require_validation_step": False,
            }
        )
        prompt = functools.partial(tools_opening, arms, rules.min_steps, rules.max_steps)
        rule_based = ToolSetPlanner(
            planning, rules, confidence, resolver, examples=examples.examples, lane=lane
        )
    else:
        resolver = ArmResolver(arms, aliases, lane=lane)
        prompt = functools.partial(plan_opening, arms, planning)
        rule_based = RuleBasedPlanner(planning, rules, confidence, resolver)
    box = Toolbox(
        arms=tuple(arms),
        resolver=resolver,
        rules=rules,
        rule_based=rule_based,
        prompt=Lazy(prompt, lane),
        shortlist_size=planning.tool_shortlist,
        examples=examples,
        example_count=planning.tool_examples,
        example_chars=planning.tool_examples_chars,
    )
    return replace(box, base_weight=deep_size(box, not_its_own))


def _build_parts(parts: Sequence[Lazy[Any]]) -> None:
    for part in parts:
        part.get()


def _tool_set_of(request: PlanRequest) -> tuple[str, list[ArmSpec]]:
    tool_set = request.tool_set
    assert tool_set is not None  # the request brings tools
    return tool_set


class Toolboxes:
    """The configured toolbox, and one per tool set requests bring (see the module)."""

    def __init__(
        self,
        settings: Settings,
        metrics: PlannerMetrics | None = None,
        lane: BuildLane | None = None,
    ) -> None:
        """`lane`: the lane builds take (one of `tool_sets.max_builds` threads by default;
        tests pass one that watches or holds its threads)."""
        tool_sets = settings.tool_sets
        self._planning = settings.planning
        self._confidence = settings.fallback.confidence
        self._examples = ExampleIndex(settings.examples)
        self.configured = build_toolbox(
            settings.arms,
            settings.arm_aliases,
            settings.planning,
            self._confidence,
            self._examples,
        )
        # Built at start-up, never on a request's way.
        _build_parts(self.configured.parts)
        self._examples.build()
        lane = lane or BuildLane(tool_sets.max_builds)
        self.shared = SharedWork(ToolMemo(tool_sets.shared_bytes), lane)
        self.kept: KeptToolSets[Toolbox] = KeptToolSets(tool_sets.max_kept, tool_sets.max_bytes)
        self.slots = BuildSlots(
            tool_sets.max_builds,
            tool_sets.max_builds_per_principal,
            tool_sets.max_waiting_per_principal,
            tool_sets.max_waiting,
        )
        self._building: dict[str, asyncio.Task[Toolbox]] = {}
        if metrics is not None:
            kept = self.kept
            metrics.tool_sets_kept.set_function(lambda: len(kept))
            metrics.tool_sets_kept_bytes.set_function(lambda: kept.bytes)

    async def tool_set(self, request: PlanRequest) -> tuple[str, list[ArmSpec]]:
        """The request's tools as arms and their digest (made once per request), read in a
        worker thread: CPU work that grows with the tool set."""
        if "tool_set" in request.__dict__:  # read already
            return _tool_set_of(request)
        return await to_thread.run_sync(_tool_set_of, request)

    async def for_request(
        self, request: PlanRequest, box: Toolbox, owner: str, deadline: Deadline
    ) -> RequestToolbox:
        """What `request` plans with from `box`, the toolbox it holds (`held`), resolved once
        for its job: for a tool set, in a build slot of `owner`'s, since choosing a shortlist
        and worked examples grows with the set."""
        if box.resolver.index is None:
            return box.plain
        async with self.slots.slot(owner, deadline):
            return await to_thread.run_sync(self.shared.lane.run, box.resolved, request)

    @asynccontextmanager
    async def held(
        self, request: PlanRequest, owner: str, deadline: Deadline, *, streamed: bool = False
    ) -> AsyncIterator[Toolbox]:
        """The request's toolbox, kept while the request plans; built first (off the event
        loop) when it is not kept. `owner`: the principal, whose share of builds this takes.
        `streamed`: every part is built now, since a streamed step is checked on the loop."""
        if request.tools is None:
            yield self.configured
            return
        key, specs = await self.tool_set(request)
        box = self.kept.hold(key) or await self._built(key, specs, owner, deadline)
        try:
            await self._free_evicted()
            parts = [part for part in box.parts_for(streamed=streamed) if not part.built]
            if parts:
                async with self.slots.waiting(owner), self.slots.slot(owner, deadline):
                    await to_thread.run_sync(self.shared.lane.run, _build_parts, parts)
            yield box
        finally:
            self.kept.release(key, box.weight)
            del box
            await self._free_evicted()

    async def _free_evicted(self) -> None:
        """The sets just evicted, freed in a worker thread: freeing the objects of a large
        set is CPU work the event loop need not wait for."""
        evicted = self.kept.take_evicted()
        if evicted:
            await to_thread.run_sync(evicted.clear)

    async def _built(
        self, key: str, specs: Sequence[ArmSpec], owner: str, deadline: Deadline
    ) -> Toolbox:
        """The tool set's toolbox, held, once built; the request counted meanwhile among its
        principal's waiting for a build."""
        async with self.slots.waiting(owner):
            return await self._ready(key, specs, owner, deadline)

    async def _ready(
        self, key: str, specs: Sequence[ArmSpec], owner: str, deadline: Deadline
    ) -> Toolbox:
        """The tool set's toolbox, held: kept, being built for another request, or built
        now in a build slot of the owner's; ToolSetsBusy when the deadline comes first."""
        while True:
            box = self.kept.hold(key)
            if box is not None:
                return box
            building = self._building.get(key)
            if building is None:
                await self.slots.take(owner, deadline)
                if key in self.kept or key in self._building:  # built while this one waited
                    self.slots.give_back(owner)
                    continue
                building = asyncio.create_task(self._build(key, specs, owner))
                self._building[key] = building
            try:
                async with asyncio.timeout(deadline.remaining()):
                    # Shielded: the build goes on for the next request, kept.
                    box = await asyncio.shield(building)
            except TimeoutError:
                raise ToolSetsBusy(
                    "the request's tool set was still being built at its deadline: it is "
                    "kept once built, so the same tools sent again are planned with at once",
                    retry_after=BUSY_RETRY_SECONDS,
                ) from None
            return self.kept.put(key, box, owner, box.weight, held=True)

    async def _build(self, key: str, specs: Sequence[ArmSpec], owner: str) -> Toolbox:
        """The set built with the parts every request over it uses, in the slot the owner
        took; kept for the next request even when the one that asked for it has gone."""
        try:
            build = functools.partial(
                build_toolbox,
                specs,
                {},
                self._planning,
                self._confidence,
                self._examples,
                self.shared,
                callers=True,
            )
            lane = self.shared.lane
            box = await to_thread.run_sync(lane.run, build)
            await to_thread.run_sync(lane.run, _build_parts, box.tool_parts)
        finally:
            self.slots.give_back(owner)
            del self._building[key]
        self.kept.put(key, box, owner, box.weight)
        return box
