"""Both clients against the real service process over loopback HTTP (the stub model behind
it): an orchestrator's loop, the stream, each error class, and the API key."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from planner_arm.client import (
    AsyncPlannerClient,
    InvalidRequest,
    PlannerClient,
    PlanNotFound,
    TransportError,
    Unauthorized,
)
from support.invariants import assert_valid_plan
from support.service import free_port, serving
from support.stub_model import StubLLM

pytestmark = pytest.mark.slow

GOAL = "Fix authentication bug and add tests"
KEY = "key-one-0123456789"


@pytest.fixture
def url(stub: StubLLM) -> Iterator[str]:
    for http in serving({"OPENAI_BASE_URL": stub.base_url}):
        yield str(http.base_url)


def test_an_orchestrators_loop_with_the_sync_client(url: str, stub: StubLLM) -> None:
    with PlannerClient(url) as client:
        assert client.health().status == "healthy"
        assert client.capabilities().timeout_seconds > 0
        plan = client.plan(GOAL, ["No schema change"], idempotency_key="loop-1")
        repeat = client.plan(GOAL, ["No schema change"], idempotency_key="loop-1")
        events = list(client.stream(GOAL, use_cache=False))
        check = client.validate(plan.plan)
        replanned = client.replan(
            GOAL, plan_id=plan.plan_id, step_states={1: "completed", "2": "failed"}
        )
        fetched = client.get(replanned.plan_id)
    assert plan.metadata.source == "llm"
    assert_valid_plan(plan.model_dump(mode="json"))
    assert repeat.plan_id == plan.plan_id
    assert [events[0].event, events[-1].event] == ["plan.started", "plan"]
    assert events[-1].plan is not None
    assert_valid_plan(events[-1].plan.model_dump(mode="json"))
    assert check.valid is True
    assert replanned.parent_plan_id == plan.plan_id
    assert fetched == replanned


def test_errors_over_loopback(url: str) -> None:
    with PlannerClient(url) as client:
        plan = client.plan(GOAL)
        with pytest.raises(PlanNotFound) as missing:
            client.get("no-such-plan")
        with pytest.raises(InvalidRequest) as unknown:
            client.replan(GOAL, plan_id=plan.plan_id, step_states={9: "failed"})
    assert (missing.value.status, missing.value.code) == (404, "plan_not_found")
    assert missing.value.request_id
    assert (unknown.value.status, unknown.value.code) == (422, "unknown_step")
    closed = f"http://127.0.0.1:{free_port()}"
    with PlannerClient(closed, retries=0) as client, pytest.raises(TransportError):
        client.health()


async def test_the_async_client_over_loopback(url: str) -> None:
    async with AsyncPlannerClient(url) as client:
        plan = await client.plan(GOAL)
        events = [event async for event in client.stream(GOAL, use_cache=False)]
        expanded = await client.expand(GOAL, step=2, plan_id=plan.plan_id)
        with pytest.raises(PlanNotFound):
            await client.specialize(2, plan_id="no-such-plan")
    final = events[-1].plan
    assert final is not None
    steps = [event.step for event in events if event.event == "step"]
    assert steps[-len(final.plan) :] == final.plan  # the steps after the last reset
    assert expanded.version > plan.version


def test_the_api_key_over_loopback(stub: StubLLM) -> None:
    env = {"OPENAI_BASE_URL": stub.base_url, "PLANNER_API_KEYS": KEY}
    for http in serving(env):
        with PlannerClient(str(http.base_url)) as anonymous, pytest.raises(Unauthorized):
            anonymous.plan(GOAL)
        with PlannerClient(str(http.base_url), api_key=KEY) as keyed:
            assert keyed.plan(GOAL).metadata.source == "llm"


def test_a_client_can_bring_its_own_httpx_client(url: str) -> None:
    with httpx.Client(timeout=5) as http:
        with PlannerClient(url, http_client=http) as client:
            assert client.health().status == "healthy"
        assert not http.is_closed  # the caller's client is left open
