"""Checks every answer of the service must pass: plan invariants, the error shape, metrics.

`assert_valid_plan`: every promise a 200 response from POST /plan makes, checked on its JSON.
`assert_error_body`: the one error shape every error answer of the API has,
`{"error": code, "detail": one sentence, "request_id": id}`, plus `errors` (each problem:
`code`, `message`, maybe `loc` and `step`) when a request or a plan had problems to list, and
`figures` when no plan fits a budget.
`sample`: one value of the service's /metrics text, read with the Prometheus client's own
parser, so the tests hold the real text format too.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, TypeGuard

import httpx
from prometheus_client.parser import text_string_to_metric_families

DEFAULT_ARMS = ("planner", "retriever", "coder", "executor", "judge", "guardian")
SOURCES = ("llm", "fallback", "cache", "validated")


def _is_int(value: object) -> TypeGuard[int]:
    return type(value) is int  # bool is an int subclass, and never a valid count here


def _is_number(value: object) -> TypeGuard[float]:
    return type(value) in (int, float)


def _is_str_list(value: object) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _nonempty_str(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and bool(value.strip())


def assert_valid_plan(
    body: Mapping[str, Any],
    *,
    min_steps: int = 3,
    max_steps: int = 7,
    arm_ids: Collection[str] = DEFAULT_ARMS,
    require_validation_step: bool = True,
    consecutive: bool = True,
    require_dependency_check: bool = True,
    iterative_done: Collection[int] | None = None,
    stage_steps: int = 3,
    numbers_rise: bool = True,
    expansions: int = 0,
) -> None:
    """Fail with a message naming the first broken invariant of a plan response body.

    `consecutive=False` for a replan's answer: its numbers rise in list order but may skip,
    and `max_steps` bounds only the steps not yet done (the caller checks those).
    `numbers_rise=False` for an expanded plan (/plan/expand): its list is in dependency order
    but the new steps' numbers are above the kept ones'; `expansions`: how many of the
    versions in its chain were expansions, which do not count as replans.

    `iterative_done`: the answer is an iterative one, and these are the steps reported done
    (none for /plan). While it is not `complete`, it holds those steps and the next stage
    only: 1..`stage_steps` steps that can all start now, with no final check yet; once
    `complete`, it is checked as a whole plan."""
    plan = body.get("plan")
    assert isinstance(plan, list), f"plan is not a list: {plan!r}"
    n = len(plan)
    partial = iterative_done is not None and _assert_stage(body, iterative_done, stage_steps)
    # The final check is outside the bound: max_steps counts the steps of the work.
    most = max_steps + require_validation_step if consecutive else max(n, max_steps)
    if not partial:
        assert min_steps <= n <= most, f"plan has {n} steps; expected {min_steps}..{max_steps}"

    durations, deps_of = _assert_steps(plan, arm_ids, consecutive, numbers_rise)
    if require_validation_step and not partial:
        last_arm = plan[-1].get("required_arm") if plan else None
        assert last_arm == "judge", f"last step's arm is {last_arm!r}, not 'judge'"
        if require_dependency_check:
            _assert_final_check_comes_last(deps_of, plan[-1]["step"])

    _assert_summary(body, durations)
    _assert_stages(body.get("parallel_stages"), deps_of)
    _assert_critical_path(body.get("critical_path_duration"), durations, deps_of)
    _assert_estimated_cost(body.get("estimated_cost"))
    _assert_metadata(body.get("metadata"))
    for name in ("plan_id", "request_id"):
        assert _nonempty_str(body.get(name)), f"{name} {body.get(name)!r} is empty"
    _assert_lineage(body, expansions)


def _assert_steps(
    plan: list[Any], arm_ids: Collection[str], consecutive: bool, numbers_rise: bool
) -> tuple[dict[int, int], dict[int, list[int]]]:
    """Each step in list order; returns every step's duration and dependencies by number."""
    durations: dict[int, int] = {}
    deps_of: dict[int, list[int]] = {}
    for index, step in enumerate(plan, 1):
        assert isinstance(step, Mapping), f"plan[{index - 1}] is not an object: {step!r}"
        number = step.get("step")
        assert _is_int(number), f"step at {index} is numbered {number!r}"
        previous = plan[index - 2]["step"] if index > 1 else 0
        in_order = number == index if consecutive else number > previous
        assert in_order or not numbers_rise, f"step at {index} is numbered {number!r}"
        assert number not in durations, f"step {number} is listed twice"
        where = f"step {number}"
        _assert_step_task(step, where, arm_ids)
        deps_of[number] = _assert_dependencies(step.get("depends_on"), where, durations)
        durations[number] = _assert_estimates(step, where)
    return durations, deps_of


def _assert_step_task(step: Mapping[str, Any], where: str, arm_ids: Collection[str]) -> None:
    """What the step is: its action, the arm that does it and how to tell it is done."""
    assert _nonempty_str(step.get("action")), f"{where}: empty action {step.get('action')!r}"
    arm = step.get("required_arm")
    assert arm in arm_ids, f"{where}: required_arm {arm!r} not in {sorted(arm_ids)}"
    criteria = step.get("acceptance_criteria")
    assert _is_str_list(criteria), f"{where}: acceptance_criteria {criteria!r}"
    assert any(text.strip() for text in criteria), f"{where}: no non-empty criterion"


