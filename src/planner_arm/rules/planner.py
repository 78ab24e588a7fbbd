"""The rule-based planner: a plan for any goal without a model, and the sub-plan of one step.

A plan: the goal is read (`goals.py`: its parts, each with a kind and a subject, and the
environments, versions, files, URLs and tickets it names), each part's template
(`templates.py`) is filled with its subject and specifics, the parts are chained in order and
fitted to the configured step limits, and a judge step that checks the caller's constraints
ends the plan. `RuleBasedPlanner` fits it to the caller's budget too (fewer steps until it
fits, or `BudgetExceeded` with the figures of the smallest plan), with the fixed confidence
that lets a caller tell it from a model's.

A sub-plan (POST /plan/expand, a hierarchical node the model could not detail): the rules must
not plan the whole goal again from the step's words, which repeats the work of the steps
around it ("write a test", "patch the code" for a step that only analyses). A step's own
detail is the same for every kind of step: gather what it needs, do it (split by its
acceptance criteria when more steps are wanted), and check it against those criteria.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, NamedTuple

from planner_arm.config import PlanningSettings
from planner_arm.plan import arms
from planner_arm.plan.arms import ArmResolver, typical_cost_tier, typical_duration_seconds
from planner_arm.plan.budget import BudgetedPlanner, fit_to_budget
from planner_arm.plan.dag import JUDGE_ARM
from planner_arm.plan.draft import DraftPlan, DraftStep
from planner_arm.plan.schemas import Budget, PlanRequest, PlanStep
from planner_arm.plan.validation import PlanRules, ValidPlan
from planner_arm.rules.goals import (
    CLAUSE_END,
    DOC_NOUNS,
    GoalDetails,
    GoalPart,
    classify_goal,
    clean,
    clip,
    goal_details,
    goal_parts,
    goal_subject,
    has_word,
)
from planner_arm.rules.templates import Step, kinds

__all__ = ["classify_goal", "goal_subject", "rule_based_plan"]

MAX_CONSTRAINT_CHARS = 500  # at most 32 constraints (the API's limit) are carried
GOAL_ACTION_CHARS = 120
# What a later part is about when it names nothing of its own ("then deploy it"): the product
# of the part before, by that part's kind.
_PRODUCT = {"bug_fix": "the fix for {the}", "research": "the findings on {the}",
            "data_analysis": "the results for {the}", "documentation": "{doc}"}  # fmt: skip
_PRONOUN = re.compile(r"\b(?:it|them)\b", re.IGNORECASE)


class _Part(NamedTuple):
    kind: str
    fill: dict[str, str]
    details: GoalDetails  # the specifics its subject does not already name


def rule_based_plan(
    goal: str,
    constraints: Sequence[str],
    context: Mapping[str, Any],
    *,
    planning: PlanningSettings,
    resolver: ArmResolver,
) -> DraftPlan:
    """A valid plan for `goal` from the templates of its parts, within the planning limits
    (a caller's tool set is `tools/planner.py`'s)."""
    pieces, size, with_check = _sized(goal, planning, resolver)
    parts: list[_Part] = []
    for piece in pieces:
        parts.append(_part(piece, parts[-1] if parts else None))
    work = _chained(tuple(part.kind for part in parts))
    kept = _fit(work, size - with_check)
    steps = _work_steps(work, kept, parts, resolver)
    if with_check:
        steps.append(_final_check(steps, parts, resolver))
    _place_details(steps, kept, parts)
    _distinct_actions(steps)
    note, found = _context_note(context)
    steps[0].action += note
    steps[0].acceptance_criteria = [*steps[0].acceptance_criteria[: 3 - len(found)], *found]
    limits = [*dict.fromkeys(filter(None, (clip(c, MAX_CONSTRAINT_CHARS) for c in constraints)))]
    steps[-1].acceptance_criteria += [f"Constraint respected: {text}" for text in limits[:32]]
    return DraftPlan(steps, _rationale(parts, len(steps)), complexity_score=_complexity(
        parts, goal, len(limits[:5])))  # fmt: skip


def _sized(
    goal: str, planning: PlanningSettings, resolver: ArmResolver
) -> tuple[list[GoalPart], int, bool]:
    """The goal's parts, the plan's size and whether a final check ends it."""
    pieces = goal_parts(goal)
    with_check = planning.require_validation_step or "judge" in resolver.arm_ids
    work_count = sum(len(kinds()[piece.kind].steps) - 1 for piece in pieces)
    size = min(max(work_count + with_check, planning.min_steps), planning.max_steps)
    with_check = with_check and (size > 1 or planning.require_validation_step)
    if len(pieces) > max(size - with_check, 1):  # too few steps for a part each: one template
        pieces = [GoalPart(goal, classify_goal(goal), goal_subject(goal))]
    return pieces, size, with_check


def _work_steps(
    work: Sequence[tuple[str, int, Step]],
    kept: list[tuple[str, int, Step]],
    parts: list[_Part],
    resolver: ArmResolver,
) -> list[DraftStep]:
    """The kept steps numbered 1..n, each waiting for the kept steps its inputs stand for."""
    number = {key: index for index, (key, _, _) in enumerate(kept, 1)}
    reach: dict[str, set[int]] = {}  # the kept steps a step stands for: itself, or its inputs
    after: dict[str, list[int]] = {}
    for key, _, step in [*work, *kept]:
        after[key] = sorted(set().union(*(reach[name] for name in step.after)))
        reach[key] = {number[key]} if key in number else set(after[key])
    return [
        _draft(step, number[key], _direct(after[key], after, kept), parts[index].fill, resolver)
        for key, index, step in kept
    ]


def _final_check(steps: list[DraftStep], parts: list[_Part], resolver: ArmResolver) -> DraftStep:
    """The last part's check, also checking what the earlier parts' checks would have, after
    every step that no other waits for."""
    needed = {dep for draft in steps for dep in draft.depends_on}
    sinks = [index for index in range(1, len(steps) + 1) if index not in needed]
    check = kinds()[parts[-1].kind].steps[-1]
    earlier = tuple(kinds()[part.kind].steps[-1].criteria[0] for part in parts[:-1])
    check = check._replace(criteria=(*earlier, *check.criteria))
    return _draft(check, len(steps) + 1, sinks, parts[-1].fill, resolver)


def _direct(
    deps: list[int], after: dict[str, list[int]], kept: list[tuple[str, int, Step]]
) -> list[int]:
    """`deps` without those another of them already waits for: a dropped step's inputs can
    overlap with what the step's other inputs wait for."""
    below: set[int] = set()
    pending = list(deps)
    while pending:
        for earlier in after[kept[pending.pop() - 1][0]]:
            if earlier not in below:
                below.add(earlier)
                pending.append(earlier)
    return [dep for dep in deps if dep not in below]


