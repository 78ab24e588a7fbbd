"""AsyncPlannerClient against the real app in process (ASGI transport, lifespan running, no
model: every answer is the rule-based planner's): each endpoint as a typed answer, the
stream, each error class with the service's code and request id, and a retried POST that
the service plans once."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from planner_arm.api.app import create_app
from planner_arm.client import (
    AsyncPlannerClient,
    BudgetExceeded,
    Conflict,
    InvalidRequest,
    PlanNotFound,
    PlanResponse,
    StepState,
    TransportError,
    Unauthorized,
)
from planner_arm.config import Settings
from support.app import make_settings, with_lifespan
from support.invariants import assert_valid_plan

GOAL = "Fix authentication bug and add tests"
BASE = "http://localhost"
KEY = "key-one-0123456789"


@asynccontextmanager
async def app_transport(settings: Settings) -> AsyncIterator[httpx.ASGITransport]:
    """The app with its lifespan running, as a transport a client can be given."""
    app = create_app(settings, http_client=httpx.AsyncClient(), rng=random.Random(7))
    async with with_lifespan(app) as served:
        yield httpx.ASGITransport(app=served, raise_app_exceptions=False)


@asynccontextmanager
async def planner(
    settings: Settings | None = None, **kwargs: Any
) -> AsyncIterator[AsyncPlannerClient]:
    async with (
        app_transport(settings or make_settings(llm=False)) as transport,
        AsyncPlannerClient(BASE, transport=transport, **kwargs) as client,
    ):
        yield client


def as_json(plan: PlanResponse) -> dict[str, Any]:
    return plan.model_dump(mode="json")


async def test_a_replan_without_a_goal_keeps_the_plans_own() -> None:
    async with planner() as client:
        plan = await client.plan(GOAL, ["No schema change"])
        by_id = await client.replan(plan_id=plan.plan_id, step_states={1: "completed", 2: "failed"})
        sent_back = await client.replan(previous=plan, step_states={1: "failed"})
    assert by_id.goal == GOAL
    assert by_id.parent_plan_id == plan.plan_id
    assert sent_back.goal == GOAL
    assert_valid_plan(as_json(by_id), consecutive=False)
    assert_valid_plan(as_json(sent_back), consecutive=False)


async def test_an_orchestrators_loop_gets_typed_answers() -> None:
    async with planner() as client:
        health = await client.health()
        capabilities = await client.capabilities()
        plan = await client.plan(GOAL, ["No schema change"], {"files": ["auth/login.py"]})
        again = await client.get(plan.plan_id)
        replanned = await client.replan(
            GOAL,
            plan_id=plan.plan_id,
            step_states={1: "completed", 2: StepState(status="failed", error="tests fail")},
            reason="the patch breaks the session tests",
        )
    assert health.status == "healthy"
    assert {arm.id for arm in capabilities.arms} >= {"coder", "judge"}
    assert_valid_plan(as_json(plan))
    assert again == plan
    assert_valid_plan(as_json(replanned), consecutive=False)
    assert replanned.parent_plan_id == plan.plan_id
    assert replanned.diff is not None
    assert 1 in replanned.diff.kept
    assert replanned.plan[0] == plan.plan[0]  # the finished step, exactly as it was


async def test_plan_options_reach_the_service() -> None:
    async with planner() as client:
        tree = await client.plan(GOAL, strategy="hierarchical", max_depth=2)
        specialized = await client.plan(GOAL, specialize=True, use_cache=False)
        keyed = await client.plan(GOAL, idempotency_key="same-key")
        repeated = await client.plan(GOAL, idempotency_key="same-key")
    assert tree.strategy == "hierarchical"
    assert tree.tree
    assert all(step.input for step in specialized.plan)
    assert repeated.plan_id == keyed.plan_id  # the stored answer, not a new plan


async def test_validate_expand_and_specialize() -> None:
    async with planner() as client:
        plan = await client.plan(GOAL)
        edited = [step.model_copy() for step in plan.plan]
        edited[1] = edited[1].model_copy(update={"depends_on": [2]})
        check = await client.validate(edited)
        fine = await client.validate([step.model_dump() for step in plan.plan])
        expanded = await client.expand(GOAL, step=2, plan_id=plan.plan_id)
        from_whole = await client.specialize(2, previous=plan)
        from_id = await client.specialize(2, plan_id=plan.plan_id)
    assert check.valid is False
    assert "self_dependency" in {problem.code for problem in check.errors}
    assert fine.valid is True
    assert fine.plan is not None
    assert expanded.plan_id != plan.plan_id
    assert any(step.parent == "2" for step in expanded.plan)
    assert from_whole.step == from_id.step == 2
    assert from_whole.input
    assert from_whole.source == "rule"


async def test_the_stream_ends_with_the_plan_its_steps_announced() -> None:
    async with planner() as client:
        events = [event async for event in client.stream(GOAL, ["No schema change"])]
    names = [event.event for event in events]
    assert names[0] == "plan.started"
    assert names[-1] == "plan"
    final = events[-1].plan
    assert final is not None
    assert_valid_plan(as_json(final))
    last_reset = max((i for i, name in enumerate(names) if name == "plan.reset"), default=0)
    streamed = [event.step for event in events[last_reset:] if event.event == "step"]
    assert streamed == final.plan
    assert events[0].data["plan_id"] == final.plan_id


async def test_each_refusal_is_its_error_class_with_the_service_code_and_request_id() -> None:
    async with planner() as client:
        plan = await client.plan(GOAL)
        with pytest.raises(PlanNotFound) as missing:
            await client.get("no-such-plan")
        with pytest.raises(InvalidRequest) as unknown:
            await client.replan(
                GOAL, plan_id=plan.plan_id, step_states={9: "failed"}, request_id="rq-7"
            )
        with pytest.raises(InvalidRequest) as blank:
            await client.plan("   ")
        with pytest.raises(BudgetExceeded) as budget:
            await client.plan(GOAL, budget={"max_steps": 2})
        with pytest.raises(BudgetExceeded):
            [event async for event in client.stream(GOAL, budget={"max_steps": 2})]
        with pytest.raises(Conflict) as limit:
            await client.replan(GOAL, plan_id=plan.plan_id, step_states={}, reason="x",
                                max_replans=0)  # fmt: skip
    assert (missing.value.status, missing.value.code) == (404, "plan_not_found")
    assert missing.value.request_id
    assert (unknown.value.status, unknown.value.code) == (422, "unknown_step")
    assert unknown.value.request_id == "rq-7"
    assert unknown.value.errors[0].step == 9
    assert blank.value.code == "invalid_request"
    assert blank.value.errors[0].loc == ["body", "goal"]
    assert budget.value.figures["max_steps"] == 2
    assert (limit.value.status, limit.value.code) == (409, "replan_limit")


async def test_the_api_key_is_sent_when_given() -> None:
    settings = make_settings(llm=False, auth={"api_keys": [KEY]})
    async with app_transport(settings) as transport:
        async with AsyncPlannerClient(BASE, transport=transport) as anonymous:
            with pytest.raises(Unauthorized) as refused:
                await anonymous.plan(GOAL)
        async with AsyncPlannerClient(BASE, api_key=KEY, transport=transport) as keyed:
            plan = await keyed.plan(GOAL)
    assert (refused.value.status, refused.value.code) == (401, "unauthorized")
    assert_valid_plan(as_json(plan))


class LoseFirstAnswer(httpx.AsyncBaseTransport):
    """Forwards every request to the app; the first answer is lost on its way back, as when
    a connection breaks after the service has planned."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.keys: list[str | None] = []
        self.lost: list[dict[str, Any]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.keys.append(request.headers.get("idempotency-key"))
        response = await self.inner.handle_async_request(request)
        if len(self.keys) == 1:
            self.lost.append(json.loads(await response.aread()))
            raise httpx.ReadError("connection reset by peer", request=request)
        return response


async def test_a_post_retried_after_a_lost_answer_is_planned_once() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async with app_transport(make_settings(llm=False)) as inner:
        lossy = LoseFirstAnswer(inner)
        async with AsyncPlannerClient(BASE, transport=lossy, sleep=sleep) as client:
            plan = await client.plan(GOAL, use_cache=False)
    assert len(lossy.keys) == 2
    assert lossy.keys[0] is not None
    assert lossy.keys[0] == lossy.keys[1]
    assert plan.plan_id == lossy.lost[0]["plan_id"]  # the first planning's answer, again
    assert waits == [0.5]


async def test_no_answer_at_all_is_a_transport_error() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    transport = httpx.MockTransport(refuse)
    async with AsyncPlannerClient(BASE, transport=transport, retries=0) as client:
        with pytest.raises(TransportError) as failed:
            await client.health()
    assert failed.value.status is None
    assert failed.value.code == "transport_error"


async def test_replan_takes_what_the_api_takes_a_reason_alone_or_bare_statuses() -> None:
    async with planner() as client:
        plan = await client.plan("Fix authentication bug and add tests")
        by_reason = await client.replan(
            "Fix authentication bug and add tests", plan_id=plan.plan_id, reason="scope changed"
        )
        by_status = await client.replan(
            "Fix authentication bug and add tests",
            plan_id=plan.plan_id,
            step_states={1: "completed", 2: "failed"},
        )
    assert by_reason.version == 2
    assert by_status.diff is not None
    assert 1 in by_status.diff.kept
    assert 2 in by_status.diff.removed
