"""Property: whatever plan the API accepts back (any size, any numbering, dangling, repeated and
self dependencies, cycles, unknown arms, odd text, inputs of any shape), /plan/specialize,
/replan and /plan/expand answer it with a plan or a 4xx in the one error shape: never a 5xx.
The model is off, so every value comes from the rules, whose output must pass our own
schemas."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner_arm.api.app import create_app
from support.app import make_settings

with warnings.catch_warnings():
    # A sync client with the lifespan running, for hypothesis's sync tests; starlette warns
    # on import that it will move it to another HTTP library, the calls stay the same.
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

ARMS = ["retriever", "coder", "executor", "judge", "guardian", "planner", "translator"]
STATUSES = ["completed", "running", "failed", "pending", "skipped"]
TEXT = st.text(min_size=1, max_size=60) | st.sampled_from(
    ["Run `pytest -q`", "Check {{steps.1.output}}", "{{", "Patch auth/login.py", " "]
)
INPUTS = st.none() | st.dictionaries(
    st.sampled_from(["query", "command", "criteria", "inputs_from", "instruction", "x"]),
    st.none() | st.integers(-3, 3) | TEXT | st.lists(st.integers(-2, 400), max_size=70),
    max_size=4,
)


@st.composite
def plans(draw: st.DrawFn) -> dict[str, Any]:
    """A /plan answer as a caller may send it back: only the response model's rules hold."""
    size = draw(st.integers(1, 8) | st.integers(9, 260))
    numbers = draw(
        st.just(list(range(1, size + 1)))
        | st.lists(st.integers(1, size + 5), min_size=size, max_size=size)
    )
    deps_of = st.lists(st.integers(-1, size + 5), max_size=4) | st.just(list(range(1, size)))
    small = size <= 8
    steps = [
        {
            "step": number,
            "action": draw(TEXT) if small else f"Do part {number}",
            "required_arm": draw(st.sampled_from(ARMS)),
            "acceptance_criteria": draw(st.lists(TEXT, min_size=1, max_size=3))
            if small
            else ["Done"],
            "depends_on": draw(deps_of) if small or number == numbers[-1] else [number - 1],
            "estimated_cost_tier": draw(st.integers(1, 5)),
            "estimated_duration_seconds": draw(st.integers(1, 4_000)),
            "input": draw(INPUTS) if small else None,
        }
        for number in numbers
    ]
    return {
        "plan": steps, "rationale": "sent back", "confidence": 0.5,
        "total_estimated_duration": 10, "complexity_score": 0.5, "plan_id": "p-sent",
        "request_id": "r", "parallel_stages": [], "critical_path_duration": 10,
        "estimated_cost": {"llm_usd": 0, "prompt_tokens": 0, "completion_tokens": 0},
        "metadata": {"source": "fallback", "model": None, "attempts": 0, "repairs": [],
                     "warnings": [], "latency_ms": 1, "prompt_version": "v"},
        "version": draw(st.integers(1, 5)),
        "parent_plan_id": draw(st.none() | st.just("p-parent")),
        "replan_count": draw(st.integers(0, 2)),
        "strategy": draw(st.sampled_from(["flat", "hierarchical", "iterative"])),
        "complete": draw(st.booleans()),
    }  # fmt: skip


def some_step(draw: st.DrawFn, plan: dict[str, Any]) -> int:
    numbers = [step["step"] for step in plan["plan"]]
    return draw(st.sampled_from(numbers) | st.integers(1, max(numbers) + 2))


@st.composite
def specialize_bodies(draw: st.DrawFn) -> dict[str, Any]:
    plan = draw(plans())
    return {"previous": plan, "step": some_step(draw, plan)}


@st.composite
def replan_bodies(draw: st.DrawFn) -> dict[str, Any]:
    plan = draw(plans())
    numbers = sorted({step["step"] for step in plan["plan"]})
    states = draw(
        st.dictionaries(st.sampled_from([str(n) for n in numbers]), st.sampled_from(STATUSES))
    )
    return {
        "goal": "Fix authentication bug and add tests",
        "previous": plan,
        "step_states": states,
        "replan_steps": draw(st.lists(st.sampled_from(numbers), max_size=2)),
        "reason": draw(st.none() | st.just("requirements changed")),
        "specialize": draw(st.booleans()),
        "strategy": draw(st.sampled_from(["flat", "iterative"])),
    }


@st.composite
def expand_bodies(draw: st.DrawFn) -> dict[str, Any]:
    plan = draw(plans())
    return {
        "goal": "Fix authentication bug and add tests",
        "previous": plan,
        "step": some_step(draw, plan),
        "specialize": draw(st.booleans()),
    }


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    settings = make_settings(
        llm=False, server={"max_body_bytes": 2 * 1024 * 1024}, expansion={"max_plan_steps": 500}
    )
    with TestClient(create_app(settings), raise_server_exceptions=False) as served:
        yield served


def no_server_error(client: TestClient, path: str, body: dict[str, Any]) -> None:
    response = client.post(path, json=body)
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        assert set(response.json()) >= {"error", "detail", "request_id"}


EXAMPLES = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.function_scoped_fixture],
)  # fmt: skip


@EXAMPLES
@given(body=specialize_bodies())
def test_specialize_never_answers_5xx(client: TestClient, body: dict[str, Any]) -> None:
    no_server_error(client, "/plan/specialize", body)


@EXAMPLES
@given(body=replan_bodies())
def test_replan_never_answers_5xx(client: TestClient, body: dict[str, Any]) -> None:
    no_server_error(client, "/replan", body)


@EXAMPLES
@given(body=expand_bodies())
def test_expand_never_answers_5xx(client: TestClient, body: dict[str, Any]) -> None:
    no_server_error(client, "/plan/expand", body)
