"""Plan rules: turn a parsed `DraftPlan` into numbered, dependency-ordered `PlanStep`s.

What can be mended locally is mended and recorded as a repair (`REPAIR_CODES`); what only the
model can mend raises one `PlanValidationError` that lists every problem found (`ERROR_CODES`).
Steps are named in repair and error details by the numbers the model gave them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from graphlib import CycleError
from typing import Literal

from planner_arm.config import ArmSpec, PlanningSettings, Settings
from planner_arm.errors import PlanValidationError
from planner_arm.plan.arms import typical_cost_tier, typical_duration_seconds
from planner_arm.plan.dag import (
    JUDGE_ACTION,
    JUDGE_ARM,
    complete_final_check,
    judge_step,
    stable_topological_order,
)
from planner_arm.plan.draft import DraftPlan, DraftStep, repair
from planner_arm.plan.schemas import PlanStep

__all__ = ["ERROR_CODES", "JUDGE_ACTION", "REPAIR_CODES", "PlanRules", "ValidPlan", "validate_plan"]

MIN_COST_TIER = 1
MAX_COST_TIER = 5
MIN_DURATION_SECONDS = 1
# One step longer than a day is a slip (minutes taken for seconds, a stray zero), not a plan.
MAX_DURATION_SECONDS = 86_400

REPAIR_CODES = frozenset(
    {
        "renumbered",  # step numbers were not 1..n in list order (0-based, gaps, missing)
        "duplicate_step_number",  # numbers repeat: steps identified by position instead
        "self_dependency",
        "unknown_dependency",
        "duplicate_dependency",
        "reordered",  # a step came before a step it depends on: stable topological order
        "empty_criteria_dropped",
        "default_cost_tier",
        "cost_tier_clamped",
        "default_duration",
        "duration_floored",
        "duration_capped",
        "judge_step_appended",
        "final_check_dependencies",  # the final judge step did not depend on every step
        "steps_merged",  # over the step bound: a step merged into the one it follows
        "link_type_mismatch",  # a link between tools whose declared types do not meet
        "link_added_by_type",  # a step's consumed type linked to the step that produces it
    }
)
ERROR_CODES = frozenset(
    {"cycle", "unknown_arm", "empty_action", "missing_criteria", "wrong_step_count"}
)


@dataclass(frozen=True)
class PlanRules:
    """The rules a plan must keep, taken once from the settings."""

    min_steps: int
    max_steps: int
    require_validation_step: bool
    arm_ids: tuple[str, ...]
    # With require_validation_step: the final judge step depends on every other step.
    require_dependency_check: bool = True
    # Per tool that declares them: the resource types it consumes and produces.
    resources: Mapping[str, tuple[frozenset[str], frozenset[str]]] = field(
        default_factory=dict, compare=False
    )
    # Of a caller's tools: whether each one writes (`tools/traits.py`). A step over one
    # says so in `writes`, whatever a model or a caller wrote there; a built-in arm's says null.
    writing: Mapping[str, bool] = field(default_factory=dict, compare=False)
    # agents: the built-in agents' rules (a final check); tools: a plan of tool calls.
    profile: Profile = field(init=False, compare=False)

    def __post_init__(self) -> None:
        if not 1 <= self.min_steps <= self.max_steps:
            raise ValueError(
                f"need 1 <= min_steps <= max_steps, got {self.min_steps}, {self.max_steps}"
            )
        if self.require_validation_step and JUDGE_ARM not in self.arm_ids:
            raise ValueError(f"require_validation_step needs the arm {JUDGE_ARM!r}")
        profile: Profile = "agents" if self.require_validation_step else "tools"
        object.__setattr__(self, "profile", profile)

    @classmethod
    def from_settings(cls, settings: Settings) -> PlanRules:
        return cls.for_arms(settings.planning, settings.arm_ids)

    def with_resources(self, arms: Sequence[ArmSpec]) -> PlanRules:
        """These rules, checking links against the types the arms declare."""
        typed = {
            arm.id: (frozenset(arm.consumes), frozenset(arm.produces))
            for arm in arms
            if arm.consumes or arm.produces
        }
        return replace(self, resources=typed) if typed else self

    def with_writes(self, writing: Mapping[str, bool]) -> PlanRules:
        """These rules over a caller's tools, `writing` saying whether each one writes: each
        step over one says so."""
        return replace(self, writing=dict(writing))

    def marked(self, steps: Sequence[PlanStep]) -> list[PlanStep]:
        """`steps`, each saying whether its tool writes (`writing`; null for a built-in arm),
        whatever it said before: the one place a step's `writes` is set."""
        return [
            step
            if step.writes is (found := self.writing.get(step.required_arm))
            else step.model_copy(update={"writes": found})
            for step in steps
        ]

    @classmethod
    def for_arms(cls, planning: PlanningSettings, arm_ids: Sequence[str]) -> PlanRules:
        """The rules for this set of arms: the agents profile where the built-in agents are
        (with `auto`, where there is a `judge`), else the tools profile."""
        ids = tuple(arm_ids)
        if profile_of(planning, ids) == "agents":
            return cls(
                min_steps=planning.min_steps,
                max_steps=planning.max_steps,
                require_validation_step=planning.require_validation_step,
                arm_ids=ids,
                require_dependency_check=planning.require_dependency_check,
            )
        return cls(
            min_steps=planning.tool_min_steps,
            max_steps=planning.tool_max_steps,
            require_validation_step=False,
            arm_ids=ids,
            require_dependency_check=False,
        )


