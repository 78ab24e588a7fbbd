"""Deeper plans, pure and without I/O: a hierarchical plan's tree flattened into the one DAG an
orchestrator runs, and a step of a plan replaced by its sub-plan (POST /plan/expand).

Flattening: each level of the tree is a valid plan numbered 1..k in dependency order; a node
with children is replaced by them. A node's first children wait for what the node waited for,
and what waited for the node waits for its last children, so the order between phases is
kept. The leaves are numbered 1..n in that order, each with `parent` the id of the node it
details (null at the top level); the tree keeps every node with its path id ("2", "2.3").

Splicing a sub-plan: the other steps keep their numbers and content, but for their
dependencies; the sub-plan's steps are numbered above the plan's highest, carry `parent`,
start from the replaced step's dependencies, and the steps that waited for it wait for the
sub-plan's last steps. The list stays in dependency order (the sub-plan takes the replaced
step's place in it), so numbers no longer rise along the list. The final check still depends
on every other step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from graphlib import CycleError

from planner_arm.errors import ExpandRejected, InvalidPrevious
from planner_arm.plan.dag import (
    JUDGE_ARM,
    ancestors,
    complete_final_check,
    descendants,
    stable_topological_order,
)
from planner_arm.plan.edited import check_sent_back
from planner_arm.plan.schemas import PlanStep, PlanTreeNode
from planner_arm.plan.validation import PlanRules


@dataclass
class Node:
    """One node: its step as planned in its own level, and its children (a level) if any."""

    step: PlanStep
    children: list[Node] = field(default_factory=list)
    compound: bool = False  # the model asked for it to be broken down again


@dataclass
class _Leaf:
    id: str
    step: PlanStep
    parent: str | None
    deps: set[str]


def flatten(
    level: Sequence[Node], *, final_check: bool
) -> tuple[list[PlanStep], list[PlanTreeNode], str | None]:
    """The primitive steps numbered 1..n in dependency order, the tree, and the final-check
    repair entry when `final_check` had to add dependencies to the last step."""
    leaves: list[_Leaf] = []
    _collect(level, "", None, set(), leaves)
    number = {leaf.id: index for index, leaf in enumerate(leaves, 1)}
    steps = [
        leaf.step.model_copy(
            update={
                "step": number[leaf.id],
                "depends_on": sorted(number[dep] for dep in leaf.deps),
                "parent": leaf.parent,
            }
        )
        for leaf in leaves
    ]
    repaired = complete_final_check(steps) if final_check and steps else None
    return steps, _tree(level, "", number), repaired


def leaf_count(level: Sequence[Node]) -> int:
    return sum(leaf_count(node.children) if node.children else 1 for node in level)


def expanded_nodes(level: Sequence[Node], prefix: str = "") -> list[tuple[str, Node]]:
    """Every node with children, with its id, parents before their children."""
    found: list[tuple[str, Node]] = []
    for node in level:
        node_id = f"{prefix}{node.step.step}"
        if node.children:
            found.append((node_id, node))
            found += expanded_nodes(node.children, f"{node_id}.")
    return found


def _collect(
    level: Sequence[Node], prefix: str, parent: str | None, inherited: set[str], out: list[_Leaf]
) -> set[str]:
    """Appends the level's leaves in dependency order; returns the ids of its last leaves."""
    exits: dict[int, set[str]] = {}
    for node in level:  # a valid level lists each node after its dependencies
        node_id = f"{prefix}{node.step.step}"
        deps = set().union(*(exits[dep] for dep in node.step.depends_on if dep in exits))
        deps = deps if node.step.depends_on else set(inherited)
        if node.children:
            exits[node.step.step] = _collect(node.children, f"{node_id}.", node_id, deps, out)
        else:
            out.append(_Leaf(node_id, node.step, parent, deps))
            exits[node.step.step] = {node_id}
    needed = {dep for node in level for dep in node.step.depends_on}
    return set().union(*(exits[n.step.step] for n in level if n.step.step not in needed))


def _tree(level: Sequence[Node], prefix: str, number: dict[str, int]) -> list[PlanTreeNode]:
    nodes = []
    for node in level:
        node_id = f"{prefix}{node.step.step}"
        nodes.append(
            PlanTreeNode(
                id=node_id,
                action=node.step.action,
                required_arm=node.step.required_arm,
                step=None if node.children else number[node_id],
                children=_tree(node.children, f"{node_id}.", number),
            )
        )
    return nodes


def leaf_id(tree: Sequence[PlanTreeNode], number: int) -> str | None:
    """The id of the tree's leaf for step `number`, if any."""
    for node in tree:
        if node.step == number:
            return node.id
        if (found := leaf_id(node.children, number)) is not None:
            return found
    return None