def _part(piece: GoalPart, before: _Part | None) -> _Part:
    """One part's template fill: its subject (or the product of the part before) and details."""
    subject = piece.subject
    the = _the(subject, before)
    clause = clip(
        next(filter(has_word, CLAUSE_END.split(piece.text[:1000])), ""), GOAL_ACTION_CHARS
    )
    if before is not None and not subject:
        clause = _PRONOUN.sub(the, clause, count=1)
    found = goal_details(piece.text)
    known = the.lower()
    details = GoalDetails(*(tuple(d for d in kind if d.lower() not in known) for kind in found))
    named = any(clean(word) in DOC_NOUNS for word in subject.split())
    paths = " and ".join(details.paths)
    fill = {
        "the": the,
        "doc": the if named else f"the documentation for {the}",
        "goal": clause[:1].upper() + clause[1:] if clause else f"Carry out {the}",
        "env": " and ".join(details.environments) or "the target environment",
        "in_env": _phrase(" in {}", details.environments, " and "),
        "ver": _phrase(" ({})", details.versions),
        "in_files": _phrase(" in {}", details.paths, " and "),
        "code": paths or "the code",
        "refs": _phrase(" ({})", (*details.tickets, *details.urls)),
    }
    return _Part(piece.kind, fill, details)


def _the(subject: str, before: _Part | None) -> str:
    """How the part's steps name what it is about."""
    if not subject:
        if before is None:
            return "the task"
        return _PRODUCT.get(before.kind, "{the}").format_map(before.fill)
    # A subject in another script reads better quoted than after "the".
    if any(char.isalpha() and not char.isascii() for char in subject):
        return f'"{subject}"'
    return f"the {subject}"


def _phrase(pattern: str, items: Sequence[str], joiner: str = ", ") -> str:
    return pattern.format(joiner.join(items)) if items else ""