Profile = Literal["agents", "tools"]


def profile_of(planning: PlanningSettings, arm_ids: Sequence[str]) -> Profile:
    """Which rules a set of arms gets (`planning.profile`, `auto` decided by a `judge` arm)."""
    if planning.profile != "auto":
        return planning.profile
    return "agents" if JUDGE_ARM in arm_ids else "tools"


@dataclass
class ValidPlan:
    """Steps that keep every rule, and the repairs made here (not the parser's)."""

    steps: list[PlanStep]
    repairs: list[str]


@dataclass(slots=True)
class _CheckedStep:
    """A step being checked; `deps` holds list positions, not step numbers."""

    action: str
    arm: str
    criteria: list[str]
    deps: list[int]
    cost: int
    duration: int


def validate_plan(draft: DraftPlan, rules: PlanRules) -> ValidPlan:
    """Check and mend `draft`; raise PlanValidationError naming every rule it still breaks."""
    repairs: list[str] = []
    draft = _merged_to_bound(draft, rules, repairs)
    if rules.resources:
        draft = typed_links(draft, rules.resources, repairs)
    given = [step.step for step in draft.steps]
    errors: list[tuple[str, str]] = []

    ids = _identify(given, repairs)
    names = [
        str(number) if number is not None else f"at position {pos}"
        for pos, number in enumerate(ids, 1)
    ]
    labels = [f"step {name}" for name in names]
    position_of = {number: pos for pos, number in enumerate(ids) if number is not None}
    work = [
        _check_step(step, pos, labels[pos], position_of, rules, repairs, errors)
        for pos, step in enumerate(draft.steps)
    ]

    order = _order_or_cycle(work, ids, errors)
    n = len(work)
    last = order[-1] if order else n - 1
    needs_judge = rules.require_validation_step and (n == 0 or work[last].arm != JUDGE_ARM)
    count_error = _count_error(n, needs_judge, rules)
    if count_error:
        errors.append(("wrong_step_count", count_error))
    _raise_errors(errors)
    assert order is not None  # no cycle, or there would be an error

    number_of = {pos: new for new, pos in enumerate(order, 1)}
    repairs.extend(_order_repairs(given, order, number_of, names))
    steps = rules.marked(_plan_steps(draft, work, order, number_of))
    _close_with_judge(steps, needs_judge, rules, repairs)
    return ValidPlan(steps=steps, repairs=repairs)


def _order_or_cycle(
    work: list[_CheckedStep], ids: list[int | None], errors: list[tuple[str, str]]
) -> list[int] | None:
    """The steps' positions in dependency order, or None after putting a cycle first in errors."""
    try:
        return stable_topological_order([step.deps for step in work])
    except CycleError as exc:
        errors.insert(0, ("cycle", _describe_cycle(exc.args[1], ids)))
        return None


def _raise_errors(errors: list[tuple[str, str]]) -> None:
    if errors:
        messages = [message for _, message in errors]
        raise PlanValidationError("; ".join(messages), code=errors[0][0], errors=messages)


