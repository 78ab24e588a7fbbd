"""GuardedLLM: a call that runs out its own time budget counts against its model, one the
request's deadline cut off (or whose caller left) does not, so one caller's slow requests
never close the model for another; the call slots are shared fairly among principals; and
the circuit gauge shows what /health shows."""

from __future__ import annotations

import asyncio

import httpx
import pytest
import respx
from prometheus_client.parser import text_string_to_metric_families

from planner_arm.clock import Deadline
from planner_arm.errors import LLMTransientError
from planner_arm.llm.client import LLMClient
from planner_arm.llm.guarded import GuardedLLM
from planner_arm.llm.usage import Usage
from planner_arm.metrics import PlannerMetrics
from support.app import FakeClock, answer, good_plan, make_settings

MODEL = "gpt-3.5-turbo"
MESSAGES = [{"role": "user", "content": "plan"}]


def sample(metrics: PlannerMetrics, name: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(metrics.render().decode()):
        for found in family.samples:
            if found.name == name and all(found.labels.get(k) == v for k, v in labels.items()):
                return float(found.value)
    return None


def guarded(
    clock: FakeClock, *, call_timeout: float = 30, keys: bool = True, **circuit: object
) -> tuple[GuardedLLM, PlannerMetrics]:
    """A guard over the mocked model; `keys`: API keys configured, so callers are principals
    of their own (else every caller is the one anonymous principal)."""
    settings = make_settings(
        circuit={"consecutive_failures": 1, **circuit},
        model={"call_timeout_seconds": call_timeout},
        auth={"api_keys": ["key-a", "key-b"]} if keys else {},
    )
    metrics = PlannerMetrics("t", "t")
    llm = LLMClient(settings, httpx.AsyncClient())
    return GuardedLLM(llm, settings, metrics, clock.as_clock()), metrics


async def hung_call(
    chat_route: respx.Route,
    fake_clock: FakeClock,
    guard: GuardedLLM,
    *,
    passes: float,
    owner: str = "a",
) -> None:
    """A call the model never answers, cancelled (as the request ends) after `passes` s."""
    arrived = asyncio.Event()

    async def hang(request: httpx.Request) -> httpx.Response:
        fake_clock.time += passes
        arrived.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    chat_route.side_effect = hang
    deadline = Deadline(10, fake_clock.as_clock())
    call = asyncio.create_task(
        guard.call(MODEL, MESSAGES, deadline, Usage(owner), seconds=9.9, min_call_seconds=0.05)
    )
    await arrived.wait()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call


async def test_a_call_cut_off_by_the_deadline_is_no_verdict_on_the_model(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    guard, metrics = guarded(fake_clock)
    await hung_call(chat_route, fake_clock, guard, passes=10)
    assert sample(metrics, "planner_llm_calls_total", model=MODEL, outcome="deadline") == 1
    assert sample(metrics, "planner_llm_calls_total", model=MODEL, outcome="timeout") is None
    assert guard.circuits() == {MODEL: "closed"}


async def test_a_model_cut_off_for_two_callers_is_slow_for_more_than_one(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    guard, metrics = guarded(fake_clock, consecutive_failures=2)
    await hung_call(chat_route, fake_clock, guard, passes=10, owner="a")
    await hung_call(chat_route, fake_clock, guard, passes=10, owner="a")
    assert guard.circuits() == {MODEL: "closed"}  # one caller's slow requests: no verdict
    await hung_call(chat_route, fake_clock, guard, passes=10, owner="b")
    await hung_call(chat_route, fake_clock, guard, passes=10, owner="a")
    assert sample(metrics, "planner_llm_calls_total", model=MODEL, outcome="timeout") == 2
    assert guard.circuits() == {MODEL: "open"}


async def test_with_one_principal_a_hanging_model_still_opens_its_circuit(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    guard, metrics = guarded(fake_clock, keys=False)
    await hung_call(chat_route, fake_clock, guard, passes=10)
    assert sample(metrics, "planner_llm_calls_total", model=MODEL, outcome="timeout") == 1
    assert guard.circuits() == {MODEL: "open"}


async def timed_out(guard: GuardedLLM, clock: FakeClock, owner: str, seconds: float) -> None:
    """One call of `seconds` whose model gave no answer in its time."""
    deadline = Deadline(10, clock.as_clock())
    with pytest.raises(LLMTransientError) as failed:
        await guard.call(
            MODEL, MESSAGES, deadline, Usage(owner), seconds=seconds, min_call_seconds=0.05
        )
    assert failed.value.code == "timeout"


async def test_deadline_cut_calls_of_one_caller_leave_the_model_to_another(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    guard, metrics = guarded(fake_clock, consecutive_failures=5)
    chat_route.side_effect = httpx.ReadTimeout("no answer")
    for _ in range(6):  # each had 2 s the request's deadline left it, less than its own 30 s
        await timed_out(guard, fake_clock, "slow-tenant", seconds=2)
    assert guard.circuits() == {MODEL: "closed"}
    assert sample(metrics, "planner_llm_calls_total", model=MODEL, outcome="deadline") == 6
    chat_route.side_effect = None
    chat_route.return_value = answer(good_plan())
    deadline = Deadline(10, fake_clock.as_clock())
    completion = await guard.call(
        MODEL, MESSAGES, deadline, Usage("other"), seconds=2, min_call_seconds=0.05
    )
    assert completion.content


async def test_a_call_that_runs_out_its_own_budget_counts_against_the_model(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    guard, metrics = guarded(fake_clock, call_timeout=2)
    chat_route.side_effect = httpx.ReadTimeout("no answer")
    await timed_out(
        guard, fake_clock, "a", seconds=2
    )  # its whole own budget, well within the deadline
    assert sample(metrics, "planner_llm_calls_total", model=MODEL, outcome="timeout") == 1
    assert guard.circuits() == {MODEL: "open"}


async def test_a_caller_that_goes_away_is_no_verdict_on_the_model(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    guard, metrics = guarded(fake_clock)
    await hung_call(chat_route, fake_clock, guard, passes=1)  # the deadline has 9 s left
    assert sample(metrics, "planner_llm_calls_total", model=MODEL, outcome="timeout") is None
    assert guard.circuits() == {MODEL: "closed"}


async def test_the_circuit_gauge_shows_what_health_shows(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    guard, metrics = guarded(fake_clock, cooldown_seconds=30)
    chat_route.return_value = httpx.Response(503, json={})
    deadline = Deadline(10, fake_clock.as_clock())
    with pytest.raises(LLMTransientError):
        await guard.call(MODEL, MESSAGES, deadline, Usage("a"), seconds=5, min_call_seconds=0.05)
    assert guard.circuits() == {MODEL: "open"}
    assert sample(metrics, "planner_llm_circuit_state", model=MODEL) == 2
    fake_clock.time += 30  # cooled down: the next call would be the probe
    assert guard.circuits() == {MODEL: "half_open"}
    assert sample(metrics, "planner_llm_circuit_state", model=MODEL) == 1
