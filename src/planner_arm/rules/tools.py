"""The rule-based plan over a caller's tools: the tools the request calls for, in its order.

The request is cut into the pieces of work it asks for (sentences, then "and", "then",
"after that"); each piece gets the tool whose name and description match it best (BM25, see
`plan/tools.py`), a tool only once; the chosen tools run in the order the request mentions the
work, each after the one before it (a tool's output is usually the next one's input). A piece
no tool matches adds no step; a request that matches none gets the one best tool overall.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planner_arm.plan.arms import ArmResolver, typical_cost_tier, typical_duration_seconds
from planner_arm.plan.draft import DraftPlan, DraftStep
from planner_arm.plan.tool_index import ToolIndex
from planner_arm.plan.tools import request_pieces

# A piece's tool must score at least this share of the best piece's best match: a piece
# that only chats ("Who played in it?") adds no step.
_RELATIVE_FLOOR = 0.5
_MAX_ACTION_CHARS = 300


def tool_plan(
    goal: str, context: Mapping[str, Any], resolver: ArmResolver, max_steps: int
) -> DraftPlan:
    """A plan of tool calls for `goal`, at most `max_steps` of them."""
    index = resolver.index or ToolIndex(resolver.arms)
    chosen = _chosen_tools(index, goal) or [(_best_overall(index, resolver, goal), goal)]
    steps = [
        DraftStep(
            action=_action(tool, piece),
            required_arm=tool,
            acceptance_criteria=[f"{tool} answered for: {_clip(piece, 120)}"],
            depends_on=[number - 1] if number > 1 else [],
            step=number,
            estimated_cost_tier=typical_cost_tier(tool),
            estimated_duration_seconds=typical_duration_seconds(tool),
        )
        for number, (tool, piece) in enumerate(chosen[:max_steps], 1)
    ]
    names = ", ".join(step.required_arm for step in steps)
    return DraftPlan(steps, f"The tools the request calls for, in its order: {names}.")


def _chosen_tools(index: ToolIndex, goal: str) -> list[tuple[str, str]]:
    """Each piece of work's best tool (each tool once, a weak match left out), then any tool
    the request names, with the piece it is for."""
    pieces = request_pieces(goal)
    best = [index.ranked(piece)[0][1] if index.ids else 0.0 for piece in pieces]
    floor = _RELATIVE_FLOOR * max(best, default=0.0)
    chosen: dict[str, str] = {}
    for piece in pieces:
        tool, score = _best_unused(index, piece, set(chosen))
        if tool is not None and score > 0 and score >= floor:
            chosen[tool] = piece
    for named in index.named_in(goal):  # a tool the request names is wanted
        chosen.setdefault(named, goal)
    return list(chosen.items())


def _best_overall(index: ToolIndex, resolver: ArmResolver, goal: str) -> str:
    ranked = index.ranked(goal)
    return ranked[0][0] if ranked else resolver.arm_ids[0]


def _best_unused(index: ToolIndex, piece: str, used: set[str]) -> tuple[str | None, float]:
    for tool, score in index.ranked(piece):
        if tool not in used:
            return tool, score
    return None, 0.0


def _action(tool: str, piece: str) -> str:
    text = _clip(piece, _MAX_ACTION_CHARS)
    return f"Call {tool} to {text[0].lower()}{text[1:]}" if text else f"Call {tool}"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