def _order_repairs(
    given: list[int | None], order: list[int], number_of: dict[int, int], names: list[str]
) -> list[str]:
    n = len(order)
    final = [number_of[pos] for pos in range(n)]
    repairs = []
    # A step keeping its given number needs no entry, nor one whose number only changed
    # because it moved (`reordered` says so), nor one identified by position after duplicates.
    if final != given and given != list(range(1, n + 1)) and not _has_duplicates(given):
        repairs.append(repair("renumbered", f"step numbers {given} became {final}"))
    if order != list(range(n)):
        moved = ", ".join(names[pos] for pos in order)
        repairs.append(repair("reordered", f"steps put in dependency order {moved}"))
    return repairs


def _plan_steps(
    draft: DraftPlan, work: list[_CheckedStep], order: list[int], number_of: dict[int, int]
) -> list[PlanStep]:
    # The checks already keep PlanStep's constraints, but full validation stays: with
    # pydantic-core it is faster than model_construct (about 1.6 us against 2.8 us a step).
    return [
        PlanStep(
            step=new,
            action=work[pos].action,
            required_arm=work[pos].arm,
            acceptance_criteria=work[pos].criteria,
            depends_on=sorted(number_of[dep] for dep in work[pos].deps),
            estimated_cost_tier=work[pos].cost,
            estimated_duration_seconds=work[pos].duration,
            parent=draft.steps[pos].parent,
            input=draft.steps[pos].input,
        )
        for new, pos in enumerate(order, 1)
    ]


def _close_with_judge(
    steps: list[PlanStep], needs_judge: bool, rules: PlanRules, repairs: list[str]
) -> None:
    """Append the final judge step, or make the model's one depend on every step."""
    if needs_judge:
        given_count = len(steps)
        steps.append(judge_step(steps))
        sinks = ", ".join(map(str, steps[-1].depends_on)) or "none"
        repairs.append(
            repair(
                "judge_step_appended",
                f"step {given_count + 1} validates the results of steps {sinks}",
            )
        )
    elif rules.require_validation_step and rules.require_dependency_check:
        completed = complete_final_check(steps)
        if completed:
            repairs.append(completed)


def _identify(given: list[int | None], repairs: list[str]) -> list[int | None]:
    """The number each step is known by, for its dependents; None for an unreachable step.

    Unique given numbers are kept (0-based and gapped ones too: the dependencies use them).
    A step without a number takes its 1-based position unless another step claims it. When
    numbers repeat, a dependency on one is ambiguous, so every step is known by its position.
    """
    if _has_duplicates(given):
        by_position: list[int | None] = list(range(1, len(given) + 1))
        repairs.append(
            repair(
                "duplicate_step_number", f"step numbers {given} repeat; steps numbered by position"
            )
        )
        return by_position
    taken = set(given)
    return [
        number if number is not None else (pos if pos not in taken else None)
        for pos, number in enumerate(given, 1)
    ]


def _has_duplicates(given: list[int | None]) -> bool:
    numbers = [number for number in given if number is not None]
    return len(set(numbers)) != len(numbers)


def _check_step(
    step: DraftStep,
    pos: int,
    label: str,
    position_of: dict[int, int],
    rules: PlanRules,
    repairs: list[str],
    errors: list[tuple[str, str]],
) -> _CheckedStep:
    action = step.action.strip()
    if not action:
        errors.append(("empty_action", f"{label}: action is empty"))

    arm = step.required_arm
    known_arm = arm in rules.arm_ids
    if not known_arm:
        errors.append(
            (
                "unknown_arm",
                f"{label}: required_arm {arm!r} is not one of {', '.join(rules.arm_ids)}",
            )
        )

    kept = _kept_criteria(step.acceptance_criteria, label, repairs, errors)
    deps = _dependency_positions(step.depends_on, pos, label, position_of, repairs)
    cost = _cost_tier(step.estimated_cost_tier, arm if known_arm else None, label, repairs)
    duration = _duration(
        step.estimated_duration_seconds, arm if known_arm else None, label, repairs
    )
    # None is left only on a step with an unknown arm, which is already an error.
    return _CheckedStep(
        action, arm, kept, deps, cost or MIN_COST_TIER, duration or MIN_DURATION_SECONDS
    )


def _kept_criteria(
    given: list[str], label: str, repairs: list[str], errors: list[tuple[str, str]]
) -> list[str]:
    criteria = [text.strip() for text in given]
    kept = [text for text in criteria if text]
    if not kept:
        errors.append(("missing_criteria", f"{label}: no non-empty acceptance criterion"))
    elif len(kept) != len(criteria):
        repairs.append(
            repair("empty_criteria_dropped", f"{label}: dropped {len(criteria) - len(kept)} empty")
        )
    return kept