def expanded_tree(
    tree: Sequence[PlanTreeNode], number: int, new_steps: Sequence[PlanStep]
) -> list[PlanTreeNode]:
    """`tree` with the leaf of step `number` given `new_steps` as its children."""
    result = []
    for node in tree:
        if node.step == number:
            children = [
                PlanTreeNode(
                    id=f"{node.id}.{index}",
                    action=step.action,
                    required_arm=step.required_arm,
                    step=step.step,
                )
                for index, step in enumerate(new_steps, 1)
            ]
            result.append(node.model_copy(update={"step": None, "children": children}))
        else:
            children = expanded_tree(node.children, number, new_steps)
            result.append(node.model_copy(update={"children": children}))
    return result


def expandable_step(steps: Sequence[PlanStep], number: int, rules: PlanRules) -> PlanStep:
    """The step to expand; ExpandRejected `unknown_step` or `step_not_expandable`, or
    InvalidPrevious for a plan sent back that is not one to work on (`check_sent_back`: an
    empty action or criterion, repeated numbers, unknown dependencies, a cycle, an arm not
    configured here)."""
    by_number = {step.step: step for step in steps}
    check_sent_back(steps, rules.arm_ids)
    target = by_number.get(number)
    if target is None:
        raise ExpandRejected(
            f"the plan has no step {number} (it has steps {sorted(by_number)})",
            code="unknown_step",
            errors=[{"code": "unknown_step", "step": number, "message": f"no step {number}"}],
        )
    _in_dependency_order(list(steps))  # ExpandRejected on a cycle
    final = steps[-1] if steps else None
    if rules.require_validation_step and target is final and target.required_arm == JUDGE_ARM:
        message = (
            f"step {number} is the plan's final check, which validates everything else; "
            "expand the work it checks instead"
        )
        raise ExpandRejected(
            message,
            code="step_not_expandable",
            errors=[{"code": "step_not_expandable", "step": number, "message": message}],
        )
    return target


def surroundings(steps: Sequence[PlanStep], number: int) -> tuple[list[PlanStep], list[PlanStep]]:
    """The steps `number` waits for (directly or not) and the steps that wait for it."""
    listed = list(steps)
    before = ancestors(listed, number)
    waiting = descendants(listed, number)
    after = [step for step in listed if step.step in waiting]
    return [step for step in listed if step.step in before], after


def splice(
    steps: Sequence[PlanStep],
    number: int,
    sub: Sequence[PlanStep],
    *,
    parent: str,
    rules: PlanRules,
) -> list[PlanStep]:
    """`steps` with step `number` replaced by `sub` (a valid plan numbered 1..k in order)."""
    target = next(step for step in steps if step.step == number)
    highest = max(step.step for step in steps)
    renumber = {local.step: highest + index for index, local in enumerate(sub, 1)}
    sinks = _last_steps(sub, renumber)
    new_steps = [_placed(local, renumber, target, parent) for local in sub]
    merged: list[PlanStep] = []
    for step in steps:
        merged += new_steps if step.step == number else [_rewired(step, number, sinks)]
    ordered = _in_dependency_order(merged)
    if rules.require_validation_step and rules.require_dependency_check:
        complete_final_check(ordered)
    return ordered


def _last_steps(sub: Sequence[PlanStep], renumber: dict[int, int]) -> list[int]:
    """The sub-plan steps no other sub-plan step waits for, by their numbers in the plan."""
    needed = {dep for local in sub for dep in local.depends_on}
    return sorted(renumber[local.step] for local in sub if local.step not in needed)


def _rewired(step: PlanStep, number: int, sinks: list[int]) -> PlanStep:
    """A step that waited for step `number` waits for the sub-plan's last steps instead."""
    if number not in step.depends_on:
        return step
    deps = {dep for dep in step.depends_on if dep != number} | set(sinks)
    return step.model_copy(update={"depends_on": sorted(deps)})


def _placed(local: PlanStep, renumber: dict[int, int], target: PlanStep, parent: str) -> PlanStep:
    """A sub-plan step as it stands in the plan; the sub-plan's first steps wait for what the
    replaced step waited for."""
    deps = sorted(renumber[dep] for dep in local.depends_on) or sorted(target.depends_on)
    return local.model_copy(
        update={"step": renumber[local.step], "depends_on": deps, "parent": parent}
    )


def _in_dependency_order(steps: list[PlanStep]) -> list[PlanStep]:
    """Stable: a plan already in order stays as it is; the final check stays last."""
    position = {step.step: index for index, step in enumerate(steps)}
    try:
        order = stable_topological_order(
            [[position[dep] for dep in step.depends_on if dep in position] for step in steps]
        )
    except CycleError:
        message = "the dependencies go round in a cycle"
        raise InvalidPrevious(
            f"the plan sent back is not one to work on: {message}",
            errors=[{"code": "cycle", "step": None, "message": message}],
        ) from None
    return [steps[index] for index in order]
