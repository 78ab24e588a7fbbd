"""The plan drawn, without I/O: where each step's box goes in a picture, and the plan as a
Mermaid flowchart.

The picture (`plan_layout`) is computed here, not in a browser, so that what the HTML page
shows is known before it is sent: stages are bands from top to bottom (stage 1 first), a
stage's steps sit side by side in it, at most `PER_ROW` to a row (a wider stage takes more
rows), so the page is never wider than a laptop screen whatever the plan. Text is set in a
monospaced font and wrapped here, so a box is as tall as its text and no two boxes overlap.
An arrow leaves the bottom of the step depended on and ends on the top of the step that
waits for it; the steps and arrows of the critical path are marked. A hierarchical plan
(one with a `tree`) is drawn a level deeper: each phase (a node at the top of the tree) is a
labelled frame around the bands of its steps, phases from top to bottom in the order they
start, so every step sits inside its phase's frame and no two frames overlap.

Text of the plan (the model's, the caller's) drawn for a terminal or as Mermaid passes
`shown_text` first: nothing in it reaches a terminal or a Mermaid reader as a command.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from planner_arm.plan.estimation import critical_path, parallel_stages
from planner_arm.plan.schemas import PlanStep, PlanTreeNode

PER_ROW = 4
BOX_WIDTH = 220
GAP_X = 36
GAP_Y = 48  # room for the arrows between two rows
MARGIN = 16
LABEL_WIDTH = 84  # the stage names, left of the boxes
# 12px monospace: 0.6em a character at most in the usual fonts (DejaVu, Liberation, Courier).
FONT_SIZE = 12
CHAR_WIDTH = 7.3
LINE_HEIGHT = 16
PADDING = 10
CHARS_PER_LINE = int((BOX_WIDTH - 2 * PADDING) / CHAR_WIDTH)
MAX_ACTION_LINES = 10  # past this the box shows "…" and its tooltip the whole action
HEAD_LINES = 1  # "#3 coder"
MAX_AFTER_LINES = 2  # the steps waited for; past this "after N steps"
CONTENT_WIDTH = PER_ROW * BOX_WIDTH + (PER_ROW - 1) * GAP_X
WIDTH = 2 * MARGIN + LABEL_WIDTH + CONTENT_WIDTH
# A phase's frame: its label on one line at the top, above the first stage's band; the
# frames a little inside the picture's edges, half a row gap apart.
PHASE_HEAD = 52
PHASE_LABEL_BASELINE = 20
PHASE_INSET = MARGIN // 2
PHASE_CHARS = int((WIDTH - 2 * PHASE_INSET - 2 * PADDING) / CHAR_WIDTH)


@dataclass(frozen=True)
class Box:
    step: PlanStep
    stage: int  # 1 for the first stage
    x: int
    y: int
    width: int
    height: int
    head: str  # "#3 coder"
    lines: list[str]  # the action, wrapped
    foot: list[str]  # "60 s · tier 3", then "after 1, 2" (wrapped) if it waits
    critical: bool

    def port(self, index: int, count: int, *, bottom: bool) -> tuple[int, int]:
        """Where the `index`th of `count` arrows leaves (bottom) or meets (top) the box:
        spread along the edge, so many arrows to one step stay apart."""
        x = self.x + self.width * (index + 1) // (count + 1)
        return x, self.y + self.height if bottom else self.y


@dataclass(frozen=True)
class Arrow:
    source: int  # the step depended on
    target: int  # the step that waits for it
    path: str  # SVG path data
    critical: bool


@dataclass(frozen=True)
class Band:
    stage: int
    y: int
    height: int
    x: int = 0
    width: int = WIDTH


@dataclass(frozen=True)
class Phase:
    """A frame around the bands of one phase of a hierarchical plan."""

    id: str  # the tree node's id: "2"
    label: str  # "phase 2 · <its action>", cut to one line
    action: str  # whole, for the tooltip
    steps: list[int]
    x: int
    y: int
    width: int
    height: int


@dataclass(frozen=True)
class PlanLayout:
    boxes: list[Box]
    arrows: list[Arrow]
    bands: list[Band]
    width: int
    height: int
    critical_path: list[int]
    phases: list[Phase]
    phase_of: dict[int, str]  # a step's phase id, for the steps inside a frame


def action_lines(action: str) -> list[str]:
    """The action wrapped to a box's width; cut with "…" past MAX_ACTION_LINES."""
    lines = textwrap.wrap(" ".join(action.split()), CHARS_PER_LINE, break_long_words=True)
    if len(lines) > MAX_ACTION_LINES:
        lines = lines[:MAX_ACTION_LINES]
        lines[-1] = lines[-1][: CHARS_PER_LINE - 1] + "…"
    return lines or [""]


