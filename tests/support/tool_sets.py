"""Tool sets for the tests of how they are built and kept: distinct sets of made-up tools, the
requests that bring them, and a build lane whose threads a test watches and holds."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from planner_arm.plan.schemas import PlanRequest
from planner_arm.plan.weighed import BuildLane

T = TypeVar("T")
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def made_up_tools(
    name: str, count: int, words: int = 20, vocabulary: int = 0
) -> list[dict[str, Any]]:
    """`count` tools no other set has (ids start with `name`), each described by `words`
    made-up words drawn from a vocabulary of 3,000 (the same for every set, unless another
    `vocabulary` seed is given)."""
    vocabulary_rng = random.Random(vocabulary)
    known = [
        "".join(vocabulary_rng.choice(_LETTERS) for _ in range(vocabulary_rng.randint(4, 9)))
        for _ in range(3000)
    ]
    rng = random.Random(name)
    return [
        {
            "id": f"{name}_{number}",
            "description": " ".join(rng.choice(known) for _ in range(words)),
        }
        for number in range(count)
    ]


def tool_request(name: str, count: int = 8, goal: str = "Look up the weather") -> PlanRequest:
    """A /plan request bringing `made_up_tools(name, count)`."""
    return PlanRequest.model_validate({"goal": goal, "tools": made_up_tools(name, count)})


class WatchedLane(BuildLane):
    """A build lane that notes the thread that enters it and the work it runs, and keeps the
    work `gated` picks (all of it by default) waiting at its door while the door is closed
    (`entered` is set when one is there)."""

    def __init__(self, gated: Callable[[Callable[..., Any]], bool] = lambda work: True) -> None:
        super().__init__(1)
        self.gated = gated
        self.threads: list[threading.Thread] = []
        self.works: list[Callable[..., Any]] = []
        self.finished: list[Callable[..., Any]] = []
        self.entered = threading.Event()
        self.door = threading.Event()
        self.door.set()
        self._changed = threading.Condition()

    def close(self) -> None:
        self.door.clear()

    def open(self) -> None:
        self.door.set()

    def wait_until(self, ready: Callable[[WatchedLane], bool]) -> None:
        """Blocks (a worker thread: `to_thread.run_sync`) until `ready(self)`."""
        with self._changed:
            self._changed.wait_for(lambda: ready(self), timeout=30)

    def run(self, work: Callable[..., T], *args: Any) -> T:
        self._note(self.works, work)
        if self.gated(work):
            self.entered.set()
            self.door.wait(timeout=30)
        result = super().run(work, *args)
        self._note(self.finished, work)
        return result

    def _note(self, works: list[Callable[..., Any]], work: Callable[..., Any]) -> None:
        with self._changed:
            works.append(work)
            self._changed.notify_all()

    def held(self) -> Any:
        self.threads.append(threading.current_thread())
        return super().held()
