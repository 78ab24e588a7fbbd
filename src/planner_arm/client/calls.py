"""Each endpoint's call as data: method, path and JSON body, built from a method's arguments.

Both clients send the same calls; only how they wait differs. The bodies are left to the
service to validate (its limits come from its config, which a client does not know): a bad
one comes back as `InvalidRequest` listing each problem.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from pydantic import BaseModel

from planner_arm.plan.endpoint_schemas import StepState
from planner_arm.plan.schemas import Budget, PlanResponse, PlanStep, Strategy

# A step's state: the model, its JSON, or just its status ("completed", "failed", ...).
StepStateLike = StepState | Mapping[str, Any] | str
PlanLike = PlanResponse | Mapping[str, Any]


@dataclass(frozen=True)
class Call:
    """One HTTP call of the API. A POST carries an Idempotency-Key (`idempotency_key`, or one
    made for the call and kept across its retries)."""

    method: str
    path: str
    body: dict[str, Any] | None = None
    idempotency_key: str | None = None


def _json(value: BaseModel | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    return dict(value)


def plan_fields(
    goal: str,
    constraints: Sequence[str] | None = None,
    context: Mapping[str, Any] | None = None,
    *,
    strategy: Strategy | None = None,
    max_depth: int | None = None,
    budget: Budget | Mapping[str, Any] | None = None,
    specialize: bool = False,
    use_cache: bool = True,
    request_id: str | None = None,
) -> dict[str, Any]:
    """The /plan body; the fields left out take the service's defaults."""
    body: dict[str, Any] = {"goal": goal}
    if constraints is not None:
        body["constraints"] = list(constraints)
    if context is not None:
        body["context"] = dict(context)
    if strategy is not None:
        body["strategy"] = strategy
    if max_depth is not None:
        body["max_depth"] = max_depth
    if budget is not None:
        body["budget"] = _json(budget)
    if specialize:
        body["specialize"] = True
    if not use_cache:
        body["options"] = {"use_cache": False}
    if request_id is not None:
        body["request_id"] = request_id
    return body


def _one_plan(previous: PlanLike | None, plan_id: str | None) -> dict[str, Any]:
    if (previous is None) == (plan_id is None):
        raise TypeError("give exactly one of previous and plan_id")
    if previous is None:
        return {"plan_id": plan_id}
    if isinstance(previous, PlanResponse):
        return {"previous": previous.model_dump(mode="json")}
    return {"previous": dict(previous)}


def step_states_json(
    states: Mapping[int, StepStateLike] | Mapping[str, StepStateLike] | None,
) -> dict[str, Any]:
    """`step_states` keyed by step number as text, whether given as int or str keys; a bare
    status is sent as it is (the API takes `{"1": "completed"}` too)."""
    out: dict[str, Any] = {}
    for step, state in (states or {}).items():
        out[str(step)] = state if isinstance(state, str) else _json(state)
    return out


def plan_call(body: dict[str, Any], idempotency_key: str | None) -> Call:
    return Call("POST", "/plan", body, idempotency_key)


def replan_call(
    body: dict[str, Any],
    *,
    previous: PlanLike | None,
    plan_id: str | None,
    step_states: Mapping[int, StepStateLike] | Mapping[str, StepStateLike] | None,
    replan_steps: Sequence[int] | None,
    reason: str | None,
    max_replans: int | None,
    idempotency_key: str | None,
) -> Call:
    body = {**body, **_one_plan(previous, plan_id)}
    if step_states:
        body["step_states"] = step_states_json(step_states)
    if replan_steps:
        body["replan_steps"] = list(replan_steps)
    if reason is not None:
        body["reason"] = reason
    if max_replans is not None:
        body["max_replans"] = max_replans
    return Call("POST", "/replan", body, idempotency_key)


def validate_call(steps: Sequence[PlanStep | Mapping[str, Any]], fix: bool) -> Call:
    return Call("POST", "/plan/validate", {"plan": [_json(step) for step in steps], "fix": fix})


def expand_call(
    body: dict[str, Any],
    *,
    step: int,
    previous: PlanLike | None,
    plan_id: str | None,
    idempotency_key: str | None,
) -> Call:
    body = {**body, **_one_plan(previous, plan_id), "step": step}
    return Call("POST", "/plan/expand", body, idempotency_key)


def specialize_call(
    step: int, *, previous: PlanLike | None, plan_id: str | None, goal: str | None
) -> Call:
    body: dict[str, Any] = {**_one_plan(previous, plan_id), "step": step}
    if goal is not None:
        body["goal"] = goal
    return Call("POST", "/plan/specialize", body)


def get_call(plan_id: str) -> Call:
    return Call("GET", f"/plan/{quote(plan_id, safe='')}")