def box_height(lines: Sequence[str], foot: Sequence[str]) -> int:
    return (HEAD_LINES + len(lines) + len(foot)) * LINE_HEIGHT + 2 * PADDING


def plan_layout(
    steps: Sequence[PlanStep], tree: Sequence[PlanTreeNode] | None = None
) -> PlanLayout:
    """Every step's box, every dependency's arrow, every stage's band and, with a `tree`,
    every phase's frame, in pixels."""
    path = critical_path(steps)
    placement = _Placement({step.step: step for step in steps}, set(path))
    stage_of = {n: i for i, numbers in enumerate(parallel_stages(steps), 1) for n in numbers}
    y = MARGIN
    foot = 0  # the lowest thing drawn so far
    for node, numbers in _groups(steps, tree or [], stage_of):
        if node is None:
            y = placement.stages(numbers, stage_of, y, 0, WIDTH)
            foot = y - GAP_Y
            continue
        frame_width = WIDTH - 2 * PHASE_INSET
        below = placement.stages(numbers, stage_of, y + PHASE_HEAD, PHASE_INSET, frame_width)
        foot = below - GAP_Y // 2  # the last band's foot
        placement.phases.append(
            Phase(
                id=node.id,
                label=_one_line(f"phase {node.id} · {' '.join(node.action.split())}"),
                action=node.action,
                steps=numbers,
                x=PHASE_INSET,
                y=y,
                width=frame_width,
                height=foot - y,
            )
        )
        y = foot + GAP_Y // 2
    boxes = placement.boxes
    return PlanLayout(
        boxes=[boxes[step.step] for step in steps if step.step in boxes],
        arrows=_arrows(steps, boxes, set(pairwise(path))),
        bands=placement.bands,
        width=WIDTH,
        height=max(foot + MARGIN, 2 * MARGIN),
        critical_path=path,
        phases=placement.phases,
        phase_of={n: phase.id for phase in placement.phases for n in phase.steps},
    )


