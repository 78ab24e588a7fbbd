"""The incremental step cutter: steps come out as soon as they close, whatever the chunking."""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from planner_arm.pipeline.stream_cut import StepCutter
from support.stub_model import PLAN, PLAN_JSON


def cut(chunks: list[str]) -> list[Any]:
    cutter = StepCutter()
    return [step for chunk in chunks for step in cutter.feed(chunk)]


def split_at(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(max(c, 0), len(text)) for c in cuts})
    edges = [0, *points, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(edges)]


def test_each_step_comes_out_when_its_closing_brace_arrives() -> None:
    cutter = StepCutter()
    first_end = PLAN_JSON.index("}") + 1  # the first step has no nested object
    assert cutter.feed(PLAN_JSON[: first_end - 1]) == []
    assert cutter.feed(PLAN_JSON[first_end - 1 : first_end]) == [PLAN["plan"][0]]
    assert cutter.feed(PLAN_JSON[first_end:]) == PLAN["plan"][1:]
    assert cutter.done


def test_a_code_fence_and_prose_before_the_json_are_skipped() -> None:
    answer = 'Here is "the" plan:\n```json\n' + json.dumps(PLAN, indent=2) + "\n```\nDone."
    assert cut(split_at(answer, list(range(0, len(answer), 7)))) == PLAN["plan"]


def test_braces_and_quotes_inside_strings_do_not_confuse_it() -> None:
    tricky = {
        "plan": [
            {"action": 'Escape "quotes" and {braces} [and] \\ back\\slashes', "step": 1},
            {"action": "Unicode \u00e9\u4e2d and \\u escapes: \u0022", "step": 2},
        ],
        "rationale": "a } that is not a close",
    }
    text = json.dumps(tricky)
    for size in (1, 2, 3, 5, len(text)):
        assert cut([text[i : i + size] for i in range(0, len(text), size)]) == tricky["plan"]


def test_other_step_list_keys_and_a_bare_list_are_found() -> None:
    steps = [{"action": "a", "arm": "coder"}, {"action": "b"}]
    assert cut([json.dumps({"rationale": "r", "steps": steps})]) == steps
    assert cut([json.dumps({"response": {"tasks": steps}})]) == steps
    assert cut([json.dumps(steps)]) == steps


def test_lists_that_are_not_the_step_list_give_nothing() -> None:
    text = json.dumps({"notes": [{"a": 1}], "plan": [{"action": "x"}], "more": [{"b": 2}]})
    assert cut([text]) == [{"action": "x"}]


def test_text_after_the_answer_is_ignored() -> None:
    assert cut([PLAN_JSON + ' {"plan": [{"action": "again"}]}']) == PLAN["plan"]


json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(alphabet=st.characters(), max_size=12)
)
json_value = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
steps_strategy = st.lists(st.dictionaries(st.text(max_size=8), json_value, max_size=4), max_size=6)


@settings(max_examples=200, deadline=None)
@given(
    steps=steps_strategy,
    rationale=st.text(max_size=20),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=30),
    indent=st.sampled_from([None, 2]),
    ascii_only=st.booleans(),
)
def test_any_chunking_yields_the_steps_json_loads_reads(
    steps: list[dict[str, Any]],
    rationale: str,
    cuts: list[int],
    indent: int | None,
    ascii_only: bool,
) -> None:
    answer = json.dumps(
        {"rationale": rationale, "plan": steps}, indent=indent, ensure_ascii=ascii_only
    )
    assert cut(split_at(answer, cuts)) == json.loads(answer)["plan"]


def _answer_of(size: int) -> str:
    steps = []
    while len(json.dumps({"plan": steps})) < size:
        steps.append({**PLAN["plan"][1], "step": len(steps) + 1})
    return json.dumps({"plan": steps, "rationale": "r"})


def _seconds_per_chunk(answer: str, chunk: int = 16) -> float:
    cutter = StepCutter()
    pieces = [answer[i : i + chunk] for i in range(0, len(answer), chunk)]
    started = time.perf_counter()
    for piece in pieces:
        cutter.feed(piece)
    return (time.perf_counter() - started) / len(pieces)


def test_the_cost_per_chunk_does_not_grow_with_the_answer() -> None:
    small = min(_seconds_per_chunk(_answer_of(1_000)) for _ in range(5))
    large = min(_seconds_per_chunk(_answer_of(50_000)) for _ in range(5))
    # A cutter that re-read the buffer would pay ~50x here; allow noise, not growth.
    assert large < small * 4