@cache
def _chained(names: tuple[str, ...]) -> tuple[tuple[str, int, Step], ...]:
    """Every part's work steps, keyed "part.key"; a part's first steps wait for the last ones
    of the part before (those no other step of it depends on)."""
    chained: list[tuple[str, int, Step]] = []
    ends: tuple[str, ...] = ()
    for index, name in enumerate(names):
        work = kinds()[name].steps[:-1]
        for step in work:
            after = tuple(f"{index}.{key}" for key in step.after) or ends
            chained.append((f"{index}.{step.key}", index, step._replace(after=after)))
        needed = {key for step in work for key in step.after}
        ends = tuple(f"{index}.{step.key}" for step in work if step.key not in needed)
    return tuple(chained)


def _fit(work: Sequence[tuple[str, int, Step]], size: int) -> list[tuple[str, int, Step]]:
    """`size` steps: the most essential of every part, or all of them and padding steps."""
    if size <= len(work):
        order = sorted(range(len(work)), key=lambda i: (work[i][2].keep, work[i][1], i))
        keep = set(order[:size])
        return [entry for i, entry in enumerate(work) if i in keep]
    last = work[-1][1]
    main = min((entry for entry in work if entry[1] == last), key=lambda entry: entry[2].keep)[0]
    pads = kinds()["pad"].steps
    extra = []
    for index in range(size - len(work)):
        pad, rounds = pads[index % len(pads)], index // len(pads)
        action = pad.action + (f" (round {rounds + 1})" if rounds else "")
        extra.append((f"pad{index}", last, pad._replace(after=(main,), action=action)))
    return [*work, *extra]


def _draft(
    step: Step, number: int, after: list[int], fill: dict[str, str], resolver: ArmResolver
) -> DraftStep:
    action = step.action.format_map(fill)
    criteria = [text.format_map(fill) for text in step.criteria]
    if step.arm in resolver.arm_ids:
        arm, tier, seconds = step.arm, step.tier, step.seconds
    else:  # "*", or an arm this registry does not have
        arm = resolver.select(action, criteria)
        tier, seconds = arms.typical_cost_tier(arm), arms.typical_duration_seconds(arm)
    return DraftStep(action, arm, criteria, after, number, tier, seconds)


def _place_details(
    steps: list[DraftStep], kept: list[tuple[str, int, Step]], parts: list[_Part]
) -> None:
    """Each specific a part names, that none of its kept steps does, added to its main step."""
    for index, part in enumerate(parts):
        mine = [steps[n] for n, entry in enumerate(kept) if entry[1] == index]
        if index == len(parts) - 1 and len(steps) > len(kept):
            mine.append(steps[-1])
        missing = _not_named(part.details, mine)
        if missing.all():
            main = [
                steps[n] for n, entry in enumerate(kept) if entry[1] == index and entry[2].keep == 0
            ]
            (main or mine or steps)[0].action += _details_phrase(missing)


def _not_named(details: GoalDetails, steps: list[DraftStep]) -> GoalDetails:
    """The details that none of the steps' actions names."""
    text = " ".join(step.action.lower() for step in steps)
    return GoalDetails(*(tuple(d for d in kind if d.lower() not in text) for kind in details))


def _details_phrase(details: GoalDetails) -> str:
    return (
        _phrase(" in {}", details.environments, " and ")
        + _phrase(" in {}", details.paths, " and ")
        + _phrase(" ({})", (*details.versions, *details.tickets, *details.urls))
    )


def _distinct_actions(steps: list[DraftStep]) -> None:
    seen: set[str] = set()
    for step in steps:
        if step.action in seen:
            step.action += f" (step {step.step})"
        seen.add(step.action)


def _rationale(parts: list[_Part], size: int) -> str:
    read = [
        f"{kinds()[part.kind].label} (kind '{part.kind}') for {part.fill['the']}" for part in parts
    ]
    if len(parts) == 1:
        kind, the = parts[0].kind, parts[0].fill["the"]
        return (
            f"Rule-based planner (no usable model plan): the goal reads as "
            f"{kinds()[kind].label} (kind '{kind}'), so the {kind} template was applied to {the} "
            f"and fitted to {size} steps, independent ones in parallel, the last checking the "
            "result and the constraints."
        )
    return (
        f"Rule-based planner (no usable model plan): the goal has {len(parts)} parts, done in "
        f"order: {', then '.join(read)}. Each part's template was applied, the parts chained and "
        f"fitted to {size} steps, independent ones in parallel, the last checking the result and "
        "the constraints."
    )


