"""The plan drawn, without I/O: where each step's box goes in a picture, and the plan as a
Mermaid flowchart.

The picture (`plan_layout`) is computed here, not in a browser, so that what the HTML page
shows is known before it is sent: stages are bands from top to bottom (stage 1 first), a
stage's steps sit side by side in it, at most `PER_ROW` to a row (a wider stage takes more
rows), so the page is never wider than a laptop screen whatever the plan. Text is set in a
monospaced font and wrapped here, so a box is as tall as its text and no two boxes overlap.
An arrow leaves the bottom of the step depended on and ends on the top of the step that
waits for it; the steps and arrows of the critical path are marked.

Text of the plan (the model's, the caller's) drawn for a terminal or as Mermaid passes
`shown_text` first: nothing in it reaches a terminal or a Mermaid reader as a command.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from planner_arm.plan.estimation import critical_path, parallel_stages
from planner_arm.plan.schemas import PlanStep

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


@dataclass(frozen=True)
class PlanLayout:
    boxes: list[Box]
    arrows: list[Arrow]
    bands: list[Band]
    width: int
    height: int
    critical_path: list[int]


def action_lines(action: str) -> list[str]:
    """The action wrapped to a box's width; cut with "…" past MAX_ACTION_LINES."""
    lines = textwrap.wrap(" ".join(action.split()), CHARS_PER_LINE, break_long_words=True)
    if len(lines) > MAX_ACTION_LINES:
        lines = lines[:MAX_ACTION_LINES]
        lines[-1] = lines[-1][: CHARS_PER_LINE - 1] + "…"
    return lines or [""]


def box_height(lines: Sequence[str], foot: Sequence[str]) -> int:
    return (HEAD_LINES + len(lines) + len(foot)) * LINE_HEIGHT + 2 * PADDING


def plan_layout(steps: Sequence[PlanStep]) -> PlanLayout:
    """Every step's box, every dependency's arrow and every stage's band, in pixels."""
    path = critical_path(steps)
    on_path = set(path)
    by_number = {step.step: step for step in steps}
    boxes: dict[int, Box] = {}
    bands: list[Band] = []
    y = MARGIN
    for stage_index, numbers in enumerate(parallel_stages(steps), 1):
        ordered = _ordered(numbers, by_number, boxes)
        band_top = y
        for start in range(0, len(ordered), PER_ROW):
            row = ordered[start : start + PER_ROW]
            left = MARGIN + LABEL_WIDTH + (CONTENT_WIDTH - _row_width(len(row))) // 2
            texts = [(action_lines(by_number[n].action), _foot(by_number[n])) for n in row]
            for column, (number, (lines, foot)) in enumerate(zip(row, texts, strict=True)):
                step = by_number[number]
                boxes[number] = Box(
                    step=step,
                    stage=stage_index,
                    x=left + column * (BOX_WIDTH + GAP_X),
                    y=y,
                    width=BOX_WIDTH,
                    height=box_height(lines, foot),
                    head=_head(step, critical=number in on_path),
                    lines=lines,
                    foot=foot,
                    critical=number in on_path,
                )
            y += max(box_height(lines, foot) for lines, foot in texts) + GAP_Y
        bands.append(Band(stage_index, band_top - GAP_Y // 2, y - band_top))
    width = 2 * MARGIN + LABEL_WIDTH + CONTENT_WIDTH
    return PlanLayout(
        boxes=[boxes[step.step] for step in steps if step.step in boxes],
        arrows=_arrows(steps, boxes, set(pairwise(path))),
        bands=bands,
        width=width,
        height=max(y - GAP_Y + MARGIN, 2 * MARGIN),
        critical_path=path,
    )


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


def mermaid_flowchart(steps: Sequence[PlanStep]) -> str:
    """The plan as Mermaid `flowchart TD` text: one subgraph per stage, one node per step
    (number, arm, action, estimates), one arrow per dependency, the critical path marked."""
    path = critical_path(steps)
    links = set(pairwise(path))
    by_number = {step.step: step for step in steps}
    lines = ["flowchart TD"]
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