class _Placement:
    """The boxes and bands placed so far, top to bottom."""

    def __init__(self, by_number: dict[int, PlanStep], on_path: set[int]) -> None:
        self.by_number = by_number
        self.on_path = on_path
        self.boxes: dict[int, Box] = {}
        self.bands: list[Band] = []
        self.phases: list[Phase] = []

    def stages(
        self, numbers: list[int], stage_of: dict[int, int], y: int, band_x: int, band_width: int
    ) -> int:
        """Places `numbers` stage by stage from `y` down, a band per stage; returns the y
        below them (the last row's foot and the gap under it)."""
        for stage in sorted({stage_of[n] for n in numbers}):
            in_stage = [n for n in numbers if stage_of[n] == stage]
            band_top = y
            y = self.rows(stage, _ordered(in_stage, self.by_number, self.boxes), y)
            self.bands.append(Band(stage, band_top - GAP_Y // 2, y - band_top, band_x, band_width))
        return y

    def rows(self, stage: int, ordered: list[int], y: int) -> int:
        by_number = self.by_number
        for start in range(0, len(ordered), PER_ROW):
            row = ordered[start : start + PER_ROW]
            left = MARGIN + LABEL_WIDTH + (CONTENT_WIDTH - _row_width(len(row))) // 2
            texts = [(action_lines(by_number[n].action), _foot(by_number[n])) for n in row]
            for column, (number, (lines, foot)) in enumerate(zip(row, texts, strict=True)):
                step = by_number[number]
                critical = number in self.on_path
                self.boxes[number] = Box(
                    step=step,
                    stage=stage,
                    x=left + column * (BOX_WIDTH + GAP_X),
                    y=y,
                    width=BOX_WIDTH,
                    height=box_height(lines, foot),
                    head=_head(step, critical=critical),
                    lines=lines,
                    foot=foot,
                    critical=critical,
                )
            y += max(box_height(lines, foot) for lines, foot in texts) + GAP_Y
        return y


def _leaf_steps(node: PlanTreeNode) -> list[int]:
    if node.step is not None:
        return [node.step]
    return [number for child in node.children for number in _leaf_steps(child)]


def _groups(
    steps: Sequence[PlanStep], tree: Sequence[PlanTreeNode], stage_of: dict[int, int]
) -> list[tuple[PlanTreeNode | None, list[int]]]:
    """The steps as drawn, top to bottom: each phase of `tree` with its steps, the phases in
    the order their first steps start (the tree's order among equals); a step no phase holds
    joins its stage's neighbours outside any frame. Without a tree: all steps, no phase."""
    order = {step.step: index for index, step in enumerate(steps)}
    found: list[tuple[PlanTreeNode | None, list[int]]] = []
    placed: set[int] = set()
    for node in tree:
        numbers = [n for n in _leaf_steps(node) if n in stage_of and n not in placed]
        placed.update(numbers)
        if numbers:
            found.append((node, sorted(numbers, key=order.__getitem__)))
    found += [(None, [step.step]) for step in steps if step.step not in placed]
    found.sort(key=lambda group: min(stage_of[n] for n in group[1]))
    merged: list[tuple[PlanTreeNode | None, list[int]]] = []
    for phase, numbers in found:  # loose steps next to each other are drawn as one group
        if phase is None and merged and merged[-1][0] is None:
            merged[-1][1].extend(numbers)
        else:
            merged.append((phase, list(numbers)))
    return merged


def _one_line(text: str) -> str:
    return text if len(text) <= PHASE_CHARS else text[: PHASE_CHARS - 1] + "…"


def _fitted(text: str) -> str:
    return text if len(text) <= CHARS_PER_LINE else text[: CHARS_PER_LINE - 1] + "…"


def _head(step: PlanStep, *, critical: bool) -> str:
    """The step's number and arm; "★" after them on the critical path."""
    mark = " ★" if critical else ""
    name = f"#{step.step} {step.required_arm}"
    if len(name) + len(mark) > CHARS_PER_LINE:
        name = name[: CHARS_PER_LINE - len(mark) - 1] + "…"
    return name + mark


def _foot(step: PlanStep) -> list[str]:
    """The estimates, then the steps waited for ("after N steps" when they take too long)."""
    estimates = _fitted(f"{step.estimated_duration_seconds} s · tier {step.estimated_cost_tier}")
    if not step.depends_on:
        return [estimates]
    after = textwrap.wrap(f"after {', '.join(map(str, step.depends_on))}", CHARS_PER_LINE)
    if len(after) > MAX_AFTER_LINES:
        after = [f"after {len(step.depends_on)} steps"]
    return [estimates, *after]


def _arrows(
    steps: Sequence[PlanStep], boxes: dict[int, Box], critical: set[tuple[int, int]]
) -> list[Arrow]:
    """One arrow per dependency, in plan order; the arrows leaving one box (and those
    meeting one) are spread along its edge in the order of their other ends, so they do not
    cross at the box."""
    edges = [
        (dep, step.step)
        for step in steps
        for dep in step.depends_on
        if dep in boxes and step.step in boxes
    ]

    def ports(end: int, other: int) -> dict[tuple[int, int], tuple[int, int]]:
        by_box: dict[int, list[tuple[int, int]]] = {}
        for edge in edges:
            by_box.setdefault(edge[end], []).append(edge)
        placed = {}
        for number, mine in by_box.items():
            mine.sort(key=lambda edge: (boxes[edge[other]].x, edge[other]))
            for index, edge in enumerate(mine):
                placed[edge] = boxes[number].port(index, len(mine), bottom=end == 0)
        return placed

    starts, ends = ports(0, 1), ports(1, 0)
    return [
        Arrow(
            dep, number, _curve(starts[dep, number], ends[dep, number]), (dep, number) in critical
        )
        for dep, number in edges
    ]


def _row_width(count: int) -> int:
    return count * BOX_WIDTH + (count - 1) * GAP_X


def _ordered(
    numbers: list[int], by_number: dict[int, PlanStep], placed: dict[int, Box]
) -> list[int]:
    """A stage's steps under the steps they wait for (the mean x of those), which keeps the
    arrows short and few of them crossing; plan order among equals."""

    def centre(number: int) -> float:
        xs = [placed[dep].x for dep in by_number[number].depends_on if dep in placed]
        return sum(xs) / len(xs) if xs else 0.0

    return sorted(numbers, key=lambda number: (centre(number), number))


def _curve(start: tuple[int, int], end: tuple[int, int]) -> str:
    (x1, y1), (x2, y2) = start, end
    bend = max(min((y2 - y1) // 2, 60), 12)
    return f"M {x1} {y1} C {x1} {y1 + bend}, {x2} {y2 - bend}, {x2} {y2}"


# Printed as one space: what breaks a line, or moves to the next tab stop.
_LINE_BREAKS = "\t\n\v\f\r\x85\u2028\u2029"
# The bidi controls: they reorder what a terminal shows after them, so text reads as another.
_BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_CONTROLS = [chr(code) for code in (*range(0x20), *range(0x7F, 0xA0))]
_SHOWN = str.maketrans(
    {ch: f"\\u{ord(ch):04x}" for ch in (*_CONTROLS, *_BIDI_CONTROLS)}
    | dict.fromkeys(_LINE_BREAKS, " ")
)


def shown_text(text: str) -> str:
    """`text` safe to print: line breaks and tabs become a space; every other control
    character (C0, DEL, C1) and every bidi control is written as its `\\uXXXX` escape, so ESC
    shows as `\\u001b`: no text can move the cursor, recolour or retitle the terminal, ring
    it, or reorder what is printed after it."""
    return text.translate(_SHOWN)


# Mermaid reads `#<code>;` in a label as that character: the characters that would end the
# quoted label, start an entity or markup, or be read as HTML are written so, and so is `%`:
# `%%` starts a comment and `%%{init: ...}%%` a directive wherever it stands in the text.
_MERMAID_CODES = {ch: f"#{ord(ch)};" for ch in '#"<>&`%'}


def mermaid_text(text: str) -> str:
    """`text` safe inside a Mermaid label in double quotes, on one line."""
    one_line = " ".join(shown_text(text).split())
    return "".join(_MERMAID_CODES.get(ch, ch) for ch in one_line)


# In the title, YAML's `\uXXXX` for what Mermaid must not read as markup, an entity or a
# directive, and for what YAML does not allow in a document (surrogates, U+FFFE, U+FFFF).
_TITLE_CODES = {ch: f"\\u{ord(ch):04x}" for ch in "%<>&`\ufffe\uffff"}


def mermaid_title(text: str) -> str:
    """`text` as the value of the `title:` of Mermaid's front matter: one line, written as a
    YAML double-quoted string (a JSON string is one), with `shown_text` applied first."""
    quoted = json.dumps(" ".join(shown_text(text).split()), ensure_ascii=False)
    return "".join(
        _TITLE_CODES.get(ch) or (f"\\u{ord(ch):04x}" if 0xD800 <= ord(ch) <= 0xDFFF else ch)
        for ch in quoted
    )


def mermaid_flowchart(steps: Sequence[PlanStep], goal: str | None = None) -> str:
    """The plan as Mermaid `flowchart TD` text: the goal as its title (front matter), one
    subgraph per stage, one node per step (number, arm, action, estimates), one arrow per
    dependency, the critical path marked."""
    path = critical_path(steps)
    links = set(pairwise(path))
    by_number = {step.step: step for step in steps}
    lines = [] if goal is None else ["---", f"title: {mermaid_title(goal)}", "---"]
    lines.append("flowchart TD")
    for index, numbers in enumerate(parallel_stages(steps), 1):
        lines.append(f'  subgraph stage{index}["stage {index}"]')
        for number in numbers:
            step = by_number[number]
            label = (
                f"{step.step} · {mermaid_text(step.required_arm)}<br/>"
                f"{mermaid_text(step.action)}<br/>"
                f"{step.estimated_duration_seconds} s · tier {step.estimated_cost_tier}"
            )
            lines.append(f'    s{step.step}["{label}"]')
        lines.append("  end")
    edges = [(dep, step.step) for step in steps for dep in step.depends_on]
    lines += [f"  s{dep} --> s{number}" for dep, number in edges]
    # linkStyle numbers the arrows in the order they were written.
    critical_links = [str(index) for index, edge in enumerate(edges) if edge in links]
    lines.append("  classDef critical stroke:#d9480f,stroke-width:3px")
    if path:
        lines.append(f"  class {','.join(f's{number}' for number in path)} critical")
    if critical_links:
        lines.append(f"  linkStyle {','.join(critical_links)} stroke:#d9480f,stroke-width:3px")
    return "\n".join(lines) + "\n"
