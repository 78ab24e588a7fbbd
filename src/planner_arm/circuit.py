"""The circuit breaker: after repeated failures a dependency (a model, the plan store) is
skipped for a cooldown, and one probe call after it decides whether it is back.

Without it every request to a dead dependency waits out its timeouts; with it, requests go
straight to what comes next (the next model, the fallback, an answer without the store).

    closed --(N failures in a row, or failure rate over the window; or a failed check)--> open
    open --(cooldown passed; one probe allowed)--> half_open
    half_open --(probe succeeds)--> closed;  --(probe fails)--> open
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from enum import Enum

from planner_arm.clock import Clock
from planner_arm.config import CircuitSettings


class CircuitState(Enum):
    CLOSED = "closed"
    HALF_OPEN = "half_open"
    OPEN = "open"


StateListener = Callable[[str, CircuitState], None]


class Circuit:
    """One circuit breaker: `name` (a model, the store) is skipped while it is open."""

    def __init__(
        self,
        name: str,
        settings: CircuitSettings,
        clock: Clock,
        on_change: StateListener | None = None,
    ) -> None:
        self.name = name
        self._settings = settings
        self._clock = clock
        self._on_change = on_change
        self._state = CircuitState.CLOSED
        self._open_until = 0.0
        self._probe_in_flight = False
        self._consecutive_failures = 0
        self._outcomes: deque[tuple[float, bool]] = deque()

    @property
    def state(self) -> CircuitState:
        """The state a caller would see now (an open circuit whose cooldown passed is
        half-open: the next call is the probe)."""
        if self._state is CircuitState.OPEN and self._clock.now() >= self._open_until:
            return CircuitState.HALF_OPEN
        return self._state

    def may_allow(self) -> bool:
        """Would `allow` let a call through now? A look only: no probe slot is claimed."""
        if not self._settings.enabled:
            return True
        state = self.state
        return state is CircuitState.CLOSED or (
            state is CircuitState.HALF_OPEN and not self._probe_in_flight
        )

    def allow(self) -> bool:
        """May a call go to this model now? Claims the probe slot when half-open."""
        if not self._settings.enabled:
            return True
        state = self.state
        if state is CircuitState.CLOSED:
            return True
        if state is CircuitState.OPEN or self._probe_in_flight:
            return False
        self._set(CircuitState.HALF_OPEN)
        self._probe_in_flight = True
        return True

    def record_success(self) -> None:
        """The model answered (whether or not its plan was usable: the service is up)."""
        self._probe_in_flight = False
        self._consecutive_failures = 0
        self._note(ok=True)
        if self._state is not CircuitState.CLOSED:
            self._outcomes.clear()
            self._set(CircuitState.CLOSED)

    def record_failure(self, retry_after: float | None = None) -> None:
        self._probe_in_flight = False
        self._consecutive_failures += 1
        self._note(ok=False)
        if self._state is CircuitState.HALF_OPEN or self._should_open():
            self._open(retry_after)

    def trip(self, retry_after: float | None = None) -> None:
        """A check of the dependency's own, which no caller's request shaped, got no answer:
        it is out now, as a failed probe after the cooldown says, whatever the counts."""
        self._probe_in_flight = False
        self._note(ok=False)
        self._open(retry_after)

    def release(self) -> None:
        """A call ended with no verdict on the model (cancelled): free the probe slot."""
        self._probe_in_flight = False

    def _note(self, *, ok: bool) -> None:
        now = self._clock.now()
        self._outcomes.append((now, ok))
        horizon = now - self._settings.window_seconds
        while self._outcomes and self._outcomes[0][0] < horizon:
            self._outcomes.popleft()

    def _should_open(self) -> bool:
        if self._consecutive_failures >= self._settings.consecutive_failures:
            return True
        calls = len(self._outcomes)
        if calls < self._settings.min_calls:
            return False
        failures = sum(1 for _, ok in self._outcomes if not ok)
        return failures / calls > self._settings.failure_rate

    def _open(self, retry_after: float | None) -> None:
        # A provider may ask for a long pause; it closes the model for at most the cap.
        asked = min(retry_after or 0.0, self._settings.max_retry_after_seconds)
        cooldown = max(self._settings.cooldown_seconds, asked)
        self._open_until = self._clock.now() + cooldown
        self._consecutive_failures = 0
        self._outcomes.clear()
        self._set(CircuitState.OPEN)

    def _set(self, state: CircuitState) -> None:
        if state is not self._state:
            self._state = state
            if self._on_change is not None:
                self._on_change(self.name, state)