def _complexity(parts: list[_Part], goal: str, constraints: int) -> float:
    base = max(kinds()[part.kind].complexity for part in parts) + 0.05 * (len(parts) - 1)
    score = base + min(0.15, len(goal.split()) / 200) + 0.03 * constraints
    return round(min(1.0, score), 2)


def _context_note(context: Mapping[str, Any]) -> tuple[str, list[str]]:
    """A suffix for the first action naming what the context points at, and a criterion."""
    files = next(filter(None, map(context.get, ("affected_files", "files", "paths"))), None)
    if files:
        names = files if isinstance(files, list) else [files]
        more = f" and {len(names) - 3} more" if len(names) > 3 else ""
        shown = clip(", ".join(str(name) for name in names[:3]), 150) + more
        return f" (starting with {shown})", [f"{shown} examined"]
    if context:
        return f" (using the context's {clip(', '.join(map(str, context)), 100)})", []
    return "", []


def plan_within_budget(
    goal: str,
    constraints: Sequence[str],
    context: Mapping[str, Any],
    *,
    planning: PlanningSettings,
    resolver: ArmResolver,
    rules: PlanRules,
    budget: Budget | None,
) -> tuple[DraftPlan, ValidPlan]:
    """The rule-based plan, with as many steps as the planning limits and the budget allow."""

    def draft_of(fitted: PlanningSettings) -> DraftPlan:
        return rule_based_plan(goal, constraints, context, planning=fitted, resolver=resolver)

    return fit_to_budget(draft_of, planning, rules, budget)


@dataclass
class RuleBasedPlanner(BudgetedPlanner):
    """The rule-based planner of the configured agents."""

    resolver: ArmResolver

    def draft(self, request: PlanRequest, planning: PlanningSettings) -> DraftPlan:
        return rule_based_plan(
            request.goal,
            request.constraints,
            request.context,
            planning=planning,
            resolver=self.resolver,
        )


_GATHER_ARM = "retriever"
# What gathering means for the arm that does the step.
_GATHER = {
    "retriever": "List the sources and search terms for: {action}",
    "coder": "Read the code, notes and earlier results that this builds on: {action}",
    "executor": "Check the preconditions and inputs of: {action}",
    "guardian": "Collect the material and the policies to check for: {action}",
    "judge": "Collect the results to be checked for: {action}",
    "planner": "Gather what is known about: {action}",
}
_DEFAULT_GATHER = "Gather what is needed for: {action}"


def step_detail(
    step: PlanStep,
    constraints: Sequence[str],
    *,
    arm_ids: Sequence[str],
    size: int,
) -> DraftPlan:
    """A sub-plan of `size` steps (at least 3 when the judge arm exists) that details `step`."""
    action = step.action.strip().rstrip(".")
    gather_arm = _GATHER_ARM if _GATHER_ARM in arm_ids else step.required_arm
    gather = _GATHER.get(step.required_arm, _DEFAULT_GATHER).format(action=action)
    with_check = JUDGE_ARM in arm_ids
    work = max(1, size - 1 - with_check)  # the steps that do the work itself
    criteria = [text for text in step.acceptance_criteria if text.strip()] or [action]
    steps = [_detail_step(1, gather, gather_arm, [f"What '{action}' needs is at hand"], [])]
    if work == 1:
        steps.append(_detail_step(2, action, step.required_arm, criteria, [1]))
    else:
        # One part of the work per criterion (the last takes the rest), side by side.
        for index in range(work):
            aim = criteria[index] if index < len(criteria) else criteria[-1]
            part = f"{action}, so that: {aim}" + (
                f" (part {index + 1})" if index >= len(criteria) else ""
            )
            steps.append(_detail_step(index + 2, part, step.required_arm, [aim], [1]))
    if with_check:
        done = [draft.step for draft in steps[1:] if draft.step is not None]
        checks = [*criteria, *(f"Constraint respected: {text}" for text in constraints)]
        steps.append(
            _detail_step(len(steps) + 1, f"Check the result of: {action}", JUDGE_ARM, checks, done)
        )
    rationale = (
        "Rule-based detail of one step (no usable model answer): gather what it needs, do it, "
        "and check it against its acceptance criteria."
    )
    return DraftPlan(steps, rationale)


def _detail_step(
    number: int, action: str, arm: str, criteria: list[str], after: list[int]
) -> DraftStep:
    return DraftStep(
        action, arm, criteria, after, number, typical_cost_tier(arm), typical_duration_seconds(arm)
    )
