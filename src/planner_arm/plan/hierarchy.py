"""A hierarchical plan's tree, flattened into the one DAG an orchestrator runs: pure, no I/O.

Each level of the tree is a valid plan numbered 1..k in dependency order; a node with
children is replaced by them. A node's first children wait for what the node waited for,
and what waited for the node waits for its last children, so the order between phases is
kept. The leaves are numbered 1..n in that order, each with `parent` the id of the node it
details (null at the top level); the tree keeps every node with its path id ("2", "2.3").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from planner_arm.plan.final_check import complete_final_check
from planner_arm.plan.schemas import PlanStep, PlanTreeNode


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
