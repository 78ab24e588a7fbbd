"""GuardedLLM: a call that runs out its own time budget counts against its model, one the
request's deadline cut off (or whose caller left) does not, however many callers' calls are
cut, so callers' slow requests never close the model for another; a model that answers
nobody is found by the hang check; and the circuit gauge shows what /health shows."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import httpx
import pytest
import respx
from prometheus_client.parser import text_string_to_metric_families

from planner_arm.clock import Deadline
from planner_arm.errors import LLMTransientError
from planner_arm.llm.client import LLMClient
from planner_arm.llm.guarded import HANG_CHECK, CallSkipped, GuardedLLM
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


def is_check(request: httpx.Request) -> bool:
    """Is this the guard's hang check rather than a caller's call?"""
    return bool(json.loads(request.content)["messages"] == HANG_CHECK)


# How the model meets the hang check: it answers, or it hangs too.
Check = Callable[[httpx.Request], httpx.Response]


def check_answered(request: httpx.Request) -> httpx.Response:
    return answer({"ok": True})


def checks_answered_calls_time_out(request: httpx.Request) -> httpx.Response:
    """A model that answers the hang check, and no caller's call within its time."""
    if is_check(request):
        return check_answered(request)
    raise httpx.ReadTimeout("no answer")


async def hung_call(
    chat_route: respx.Route,
    fake_clock: FakeClock,
    guard: GuardedLLM,
    *,
    passes: float,
    owner: str = "a",
    check: Check = check_answered,
) -> None:
    """A call the model never answers, cancelled (as the request ends) after `passes` s; the
    hang check, if any, gets `check`."""
    arrived = asyncio.Event()

    async def hang(request: httpx.Request) -> httpx.Response:
        if is_check(request):
            return check(request)
        fake_clock.time += passes
        arrived.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    chat_route.side_effect = hang
    deadline = Deadline(10, fake_clock.as_clock())
    call = asyncio.create_task(
        guard.call(MODEL, MESSAGES, deadline, Usage(owner), seconds=9.9, min_call_seconds=0.05)
    )
    arrival = asyncio.create_task(arrived.wait())
    await asyncio.wait({call, arrival}, return_when=asyncio.FIRST_COMPLETED)
    arrival.cancel()
    assert not call.done(), f"no call was made: {call.exception()!r}"
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