def _dependency_positions(
    numbers: list[int], pos: int, label: str, position_of: dict[int, int], repairs: list[str]
) -> list[int]:
    deps: list[int] = []
    for number in numbers:
        target = position_of.get(number)
        if target is None:
            repairs.append(repair("unknown_dependency", f"{label}: no step {number} to depend on"))
        elif target == pos:
            repairs.append(repair("self_dependency", f"{label}: dropped its dependency on itself"))
        elif target in deps:
            repairs.append(repair("duplicate_dependency", f"{label}: step {number} listed twice"))
        else:
            deps.append(target)
    return deps


def _cost_tier(
    cost: int | None, known_arm: str | None, label: str, repairs: list[str]
) -> int | None:
    """The step's cost tier: the arm's typical one when none is given, clamped into range."""
    if cost is None and known_arm is not None:
        cost = typical_cost_tier(known_arm)
        repairs.append(
            repair("default_cost_tier", f"{label}: none given, used {cost} ({known_arm})")
        )
    if cost is not None and not MIN_COST_TIER <= cost <= MAX_COST_TIER:
        clamped = min(max(cost, MIN_COST_TIER), MAX_COST_TIER)
        repairs.append(repair("cost_tier_clamped", f"{label}: {cost} -> {clamped}"))
        cost = clamped
    return cost


def _duration(
    duration: int | None, known_arm: str | None, label: str, repairs: list[str]
) -> int | None:
    """The step's duration: the arm's typical one when none is given, kept within a day."""
    if duration is None and known_arm is not None:
        duration = typical_duration_seconds(known_arm)
        repairs.append(
            repair("default_duration", f"{label}: none given, used {duration} s ({known_arm})")
        )
    if duration is not None and duration < MIN_DURATION_SECONDS:
        repairs.append(repair("duration_floored", f"{label}: {duration} -> {MIN_DURATION_SECONDS}"))
        duration = MIN_DURATION_SECONDS
    elif duration is not None and duration > MAX_DURATION_SECONDS:
        repairs.append(repair("duration_capped", f"{label}: {duration} -> {MAX_DURATION_SECONDS}"))
        duration = MAX_DURATION_SECONDS
    return duration


def _describe_cycle(cycle: list[int], ids: list[int | None]) -> str:
    """'dependency cycle: 1 -> 3 -> 1', where each step depends on the one after its arrow.

    graphlib lists each node before its dependent, so the list is reversed; it is rotated to
    start at the earliest-listed step so the message is stable.
    """
    ring = list(reversed(cycle[:-1]))
    start = ring.index(min(ring))
    ring = ring[start:] + ring[:start] + [ring[start]]
    return "dependency cycle: " + " -> ".join(str(ids[pos]) for pos in ring)


def _merged_to_bound(draft: DraftPlan, rules: PlanRules, repairs: list[str]) -> DraftPlan:
    """A plan a few steps over the bound, mended: a step that needs only the one before it
    (the same arm first) is merged into it, until the model's steps fit. Plans whose steps
    are not all numbered uniquely are left as they are (the count error asks the model)."""
    steps = draft.steps
    closing = bool(steps) and rules.require_validation_step and steps[-1].required_arm == JUDGE_ARM
    own = steps[:-1] if closing else steps
    if len(own) <= rules.max_steps or not _numbered_uniquely(own):
        return draft
    own = [replace(step, depends_on=list(step.depends_on)) for step in own]
    last = [replace(steps[-1], depends_on=list(steps[-1].depends_on))] if closing else []
    while len(own) > rules.max_steps:
        pair = _mergeable(own)
        if pair is None:
            break
        first, second = own[pair], own[pair + 1]
        repairs.append(repair("steps_merged", f"step {second.step} into step {first.step}"))
        own = [*own[:pair], _merged(first, second), *own[pair + 2 :]]
        _redirect([*own, *last], second.step, first.step)
    for step in last:
        kept = {other.step for other in own}
        step.depends_on = [dep for dep in step.depends_on if dep in kept]
    return replace(draft, steps=[*own, *last])


