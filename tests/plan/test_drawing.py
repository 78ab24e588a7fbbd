"""The plan drawn: the critical path, the picture's layout (no two boxes overlap, one arrow per
dependency, never wider than a laptop screen) and the Mermaid text."""

from __future__ import annotations

import re
import unicodedata

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from planner_arm.plan.drawing import (
    CHARS_PER_LINE,
    LINE_HEIGHT,
    MAX_ACTION_LINES,
    PADDING,
    PHASE_CHARS,
    PlanLayout,
    action_lines,
    mermaid_flowchart,
    mermaid_text,
    plan_layout,
    shown_text,
)
from planner_arm.plan.estimation import critical_path, critical_path_duration
from planner_arm.plan.hierarchy import Node, flatten
from planner_arm.plan.schemas import PlanStep, PlanTreeNode

LAPTOP_WIDTH = 1280


def step(number: int, *deps: int, seconds: int = 30, action: str | None = None) -> PlanStep:
    return PlanStep(
        step=number,
        action=action or f"Do part {number} of the work",
        required_arm="coder",
        acceptance_criteria=["done"],
        depends_on=list(deps),
        estimated_duration_seconds=seconds,
    )


def diamond() -> list[PlanStep]:
    # 1 -> 2 (60 s) -> 4 and 1 -> 3 (40 s) -> 4: the path goes through 2.
    return [step(1, seconds=20), step(2, 1, seconds=60), step(3, 1, seconds=40), step(4, 2, 3)]


