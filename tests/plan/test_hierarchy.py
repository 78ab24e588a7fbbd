"""A hierarchical tree flattened: primitive steps 1..n in dependency order, parents, the tree."""

from __future__ import annotations

from planner_arm.plan.hierarchy import Node, expanded_tree, flatten, leaf_count, leaf_id
from planner_arm.plan.schemas import PlanStep


def step(number: int, action: str, arm: str, deps: list[int]) -> PlanStep:
    return PlanStep(step=number, action=action, required_arm=arm,
                    acceptance_criteria=[f"{action} done"], depends_on=deps)  # fmt: skip


def level(*rows: tuple[str, str, list[int]]) -> list[Node]:
    return [Node(step(index, *row)) for index, row in enumerate(rows, 1)]


def phases() -> list[Node]:
    top = level(("Locate", "retriever", []), ("Fix", "coder", [1]), ("Test", "coder", [1]),
                ("Check all", "judge", [2, 3]))  # fmt: skip
    top[1].children = level(("Read code", "retriever", []), ("Patch", "coder", [1]),
                            ("Check fix", "judge", [2]))  # fmt: skip
    top[2].children = level(("Write test", "coder", []), ("Run test", "executor", []),
                            ("Check test", "judge", [1, 2]))  # fmt: skip
    top[2].children[1].children = level(("Set up", "executor", []), ("Run", "executor", [1]),
                                        ("Check run", "judge", [2]))  # fmt: skip
    return top


def test_leaves_are_numbered_in_dependency_order_with_their_parent_node() -> None:
    steps, _, _ = flatten(phases(), final_check=True)
    assert [(s.step, s.action, s.parent) for s in steps] == [
        (1, "Locate", None),
        (2, "Read code", "2"),
        (3, "Patch", "2"),
        (4, "Check fix", "2"),
        (5, "Write test", "3"),
        (6, "Set up", "3.2"),
        (7, "Run", "3.2"),
        (8, "Check run", "3.2"),
        (9, "Check test", "3"),
        (10, "Check all", None),
    ]
    assert leaf_count(phases()) == 10


def test_order_between_phases_is_kept_through_their_sub_steps() -> None:
    deps = {s.step: s.depends_on for s in flatten(phases(), final_check=True)[0]}
    assert deps[2] == [1]  # phase 2's first sub-step waits for phase 1's last
    assert deps[5] == [1]
    assert deps[6] == [1]
    assert deps[9] == [5, 8]  # the sub-plan's judge waits for the nested node's last step
    assert deps[10] == [4, 9]  # the final check waits for each phase's last step
    for number, after in deps.items():
        assert all(dep < number for dep in after)


def test_the_tree_names_every_node_and_points_leaves_at_their_steps() -> None:
    _, tree, _ = flatten(phases(), final_check=True)
    assert [(n.id, n.step) for n in tree] == [("1", 1), ("2", None), ("3", None), ("4", 10)]
    test_phase = tree[2]
    assert [(n.id, n.step) for n in test_phase.children] == [("3.1", 5), ("3.2", None), ("3.3", 9)]
    assert [(n.id, n.step) for n in test_phase.children[1].children] == [
        ("3.2.1", 6), ("3.2.2", 7), ("3.2.3", 8)
    ]  # fmt: skip


def test_a_final_check_that_misses_a_step_is_made_to_wait_for_it() -> None:
    top = level(("Locate", "retriever", []), ("Fix", "coder", []), ("Check", "judge", [1]))
    steps, _, repaired = flatten(top, final_check=True)
    assert steps[-1].depends_on == [1, 2]
    assert repaired is not None
    assert repaired.startswith("final_check_dependencies")


def test_an_expanded_leaf_gets_children_in_the_tree() -> None:
    _, tree, _ = flatten(phases(), final_check=True)
    assert leaf_id(tree, 7) == "3.2.2"
    new = [step(11, "Open", "executor", [6]), step(12, "Check open", "judge", [11])]
    updated = expanded_tree(tree, 7, new)
    node = updated[2].children[1].children[1]
    assert node.step is None
    assert [(n.id, n.step) for n in node.children] == [("3.2.2.1", 11), ("3.2.2.2", 12)]
