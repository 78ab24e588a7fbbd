"""Every prompt's text, rendered over fixed inputs and held to a digest: a prompt's wording
changes only on purpose, together with its version (PROMPT_VERSION and the others)."""

from __future__ import annotations

import hashlib
from typing import Any

from planner_arm.config import ArmSpec, WorkedExample, load_settings
from planner_arm.plan.draft import DraftStep
from planner_arm.plan.endpoint_schemas import StepState
from planner_arm.plan.output_fields import OutputFields
from planner_arm.plan.replan import ReplanScope
from planner_arm.plan.schemas import PlanRequest, PlanStep
from planner_arm.strategies.prompts.expand import (
    EXPAND_PROMPT_VERSION,
    phases_user_prompt,
    subplan_user_prompt,
)
from planner_arm.strategies.prompts.messages import (
    as_data,
    initial_messages,
    problems_prompt,
    repair_prompt,
    with_repair,
)
from planner_arm.strategies.prompts.plans import (
    PROMPT_VERSION,
    example_texts,
    plan_opening,
    system_prompt,
    user_prompt,
)
from planner_arm.strategies.prompts.replan import REPLAN_PROMPT_VERSION, replan_user_prompt
from planner_arm.strategies.prompts.specialize import (
    SPECIALIZE_PROMPT_VERSION,
    SPECIALIZE_SYSTEM_PROMPT,
    SpecializeBrief,
    specialize_messages,
    specialize_repair,
    specialize_user_prompt,
)
from planner_arm.strategies.prompts.tools import (
    draft_prompt,
    examples_prompt,
    tools_opening,
    tools_system_prompt,
)

GOAL = 'Fix the login bug "now"\nand add tests \u2028 ünïcode'
CONSTRAINTS = ["No DB changes", "Keep the API"]
CONTEXT = {"repo": "acme/web", "n": 3}
BUDGET = "Keep the plan under 120 seconds."
STEPS = [
    PlanStep(
        step=1,
        action="Find the login handler",
        required_arm="retriever",
        acceptance_criteria=["handler found"],
    ),
    PlanStep(
        step=2,
        action="Patch the handler",
        required_arm="coder",
        acceptance_criteria=["bug fixed", "lint clean"],
        depends_on=[1],
        estimated_cost_tier=3,
        estimated_duration_seconds=90,
    ),
    PlanStep(
        step=3,
        action="Check the fix",
        required_arm="judge",
        acceptance_criteria=["tests pass"],
        depends_on=[2],
    ),
]
TOOLS = [
    ArmSpec(id="search_books", description="Find books", produces=["book"]),
    ArmSpec(id="order_book", description="Order a book", consumes=["book"]),
]
EXAMPLE = WorkedExample.model_validate(
    {
        "request": "order a book on owls",
        "steps": [
            {"tool": "search_books", "action": "find owl books"},
            {"tool": "order_book", "depends_on": [1]},
        ],
    }
)
OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {
        "books": {
            "type": "array",
            "items": {"type": "object", "properties": {"book_id": {"type": "string"}}},
        }
    },
}


def _replan(partial: bool, strategy: str) -> str:
    scope = ReplanScope(
        previous=tuple(STEPS),
        states={
            1: StepState(status="completed", output="x" * 50),
            2: StepState(status="failed", error="y" * 50),
        },
        marked=frozenset({3}),
        reason="the tests moved",
        partial=partial,
    )
    request = PlanRequest(goal=GOAL, constraints=CONSTRAINTS, context=CONTEXT, strategy=strategy)
    return replan_user_prompt(request, scope, max_output_chars=20, budget_rule=BUDGET)


def _subplan(allow_compound: bool, budget_rule: str) -> str:
    return subplan_user_prompt(
        GOAL,
        CONSTRAINTS,
        CONTEXT,
        step=STEPS[1],
        before=STEPS[:1],
        after=STEPS[2:],
        max_steps=5,
        allow_compound=allow_compound,
        budget_rule=budget_rule,
    )


def rendered() -> dict[str, Any]:
    """Every prompt text, under a name, over the fixed inputs above."""
    settings = load_settings(planning={"min_steps": 3, "max_steps": 7})
    no_judge = load_settings(planning={"require_validation_step": False}).planning
    opening = plan_opening(settings.arms, settings.planning)
    tools = tools_opening(TOOLS, 1, 6)
    shortlist = tools_opening(TOOLS, 2, 4, shortlist=True)
    brief = SpecializeBrief(goal=GOAL, constraints=CONSTRAINTS, context=CONTEXT, given=["z"])
    outputs = {1: OutputFields.of(OUTPUT_SCHEMA)}
    assert outputs[1] is not None
    special = specialize_messages("order_book", {"type": "object"}, brief, STEPS[1], STEPS[:1])
    return {
        "versions": [
            PROMPT_VERSION,
            REPLAN_PROMPT_VERSION,
            EXPAND_PROMPT_VERSION,
            SPECIALIZE_PROMPT_VERSION,
        ],
        "example_texts": example_texts(),
        "system": system_prompt(settings.planning),
        "system_no_judge": system_prompt(no_judge),
        "plan_opening": [opening.system, opening.arms, opening.shortlist],
        "plan_messages": opening.messages(user_prompt(GOAL, CONSTRAINTS, CONTEXT), "fixed"),
        "tools_system": tools_system_prompt(1, 6),
        "tools_messages": tools.messages("user", examples_prompt([EXAMPLE], chosen=False)),
        "shortlist_messages": shortlist.messages("user", examples_prompt([EXAMPLE])),
        "draft": draft_prompt(
            [DraftStep(action="a", required_arm="search_books", step=1, depends_on=[])]
        ),
        "draft_empty": draft_prompt([]),
        "examples_empty": examples_prompt([]),
        "as_data": as_data({"text": "a\u2028b\u2029c", "n": 1}),
        "user": user_prompt(GOAL, CONSTRAINTS, CONTEXT, BUDGET),
        "repair": repair_prompt('{"plan": []}', ["no steps", 'step "1"'], usable=True),
        "repair_long": repair_prompt("z" * 7_000, ["too long"]),
        "repair_empty": repair_prompt(None, []),
        "problems": problems_prompt(["one", "two"]),
        "initial": initial_messages("sys", "user"),
        "with_repair": with_repair(initial_messages("s", "u"), "answer", ["wrong"], True),
        "replan": _replan(partial=False, strategy="flat"),
        "replan_iterative": _replan(partial=True, strategy="iterative"),
        "phases": phases_user_prompt(GOAL, CONSTRAINTS, CONTEXT, BUDGET),
        "subplan": _subplan(allow_compound=True, budget_rule=BUDGET),
        "subplan_plain": _subplan(allow_compound=False, budget_rule=""),
        "specialize_system": SPECIALIZE_SYSTEM_PROMPT,
        "specialize_user": specialize_user_prompt(
            "order_book", {"type": "object"}, brief, STEPS[1], STEPS[:1], outputs
        ),
        "specialize_messages": special,
        "specialize_repair": specialize_repair(special, "  ", ["no input"]),
    }


