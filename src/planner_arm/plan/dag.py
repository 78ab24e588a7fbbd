"""The plan as a graph, pure and without I/O: the walks over its dependencies, the judge step
that closes a plan, and the stages an iterative plan is cut into.

The walks: what a step waits for, directly or through others (`ancestors`); the steps nothing
waits for (`sinks`); a stable dependency order (`stable_topological_order`). A plan sent by a
caller may be long, have cycles or name missing steps: validation reports those, the walks
only stop at them.

The final check is only worth its name if it runs after everything it checks, so it depends,
directly or through other steps, on every other step; a judge step the model left without
those dependencies would run first (at stage one), checking nothing.

The next stage of an iterative plan is the steps not done yet whose every dependency is done
(they can all start now, side by side), at most `limit` of them, in plan order. The plan is
complete when the stage holds every step still to do: then its final check is among them.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from graphlib import TopologicalSorter
from typing import Protocol

from planner_arm.plan.draft import repair
from planner_arm.plan.schemas import PlanStep

JUDGE_ARM = "judge"
JUDGE_ACTION = "Validate that the plan's results meet the goal and its acceptance criteria"
JUDGE_CRITERIA = (
    "Every earlier step's acceptance criteria are met",
    "The combined result satisfies the goal and its constraints",
)
JUDGE_COST_TIER = 2
JUDGE_DURATION_SECONDS = 30


class StepLike(Protocol):
    @property
    def step(self) -> int: ...

    @property
    def depends_on(self) -> list[int]: ...


def ancestors(steps: Sequence[StepLike], number: int) -> frozenset[int]:
    """Every step that step `number` depends on, directly or through others."""
    return _walk({step.step: list(step.depends_on) for step in steps}, number)


def ancestors_of_each(steps: Sequence[StepLike]) -> dict[int, frozenset[int]]:
    """For each step, every step it depends on, directly or through others."""
    direct = {step.step: list(step.depends_on) for step in steps}
    return {number: _walk(direct, number) for number in direct}


def descendants(steps: Sequence[StepLike], number: int) -> frozenset[int]:
    """Every step that depends on step `number`, directly or through others (one walk)."""
    waiting: dict[int, list[int]] = {step.step: [] for step in steps}
    for step in steps:
        for dep in step.depends_on:
            if dep in waiting:
                waiting[dep].append(step.step)
    return _walk(waiting, number)


def _walk(direct: dict[int, list[int]], number: int) -> frozenset[int]:
    # A walk, not a recursion: long chains, cycles and missing steps only end it.
    seen: set[int] = set()
    todo = list(direct.get(number, []))
    while todo:
        parent = todo.pop()
        if parent in seen or parent == number or parent not in direct:
            continue
        seen.add(parent)
        todo.extend(direct[parent])
    return frozenset(seen)


def sinks(steps: Sequence[StepLike]) -> list[int]:
    """The steps no other step depends on, in the plan's order."""
    depended_on = {dep for step in steps for dep in step.depends_on}
    return [step.step for step in steps if step.step not in depended_on]


def stable_topological_order(deps: Sequence[Sequence[int]]) -> list[int]:
    """Positions in dependency order, earliest-listed first among the ready ones.

    Raises graphlib.CycleError. A plan already in order (the usual case) skips graphlib.
    """
    if all(dep < pos for pos, step_deps in enumerate(deps) for dep in step_deps):
        return list(range(len(deps)))
    sorter = TopologicalSorter(dict(enumerate(deps)))
    sorter.prepare()
    ready = list(sorter.get_ready())
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        pos = heapq.heappop(ready)
        order.append(pos)
        sorter.done(pos)
        for unlocked in sorter.get_ready():
            heapq.heappush(ready, unlocked)
    return order


def judge_step(steps: Sequence[PlanStep], number: int | None = None) -> PlanStep:
    """A final judge step, numbered `number` (else after the last), that depends on every
    step nothing else depends on."""
    return PlanStep(
        step=len(steps) + 1 if number is None else number,
        action=JUDGE_ACTION,
        required_arm=JUDGE_ARM,
        acceptance_criteria=list(JUDGE_CRITERIA),
        depends_on=sinks(steps),
        estimated_cost_tier=JUDGE_COST_TIER,
        estimated_duration_seconds=JUDGE_DURATION_SECONDS,
    )


def complete_final_check(steps: list[PlanStep]) -> str | None:
    """Makes the last step depend on every other step; the repair entry, or None if it did.

    The steps it lacks are added through the ones among them that nothing else depends on,
    which reach the rest: the fewest new dependencies, and the plan's parallelism kept.
    """
    final = steps[-1]
    others = steps[:-1]
    reached = ancestors(steps, final.step)
    missing = [step.step for step in others if step.step not in reached]
    if not missing:
        return None
    depended_on = {dep for step in others for dep in step.depends_on}
    added = [number for number in missing if number not in depended_on]
    steps[-1] = final.model_copy(update={"depends_on": sorted({*final.depends_on, *added})})
    listed = ", ".join(map(str, added))
    return repair("final_check_dependencies", f"step {final.step} now depends on {listed}")


@dataclass(frozen=True)
class Stage:
    steps: list[PlanStep]
    complete: bool  # no step is left to plan after these
    left: int  # steps of the whole plan still to do after this stage


def next_stage(steps: Sequence[PlanStep], done: Collection[int], limit: int) -> Stage:
    """The steps of `steps` not in `done` that can start now, at most `limit`."""
    todo = [step for step in steps if step.step not in done]
    ready = [step for step in todo if all(dep in done for dep in step.depends_on)]
    stage = ready[:limit]
    return Stage(stage, complete=len(stage) == len(todo), left=len(todo) - len(stage))


def first_stage_steps(stage: Sequence[PlanStep]) -> list[PlanStep]:
    """A first stage numbered 1..n, as a /plan answer is (its steps depend on nothing)."""
    return [
        step.model_copy(update={"step": n, "depends_on": []}) for n, step in enumerate(stage, 1)
    ]


def closing_stage(finished: Sequence[PlanStep], number: int, *, with_check: bool) -> list[PlanStep]:
    """The last stage when no more work may be planned: the final check of what was done,
    numbered `number` (nothing when the plan rules want no final check)."""
    return [judge_step(finished, number)] if with_check else []
