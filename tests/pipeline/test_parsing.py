"""extract_json: every malformation a model produces, the repairs recorded, the errors raised;
and the small parsers for value text (durations, step references, cost words, lists)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner_arm.errors import PlanParseError
from planner_arm.pipeline.fields import (
    parse_cost_word,
    parse_duration,
    parse_step_reference,
    readable_identifier,
    split_list_text,
)
from planner_arm.pipeline.parsing import extract_json
from planner_arm.plan.draft import repair_code
from support.app import FIXTURES

PLAN = {"plan": [{"step": 1, "action": "Fix the bug", "depends_on": []}], "confidence": 0.8}
PLAN_TEXT = json.dumps(PLAN)


def codes(repairs: list[str]) -> list[str]:
    return [repair_code(entry) for entry in repairs]


def test_well_formed_answer_takes_the_fast_path_without_repairs() -> None:
    assert extract_json(PLAN_TEXT) == (PLAN, [])
    assert extract_json(f"\n  {PLAN_TEXT}\n\n") == (PLAN, [])


def test_a_bare_list_of_steps_is_returned_as_a_list() -> None:
    steps = [{"action": "a"}, {"action": "b"}]
    assert extract_json(json.dumps(steps)) == (steps, [])


@pytest.mark.parametrize(
    ("text", "expected_codes"),
    [
        pytest.param(f"```json\n{PLAN_TEXT}\n```", ["code_fence"], id="json-fence"),
        pytest.param(f"```\n{PLAN_TEXT}\n```", ["code_fence"], id="plain-fence"),
        pytest.param(f"```JSON {PLAN_TEXT}```", ["code_fence"], id="inline-fence"),
        pytest.param(
            f"Here is the plan:\n```json\n{PLAN_TEXT}\n```\nLet me know if it helps!",
            ["code_fence", "surrounding_text"],
            id="fence-with-prose",
        ),
        pytest.param(
            f"```python\nprint('hi')\n```\nand the plan:\n```json\n{PLAN_TEXT}\n```",
            ["code_fence", "surrounding_text"],
            id="second-fence-holds-the-json",
        ),
        pytest.param(
            f"Sure! Here is your plan: {PLAN_TEXT} I hope this helps.",
            ["surrounding_text"],
            id="chatty-prose",
        ),
        pytest.param(
            f"Plan [draft 2], see below.\n{PLAN_TEXT}",
            ["surrounding_text"],
            id="larger-span-beats-bracketed-prose",
        ),
    ],
)
def test_answer_wrapped_in_fences_or_prose(text: str, expected_codes: list[str]) -> None:
    value, repairs = extract_json(text)
    assert value == PLAN
    assert codes(repairs) == expected_codes


@pytest.mark.parametrize(
    ("text", "expected", "code"),
    [
        pytest.param(
            '{"a": [1, 2,], "b": 3,}', {"a": [1, 2], "b": 3}, "trailing_comma", id="comma"
        ),
        pytest.param('{"a": 1, // why\n "b": 2}', {"a": 1, "b": 2}, "comments", id="line-comment"),
        pytest.param('{"a": /* one */ 1}', {"a": 1}, "comments", id="block-comment"),
        pytest.param(
            "{'action': 'Say \"hi\"', 'arm': 'coder'}",
            {"action": 'Say "hi"', "arm": "coder"},
            "single_quotes",
            id="single-quotes",
        ),
        pytest.param(
            "{'action': 'Don't break the API'}",
            {"action": "Don't break the API"},
            "single_quotes",
            id="apostrophe-inside-single-quotes",
        ),
        pytest.param(
            '{"done": True, "skip": False, "arm": None}',
            {"done": True, "skip": False, "arm": None},
            "python_literals",
            id="python-literals",
        ),
        pytest.param(
            "{\u201caction\u201d: \u201cFix the user\u2019s login\u201d}",
            {"action": "Fix the user\u2019s login"},
            "smart_quotes",
            id="curly-double-quotes",
        ),
        pytest.param(
            "{\u2018action\u2019: \u2018Fix it\u2019}",
            {"action": "Fix it"},
            "smart_quotes",
            id="curly-single-quotes",
        ),
        pytest.param(
            '{"confidence": NaN, "cost": Infinity, "low": -Infinity}',
            {"confidence": None, "cost": None, "low": None},
            "nan_value",
            id="nan-and-infinity",
        ),
        pytest.param(json.dumps(PLAN_TEXT), PLAN, "double_encoded", id="double-encoded"),
    ],
)
def test_targeted_cleanups(text: str, expected: Any, code: str) -> None:
    value, repairs = extract_json(text)
    assert value == expected
    assert codes(repairs) == [code]


def test_several_malformations_each_recorded_once() -> None:
    text = "Plan:\n```json\n{'plan': [{'step': 1, 'ok': True,}, {'step': 2,},], // done\n}\n```"
    value, repairs = extract_json(text)
    assert value == {"plan": [{"step": 1, "ok": True}, {"step": 2}]}
    assert sorted(codes(repairs)) == sorted(
        [
            "code_fence",
            "surrounding_text",
            "single_quotes",
            "python_literals",
            "trailing_comma",
            "comments",
        ]
    )


def test_double_encoded_fenced_answer_records_both_fixes() -> None:
    value, repairs = extract_json(json.dumps(f"```json\n{PLAN_TEXT}\n```"))
    assert value == PLAN
    assert codes(repairs) == ["double_encoded", "code_fence"]


def test_json_repair_mends_what_the_cleanups_cannot() -> None:
    value, repairs = extract_json('{"plan": [{"step": 1 "action": "Fix"}]}')
    assert value == {"plan": [{"step": 1, "action": "Fix"}]}
    assert codes(repairs) == ["json_repair"]


CUT_OFF = '{"plan": [{"step": 1, "action": "Fix the bug"}, {"step": 2, "action": "Add te'


def test_truncated_answer_is_closed_and_says_so() -> None:
    value, repairs = extract_json(CUT_OFF, truncated=True)
    assert value["plan"][0] == {"step": 1, "action": "Fix the bug"}
    assert value["plan"][1]["step"] == 2
    assert codes(repairs) == ["json_repair", "truncated_output"]
    assert "token limit" in repairs[-1]


def test_unclosed_answer_not_flagged_truncated_gets_no_truncated_entry() -> None:
    value, repairs = extract_json(CUT_OFF)
    assert len(value["plan"]) == 2
    assert codes(repairs) == ["json_repair"]


def test_truncated_flag_on_complete_json_records_nothing() -> None:
    assert extract_json(PLAN_TEXT, truncated=True) == (PLAN, [])


@pytest.mark.parametrize("text", [None, "", "   \n\t "])
def test_empty_answer(text: str | None) -> None:
    with pytest.raises(PlanParseError) as caught:
        extract_json(text)
    assert caught.value.code == "empty"


@pytest.mark.parametrize(
    "text",
    [
        "I'm sorry, but I can't help with that request.",
        "I am sorry, I cannot create this plan.",
        "As an AI language model, I am unable to plan this.",
        "I apologise, but I won't do that.",
        json.dumps("I'm sorry, I can't do that."),
    ],
)
def test_refusal(text: str) -> None:
    with pytest.raises(PlanParseError) as caught:
        extract_json(text)
    assert caught.value.code == "refusal"


@pytest.mark.parametrize(
    "text",
    [
        "Step one: search. Step two: fix.",
        "42",
        "true",
        '"just a sentence"',
        "{",
        "[[[",
        "[" * 5000,
        "{" * 100_000,
        "{}}}{{{",
    ],
)
def test_no_json(text: str) -> None:
    with pytest.raises(PlanParseError) as caught:
        extract_json(text)
    assert caught.value.code == "no_json"


@pytest.mark.parametrize("text", ["Here is the plan: first we", '{"pl', "{"])
def test_truncated_without_anything_usable(text: str) -> None:
    with pytest.raises(PlanParseError) as caught:
        extract_json(text, truncated=True)
    assert caught.value.code == "truncated"


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.txt")), ids=lambda path: path.stem)
def test_real_model_answers_decode(path: Path) -> None:
    value, repairs = extract_json(path.read_text(encoding="utf-8"))
    assert isinstance(value, dict)
    assert isinstance(value["plan"], list)
    assert len(value["plan"]) >= 2
    assert codes(repairs) == (["code_fence"] if "fenced" in path.stem else [])


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(), JSON_VALUES, max_size=6))
def test_any_json_object_round_trips_without_repairs(data: dict[str, Any]) -> None:
    assert extract_json(json.dumps(data)) == (data, [])


@settings(max_examples=300, deadline=None)
@given(st.text(), st.booleans())
def test_arbitrary_text_raises_only_plan_parse_errors(text: str, truncated: bool) -> None:
    try:
        value, repairs = extract_json(text, truncated=truncated)
    except PlanParseError as error:
        failure = error.code
    else:
        failure = None
        assert isinstance(value, dict | list)
        assert len(set(codes(repairs))) == len(repairs)
    assert failure in {None, "empty", "refusal", "no_json", "truncated"}


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="{}[]\"',:/*#\\ \nabcTrueNoneNaN-0123456789\u201c\u201d\u2018\u2019`"))
def test_json_like_noise_raises_only_plan_parse_errors(text: str) -> None:
    try:
        value, _ = extract_json(text)
    except PlanParseError:
        return
    assert isinstance(value, dict | list)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("45", 45),
        ("45s", 45),
        ("45 sec", 45),
        ("2 minutes", 120),
        ("1m30s", 90),
        ("1 min, 30 seconds", 90),
        ("1h", 3600),
        ("1.5 hours", 5400),
        ("PT1M30S", 90),
        ("PT2H", 7200),
        ("about 2 min", 120),
        ("500ms", 0.5),
        ("soon", None),
        ("5 steps", None),
        ("two minutes", None),
        ("P", None),
    ],
)
def test_parse_duration(text: str, seconds: float | None) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("3", 3),
        ("step 2", 2),
        ("Step #2", 2),
        ("s2", 2),
        ("task-2", 2),
        ("2.", 2),
        ("#4", 4),
        ("Step_10", 10),
        ("search", None),
        ("step two", None),
        ("step" + " " * 5000 + "x", None),
        ("", None),
    ],
)
def test_parse_step_reference(text: str, number: int | None) -> None:
    assert parse_step_reference(text) == number


@pytest.mark.parametrize(
    ("text", "tier"),
    [
        ("very low", 1),
        ("Low", 2),
        ("medium", 3),
        ("HIGH", 4),
        ("very-high", 5),
        ("low cost", 2),
        ("$$$", 3),
        ("purple", None),
        ("", None),
    ],
)
def test_parse_cost_word(text: str, tier: int | None) -> None:
    assert parse_cost_word(text) == tier


@pytest.mark.parametrize(
    ("text", "readable"),
    [
        ("check_login", "Check login"),
        ("update_JWT_token", "Update JWT token"),
        ("checkAPIKey", "Check API key"),
        ("runTests", "Run tests"),
        ("Fix the login bug", None),
        ("deploy", None),
        ("run_tests.py", None),
    ],
)
def test_readable_identifier(text: str, readable: str | None) -> None:
    assert readable_identifier(text) == readable


@pytest.mark.parametrize(
    ("text", "items"),
    [
        ("All tests pass", ["All tests pass"]),
        ("- Tests pass\n- Lint is clean\n", ["Tests pass", "Lint is clean"]),
        ("1. Bug reproduced\n2) Fix merged", ["Bug reproduced", "Fix merged"]),
        ("Tests pass; docs updated", ["Tests pass", "docs updated"]),
        ("\u2022 one \u2022 two", ["one", "two"]),
        ("   ", []),
    ],
)
def test_split_list_text(text: str, items: list[str]) -> None:
    assert split_list_text(text) == items
