"""The rule-based sub-plan of one step: it details the step, it does not plan the goal again."""

from __future__ import annotations

import pytest

from planner_arm.llm.usage import Usage
from planner_arm.pipeline.assembly import assemble_response
from planner_arm.plan.schemas import PlanStep
from planner_arm.plan.validation import PlanRules, validate_plan
from planner_arm.rules.planner import step_detail
from support.app import make_settings
from support.invariants import assert_valid_plan

SETTINGS = make_settings(llm=False)
RULES = PlanRules.from_settings(SETTINGS)
ANALYSE = PlanStep(
    step=2,
    action="Analyse the code behind the authentication bug",
    required_arm="retriever",
    acceptance_criteria=["Root cause named", "Affected files listed"],
    depends_on=[1],
)


@pytest.mark.parametrize("size", [3, 4, 5, 7])
def test_a_detail_plan_is_valid_at_every_size(size: int) -> None:
    draft = step_detail(ANALYSE, ["No schema change"], arm_ids=SETTINGS.arm_ids, size=size)
    valid = validate_plan(draft, RULES)
    assert len(valid.steps) == size
    assert valid.repairs == []
    body = assemble_response(
        draft=draft, valid=valid, goal=ANALYSE.action, source="fallback", model=None,
        usage=Usage(), request_id="r", latency_ms=0, prompt_version="v",
    ).model_dump(mode="json")  # fmt: skip
    assert_valid_plan(body)


def test_it_details_the_step_and_checks_its_criteria() -> None:
    draft = step_detail(ANALYSE, ["No schema change"], arm_ids=SETTINGS.arm_ids, size=4)
    actions = [step.action for step in draft.steps]
    # Gather, one part per criterion, the check: every step is about this step's work, and
    # nothing plans what the steps around it do (a patch, a test).
    assert all("authentication bug" in action for action in actions)
    assert not any(word in " ".join(actions).lower() for word in ("patch", "regression test"))
    assert [step.required_arm for step in draft.steps] == [
        "retriever",
        "retriever",
        "retriever",
        "judge",
    ]
    assert draft.steps[-1].acceptance_criteria == [
        "Root cause named",
        "Affected files listed",
        "Constraint respected: No schema change",
    ]