def _assert_dependencies(deps: object, where: str, earlier: Collection[int]) -> list[int]:
    """depends_on: distinct numbers of steps listed before this one."""
    assert isinstance(deps, list), f"{where}: depends_on {deps!r} is not a list"
    assert all(_is_int(dep) for dep in deps), f"{where}: depends_on {deps!r} holds a non-int"
    assert len(set(deps)) == len(deps), f"{where}: repeated dependency in {deps}"
    forward = [dep for dep in deps if dep not in earlier]
    assert not forward, f"{where}: depends on a non-earlier step {forward}"
    return deps


def _assert_estimates(step: Mapping[str, Any], where: str) -> int:
    """A cost tier of 1-5 and a duration of at least a second; returns the duration."""
    cost = step.get("estimated_cost_tier")
    assert _is_int(cost), f"{where}: cost tier {cost!r} is not an int"
    assert 1 <= cost <= 5, f"{where}: cost tier {cost!r} is not 1-5"
    duration = step.get("estimated_duration_seconds")
    assert _is_int(duration), f"{where}: duration {duration!r} is not an int"
    assert duration >= 1, f"{where}: duration {duration!r} is not >= 1"
    return duration


def _assert_summary(body: Mapping[str, Any], durations: Mapping[int, int]) -> None:
    """The total duration is the steps' sum; confidence and complexity in [0, 1]; a rationale."""
    total = body.get("total_estimated_duration")
    assert _is_int(total), f"total_estimated_duration {total!r} is not an int"
    assert total == sum(durations.values()), (
        f"total_estimated_duration {total!r} != sum of durations {sum(durations.values())}"
    )
    for name in ("confidence", "complexity_score"):
        value = body.get(name)
        assert _is_number(value), f"{name} {value!r} is not a number"
        assert 0.0 <= value <= 1.0, f"{name} {value!r} is not in [0, 1]"
    assert _nonempty_str(body.get("rationale")), f"rationale {body.get('rationale')!r} is empty"


def _assert_estimated_cost(cost: object) -> None:
    """Dollars and token counts, none negative; the token counts whole numbers."""
    assert isinstance(cost, Mapping), f"estimated_cost {cost!r} is not an object"
    for name in ("llm_usd", "prompt_tokens", "completion_tokens"):
        value = cost.get(name)
        assert _is_number(value), f"estimated_cost.{name} {value!r} is not a number"
        assert value >= 0, f"estimated_cost.{name} {value!r} is negative"
    for name in ("prompt_tokens", "completion_tokens"):
        assert _is_int(cost[name]), f"estimated_cost.{name} {cost[name]!r} is not an int"


def _assert_metadata(meta: object) -> None:
    """Where the plan came from, how many model calls it took, its repairs and warnings."""
    assert isinstance(meta, Mapping), f"metadata {meta!r} is not an object"
    assert meta.get("source") in SOURCES, f"metadata.source {meta.get('source')!r}"
    attempts = meta.get("attempts")
    assert _is_int(attempts), f"metadata.attempts {attempts!r} is not an int"
    assert attempts >= 0, f"metadata.attempts {attempts!r} is negative"
    for name in ("repairs", "warnings"):
        _assert_notes(meta.get(name), f"metadata.{name}")


def _assert_notes(notes: object, where: str) -> None:
    """A list of {"code", "detail"} notes, each with a code."""
    assert isinstance(notes, list), f"{where} {notes!r} is not a list"
    for note in notes:
        assert isinstance(note, Mapping), f"{where}: {note!r} is not an object"
        assert set(note) == {"code", "detail"}, f"{where}: {note!r}"
        assert _nonempty_str(note["code"]), f"{where}: code of {note!r}"
        assert isinstance(note["detail"], str), f"{where}: detail of {note!r}"


def _assert_lineage(body: Mapping[str, Any], expansions: int = 0) -> None:
    """version, parent_plan_id, replan_count and diff agree: /plan answers are version 1."""
    version, count, parent = (
        body.get("version"),
        body.get("replan_count"),
        body.get("parent_plan_id"),
    )
    assert _is_int(version), f"version {version!r} is not an int"
    assert version >= 1, f"version {version!r} is below 1"
    assert _is_int(count), f"replan_count {count!r} is not an int"
    if body.get("strategy") == "iterative":  # rounds that only report progress do not count
        assert 0 <= count <= version - 1, f"replan_count {count!r}, version {version}"
    else:
        assert count == version - 1 - expansions, f"replan_count {count!r}, version {version}"
    if version == 1:
        assert parent is None, f"parent_plan_id {parent!r} on a first plan"
        assert body.get("diff") is None, f"diff {body.get('diff')!r} on a first plan"
    else:
        assert _nonempty_str(parent), f"parent_plan_id {parent!r} on a replan"
        diff = body.get("diff")
        assert isinstance(diff, Mapping), f"diff {diff!r} on a replan"
        numbers = {step["step"] for step in body["plan"]}
        assert set(diff["kept"]) | set(diff["added"]) == numbers, f"diff {diff} vs {numbers}"
        assert not set(diff["kept"]) & set(diff["added"]), f"diff {diff} keeps and adds a step"


