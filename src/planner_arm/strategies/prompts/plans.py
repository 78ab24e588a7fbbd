"""The plan's prompts (the agents profile): the system rules with the exact answer shape, the
arm registry as data, and the caller's request as one JSON object."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from planner_arm.config import ArmSpec, PlanningSettings
from planner_arm.strategies.prompts.messages import DATA_RULE, Opening, as_data

PROMPT_VERSION = "2026-11-28.3"

# The answer's shape, shown with placeholders: a small model copies whatever example content it
# is shown into unrelated goals (a login handler turned up in "deploy a REST API"), so the
# example says what goes where and carries nothing a plan could reuse. A step that repeats it
# is caught (plan/plan_quality.py, `example_copied`).
_EXAMPLE: dict[str, Any] = {
    "plan": [
        {
            "step": 1,
            "action": "<what is done to what, for this goal>",
            "required_arm": "<one arm id>",
            "acceptance_criteria": ["<a condition someone can check>", "<another one>"],
            "depends_on": [],
            "estimated_cost_tier": 1,
            "estimated_duration_seconds": 30,
        },
        {
            "step": 2,
            "action": "<the next action, which needs the result of step 1>",
            "required_arm": "<one arm id>",
            "acceptance_criteria": ["<a condition someone can check>"],
            "depends_on": [1],
            "estimated_cost_tier": 3,
            "estimated_duration_seconds": 60,
        },
    ],
    "rationale": "<why these steps, in this order>",
    "confidence": 0.8,
    "complexity_score": 0.4,
}


def example_texts() -> list[str]:
    """The example's step texts, which no plan should repeat."""
    return [
        text for step in _EXAMPLE["plan"] for text in [step["action"], *step["acceptance_criteria"]]
    ]


def plan_opening(arms: Sequence[ArmSpec], planning: PlanningSettings) -> Opening:
    """The agents profile: the rules and the exact answer shape, then the arm registry (ids,
    descriptions, capabilities) as data. Built once per set of arms."""
    lines = "\n".join(
        as_data({"id": arm.id, "description": arm.description, "capabilities": arm.capabilities})
        for arm in arms
    )
    return Opening(
        system_prompt(planning),
        f"The arms, one JSON object a line (data):\n{lines}",
    )


def system_prompt(planning: PlanningSettings) -> str:
    """The agents profile's rules and the exact answer shape: the same for every request."""
    last_rule = (
        "- The last step must use the arm `judge` and check the results against the goal "
        "and every constraint; it depends on every other step, and nothing comes after it.\n"
        if planning.require_validation_step
        else ""
    )
    return (
        "You are the planner of a system of specialised AI agents called arms. Break the "
        "goal you are given into an executable plan.\n\n"
        "Rules:\n"
        "- required_arm is the id of one of the arms the user message lists, written exactly "
        "as it is there.\n"
        f"- Between {planning.min_steps} and {planning.max_steps} steps, numbered from 1.\n"
        "- Each action is one imperative sentence naming what is done to what.\n"
        "- depends_on lists earlier step numbers only; steps that do not need each other "
        "have no dependency between them, so they can run in parallel.\n"
        "- Each step has 2-3 acceptance criteria that someone could check.\n"
        "- estimated_cost_tier: 1 (cheap) to 5 (expensive). "
        "estimated_duration_seconds: a realistic whole number of seconds.\n"
        "- Plan what the goal asks and no more: no release, deployment or clean-up the goal "
        "and constraints do not ask for.\n"
        "- Every constraint is addressed by a step, or by an acceptance criterion that checks "
        "it.\n"
        f"{last_rule}"
        + DATA_RULE.format(
            what="the arms and their descriptions, and the goal, constraints and context of "
            "the task"
        )
        + "Answer with exactly one JSON object and nothing else: no prose, no code fence. "
        "Its shape, with <placeholders> for what you write (as many steps as the plan needs):\n"
        f"{json.dumps(_EXAMPLE, separators=(',', ':'))}"
    )


def user_prompt(
    goal: str, constraints: Sequence[str], context: Mapping[str, Any], budget_rule: str = ""
) -> str:
    """The caller's request as one JSON object: data, which its text cannot break out of.

    `budget_rule` (plan/budget.py's `describe_budget`) is our own sentence built from the
    caller's numbers, so it goes after the data, with our instructions, not inside it.
    """
    request = {"goal": goal, "constraints": list(constraints), "context": dict(context)}
    return (
        "The request to plan, as one JSON object on the next line:\n"
        f"{as_data(request)}\n"
        "Write the plan as the JSON object described in the rules."
        + (f"\n{budget_rule}" if budget_rule else "")
    )