# sha256 of each rendered text's repr. A change here is a prompt's wording: bump its version.
DIGESTS = {
    "versions": "3dd800c4cc86a5868aaf4e237784b9f0a54dfa29e391428ced15a94eb4510944",
    "example_texts": "e26cb95f6d7f2615f0b5f2be77bf79dabd4a4abb51d55ed53008b8e9a2a06661",
    "system": "9b30898c9e2d220ad24ef628e74abb95b597ec712f92442613065c461c30a6bc",
    "system_no_judge": "1ec4e080aea366c8d93f2cda75a605d13c6b6d8f3048413965ddc0087b366a69",
    "plan_opening": "a91273bbac8a408d57f547ce270923402db1564ffa426d6fd347fc49d6a89987",
    "plan_messages": "875caafc50c0b310b34e8234772ca8e55af3567bfafd1fbad3258dc91199330c",
    "tools_system": "a8b9b9817671cb8e90936394744c5f2f3deb2ab6095b2c032e442a707618bee4",
    "tools_messages": "131b5a5806fbb10368a36b0020951593aa41c901b3cc3de205ffe68ef15bb647",
    "shortlist_messages": "3b8c28c226e8d4b79e2fc4b954d2dec7c0fa24bb3dfeb2a60cb8a5670f5ea561",
    "draft": "40d85c63087ee11fed744149717809056bba765d4e3f9c8639524c1de4f77a8f",
    "draft_empty": "6f49cdbd80e1b95d5e6427e1501fc217790daee87055fa5b4e71064288bddede",
    "examples_empty": "6f49cdbd80e1b95d5e6427e1501fc217790daee87055fa5b4e71064288bddede",
    "as_data": "06f1261d95882e1faa8b21290ef893ba7835fcf73529c09a2e239cc367332366",
    "user": "ed2ddc3dd5eb727e6cb07b5280f69968c60512fa7333cfabe370fede372302e1",
    "repair": "362ac8ff7b0cad0f0670077cf91e8f5ccb0bc739c4e8e5d05c65635db414db27",
    "repair_long": "3df4c0be398b307566bdc1f98aa10041ccadd1336b011780046630c8c46ed981",
    "repair_empty": "25900c23f26840aca4918d56df31a50cbf83e8e9e4a44b56ed650a05c0ee7862",
    "problems": "76450f0555239b42ad7d3f76f7221aab913cd9f2e0ffaccf30f9deb59a5abe91",
    "initial": "31a08e468a006bd0bf96f8386fae4f43b53a87cbff4656c49aed8550b1c62e11",
    "with_repair": "36513de1a8ecfcabc97b11cca0524f4e3b250d871d34aaae168a90c897e0e7e6",
    "replan": "9af0d029a8acb062e0bcb1943e73b843d52bfb6ecbd18f0fe81a45b8b9bc1c24",
    "replan_iterative": "b7dc0588a223da43acffd295be4828863c678bab2a5ab1167d25a6195b208a00",
    "phases": "084cf89b22ff87baba08be00c19b3def86e48c53f43a669ccc08862515b8a61b",
    "subplan": "ec6942efab34ea434721ad03675211568b62b9fd92373402b97131f8475249e0",
    "subplan_plain": "0701f2ceb25b2299d38680654904d73ee6b3817437473e7f8cf57e1758498e25",
    "specialize_system": "7b0eaa0e1e04a63f736f44d24797dbfb3b7b6ad97bfd8e3271749c730a323391",
    "specialize_user": "863930bd3f4d0d4679e8fe565187a642d5ac4489f0e7549a4e18c1bac4534bb2",
    "specialize_messages": "35e7b50fe480d91bbb8874b1502cd94257dc4b6e3e2ddaf114927f196127c040",
    "specialize_repair": "7e15d1bf6920e5e47f51d7ff9fcf0976df41b2ed8f610451f6d1ee749a0acbe1",
}


def test_every_prompt_renders_as_it_did() -> None:
    digests = {
        name: hashlib.sha256(repr(text).encode()).hexdigest() for name, text in rendered().items()
    }
    assert digests == DIGESTS
