"""GET /plan/{plan_id} as a page for a person: chosen by the Accept header, drawn on the server.

A caller that prefers `text/html` to `application/json` (a browser does) gets one
self-contained HTML page: what the plan is for (its goal, in the heading and the title, and its
constraints), the steps by stage (a hierarchical plan's within a frame per phase) in an SVG
picture laid out by `planner_arm.plan.drawing`, the arrows of their dependencies, the critical
path, the estimates, where the plan came from and its warnings. No script, no request to any
other host: the style is inline and the Content-Security-Policy allows nothing else. Every
text of the plan (the model's or the caller's) goes through Jinja's autoescaping. Anyone else
gets the JSON answer.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from fastapi import Request
from fastapi.responses import HTMLResponse

from planner_arm.plan import drawing
from planner_arm.plan.schemas import PlanResponse

if TYPE_CHECKING:
    from jinja2 import Environment

HTML_TYPE = "text/html"
JSON_TYPE = "application/json"
# Inline style only; no script, frame, form, font or image from anywhere.
PAGE_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)
# The goal names the page: cut short in the title (a browser tab), longer in the heading, and
# whole under it when the heading had to be cut.
TITLE_CHARS = 80
HEADING_CHARS = 240
SOURCE_NAMES = {
    "llm": "model",
    "fallback": "rule-based",
    "cache": "cache (a repeated answer)",
    "validated": "validated edited plan",
}


@functools.cache
def _templates() -> Environment:
    """The page's templates, loaded on the first page asked for: most callers never ask for
    one, and Jinja is about 2 MiB and 13 ms of start-up."""
    from jinja2 import Environment, PackageLoader, select_autoescape

    return Environment(
        loader=PackageLoader("planner_arm.api", "templates"),
        autoescape=select_autoescape(["html"], default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _quality(media_range: str, accept: str) -> float:
    """The q the Accept header gives `media_range`, by its most specific matching entry."""
    kind, _, _ = media_range.partition("/")
    best: tuple[int, float] = (-1, 0.0)
    for entry in accept.split(","):
        name, *params = (part.strip() for part in entry.split(";"))
        name = name.lower()
        if name == media_range:
            specificity = 2
        elif name == f"{kind}/*":
            specificity = 1
        elif name == "*/*":
            specificity = 0
        else:
            continue
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        best = max(best, (specificity, q))
    return best[1]


def wants_html(request: Request) -> bool:
    """True when Accept rates text/html above application/json (JSON wins a tie)."""
    accept = request.headers.get("accept", "")
    return _quality(HTML_TYPE, accept) > _quality(JSON_TYPE, accept)


def cut(text: str, limit: int) -> str:
    """`text` on one line, cut to `limit` characters with "…"."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def plan_page(plan: PlanResponse) -> str:
    """The whole HTML page of `plan`."""
    layout = drawing.plan_layout(plan.plan, plan.tree)
    goal = plan.goal
    heading = goal if goal is None or len(goal) <= HEADING_CHARS else cut(goal, HEADING_CHARS)
    return (
        _templates()
        .get_template("plan.html")
        .render(
            plan=plan,
            title=f"Plan {plan.plan_id}" if goal is None else cut(goal, TITLE_CHARS),
            heading=heading,
            stages=len({box.stage for box in layout.boxes}),
            layout=layout,
            source=SOURCE_NAMES.get(plan.metadata.source, plan.metadata.source),
            tiers=sum(step.estimated_cost_tier for step in plan.plan),
            font_size=drawing.FONT_SIZE,
            line_height=drawing.LINE_HEIGHT,
            padding=drawing.PADDING,
            margin=drawing.MARGIN,
            phase_baseline=drawing.PHASE_LABEL_BASELINE,
        )
    )


def plan_page_response(plan: PlanResponse) -> HTMLResponse:
    return HTMLResponse(
        plan_page(plan),
        headers={
            "Content-Security-Policy": PAGE_POLICY,
            "X-Content-Type-Options": "nosniff",
        },
    )