def _assert_stage(body: Mapping[str, Any], done: Collection[int], most: int) -> bool:
    """An iterative answer: True while it holds only the next stage (`complete` false)."""
    assert body.get("strategy") == "iterative", f"strategy {body.get('strategy')!r}"
    complete = body.get("complete")
    assert isinstance(complete, bool), f"complete {complete!r} is not a bool"
    if complete:
        return False
    numbers = {step.get("step") for step in body["plan"] if isinstance(step, Mapping)}
    assert set(done) <= numbers, f"done steps {sorted(done)} are not all in {sorted(numbers)}"
    stage = [step for step in body["plan"] if step.get("step") not in done]
    assert 1 <= len(stage) <= most, f"the next stage has {len(stage)} steps, not 1..{most}"
    for step in stage:
        waiting = [dep for dep in step.get("depends_on", []) if dep not in done]
        assert not waiting, f"step {step.get('step')} cannot start now: it waits for {waiting}"
    return True


def _assert_final_check_comes_last(deps_of: Mapping[int, list[int]], last: int) -> None:
    """The last step depends, directly or through others, on every other step."""
    reached: set[int] = set()
    todo = list(deps_of.get(last, []))
    while todo:
        dep = todo.pop()
        if dep not in reached:
            reached.add(dep)
            todo.extend(deps_of[dep])
    unreached = sorted(set(deps_of) - reached - {last})
    assert not unreached, f"the final check (step {last}) does not depend on steps {unreached}"


def _assert_stages(stages: object, deps_of: Mapping[int, list[int]]) -> None:
    """Every step in exactly one stage, each stage after its dependencies' stages, and at the
    earliest stage its dependencies allow (the longest chain from a root)."""
    assert isinstance(stages, list), f"parallel_stages {stages!r} is not a list"
    stage_of: dict[int, int] = {}
    for index, stage in enumerate(stages):
        assert isinstance(stage, list), f"parallel_stages[{index}] {stage!r} is not a list"
        assert stage, f"parallel_stages[{index}] is empty"
        assert stage == sorted(stage), f"parallel_stages[{index}] {stage} is not sorted"
        for number in stage:
            assert number not in stage_of, f"step {number} is in more than one stage"
            stage_of[number] = index
    assert sorted(stage_of) == sorted(deps_of), (
        f"parallel_stages covers {sorted(stage_of)}, the plan has {sorted(deps_of)}"
    )
    for number, deps in deps_of.items():
        earliest = 1 + max((stage_of[dep] for dep in deps), default=-1)
        assert stage_of[number] == earliest, (
            f"step {number} is in stage {stage_of[number]}; its dependencies {deps} put it "
            f"in stage {earliest}"
        )


def _assert_critical_path(
    value: object, durations: Mapping[int, int], deps_of: Mapping[int, list[int]]
) -> None:
    assert isinstance(value, int), f"critical_path_duration {value!r} is not an int"
    assert _is_int(value), f"critical_path_duration {value!r} is not an int"
    total = sum(durations.values())
    longest_step = max(durations.values(), default=0)
    assert longest_step <= value <= total, (
        f"critical_path_duration {value} is outside [{longest_step}, {total}]"
    )
    finish: dict[int, int] = {}
    for number in durations:  # in list order: dependencies are listed earlier, checked above
        start = max((finish[dep] for dep in deps_of[number]), default=0)
        finish[number] = start + durations[number]
    expected = max(finish.values(), default=0)
    assert value == expected, f"critical_path_duration {value}; the longest chain is {expected}"


def assert_error_body(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """Asserts `response` is an error answer with `status` and `code` in the one error shape;
    returns its body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body: dict[str, Any] = response.json()
    assert set(body) - {"errors", "figures"} == {"error", "detail", "request_id"}, body
    assert body["error"] == code
    assert isinstance(body["detail"], str), body
    assert body["detail"].strip(), body
    assert body["request_id"]
    assert response.headers["x-request-id"] == body["request_id"]
    for problem in body.get("errors", []):
        _assert_problem(problem)
    assert "Traceback" not in response.text
    return body


def _assert_problem(problem: Mapping[str, Any]) -> None:
    """One entry of `errors`: a code and a message, maybe where (`loc`) and which `step`."""
    assert {"code", "message"} <= set(problem) <= {"code", "message", "loc", "step"}, problem
    assert isinstance(problem["code"], str)
    assert problem["code"]
    assert isinstance(problem["message"], str)
    assert problem["message"]


def sample(metrics_text: str, name: str, **labels: str) -> float:
    """The value of one sample; fails when the text has no such sample."""
    for family in text_string_to_metric_families(metrics_text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    raise AssertionError(f"no sample {name} {labels}")
