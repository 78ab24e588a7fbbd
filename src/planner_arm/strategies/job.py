"""One request on its way through a strategy: the `Job`.

The plan service builds one job per request that plans: what was asked, the request's id, the
deadline built once for it, the request's toolbox (resolved once: the configured arms or the
request's own tools), the bill of its model calls (`Usage`, with the caller's cap and whose
calls they are), the notes its answer will carry as warnings, who asked, and who watches it
being written (a streamed answer). Every strategy entry point takes the job first; the
strategies themselves are built once and never copied per request.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Generic, Protocol, TypeVar

from pydantic import BaseModel

from planner_arm.clock import Deadline
from planner_arm.llm.client import AnswerSink
from planner_arm.llm.usage import Usage
from planner_arm.plan.arms import ArmResolver
from planner_arm.plan.validation import PlanRules
from planner_arm.principal import ANONYMOUS, Principal
from planner_arm.strategies.toolbox import RequestToolbox

# Covariant: a job for a replan is a job for a plan (ReplanRequest is a PlanRequest).
R = TypeVar("R", bound=BaseModel, covariant=True)


class PlanListener(AnswerSink, Protocol):
    """Who watches one request's planning as it happens (a streamed answer): the model's text
    as it is written, and the plan_id its answer will carry, announced before it exists."""

    @property
    def plan_id(self) -> str:
        """The id the plan made for this request takes (a repeated answer keeps its own)."""

    def check_with(self, resolver: ArmResolver, rules: PlanRules) -> None:
        """The arms and rules each step is checked with as it is written (the request's
        own tools'), told before the first model call."""


class Notes:
    """What an answer will say besides its plan (`metadata.warnings`), each once, in the
    order they were noted: "code" or "code: detail"."""

    def __init__(self) -> None:
        self.entries: list[str] = []

    def warn_once(self, text: str) -> None:
        if text not in self.entries:
            self.entries.append(text)


@dataclass(frozen=True)
class Job(Generic[R]):
    request: R
    request_id: str
    deadline: Deadline
    toolbox: RequestToolbox
    usage: Usage
    notes: Notes = field(default_factory=Notes)
    principal: Principal = ANONYMOUS
    listener: PlanListener | None = None

    def heard_by(self, listener: PlanListener | None) -> Job[R]:
        """The same job watched by `listener` instead (None: by nobody)."""
        return replace(self, listener=listener)

    def quiet(self) -> Job[R]:
        """The same job, watched by nobody: for the calls a streamed answer does not show
        (a hierarchical plan's phases, the steps' inputs)."""
        return self.heard_by(None)

    def beside(self) -> Job[R]:
        """A quiet job for calls made beside others of the same request, with a bill of its
        own that starts where the request's stands (`Usage.part`): the same deadline, notes
        and toolbox. Its calls join the request's bill by `usage.absorb`."""
        return replace(self, listener=None, usage=self.usage.part())

    def warnings(self) -> list[str]:
        """What the answer says besides its plan: what the bill leaves out, then the notes."""
        uncounted = [f"{reason}: {model}" for reason, model in self.usage.uncounted]
        return [*uncounted, *self.notes.entries]