async def test_the_circuit_stays_closed_when_many_principals_calls_are_cut_by_their_deadlines(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    guard, metrics = guarded(fake_clock, consecutive_failures=2, min_calls=2)
    principals = [f"tenant-{n}" for n in range(12)]
    for owner in principals:  # cancelled as their requests' deadlines came
        await hung_call(chat_route, fake_clock, guard, passes=10, owner=owner)
    chat_route.side_effect = checks_answered_calls_time_out
    for owner in principals:  # their per-call time, cut to what the deadline left, ran out
        await timed_out(guard, fake_clock, owner, seconds=2)
    await guard.checks_ended()
    assert guard.circuits() == {MODEL: "closed"}
    assert sample(metrics, "planner_llm_calls_total", model=MODEL, outcome="deadline") == 24
    assert sample(metrics, "planner_llm_calls_total", model=MODEL, outcome="timeout") is None
    assert guard.last_failure(MODEL) is None
    chat_route.side_effect = None
    chat_route.return_value = answer(good_plan())
    deadline = Deadline(10, fake_clock.as_clock())
    completion = await guard.call(
        MODEL, MESSAGES, deadline, Usage("other"), seconds=2, min_call_seconds=0.05
    )
    assert completion.content
    await guard.aclose()


async def test_cut_calls_of_a_model_that_answers_others_start_no_hang_check(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    guard, metrics = guarded(fake_clock)
    arrived = asyncio.Event()
    checks = 0

    async def respond(request: httpx.Request) -> httpx.Response:
        nonlocal checks
        checks += is_check(request)
        if b"slow tenant" in request.content:
            arrived.set()
            await asyncio.Event().wait()
        return answer(good_plan())

    chat_route.side_effect = respond
    deadline = Deadline(10, fake_clock.as_clock())
    slow = [{"role": "user", "content": "plan for the slow tenant"}]
    cut = asyncio.create_task(
        guard.call(MODEL, slow, deadline, Usage("a"), seconds=9.9, min_call_seconds=0.05)
    )
    await arrived.wait()
    fake_clock.time += 1  # the other caller's answer comes while the slow call waits
    await guard.call(MODEL, MESSAGES, deadline, Usage("b"), seconds=2, min_call_seconds=0.05)
    fake_clock.time += 9  # then the slow call's deadline comes
    cut.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cut
    await guard.checks_ended()
    assert checks == 0
    assert sample(metrics, "planner_llm_hang_checks_total", model=MODEL, outcome="answered") is None
    assert guard.circuits() == {MODEL: "closed"}


def check_hangs(request: httpx.Request) -> httpx.Response:
    raise httpx.ReadTimeout("no answer")


@pytest.mark.parametrize(
    ("check", "code"),
    [(check_hangs, "timeout"), (lambda request: httpx.Response(503, json={}), "server_error")],
    ids=["hangs", "fails"],
)
async def test_a_model_that_answers_nobody_opens_its_circuit_through_the_hang_check(
    chat_route: respx.Route, fake_clock: FakeClock, check: Check, code: str
) -> None:
    guard, metrics = guarded(fake_clock, consecutive_failures=5)
    # One principal's one call, cut by its deadline: the model answered nobody meanwhile.
    await hung_call(chat_route, fake_clock, guard, passes=10, check=check)
    await guard.checks_ended()
    assert sample(metrics, "planner_llm_hang_checks_total", model=MODEL, outcome=code) == 1
    assert guard.circuits() == {MODEL: "open"}
    cause = guard.last_failure(MODEL)
    assert cause is not None
    assert (cause.code, cause.detail.startswith("hang check: ")) == (code, True)
    deadline = Deadline(10, fake_clock.as_clock())
    with pytest.raises(CallSkipped):
        await guard.call(MODEL, MESSAGES, deadline, Usage("b"), seconds=2, min_call_seconds=0.05)


async def test_after_the_cooldown_cut_probes_leave_the_verdict_to_the_hang_check(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    guard, metrics = guarded(fake_clock, consecutive_failures=1, cooldown_seconds=30)
    chat_route.return_value = httpx.Response(503, json={})
    deadline = Deadline(10, fake_clock.as_clock())
    with pytest.raises(LLMTransientError):  # the model was down: its circuit opened
        await guard.call(MODEL, MESSAGES, deadline, Usage("a"), seconds=5, min_call_seconds=0.05)
    assert guard.circuits() == {MODEL: "open"}
    fake_clock.time += 30  # it is back; slow callers take the probes and their deadlines cut them
    for owner in ("slow-1", "slow-2", "slow-3"):
        await hung_call(chat_route, fake_clock, guard, passes=10, owner=owner)
    await guard.checks_ended()
    assert guard.circuits() == {MODEL: "closed"}
    assert sample(metrics, "planner_llm_circuit_opened_total", model=MODEL) == 1  # not again
    chat_route.side_effect = None
    chat_route.return_value = answer(good_plan())
    deadline = Deadline(10, fake_clock.as_clock())
    completion = await guard.call(
        MODEL, MESSAGES, deadline, Usage("other"), seconds=2, min_call_seconds=0.05
    )
    assert completion.content


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
    chat_route.side_effect = checks_answered_calls_time_out
    for _ in range(6):  # each had 2 s the request's deadline left it, less than its own 30 s
        await timed_out(guard, fake_clock, "slow-tenant", seconds=2)
    await guard.aclose()
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


async def test_closing_stops_a_hang_check_under_way(
    chat_route: respx.Route, fake_clock: FakeClock
) -> None:
    guard, metrics = guarded(fake_clock)
    arrived, checked = asyncio.Event(), asyncio.Event()

    async def hang(request: httpx.Request) -> httpx.Response:
        if is_check(request):
            checked.set()
        else:
            fake_clock.time += 10
            arrived.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    chat_route.side_effect = hang
    deadline = Deadline(10, fake_clock.as_clock())
    call = asyncio.create_task(
        guard.call(MODEL, MESSAGES, deadline, Usage("a"), seconds=9.9, min_call_seconds=0.05)
    )
    await asyncio.wait_for(arrived.wait(), 5)
    call.cancel()  # the request's deadline came
    with pytest.raises(asyncio.CancelledError):
        await call
    await asyncio.wait_for(checked.wait(), 5)  # the check is under way, and hangs too
    await asyncio.wait_for(guard.aclose(), 5)  # the process closing does not wait on it
    await asyncio.wait_for(guard.checks_ended(), 5)
    assert sample(metrics, "planner_llm_hang_checks_total", model=MODEL, outcome="timeout") is None
    assert guard.circuits() == {MODEL: "closed"}
