"""Who watches one request's planning as it happens (a streamed answer): the model's text as
it is written, and the plan_id its answer will carry, announced before the plan exists."""

from __future__ import annotations

from typing import Protocol

from planner_arm.llm.streamed import AnswerSink


class PlanListener(AnswerSink, Protocol):
    @property
    def plan_id(self) -> str:
        """The id the plan made for this request takes (a repeated answer keeps its own)."""
