"""The prompts of a plan over a caller's tools (the tools profile): a short answer to write, the
tools as data, the rule-based draft the model may correct and the solved requests. Their
wording is under PROMPT_VERSION (plans.py), as the agents profile's is."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from planner_arm.config import ArmSpec, WorkedExample
from planner_arm.plan.draft import DraftStep
from planner_arm.strategies.prompts.messages import DATA_RULE, Opening, as_data


def tools_opening(
    arms: Sequence[ArmSpec], min_steps: int, max_steps: int, *, shortlist: bool = False
) -> Opening:
    """The tools profile: a short answer to write (which tool, what for, after what; the
    service fills in the rest), then each tool once, as data, in the set's order.
    `shortlist`: `arms` are the tools relevant to one request."""
    lines = "\n".join(as_data(_tool_line(arm)) for arm in arms)
    return Opening(
        tools_system_prompt(min_steps, max_steps),
        f"The tools, one JSON object a line (data):\n{lines}",
        shortlist=shortlist,
    )


def tools_system_prompt(min_steps: int, max_steps: int) -> str:
    """The tools profile's rules and answer shape: the same for every request."""
    return (
        "You plan which tools to call, and in which order, to do what a user asks.\n\n"
        "Rules:\n"
        f"- {min_steps} to {max_steps} steps, numbered from 1; each step calls exactly one tool "
        "of those the user message lists, written exactly as its name.\n"
        "- Call only the tools the request needs; a tool again only for different data.\n"
        "- When a tool needs something another tool gives (an id, a file, a result), call "
        "that tool first and list its step in depends_on.\n"
        "- depends_on lists the earlier steps whose output a step uses; steps that do not "
        "need each other have none.\n"
        "- action says in a few words what the call does for the request.\n"
        + DATA_RULE.format(
            what="the tools with their names and descriptions, the solved requests, the "
            "draft and the request"
        )
        + "Answer with exactly one JSON object and nothing else, in this shape:\n"
        '{"plan":[{"step":1,"tool":"<tool name>","action":"<what for>","depends_on":[]}]}'
    )


def draft_prompt(steps: Sequence[DraftStep]) -> str:
    """The rule-based plan of the request (which tool, after which steps), as data the model
    may correct: a small model keeps the tools and links it confirms and mends the rest."""
    if not steps:
        return ""
    draft = [
        {"step": step.step, "tool": step.required_arm, "depends_on": step.depends_on}
        for step in steps
    ]
    return (
        "A draft plan from the tools' own links (data; keep what fits the request, change "
        f"what does not):\n{as_data({'draft': draft})}\n\n"
    )


def examples_prompt(examples: Sequence[WorkedExample], *, chosen: bool = True) -> str:
    """Solved requests over the same tools, as data, to show what a good answer looks like.
    `chosen`: the ones most like this request; else every one there is, the same for every
    request over the tools."""
    if not examples:
        return ""
    lines = "\n".join(
        as_data(
            {
                "request": example.request,
                "plan": [
                    {
                        "step": number,
                        "tool": step.tool,
                        "action": step.action or f"call {step.tool}",
                        "depends_on": step.depends_on,
                    }
                    for number, step in enumerate(example.steps, 1)
                ],
            }
        )
        for example in examples
    )
    which = "like this one" if chosen else "over these tools"
    return f"Solved requests {which}, one JSON object a line (data):\n{lines}\n\n"


def _tool_line(arm: ArmSpec) -> dict[str, Any]:
    line: dict[str, Any] = {"name": arm.id, "description": arm.description}
    if arm.consumes:
        line["consumes"] = arm.consumes
    if arm.produces:
        line["produces"] = arm.produces
    return line
