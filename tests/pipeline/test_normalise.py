"""normalise_plan: wrappers, field synonyms, value shapes, references, criteria and arms, on
hand-made shapes and on real small-model answers."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner_arm.config import load_settings
from planner_arm.errors import PlanParseError
from planner_arm.pipeline.normalise import _Normaliser, as_asked, normalise_plan
from planner_arm.pipeline.parsing import extract_json
from planner_arm.plan.arms import ArmChoice, ArmResolver
from planner_arm.plan.draft import DraftPlan, repair_code
from planner_arm.tools.index import tool_resolver
from support.app import FIXTURES, fixture_text, good_plan


class FakeResolver:
    """Keeps the arm it is given (or 'planner') and records every call."""

    index = None  # the built-in arms: no tool set's index

    def __init__(self) -> None:
        self.calls: list[tuple[str | None, str]] = []

    def resolve(self, given: str | None, action: str, criteria: Sequence[str] = ()) -> ArmChoice:
        self.calls.append((given, action))
        if given is None:
            return ArmChoice("planner", "arm_missing: -> planner")
        return ArmChoice(given)

    def names_no_tool(self, given: object) -> bool:
        return False  # the built-in arms: every step is work


def normalise(data: Any) -> DraftPlan:
    return normalise_plan(data, FakeResolver())  # type: ignore[arg-type]


def codes(plan: DraftPlan) -> list[str]:
    return [repair_code(entry) for entry in plan.repairs]


def step(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "step": 1,
        "action": "Fix the login bug",
        "required_arm": "coder",
        "acceptance_criteria": ["Login works"],
        "depends_on": [],
        "estimated_cost_tier": 2,
        "estimated_duration_seconds": 60,
    }
    base.update(fields)
    return base


def one_step(**fields: Any) -> tuple[Any, DraftPlan]:
    plan = normalise({"plan": [step(**fields)]})
    return plan.steps[0], plan


TWO_STEPS = [step(step=1, action="Search"), step(step=2, action="Fix", depends_on=[1])]


def test_well_formed_plan_needs_no_repairs() -> None:
    plan = normalise(
        {
            "plan": TWO_STEPS,
            "rationale": " Search, then fix. ",
            "confidence": 0.7,
            "complexity_score": 0.4,
        }
    )
    assert [s.action for s in plan.steps] == ["Search", "Fix"]
    assert plan.steps[1].depends_on == [1]
    assert plan.steps[1].required_arm == "coder"
    assert plan.steps[1].acceptance_criteria == ["Login works"]
    assert (plan.steps[1].estimated_cost_tier, plan.steps[1].estimated_duration_seconds) == (2, 60)
    assert (plan.rationale, plan.confidence, plan.complexity_score) == (
        "Search, then fix.",
        0.7,
        0.4,
    )
    assert plan.repairs == []
    assert plan.warnings == []


@pytest.mark.parametrize(
    ("data", "expected_codes"),
    [
        pytest.param({"steps": TWO_STEPS}, ["field_synonym"], id="steps"),
        pytest.param({"tasks": TWO_STEPS}, ["field_synonym"], id="tasks"),
        pytest.param({"subtasks": TWO_STEPS}, ["field_synonym"], id="subtasks"),
        pytest.param(TWO_STEPS, ["bare_step_list"], id="bare-list"),
        pytest.param({"response": {"plan": TWO_STEPS}}, ["wrapper_unwrapped"], id="response"),
        pytest.param({"result": {"plan": TWO_STEPS}}, ["wrapper_unwrapped"], id="result"),
        pytest.param({"output": {"plan": TWO_STEPS}}, ["wrapper_unwrapped"], id="output"),
        pytest.param({"data": {"plan": TWO_STEPS}}, ["wrapper_unwrapped"], id="data"),
        pytest.param({"answer": TWO_STEPS}, ["wrapper_unwrapped"], id="answer-list"),
        pytest.param(
            {"plan": {"steps": TWO_STEPS}}, ["field_synonym", "wrapper_unwrapped"], id="plan-steps"
        ),
        pytest.param({"execution": {"plan": TWO_STEPS}}, ["wrapper_unwrapped"], id="unknown-key"),
        pytest.param({"plan": json.dumps(TWO_STEPS)}, ["double_encoded"], id="plan-as-json-string"),
    ],
)
def test_steps_found_under_any_wrapper(data: Any, expected_codes: list[str]) -> None:
    plan = normalise(data)
    assert [s.action for s in plan.steps] == ["Search", "Fix"]
    assert [s.step for s in plan.steps] == [1, 2]
    assert sorted(codes(plan)) == sorted(expected_codes)


def test_top_level_fields_are_read_next_to_nested_steps() -> None:
    plan = normalise(
        {"response": {"plan": {"steps": TWO_STEPS, "reasoning": "Because."}}, "confidence": 0.6}
    )
    assert plan.rationale == "Because."
    assert plan.confidence == 0.6
    assert plan.repairs == [
        "wrapper_unwrapped: response, plan",
        "field_synonym: steps -> plan, reasoning -> rationale",
    ]


@pytest.mark.parametrize(
    "data",
    [
        {"plan": {"1": step(action="Search"), "2": step(action="Fix")}},
        {"steps": {"step1": step(action="Search"), "step2": step(action="Fix")}},
        {"1": step(action="Search"), "2": step(action="Fix")},
    ],
)
def test_steps_keyed_by_number(data: Any) -> None:
    for entry in (data.get("plan") or data.get("steps") or data).values():
        del entry["step"]
    plan = normalise(data)
    assert [(s.step, s.action) for s in plan.steps] == [(1, "Search"), (2, "Fix")]
    assert "steps_keyed_by_number" in codes(plan)


@pytest.mark.parametrize(
    "data",
    [{"plan": []}, {"steps": None}, {"rationale": "nothing to do"}, {}, [], [None, 3]],
)
def test_no_steps(data: Any) -> None:
    with pytest.raises(PlanParseError) as caught:
        normalise(data)
    assert caught.value.code == "no_steps"


@pytest.mark.parametrize(
    "data", [42, "a plan in prose", None, {"foo": 1, "bar": 2}, {"plan": "first search, then fix"}]
)
def test_wrong_shape(data: Any) -> None:
    with pytest.raises(PlanParseError) as caught:
        normalise(data)
    assert caught.value.code == "wrong_shape"


@pytest.mark.parametrize(
    ("key", "value", "field", "expected"),
    [
        ("id", 4, "step", 4),
        ("step_number", 4, "step", 4),
        ("number", 4, "step", 4),
        ("index", 4, "step", 4),
        ("description", "Run the suite", "action", "Run the suite"),
        ("task", "Run the suite", "action", "Run the suite"),
        ("title", "Run the suite", "action", "Run the suite"),
        ("name", "Run the suite", "action", "Run the suite"),
        ("step_description", "Run the suite", "action", "Run the suite"),
        ("arm", "executor", "required_arm", "executor"),
        ("agent", "executor", "required_arm", "executor"),
        ("arm_id", "executor", "required_arm", "executor"),
        ("tool", "executor", "required_arm", "executor"),
        ("assignee", "executor", "required_arm", "executor"),
        ("dependencies", [3], "depends_on", [3]),
        ("deps", [3], "depends_on", [3]),
        ("depends", [3], "depends_on", [3]),
        ("requires", [3], "depends_on", [3]),
        ("after", [3], "depends_on", [3]),
        ("prerequisites", [3], "depends_on", [3]),
        ("success_criteria", ["Suite green"], "acceptance_criteria", ["Suite green"]),
        ("criteria", ["Suite green"], "acceptance_criteria", ["Suite green"]),
        ("acceptance", ["Suite green"], "acceptance_criteria", ["Suite green"]),
        ("done_when", ["Suite green"], "acceptance_criteria", ["Suite green"]),
        ("cost", 4, "estimated_cost_tier", 4),
        ("cost_tier", 4, "estimated_cost_tier", 4),
        ("estimated_cost", 4, "estimated_cost_tier", 4),
        ("duration", 90, "estimated_duration_seconds", 90),
        ("duration_seconds", 90, "estimated_duration_seconds", 90),
        ("estimated_duration", 90, "estimated_duration_seconds", 90),
        ("time", 90, "estimated_duration_seconds", 90),
        ("seconds", 90, "estimated_duration_seconds", 90),
        ("eta", 90, "estimated_duration_seconds", 90),
        ("dependsOn", [3], "depends_on", [3]),
        ("Required-Arm", "executor", "required_arm", "executor"),
        ("ACTION", "Run the suite", "action", "Run the suite"),
        ("acceptanceCriteria", ["Suite green"], "acceptance_criteria", ["Suite green"]),
        ("estimatedDurationSeconds", 90, "estimated_duration_seconds", 90),
    ],
)
def test_field_synonyms(key: str, value: Any, field: str, expected: Any) -> None:
    fields = step()
    del fields[field]
    fields[key] = value
    plan = normalise({"plan": [fields]})
    assert getattr(plan.steps[0], field) == expected
    assert f"field_synonym: {key} -> {field}" in plan.repairs


def test_canonical_name_wins_over_a_synonym() -> None:
    draft, _ = one_step(description="A longer description of the fix")
    assert draft.action == "Fix the login bug"


def test_top_level_synonyms() -> None:
    plan = normalise({"steps": TWO_STEPS, "explanation": "Why", "complexity": 0.3})
    assert (plan.rationale, plan.complexity_score) == ("Why", 0.3)
    assert (
        "field_synonym: steps -> plan, explanation -> rationale, complexity -> "
        "complexity_score" in plan.repairs
    )


def test_missing_top_level_fields_stay_none() -> None:
    plan = normalise({"plan": TWO_STEPS})
    assert (plan.rationale, plan.confidence, plan.complexity_score) == (None, None, None)


@pytest.mark.parametrize(
    ("given", "number"),
    [("3", 3), ("step 3", 3), ("Step #3", 3), ("s3", 3), ("task-3", 3), ("3.", 3), (3.0, 3)],
)
def test_step_number_from_text(given: Any, number: int) -> None:
    draft, plan = one_step(step=given)
    assert draft.step == number
    assert codes(plan) == ([] if isinstance(given, float) else ["number_from_string"])


@pytest.mark.parametrize(
    ("given", "expected", "detail"),
    [
        ("step 1", [1], "'step 1' -> [1]"),
        (1, [1], "1 -> [1]"),
        ("1, 2", [1, 2], "'1, 2' -> [1, 2]"),
        ("steps 1 and 2", [1, 2], "'steps 1 and 2' -> [1, 2]"),
        (["Step #1", "s2"], [1, 2], "'Step #1' -> 1"),
        (["task-1", 2.0, "2."], [1, 2, 2], "'task-1' -> 1"),
        ("none", [], "'none' -> none"),
    ],
)
def test_dependency_references(given: Any, expected: list[int], detail: str) -> None:
    draft, plan = one_step(step=3, depends_on=given)
    assert draft.depends_on == expected
    assert f"dependency_reference: {detail}" in plan.repairs[0]


def test_a_long_dependency_text_is_read_and_its_repair_detail_stays_short() -> None:
    draft, plan = one_step(step=3, depends_on="1" + " " * 5000 + "& 2")
    assert draft.depends_on == [1, 2]
    assert plan.repairs[0].startswith("dependency_reference: '1   ")
    assert len(plan.repairs[0]) < 120


def test_references_that_cannot_be_understood_are_dropped() -> None:
    draft, plan = one_step(step=3, depends_on=["the search step", 1, True, None])
    assert draft.depends_on == [1]
    assert plan.repairs == ["dependency_dropped: 'the search step', True, None"]


def test_numbers_are_kept_as_given_for_validation_to_renumber() -> None:
    plan = normalise({"plan": [step(step=0), step(step=5, depends_on=[0]), step(step=9)]})
    assert [s.step for s in plan.steps] == [0, 5, 9]
    assert plan.steps[1].depends_on == [0]


def test_string_ids_are_mapped_to_positions() -> None:
    data = {
        "plan": [
            step(step=None, id="search", action="Search the code"),
            step(step=None, id="fix", action="Fix it", depends_on=["search"]),
            step(step=None, id="check", action="Check it", depends_on="Fix, search"),
        ]
    }
    for entry in data["plan"]:
        del entry["step"]
    plan = normalise(data)
    assert [s.step for s in plan.steps] == [1, 2, 3]
    assert [s.depends_on for s in plan.steps] == [[], [1], [2, 1]]
    assert "step_id_mapped: 'search' -> 1, 'fix' -> 2, 'check' -> 3" in plan.repairs


def test_numbered_string_ids_keep_their_numbers() -> None:
    plan = normalise({"plan": [step(step="task-0"), step(step="task-1", depends_on=["task-0"])]})
    assert [s.step for s in plan.steps] == [0, 1]
    assert plan.steps[1].depends_on == [0]


@pytest.mark.parametrize(
    ("given", "criteria", "code"),
    [
        ("All tests pass", ["All tests pass"], "criteria_from_string"),
        ("- Tests pass\n- Lint clean", ["Tests pass", "Lint clean"], "criteria_from_string"),
        ("Tests pass; docs updated", ["Tests pass", "docs updated"], "criteria_from_string"),
        (["Tests pass", "", "  "], ["Tests pass"], "criteria_dropped"),
        (
            {"1": "Tests pass", "2": "Lint clean"},
            ["Tests pass", "Lint clean"],
            "criteria_from_mapping",
        ),
        (["Tests pass", "high"], ["Tests pass"], "criteria_dropped"),
    ],
)
def test_criteria_shapes(given: Any, criteria: list[str], code: str) -> None:
    draft, plan = one_step(acceptance_criteria=given)
    assert draft.acceptance_criteria == criteria
    assert code in codes(plan)
    assert "default_criteria" not in codes(plan)


@pytest.mark.parametrize("given", ["high", "low", ["medium", ""], None, [], ""])
def test_steps_without_usable_criteria_get_a_default(given: Any) -> None:
    draft, plan = one_step(action="Fix the login bug.", acceptance_criteria=given)
    assert draft.acceptance_criteria == ["Completed: Fix the login bug; the outcome is recorded"]
    assert "default_criteria" in codes(plan)


@pytest.mark.parametrize(
    ("given", "tier", "code"),
    [
        ("very low", 1, "cost_word"),
        ("low", 2, "cost_word"),
        ("Medium", 3, "cost_word"),
        ("high", 4, "cost_word"),
        ("very high", 5, "cost_word"),
        ("$$", 2, "cost_word"),
        ("3", 3, "number_from_string"),
        (2.6, 3, "value_rounded"),
        (7, 7, None),
        ("purple", None, "value_dropped"),
        (None, None, None),
    ],
)
def test_cost_tiers(given: Any, tier: int | None, code: str | None) -> None:
    draft, plan = one_step(estimated_cost_tier=given)
    assert draft.estimated_cost_tier == tier
    assert codes(plan) == ([code] if code else [])


@pytest.mark.parametrize(
    ("given", "seconds", "code"),
    [
        (45, 45, None),
        (45.4, 45, "value_rounded"),
        ("45", 45, "number_from_string"),
        ("45s", 45, "duration_text"),
        ("45 sec", 45, "duration_text"),
        ("2 minutes", 120, "duration_text"),
        ("1m30s", 90, "duration_text"),
        ("1h", 3600, "duration_text"),
        ("1.5 hours", 5400, "duration_text"),
        ("PT1M30S", 90, "duration_text"),
        ("a while", None, "value_dropped"),
    ],
)
def test_durations(given: Any, seconds: int | None, code: str | None) -> None:
    draft, plan = one_step(estimated_duration_seconds=given)
    assert draft.estimated_duration_seconds == seconds
    assert codes(plan) == ([code] if code else [])


@pytest.mark.parametrize(
    ("given", "expected", "code"),
    [
        (0.85, 0.85, None),
        (85, 0.85, "confidence_percent"),
        ("85%", 0.85, "confidence_percent"),
        ("0.6", 0.6, "number_from_string"),
        ("high", None, "value_dropped"),
        (250, None, "value_dropped"),
    ],
)
def test_confidence(given: Any, expected: float | None, code: str | None) -> None:
    plan = normalise({"plan": TWO_STEPS, "confidence": given})
    assert plan.confidence == pytest.approx(expected) if expected else plan.confidence is None
    assert code is None or code in codes(plan)


@pytest.mark.parametrize(
    ("given", "expected", "code"),
    [
        (0.4, 0.4, None),
        (1.5, 0.15, "complexity_rescaled"),
        (7, 0.7, "complexity_rescaled"),
        (45, 0.45, "complexity_rescaled"),
        ("30%", 0.3, "complexity_rescaled"),
        (-1, None, "value_dropped"),
        (1000, None, "value_dropped"),
        ("medium", None, "value_dropped"),
    ],
)
def test_complexity(given: Any, expected: float | None, code: str | None) -> None:
    plan = normalise({"plan": TWO_STEPS, "complexity_score": given})
    assert (
        plan.complexity_score == pytest.approx(expected)
        if expected
        else (plan.complexity_score is None)
    )
    assert codes(plan) == ([code] if code else [])


@pytest.mark.parametrize(
    ("fields", "action"),
    [
        ({"action": "  Fix the login bug  "}, "Fix the login bug"),
        ({"action": "check_login"}, "Check login"),
        ({"action": "checkAPIKey"}, "Check API key"),
        ({"action": "", "title": "Search the docs"}, "Search the docs"),
        ({"action": None, "description": "Search the docs"}, "Search the docs"),
        ({"action": ""}, ""),
    ],
)
def test_actions(fields: dict[str, Any], action: str) -> None:
    draft, _ = one_step(**fields)
    assert draft.action == action


def test_identifier_actions_are_made_readable_with_one_repair() -> None:
    plan = normalise({"plan": [step(action="check_login"), step(action="add_tests")]})
    assert plan.repairs == [
        "action_from_identifier: check_login -> Check login, add_tests -> Add tests"
    ]


def test_every_step_goes_through_the_arm_resolver() -> None:
    resolver = FakeResolver()
    data = {"plan": [step(action="check_login"), step(action="Run it", required_arm=None)]}
    plan = normalise_plan(data, resolver)  # type: ignore[arg-type]
    assert resolver.calls == [("coder", "Check login"), (None, "Run it")]
    assert [s.required_arm for s in plan.steps] == ["coder", "planner"]
    assert "arm_missing: -> planner" in plan.repairs


def test_steps_given_as_text_and_junk_entries() -> None:
    plan = normalise({"plan": ["Search the docs", 42, step(action="Fix")]})
    assert [s.action for s in plan.steps] == ["Search the docs", "Fix"]
    assert {"step_from_text", "step_dropped"} <= set(codes(plan))


def test_unknown_step_fields_are_reported_as_a_warning() -> None:
    _, plan = one_step(notes="n/a", inputs=[])
    assert plan.warnings == ["ignored_step_fields: notes, inputs"]


def test_repairs_are_aggregated_one_entry_per_code() -> None:
    plan = normalise({"plan": [step(step=n, estimated_cost_tier="low") for n in range(1, 8)]})
    assert plan.repairs == ["cost_word: low -> 2"]
    words = ["very low", "low", "medium", "high", "very high", "$$$"]
    plan = normalise({"plan": [step(estimated_cost_tier=word) for word in words]})
    assert plan.repairs == [
        "cost_word: very low -> 1, low -> 2, medium -> 3, high -> 4, very high -> 5 (+1 more)"
    ]


def read_fixture(name: str) -> Any:
    return extract_json(fixture_text(name))[0]


@pytest.mark.parametrize(
    ("name", "tiers", "criteria_defaulted", "complexity"),
    [
        (
            "qwen2.5-coder-0.5b_json-object-schema_identifier-actions.txt",
            [3, 4, 3, 3],
            True,
            pytest.approx(0.12),
        ),
        (
            "qwen2.5-coder-0.5b_json-object-schema_nonsense-values.txt",
            [3, 4],
            True,
            pytest.approx(0.15),
        ),
        ("qwen2.5-coder-0.5b_json-object_missing-fields.txt", [2, 3, 4], False, None),
        ("qwen2.5-coder-1.5b_json-object-schema.txt", [2, 3, 2, 3, 2, 4], False, 0.8),
        ("qwen2.5-coder-1.5b_no-response-format_fenced.txt", [2, 3, 4, 2, 3], False, 0.8),
    ],
)
def test_real_model_answers(
    name: str, tiers: list[int], criteria_defaulted: bool, complexity: Any
) -> None:
    plan = normalise(read_fixture(name))
    assert [s.estimated_cost_tier for s in plan.steps] == tiers
    assert [s.step for s in plan.steps] == list(range(1, len(tiers) + 1))
    assert plan.complexity_score == complexity
    assert all(len(s.acceptance_criteria) == 1 for s in plan.steps)
    assert ("default_criteria" in codes(plan)) is criteria_defaulted
    assert "criteria_from_string" in codes(plan)
    assert "cost_word" in codes(plan)


def test_identifier_actions_fixture_in_detail() -> None:
    plan = normalise(read_fixture("qwen2.5-coder-0.5b_json-object-schema_identifier-actions.txt"))
    assert [s.action for s in plan.steps] == [
        "Check login",
        "Update credentials",
        "Authenticate user",
        "Test authentication",
    ]
    assert [s.depends_on for s in plan.steps] == [[], [1], [], [3]]
    assert [s.estimated_duration_seconds for s in plan.steps] == [30, 50, 40, 20]
    assert plan.steps[0].acceptance_criteria == ["Completed: Check login; the outcome is recorded"]
    assert "criteria_dropped: 'high', 'low', 'medium'" in plan.repairs
    assert plan.confidence == 0.85


def test_missing_fields_fixture_keeps_the_models_criteria() -> None:
    plan = normalise(read_fixture("qwen2.5-coder-0.5b_json-object_missing-fields.txt"))
    assert [s.acceptance_criteria for s in plan.steps] == [
        ["All authentication details are correct"],
        ["All credentials are updated successfully"],
        ["All tests pass"],
    ]
    assert (plan.rationale, plan.confidence) == (None, None)


@pytest.fixture(scope="module")
def real_resolver() -> ArmResolver:
    settings = load_settings()
    return ArmResolver(settings.arms, settings.arm_aliases)


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.txt")), ids=lambda path: path.stem)
def test_real_model_answers_with_the_real_arm_resolver(
    path: Path, real_resolver: ArmResolver
) -> None:
    data, _ = extract_json(path.read_text(encoding="utf-8"))
    plan = normalise_plan(data, real_resolver)
    arm_ids = set(load_settings().arm_ids)
    assert len(plan.steps) == len(data["plan"])
    assert all(s.required_arm in arm_ids for s in plan.steps)
    assert all(s.action and s.acceptance_criteria for s in plan.steps)


def test_real_resolver_mends_an_unknown_arm_and_records_it(real_resolver: ArmResolver) -> None:
    plan = normalise_plan(
        {"plan": [step(required_arm="Developer"), step(required_arm=None)]}, real_resolver
    )
    assert plan.steps[0].required_arm == "coder"
    assert plan.steps[1].required_arm in set(load_settings().arm_ids)
    assert len(plan.repairs) == len({repair_code(entry) for entry in plan.repairs}) >= 1


PLAN_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 150)
    | st.floats()
    | st.sampled_from(
        ["1", "step 2", "high", "2 minutes", "85%", "check_login", "a; b", "none", "task-0"]
    ),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "plan",
                    "steps",
                    "step",
                    "id",
                    "action",
                    "arm",
                    "deps",
                    "criteria",
                    "cost",
                    "duration",
                    "confidence",
                    "complexity",
                    "response",
                    "1",
                ]
            ),
            inner,
            max_size=5,
        )
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(PLAN_VALUES)
def test_any_value_gives_a_typed_draft_or_a_parse_error(data: Any) -> None:
    try:
        plan = normalise(data)
    except PlanParseError as error:
        failure = error.code
    else:
        failure = None
    if failure is not None:
        assert failure in {"no_steps", "wrong_shape"}
        return
    assert plan.steps
    for draft in plan.steps:
        assert isinstance(draft.action, str)
        assert draft.acceptance_criteria
        assert all(type(ref) is int for ref in draft.depends_on)
        assert draft.estimated_cost_tier is None or type(draft.estimated_cost_tier) is int
    assert plan.confidence is None or 0 <= plan.confidence <= 1
    assert len({repair_code(entry) for entry in plan.repairs}) == len(plan.repairs)


# --- the fast path for answers in exactly the asked shape ---------------------------------

_ASKED_STEP_VALUES = st.fixed_dictionaries({
    "step": st.integers(-2, 9),
    "action": st.sampled_from(["Search the code", "fix_login", "Run tests", " Pad ", "x y"]),
    "required_arm": st.sampled_from(["coder", "judge", "Coder", "root", "retriever"]),
    "acceptance_criteria": st.lists(
        st.sampled_from(["Tests pass", "high", "", " padded ", "None", "Patch merged"]),
        max_size=3,
    ),
    "depends_on": st.lists(st.integers(-1, 9), max_size=3),
    "estimated_cost_tier": st.integers(-1, 7),
    "estimated_duration_seconds": st.integers(-5, 500),
})  # fmt: skip


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    steps=st.lists(_ASKED_STEP_VALUES, min_size=1, max_size=7),
    rationale=st.sampled_from(["Because.", "  spaced  ", ""]),
    confidence=st.sampled_from([0.0, 0.5, 1, 1.5, 85]),
    complexity=st.sampled_from([0.2, 1.0, 1.5]),
)
def test_fast_path_builds_what_the_full_normaliser_would(
    steps: list[dict[str, object]], rationale: str, confidence: float, complexity: float
) -> None:
    data = {
        "plan": steps,
        "rationale": rationale,
        "confidence": confidence,
        "complexity_score": complexity,
    }
    resolver = ArmResolver(load_settings().arms, load_settings().arm_aliases)
    fast = as_asked(data, resolver)
    if fast is None:
        return  # not in the asked shape: only the full normaliser handles it
    assert fast == _Normaliser(resolver).plan(data)
    assert fast.repairs == []


def test_fast_path_takes_the_well_formed_answer() -> None:
    resolver = ArmResolver(load_settings().arms, load_settings().arm_aliases)
    data = good_plan()
    fast = as_asked(data, resolver)
    assert fast is not None
    assert fast == _Normaliser(resolver).plan(data)
    assert as_asked({**data, "extra": 1}, resolver) is None


def test_a_tool_plans_no_tool_step_is_dropped_not_invented() -> None:
    from planner_arm.config import ArmSpec

    tools = [ArmSpec(id="search_movie", description="Search movies by title")]
    resolver = tool_resolver(tools)
    data = {
        "steps": [
            {"step": 1, "tool": "search_movie", "action": "find it"},
            {"step": 2, "tool": "none", "action": "answer the user", "depends_on": [1]},
        ]
    }
    draft = normalise_plan(data, resolver)
    assert [step.required_arm for step in draft.steps] == ["search_movie"]
    assert any(entry.startswith("no_tool_step_dropped") for entry in draft.repairs)
