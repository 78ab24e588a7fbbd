"""A streamed plan's events, read from the service's server-sent events.

The events and their data are the README's ("Streamed plans"): `plan.started`, `step`,
`plan.reset`, and last `plan`, the whole answer. An `error` event ends the stream; the
clients raise it as the `PlannerError` the JSON endpoint would have answered with.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from planner_arm.plan.schemas import PlanResponse, PlanStep

STARTED = "plan.started"
STEP = "step"
RESET = "plan.reset"
PLAN = "plan"
ERROR = "error"
SSE_TYPE = "text/event-stream"


@dataclass(frozen=True)
class PlanEvent:
    """One event of a streamed plan: its name (`event`) and its JSON `data`."""

    event: str
    data: Any

    @property
    def plan(self) -> PlanResponse | None:
        """The whole answer, on the final `plan` event; None on the others."""
        return PlanResponse.model_validate(self.data) if self.event == PLAN else None

    @property
    def step(self) -> PlanStep | None:
        """The step, on a `step` event; None on the others."""
        return PlanStep.model_validate(self.data) if self.event == STEP else None


class SSEReader:
    """Cuts server-sent events out of lines as they arrive; comment lines (pings) are
    skipped. Feed it lines; it returns each event once its blank line has come."""

    def __init__(self) -> None:
        self._name = "message"
        self._data: list[str] = []

    def feed(self, line: str) -> PlanEvent | None:
        line = line.rstrip("\r\n")
        if not line:
            return self._flush()
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            self._name = value
        elif field == "data":
            self._data.append(value)
        return None

    def _flush(self) -> PlanEvent | None:
        name, data = self._name, self._data
        self._name, self._data = "message", []
        if not data:
            return None
        return PlanEvent(name, json.loads("\n".join(data)))


def read_events(lines: Iterable[str]) -> Iterator[PlanEvent]:
    """Every event of an SSE body given line by line (the last one even without its blank
    line)."""
    reader = SSEReader()
    for line in lines:
        event = reader.feed(line)
        if event is not None:
            yield event
    event = reader.feed("")
    if event is not None:
        yield event
