from __future__ import annotations

from planner_arm.circuit import Circuit, CircuitState
from planner_arm.config import CircuitSettings
from planner_arm.llm.guarded import CircuitBreakers
from support.app import FakeClock


def circuit(clock: FakeClock, **settings: object) -> tuple[Circuit, list[str]]:
    changes: list[str] = []
    c = Circuit(
        "m",
        CircuitSettings(**settings),  # type: ignore[arg-type]
        clock.as_clock(),
        lambda model, state: changes.append(f"{model}:{state.value}"),
    )
    return c, changes


def test_opens_after_consecutive_failures(fake_clock: FakeClock) -> None:
    c, changes = circuit(fake_clock)
    for _ in range(4):
        assert c.allow()
        c.record_failure()
    assert c.state is CircuitState.CLOSED
    c.record_failure()
    assert c.state is CircuitState.OPEN
    assert not c.allow()
    assert changes == ["m:open"]


def test_a_success_resets_the_run(fake_clock: FakeClock) -> None:
    c, _ = circuit(fake_clock, min_calls=100)
    for _ in range(4):
        c.record_failure()
    c.record_success()
    for _ in range(4):
        c.record_failure()
    assert c.state is CircuitState.CLOSED


def test_opens_on_failure_rate_over_the_window(fake_clock: FakeClock) -> None:
    c, _ = circuit(fake_clock, consecutive_failures=100, min_calls=10, failure_rate=0.5)
    outcomes = [False, True, False, False, True, False, True, False, True]  # 5 of 9 failed
    for ok in outcomes:
        c.record_success() if ok else c.record_failure()
    assert c.state is CircuitState.CLOSED  # fewer than min_calls so far
    c.record_failure()  # 6 of 10
    assert c.state is CircuitState.OPEN


def test_old_outcomes_leave_the_window(fake_clock: FakeClock) -> None:
    c, _ = circuit(fake_clock, consecutive_failures=100, min_calls=10, window_seconds=60)
    for _ in range(6):
        c.record_failure()
        c.record_success()
    fake_clock.time += 61
    for _ in range(4):
        c.record_success()
    c.record_failure()
    assert c.state is CircuitState.CLOSED


def test_half_open_allows_one_probe_and_success_closes(fake_clock: FakeClock) -> None:
    c, changes = circuit(fake_clock, consecutive_failures=1, cooldown_seconds=30)
    c.record_failure()
    fake_clock.time += 29.9
    assert not c.allow()
    fake_clock.time += 0.2
    assert c.state is CircuitState.HALF_OPEN
    assert c.allow()  # the probe
    assert not c.allow()  # only one
    c.record_success()
    assert c.state is CircuitState.CLOSED
    assert c.allow()
    assert changes == ["m:open", "m:half_open", "m:closed"]


def test_failed_probe_reopens_for_another_cooldown(fake_clock: FakeClock) -> None:
    c, _ = circuit(fake_clock, consecutive_failures=1, cooldown_seconds=10)
    c.record_failure()
    fake_clock.time += 10
    assert c.allow()
    c.record_failure()
    assert c.state is CircuitState.OPEN
    fake_clock.time += 9
    assert not c.allow()


def test_retry_after_longer_than_the_cooldown_wins(fake_clock: FakeClock) -> None:
    c, _ = circuit(fake_clock, consecutive_failures=1, cooldown_seconds=5)
    c.record_failure(retry_after=40)
    fake_clock.time += 39
    assert not c.allow()
    fake_clock.time += 1
    assert c.allow()


def test_a_retry_after_closes_the_model_for_at_most_the_cap(fake_clock: FakeClock) -> None:
    c, _ = circuit(
        fake_clock, consecutive_failures=1, cooldown_seconds=5, max_retry_after_seconds=300
    )
    c.record_failure(retry_after=86_400)  # "come back tomorrow"
    fake_clock.time += 299
    assert c.state is CircuitState.OPEN
    fake_clock.time += 1
    assert c.state is CircuitState.HALF_OPEN
    assert c.allow()


def test_cancelled_probe_frees_the_slot(fake_clock: FakeClock) -> None:
    c, _ = circuit(fake_clock, consecutive_failures=1, cooldown_seconds=1)
    c.record_failure()
    fake_clock.time += 1
    assert c.allow()
    c.release()
    assert c.allow()


def test_disabled_breaker_never_blocks(fake_clock: FakeClock) -> None:
    c, _ = circuit(fake_clock, enabled=False, consecutive_failures=1)
    c.record_failure()
    c.record_failure()
    assert c.allow()


def test_breakers_report_degraded_per_model(fake_clock: FakeClock) -> None:
    breakers = CircuitBreakers(
        ["a", "b"], CircuitSettings(consecutive_failures=1), fake_clock.as_clock()
    )
    assert not breakers.degraded
    breakers["b"].record_failure()
    assert breakers.degraded
    assert breakers.states() == {"a": "closed", "b": "open"}


def test_a_failed_check_opens_the_circuit_at_once_for_the_cooldown(fake_clock: FakeClock) -> None:
    c, changes = circuit(fake_clock, consecutive_failures=5, cooldown_seconds=30)
    c.record_success()
    c.trip()  # one failure, where five in a row open it
    assert c.state is CircuitState.OPEN
    fake_clock.time += 30
    assert c.state is CircuitState.HALF_OPEN
    assert c.allow()
    c.trip(retry_after=120)  # as long as the model asks, when longer than the cooldown
    fake_clock.time += 119
    assert c.state is CircuitState.OPEN
    assert changes == ["m:open", "m:half_open", "m:open"]
