"""What a planner plans over: the configured arms, or the tools a request brings.

A `Toolbox` is everything that depends on the set of arms: the rules (the agents or the tools
profile), the resolver that reads arm names, the rule-based planner and the system prompt.
`Toolboxes` builds the configured one once and one per tool set a request brings, kept by
content (a repeated tool set costs nothing). Past `planning.tool_shortlist` tools, the prompt
lists only the tools relevant to the request; the resolver still knows them all.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from planner_arm.config import ArmSpec, PlanningSettings, Settings, WorkedExample
from planner_arm.llm.client import AnswerSchema
from planner_arm.llm.prompts import system_prompt, tools_json_schema, tools_system_prompt
from planner_arm.plan.arms import ArmResolver
from planner_arm.plan.schemas import PlanRequest
from planner_arm.plan.tool_index import ExampleIndex
from planner_arm.plan.validation import PlanRules, profile_of
from planner_arm.rules.planner import RuleBasedPlanner

# Tool sets kept built at once (each holds its index and prompt).
KEPT_TOOL_SETS = 64


@dataclass(frozen=True)
class Toolbox:
    arms: tuple[ArmSpec, ...]
    resolver: ArmResolver
    rules: PlanRules
    rule_based: RuleBasedPlanner
    system_prompt: str
    shortlist_size: int
    examples: ExampleIndex
    example_count: int = 0
    example_chars: int = 0

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

    def listed(self, request: PlanRequest) -> tuple[ArmSpec, ...]:
        """The arms the prompt lists for `request`: all, or the tools relevant to it."""
        index = self.resolver.index
        if index is None or not self.shortlists:
            return self.arms
        text = " ".join(
            [request.goal, *request.constraints, json.dumps(request.context, default=str)]
        )
        kept = set(index.shortlist(text, self.shortlist_size))
        return tuple(arm for arm in self.arms if arm.id in kept)

    def prompt_for(self, listed: tuple[ArmSpec, ...]) -> str:
        """The system prompt listing `listed` (the one built once when it is every arm)."""
        if listed == self.arms:
            return self.system_prompt
        return tools_system_prompt(listed, self.rules.min_steps, self.rules.max_steps)

    def answer_schema(self, listed: tuple[ArmSpec, ...]) -> AnswerSchema | None:
        """A tool plan's answer schema, its tools those listed; None for the agents' plans
        (the client's own plan schema applies)."""
        if self.resolver.index is None:
            return None
        return AnswerSchema("tool_plan", tools_json_schema([arm.id for arm in listed]))


def build_toolbox(
    arms: Sequence[ArmSpec],
    aliases: Mapping[str, str],
    planning: PlanningSettings,
    confidence: float,
    examples: ExampleIndex,
) -> Toolbox:
    ids = [arm.id for arm in arms]
    rules = PlanRules.for_arms(planning, ids).with_resources(arms)
    tools = profile_of(planning, ids) == "tools"
    notes = examples.notes(ids) if tools else None
    resolver = ArmResolver(arms, aliases, tools=tools, tool_notes=notes)
    if tools:
        planning = planning.model_copy(
            update={
                "min_steps": rules.min_steps,
                "max_steps": rules.max_steps,
                "require_validation_step": False,
            }
        )
        prompt = tools_system_prompt(arms, rules.min_steps, rules.max_steps)
    else:
        prompt = system_prompt(arms, planning)
    return Toolbox(
        arms=tuple(arms),
        resolver=resolver,
        rules=rules,
        rule_based=RuleBasedPlanner(planning, resolver, rules, confidence, examples.examples),
        system_prompt=prompt,
        shortlist_size=planning.tool_shortlist,
        examples=examples,
        example_count=planning.tool_examples,
        example_chars=planning.tool_examples_chars,
    )


class Toolboxes:
    """The configured toolbox, and one per tool set requests bring (least recently used out)."""

    def __init__(self, settings: Settings) -> None:
        self._planning = settings.planning
        self._confidence = settings.fallback.confidence
        self._aliases = settings.arm_aliases
        self._examples = ExampleIndex(settings.examples)
        self.configured = build_toolbox(
            settings.arms,
            settings.arm_aliases,
            settings.planning,
            self._confidence,
            self._examples,
        )
        self._kept: OrderedDict[str, Toolbox] = OrderedDict()

    def for_request(self, request: PlanRequest) -> Toolbox:
        if request.tool_set is None:
            return self.configured
        key, specs = request.tool_set
        box = self._kept.get(key)
        if box is None:
            box = build_toolbox(specs, {}, self._planning, self._confidence, self._examples)
            self._kept[key] = box
            while len(self._kept) > KEPT_TOOL_SETS:
                self._kept.popitem(last=False)
        else:
            self._kept.move_to_end(key)
        return box