def typed_links(
    draft: DraftPlan,
    resources: Mapping[str, tuple[frozenset[str], frozenset[str]]],
    repairs: list[str],
) -> DraftPlan:
    """Links checked against what the tools declare: a link from a step whose tool produces
    nothing the next one consumes is dropped (`link_type_mismatch`); a step whose tool
    consumes a type that none of its dependencies produces gets a link from the nearest
    earlier step that produces it (`link_added_by_type`). Tools that declare nothing are left
    as they are."""
    if not _numbered_uniquely(draft.steps):
        return draft
    steps = [replace(step, depends_on=list(step.depends_on)) for step in draft.steps]
    by_number = {step.step: step for step in steps}
    for pos, step in enumerate(steps):
        consumes = resources.get(step.required_arm, (frozenset(), frozenset()))[0]
        if not consumes:
            continue
        kept = []
        for dep in step.depends_on:
            produces = _produces(by_number.get(dep), resources)
            if produces and not produces & consumes:
                repairs.append(repair("link_type_mismatch", f"step {dep} -> step {step.step}"))
                continue
            kept.append(dep)
        step.depends_on = kept
        fed = set().union(*(_produces(by_number.get(dep), resources) for dep in kept))
        if not fed & consumes:
            source = _nearest_producer(steps[:pos], consumes, resources)
            if source is not None and source.step not in kept:
                step.depends_on = sorted([*kept, source.step])  # type: ignore[list-item]
                repairs.append(
                    repair("link_added_by_type", f"step {source.step} -> step {step.step}")
                )
    return replace(draft, steps=steps)


def _produces(
    step: DraftStep | None, resources: Mapping[str, tuple[frozenset[str], frozenset[str]]]
) -> frozenset[str]:
    if step is None:
        return frozenset()
    return resources.get(step.required_arm, (frozenset(), frozenset()))[1]


def _nearest_producer(
    earlier: list[DraftStep],
    consumes: frozenset[str],
    resources: Mapping[str, tuple[frozenset[str], frozenset[str]]],
) -> DraftStep | None:
    for step in reversed(earlier):
        if _produces(step, resources) & consumes:
            return step
    return None


def _numbered_uniquely(steps: list[DraftStep]) -> bool:
    numbers = [step.step for step in steps]
    return None not in numbers and len(set(numbers)) == len(numbers)


def _redirect(steps: list[DraftStep], gone: int | None, kept: int | None) -> None:
    """Dependencies on step `gone` now name step `kept` (numbered steps only)."""
    if gone is None or kept is None:
        return
    for step in steps:
        if gone in step.depends_on:
            step.depends_on = sorted({*step.depends_on} - {gone} | {kept})


def _mergeable(steps: list[DraftStep]) -> int | None:
    """The position of the first step that the next one can join: the next needs nothing but
    it and what it needs; a pair with the same arm first."""
    fits = [
        pos
        for pos in range(len(steps) - 1)
        if set(steps[pos + 1].depends_on) <= {steps[pos].step, *steps[pos].depends_on}
        and steps[pos].step in steps[pos + 1].depends_on
    ]
    same_arm = [pos for pos in fits if steps[pos].required_arm == steps[pos + 1].required_arm]
    chosen = same_arm or fits
    return chosen[0] if chosen else None


def _merged(first: DraftStep, second: DraftStep) -> DraftStep:
    then = second.action.strip()
    action = f"{first.action.strip().rstrip('.')}; then {then[:1].lower()}{then[1:]}"
    criteria = list(dict.fromkeys([*first.acceptance_criteria, *second.acceptance_criteria]))
    tiers = [t for t in (first.estimated_cost_tier, second.estimated_cost_tier) if t is not None]
    durations = [
        d
        for d in (first.estimated_duration_seconds, second.estimated_duration_seconds)
        if d is not None
    ]
    return replace(
        first,
        action=action,
        acceptance_criteria=criteria[:4],
        estimated_cost_tier=max(tiers) if tiers else None,
        estimated_duration_seconds=sum(durations) if durations else None,
    )


def _count_error(n: int, needs_judge: bool, rules: PlanRules) -> str | None:
    """The final check (the model's or the one appended) is outside the bound: `max_steps`
    counts the steps of the work itself; `min_steps` the whole plan."""
    total = n + needs_judge
    work = n if needs_judge or not rules.require_validation_step else n - 1
    if rules.min_steps <= total and work <= rules.max_steps:
        return None
    if total < rules.min_steps:
        have = f"plan has {n} step{'' if n == 1 else 's'}"
        if needs_judge:
            have += f" and lacks a final judge step ({total} with one appended)"
        return f"{have}; at least {rules.min_steps} are required"
    besides = " besides the final check" if rules.require_validation_step else ""
    return f"plan has {work} steps{besides}; at most {rules.max_steps} are allowed"