def overlaps(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    ax, ay, aw, ah = a
    bx, by, bw, bh = b
    return ax < bx + bw and bx < ax + aw and ay < by + bh and by < ay + ah


# --- the critical path ---------------------------------------------------------------------


def test_the_critical_path_is_the_longest_chain_by_duration() -> None:
    assert critical_path(diamond()) == [1, 2, 4]
    assert critical_path_duration(diamond()) == 20 + 60 + 30


def test_the_critical_path_follows_durations_not_step_counts() -> None:
    # Three short steps in a chain take less time than one long step.
    steps = [step(1, seconds=10), step(2, 1, seconds=10), step(3, 2, seconds=10), step(4)]
    steps[3] = step(4, seconds=100)
    assert critical_path(steps) == [4]
    assert critical_path_duration(steps) == 100


def test_equal_chains_give_the_earliest_numbered_path() -> None:
    steps = [step(1), step(2), step(3, 1, 2), step(4, 1, 2)]
    assert critical_path(steps) == [1, 3]


def test_no_steps_no_path() -> None:
    assert critical_path([]) == []
    assert critical_path_duration([]) == 0


# --- the layout ----------------------------------------------------------------------------


def test_each_stage_is_a_band_below_the_one_before() -> None:
    layout = plan_layout(diamond())
    stage_of = {box.step.step: box.stage for box in layout.boxes}
    assert stage_of == {1: 1, 2: 2, 3: 2, 4: 3}
    y = {box.step.step: box.y for box in layout.boxes}
    assert y[1] < y[2] == y[3] < y[4]
    assert [box.step.step for box in layout.boxes if box.critical] == [1, 2, 4]
    assert sorted((a.source, a.target) for a in layout.arrows if a.critical) == [(1, 2), (2, 4)]


def test_an_arrow_runs_from_the_step_depended_on_to_the_one_waiting() -> None:
    layout = plan_layout(diamond())
    boxes = {box.step.step: box for box in layout.boxes}
    ends = {}
    for arrow in layout.arrows:
        numbers = [int(n) for n in re.findall(r"-?\d+", arrow.path)]
        (x1, y1), (x2, y2) = numbers[:2], numbers[-2:]
        source, target = boxes[arrow.source], boxes[arrow.target]
        assert source.x < x1 < source.x + source.width
        assert y1 == source.y + source.height
        assert target.x < x2 < target.x + target.width
        assert y2 == target.y
        ends[arrow.source, arrow.target] = (x1, x2)
    # The two arrows leaving step 1 leave it apart, and so do the two meeting step 4; the
    # left one goes to the left step.
    assert ends[1, 2][0] != ends[1, 3][0]
    assert ends[2, 4][1] != ends[3, 4][1]
    assert (ends[1, 2][0] < ends[1, 3][0]) == (boxes[2].x < boxes[3].x)


@st.composite
def plans(draw: st.DrawFn) -> list[PlanStep]:
    count = draw(st.integers(1, 50))
    steps = []
    for number in range(1, count + 1):
        deps = (
            draw(st.lists(st.integers(1, number - 1), max_size=3, unique=True))
            if number > 1
            else []
        )
        words = draw(st.integers(1, 60))
        action = " ".join(["word"] * words)
        steps.append(step(number, *deps, seconds=draw(st.integers(1, 300)), action=action))
    return steps


@settings(max_examples=60, deadline=None)
@given(plans())
def test_no_two_boxes_overlap_and_every_dependency_has_its_arrow(steps: list[PlanStep]) -> None:
    layout = plan_layout(steps)
    rects = [(b.x, b.y, b.width, b.height) for b in layout.boxes]
    assert len(rects) == len(steps)
    for i, a in enumerate(rects):
        assert all(not overlaps(a, b) for b in rects[i + 1 :])
        x, y, w, h = a
        assert 0 <= x <= x + w <= layout.width
        assert 0 <= y <= y + h <= layout.height
    assert len(layout.arrows) == sum(len(s.depends_on) for s in steps)
    assert layout.width <= LAPTOP_WIDTH


def hierarchical(phases: list[tuple[list[int], int]]) -> tuple[list[PlanStep], list[PlanTreeNode]]:
    """A plan made as the hierarchical strategy makes one: phase k waits for the phases listed
    with it and holds a chain of `size` sub-steps (a phase of size 0 stays a single step)."""
    level = []
    for number, (deps, size) in enumerate(phases, 1):
        children = [Node(step(n, *([n - 1] if n > 1 else []))) for n in range(1, size + 1)]
        level.append(Node(step(number, *deps, action=f"Phase {number} of the work"), children))
    steps, tree, _ = flatten(level, final_check=False)
    return steps, tree


def frames(layout: PlanLayout) -> dict[str, tuple[int, int, int, int]]:
    return {p.id: (p.x, p.y, p.width, p.height) for p in layout.phases}


def inside(inner: tuple[int, int, int, int], outer: tuple[int, int, int, int]) -> bool:
    ix, iy, iw, ih = inner
    ox, oy, ow, oh = outer
    return ox <= ix and ix + iw <= ox + ow and oy <= iy and iy + ih <= oy + oh


def test_each_phase_is_a_labelled_frame_around_its_steps_and_bands() -> None:
    # Phases 2 and 3 both wait for phase 1 only: their steps share stages.
    steps, tree = hierarchical([([], 2), ([1], 3), ([1], 2), ([2, 3], 0)])
    layout = plan_layout(steps, tree)
    assert [p.id for p in layout.phases] == ["1", "2", "3", "4"]
    assert layout.phases[0].label == "phase 1 · Phase 1 of the work"
    assert layout.phase_of == {s.step: (s.parent or "4").split(".")[0] for s in steps}
    framed = frames(layout)
    for box in layout.boxes:
        assert inside((box.x, box.y, box.width, box.height), framed[layout.phase_of[box.step.step]])
    for band in layout.bands:  # each stage's band within one frame
        assert any(inside((band.x, band.y, band.width, band.height), f) for f in framed.values())
    rects = list(framed.values())
    for i, a in enumerate(rects):
        assert all(not overlaps(a, b) for b in rects[i + 1 :])
        assert a[1] + a[3] <= layout.height
    # The phases that run at once share stage numbers, one frame below the other.
    stages = {
        p.id: {b.stage for b in layout.boxes if b.step.step in p.steps} for p in layout.phases
    }
    assert stages["2"] & stages["3"]
    assert framed["2"][1] < framed["3"][1]


def test_a_flat_plan_has_no_phase_and_its_picture_does_not_change() -> None:
    flat = plan_layout(diamond())
    assert flat.phases == []
    assert flat.phase_of == {}
    assert plan_layout(diamond(), []) == flat
    assert [(b.x, b.width) for b in flat.bands] == [(0, flat.width)] * 3


def test_a_step_the_tree_does_not_hold_is_drawn_outside_every_frame() -> None:
    steps, tree = hierarchical([([], 2), ([1], 2)])
    extra = step(len(steps) + 1, len(steps), action="Added by a replan")
    layout = plan_layout([*steps, extra], tree)
    (box,) = [b for b in layout.boxes if b.step.step == extra.step]
    assert extra.step not in layout.phase_of
    assert not any(
        inside((box.x, box.y, box.width, box.height), f) for f in frames(layout).values()
    )
    assert box.y > max(y + h for _, y, _, h in frames(layout).values())


def test_a_long_phase_action_is_cut_to_one_line() -> None:
    steps, tree = hierarchical([([], 2)])
    tree = [tree[0].model_copy(update={"action": "Migrate\n" + "everything " * 40})]
    (phase,) = plan_layout(steps, tree).phases
    assert len(phase.label) == PHASE_CHARS
    assert phase.label.endswith("…")
    assert "\n" not in phase.label
    assert phase.action == tree[0].action


@st.composite
def hierarchical_plans(draw: st.DrawFn) -> tuple[list[PlanStep], list[PlanTreeNode]]:
    count = draw(st.integers(1, 7))
    phases = []
    for number in range(1, count + 1):
        deps = (
            draw(st.lists(st.integers(1, number - 1), max_size=2, unique=True))
            if number > 1
            else []
        )
        phases.append((deps, draw(st.integers(0, 7))))
    return hierarchical(phases)


@settings(max_examples=60, deadline=None)
@given(hierarchical_plans())
def test_every_step_sits_in_its_phase_and_no_two_frames_or_boxes_overlap(
    plan: tuple[list[PlanStep], list[PlanTreeNode]],
) -> None:
    steps, tree = plan
    layout = plan_layout(steps, tree)
    framed = frames(layout)
    assert len(framed) == len(tree)
    rects = [(b.x, b.y, b.width, b.height) for b in layout.boxes]
    assert len(rects) == len(steps)
    for box, rect in zip(layout.boxes, rects, strict=True):
        assert inside(rect, framed[layout.phase_of[box.step.step]])
    for group in (rects, list(framed.values())):
        for i, a in enumerate(group):
            assert all(not overlaps(a, b) for b in group[i + 1 :])
            x, y, w, h = a
            assert 0 <= x <= x + w <= layout.width <= LAPTOP_WIDTH
            assert 0 <= y <= y + h <= layout.height
    assert len(layout.arrows) == sum(len(s.depends_on) for s in steps)


def test_a_long_chain_and_a_wide_stage_stay_within_a_laptop_width() -> None:
    chain = [step(1), *(step(n, n - 1) for n in range(2, 51))]
    wide = [step(n) for n in range(1, 50)] + [step(50, *range(1, 50))]
    for steps in (chain, wide):
        layout = plan_layout(steps)
        assert layout.width <= LAPTOP_WIDTH
        assert len(layout.boxes) == 50


def test_a_box_says_its_estimates_and_what_it_waits_for() -> None:
    joined = [step(n) for n in range(1, 39)] + [step(39, *range(1, 39), seconds=45)]
    boxes = {box.step.step: box for box in plan_layout(joined).boxes}
    assert boxes[2].head == "#2 coder"  # the path runs through step 1, the earliest
    assert boxes[2].foot == ["30 s · tier 1"]
    assert boxes[39].head == "#39 coder ★"
    assert boxes[39].foot == ["45 s · tier 1", "after 38 steps"]
    two = {box.step.step: box for box in plan_layout(diamond()).boxes}
    assert two[4].foot == ["30 s · tier 1", "after 2, 3"]
    # A line each for the head, the action, the estimates and the steps waited for.
    assert two[4].height == 4 * LINE_HEIGHT + 2 * PADDING
    assert two[1].height == 3 * LINE_HEIGHT + 2 * PADDING


def test_a_long_action_is_wrapped_and_cut() -> None:
    lines = action_lines("x" * 5000)
    assert len(lines) == MAX_ACTION_LINES
    assert all(len(line) <= CHARS_PER_LINE for line in lines)
    assert lines[-1].endswith("…")
    assert action_lines("Run   the\ntests") == ["Run the tests"]


# --- Mermaid -------------------------------------------------------------------------------

NODE = re.compile(r'^    s(\d+)\["([^"]*)"\]$')
EDGE = re.compile(r"^  s(\d+) --> s(\d+)$")


def test_mermaid_has_a_node_per_step_and_an_edge_per_dependency() -> None:
    text = mermaid_flowchart(diamond())
    lines = text.splitlines()
    assert lines[0] == "flowchart TD"
    nodes = [int(m.group(1)) for line in lines if (m := NODE.match(line))]
    edges = sorted((int(m.group(1)), int(m.group(2))) for line in lines if (m := EDGE.match(line)))
    assert sorted(nodes) == [1, 2, 3, 4]
    assert edges == [(1, 2), (1, 3), (2, 4), (3, 4)]
    assert sum(line.strip().startswith("subgraph stage") for line in lines) == 3
    assert "  class s1,s2,s4 critical" in lines
    # The arrows are numbered in the order written: 1->2, 1->3, 2->4, 3->4.
    assert any(line.startswith("  linkStyle 0,2 ") for line in lines)


def test_mermaid_labels_cannot_break_out_of_their_quotes() -> None:
    hostile = 'Say "hi" <b>#1</b> & `code`\nthen ]; s9-->s1'
    text = mermaid_flowchart([step(1, action=hostile)])
    (label,) = [m.group(2) for line in text.splitlines() if (m := NODE.match(line))]
    for raw in ('"', "<b>", "`", "\n"):
        assert raw not in label
    assert mermaid_text(hostile) in label
    assert mermaid_text('"<&#`') == "#34;#60;#38;#35;#96;"
    assert not any(EDGE.match(line) for line in text.splitlines())


# What a model or a caller may put in a step to act on whoever reads the drawing: a colour, a
# cleared screen, a terminal title and its bell, an OSC 8 link, a CSI in C1, a bidi override,
# NEL and the other line breaks, a Mermaid directive and a comment, a closed label.
HOSTILE = (
    "Fix \x1b[31mred\x1b[0m \x1b[2J\x1b]0;owned\x07 \x1b]8;;http://x\x1b\\link \x9b1m "
    "\u202eevil\u202c \u2066iso\u2069 a\x85b\u2028c\u2029d\r\n"
    '%%{init: {"theme": "dark"}}%% %% comment "] ]; s9-->s1'
)


def test_shown_text_has_no_control_or_bidi_character_left() -> None:
    shown = shown_text(HOSTILE)
    assert all(unicodedata.category(ch) != "Cc" for ch in shown)
    assert not set(shown) & set(
        "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029"
    )
    # Seen, not acted on: each as its escape; line breaks and tabs as a space.
    assert "Fix \\u001b[31mred\\u001b[0m" in shown
    assert "\\u009b1m \\u202eevil\\u202c" in shown
    assert "a b c d" in shown
    assert shown_text("Run `pytest -q` in a\ttab, naïve café 東京") == (
        "Run `pytest -q` in a tab, naïve café 東京"
    )


def test_mermaid_has_no_directive_comment_or_control_from_a_steps_text() -> None:
    text = mermaid_flowchart([step(1, action=HOSTILE), step(2, 1, action="Check it")])
    lines = text.splitlines()
    assert "%" not in text  # no %% comment, no %%{init}%% directive
    assert all(unicodedata.category(ch) != "Cc" for ch in text.replace("\n", ""))
    nodes = [m for line in lines if (m := NODE.match(line))]
    assert [m.group(1) for m in nodes] == ["1", "2"]
    assert [line for line in lines if EDGE.match(line)] == ["  s1 --> s2"]
    assert "#37;#37;{init: {#34;theme#34;: #34;dark#34;}}#37;#37;" in nodes[0].group(2)


def test_mermaid_titles_the_chart_with_the_goal_as_yaml_front_matter() -> None:
    goal = 'Ship "v2" <b>now</b> & 100% %%{init: {"theme": "dark"}}%% \x1b[2J\u202eevil\ncafé 東京'
    text = mermaid_flowchart(diamond(), goal)
    lines = text.splitlines()
    assert lines[:1] == ["---"]
    assert lines[2:4] == ["---", "flowchart TD"]
    assert lines[1].startswith("title: ")
    # Mermaid reads the title as YAML: it says the goal as the terminal shows it.
    assert yaml.safe_load(lines[1])["title"] == " ".join(shown_text(goal).split())
    # Nothing in the raw text Mermaid or a reader could take for a directive, comment,
    # markup or an entity, and no control character.
    assert "%" not in text
    for raw in ("<", ">", "&", "\x1b", "\u202e"):
        assert raw not in lines[1]
    assert all(unicodedata.category(ch) != "Cc" for ch in text.replace("\n", ""))
    assert "café 東京" in lines[1]  # the rest as it is
    assert mermaid_flowchart(diamond()).startswith("flowchart TD\n")  # no goal, no title
