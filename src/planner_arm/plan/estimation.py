"""Figures derived from a valid plan: durations, critical path, parallel stages, complexity,
confidence, and what the planning calls cost. Pure functions, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from graphlib import TopologicalSorter

from planner_arm.plan.schemas import PlanStep

DEFAULT_MODEL_CONFIDENCE = 0.7
# Each repair says the answer was a little off; each extra call says it was badly off.
REPAIR_FACTOR = 0.97
EXTRA_CALL_FACTOR = 0.85
MIN_CONFIDENCE = 0.05
MAX_CONFIDENCE = 0.99

# A tool plan's answer has no confidence of its own (the tool prompt does not ask for one): a
# plan in the asked shape, over listed tools, covering every piece of the goal, starts here.
TOOL_PLAN_CONFIDENCE = 0.8
# What each entry of a tool plan's repairs and warnings says about the model's answer: a tool
# guessed from a misspelt name, a step whose action names another tool, a piece of the goal
# no step does cost most; a step added or dropped by the service less; any other repair is a
# small mend (`REPAIR_FACTOR`), any other warning nothing.
TOOL_PLAN_FACTORS: Mapping[str, float] = {
    "tool_closest": 0.8,
    "action_unlike_tool": 0.8,
    "goal_part_unplanned": 0.85,
    "producer_added": 0.9,
    "no_tool_step_dropped": 0.9,
    "step_dropped": 0.9,
    "repeat_merged": 0.95,
    "tool_reconciled": 0.95,
}
# A tool plan more than this share of whose steps are unlike their tools (`action_unlike_tool`)
# is some other plan with the tools' names put on it: its confidence stays under
# `MOSTLY_UNLIKE_CEILING`, below the 0.5 a caller would read as "more likely right than not".
MOSTLY_UNLIKE_SHARE = 0.5
MOSTLY_UNLIKE_CEILING = 0.45
# What the service fills in a tool plan by design (the tool prompt asks only for `step`,
# `tool`, `action`, `depends_on`): not repairs, and no cost to the confidence.
FILLED_IN_TOOL_PLANS = frozenset(
    {"default_criteria", "default_cost_tier", "default_duration", "default_rationale"}
)

# complexity_score: each part is scaled to [0, 1] and the weights sum to 1.
COMPLEXITY_WEIGHTS = {"size": 0.25, "arms": 0.20, "depth": 0.20, "width": 0.10, "cost": 0.25}
SIZE_SPAN = 9  # 1 step -> 0, 10 or more -> 1
ARMS_SPAN = 4  # 1 arm -> 0, 5 or more -> 1
DEPTH_SPAN = 6  # 1 stage -> 0, 7 or more -> 1
WIDTH_SPAN = 4  # 1 step per stage at most -> 0, 5 or more side by side -> 1


def _in_dependency_order(steps: Sequence[PlanStep]) -> list[PlanStep]:
    """The steps with each after all its dependencies (validated plans already are).

    Raises ValueError on a dependency outside the plan, graphlib.CycleError on a cycle.
    """
    seen: set[int] = set()
    for step in steps:
        if not seen.issuperset(step.depends_on):
            break
        seen.add(step.step)
    else:
        return list(steps)
    by_number = {step.step: step for step in steps}
    for step in steps:
        missing = set(step.depends_on) - by_number.keys()
        if missing:
            raise ValueError(f"step {step.step} depends on unknown step(s) {sorted(missing)}")
    graph = {step.step: step.depends_on for step in steps}
    return [by_number[number] for number in TopologicalSorter(graph).static_order()]


def _levels(steps: Sequence[PlanStep]) -> dict[int, int]:
    """Step number -> length of the longest dependency chain from a root (roots are 0)."""
    level: dict[int, int] = {}
    for step in _in_dependency_order(steps):
        level[step.step] = 1 + max((level[dep] for dep in step.depends_on), default=-1)
    return level


def parallel_stages(steps: Sequence[PlanStep]) -> list[list[int]]:
    """Stage k holds the steps whose longest dependency chain from a root has k links."""
    level = _levels(steps)
    stages: list[list[int]] = [[] for _ in range(max(level.values(), default=-1) + 1)]
    for number in sorted(level):
        stages[level[number]].append(number)
    return stages


def critical_path(steps: Sequence[PlanStep]) -> list[int]:
    """The step numbers, first to last, of the longest (by duration) dependency chain: the
    chain that sets the plan's wall-clock time. Among equally long chains, the one ending and
    then waiting on the earliest-numbered steps; [] for no steps."""
    finish: dict[int, int] = {}
    waits_on: dict[int, int] = {}
    for step in _in_dependency_order(steps):
        start = 0
        for dep in sorted(step.depends_on):
            if finish[dep] > start:
                start, waits_on[step.step] = finish[dep], dep
        finish[step.step] = start + step.estimated_duration_seconds
    if not finish:
        return []
    last = min(finish, key=lambda number: (-finish[number], number))
    path = [last]
    while path[-1] in waits_on:
        path.append(waits_on[path[-1]])
    return path[::-1]


def critical_path_duration(steps: Sequence[PlanStep]) -> int:
    """Seconds along the longest (by duration) dependency chain."""
    by_number = {step.step: step for step in steps}
    return sum(by_number[number].estimated_duration_seconds for number in critical_path(steps))


def total_duration(steps: Sequence[PlanStep]) -> int:
    """Seconds if every step ran one after another."""
    return sum(step.estimated_duration_seconds for step in steps)


def complexity_score(steps: Sequence[PlanStep]) -> float:
    """A [0, 1] score for plans the model gave none (or a nonsense one) for.

    A weighted sum of: step count, distinct arms, dependency depth (stages), width (most
    steps in one stage) and mean cost tier, each scaled to [0, 1]; rounded to 2 places.
    """
    if not steps:
        return 0.0
    stages = parallel_stages(steps)
    parts = {
        "size": (len(steps) - 1) / SIZE_SPAN,
        "arms": (len({step.required_arm for step in steps}) - 1) / ARMS_SPAN,
        "depth": (len(stages) - 1) / DEPTH_SPAN,
        "width": (max(len(stage) for stage in stages) - 1) / WIDTH_SPAN,
        "cost": (sum(step.estimated_cost_tier for step in steps) / len(steps) - 1) / 4,
    }
    score = sum(COMPLEXITY_WEIGHTS[name] * min(max(part, 0.0), 1.0) for name, part in parts.items())
    return round(min(max(score, 0.0), 1.0), 2)


def plan_confidence(model_confidence: float | None, *, repairs: int, llm_calls: int) -> float:
    """How far to trust the plan, from the model's own figure and how hard it was to get.

        confidence = base * 0.97 ** repairs * 0.85 ** max(0, llm_calls - 1)

    clamped to [0.05, 0.99] and rounded to 3 places. `base` is the model's confidence, or 0.7
    when it gave none, or one outside [0, 1], or NaN. Never increases with repairs or calls.
    """
    base = model_confidence
    if base is None or not math.isfinite(base) or not 0.0 <= base <= 1.0:
        base = DEFAULT_MODEL_CONFIDENCE
    value = base * REPAIR_FACTOR ** max(0, repairs) * EXTRA_CALL_FACTOR ** max(0, llm_calls - 1)
    return round(min(max(value, MIN_CONFIDENCE), MAX_CONFIDENCE), 3)


def tool_plan_confidence(
    model_confidence: float | None,
    *,
    repairs: Sequence[str],
    warnings: Sequence[str],
    llm_calls: int,
    steps: int | None = None,
) -> float:
    """How far to trust a model's tool plan, from what the service had to change in it and
    what it found wrong with it:

        confidence = base * product(factor(entry) for each repair and warning)
                     * 0.85 ** max(0, llm_calls - 1)

    clamped to [0.05, 0.99] and rounded to 3 places. `base` is the model's confidence when it
    gave a usable one, else `TOOL_PLAN_CONFIDENCE` (0.8). `factor` is `TOOL_PLAN_FACTORS` by
    the entry's code ("code: detail"), else 0.97 for a repair and 1 for a warning. The fields
    filled by design (`FILLED_IN_TOOL_PLANS`) are not among the repairs. When more than
    `MOSTLY_UNLIKE_SHARE` of the plan's `steps` are unlike their tools, the confidence is at
    most `MOSTLY_UNLIKE_CEILING` (0.45); None: the steps are not counted.
    """
    base = model_confidence
    if base is None or not math.isfinite(base) or not 0.0 <= base <= 1.0:
        base = TOOL_PLAN_CONFIDENCE
    value = base * EXTRA_CALL_FACTOR ** max(0, llm_calls - 1)
    for entries, other in ((repairs, REPAIR_FACTOR), (warnings, 1.0)):
        for entry in entries:
            value *= TOOL_PLAN_FACTORS.get(entry.split(":", 1)[0].strip(), other)
    unlike = sum(entry.split(":", 1)[0].strip() == "action_unlike_tool" for entry in warnings)
    if steps is not None and unlike > MOSTLY_UNLIKE_SHARE * steps:
        value = min(value, MOSTLY_UNLIKE_CEILING)
    return round(min(max(value, MIN_CONFIDENCE), MAX_CONFIDENCE), 3)
