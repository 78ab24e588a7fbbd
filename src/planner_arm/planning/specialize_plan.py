"""`"specialize": true`: an input on every step of a made plan, within the request deadline.

Steps are filled at most `specialize.max_concurrency` at a time. A step that already has a
valid input keeps it (a replan's kept steps); one whose input breaks its arm's schema or
refers to a step it does not depend on gets a new one (`input_replaced`). A step the model
could not fill in time, or at all, gets the rule-based input (`input_by_rule`). The calls are
added to the answer's `metadata.attempts` and `estimated_cost`.
"""

from __future__ import annotations

import asyncio

from planner_arm.clock import Deadline
from planner_arm.errors import PlanValidationError, RequestRejected
from planner_arm.pipeline.assembly import notes as notes_of
from planner_arm.plan.arm_inputs import check_input
from planner_arm.plan.input_refs import earlier_of, earlier_steps
from planner_arm.plan.schemas import Budget, EstimatedCost, PlanNote, PlanResponse, PlanStep
from planner_arm.plan.specialize_schemas import SpecializeResponse
from planner_arm.plan.spend import Spend
from planner_arm.planning.planner import PlannerArm
from planner_arm.planning.specialize import FilledInput, InputFiller, StepToFill


class PlanSpecializer:
    """Fills the inputs of a whole plan; see the module docstring."""

    def __init__(self, planner: PlannerArm) -> None:
        self.filler = InputFiller(planner)
        self._settings = planner.settings
        self._clock = planner.clock

    def deadline(self) -> Deadline:
        """A fresh request deadline on the planner's clock."""
        return Deadline(self._settings.planning.timeout_seconds, self._clock)

    async def specialize(
        self,
        response: PlanResponse,
        goal: str | None,
        deadline: Deadline,
        budget: Budget | None = None,
    ) -> PlanResponse:
        """`response` with an input on every step, and what that took."""
        started = self._clock.now()
        steps = response.plan
        by_id = {step.step: step for step in steps}
        earlier = earlier_steps(steps)
        spend = Spend(usd=response.estimated_cost.llm_usd)
        slots = asyncio.Semaphore(self._settings.specialize.max_concurrency)
        notes: list[tuple[int, PlanNote]] = []

        async def fill(step: PlanStep) -> PlanStep:
            ids = earlier.get(step.step, frozenset())
            if step.input is not None:
                try:
                    return step.model_copy(
                        update={"input": check_input(step.required_arm, step.input, ids)}
                    )
                except PlanValidationError as problem:
                    detail = f"step {step.step}: {problem.detail}"[:500]
                    notes.append((step.step, PlanNote(code="input_replaced", detail=detail)))
            target = StepToFill(step, goal, [by_id[number] for number in sorted(ids)])
            filled = await self.filler.fill(target, deadline, spend, budget=budget, slots=slots)
            if filled.reason is not None:
                notes.append((step.step, _by_rule_note(step, filled)))
            return step.model_copy(update={"input": filled.input})

        filled_steps = await asyncio.gather(*(fill(step) for step in steps))
        warnings = [note for _, note in sorted(notes, key=lambda item: item[0])]
        known = response.metadata.warnings
        warnings += [note for note in notes_of(spend.warnings) if note not in known]
        cost = response.estimated_cost
        metadata = response.metadata
        return response.model_copy(
            update={
                "plan": list(filled_steps),
                "estimated_cost": EstimatedCost(
                    llm_usd=round(spend.usd, 8),
                    prompt_tokens=cost.prompt_tokens + spend.prompt_tokens,
                    completion_tokens=cost.completion_tokens + spend.completion_tokens,
                ),
                "metadata": metadata.model_copy(
                    update={
                        "attempts": metadata.attempts + spend.calls,
                        "latency_ms": round(
                            metadata.latency_ms + (self._clock.now() - started) * 1000, 3
                        ),
                        "warnings": [*metadata.warnings, *warnings],
                    }
                ),
            }
        )

    async def one_step(
        self, plan: PlanResponse, number: int, goal: str | None, request_id: str
    ) -> SpecializeResponse:
        """The input of step `number` of `plan` (POST /plan/specialize), within a deadline of
        its own; RequestRejected `unknown_step` when the plan has no such step."""
        deadline = self.deadline()
        by_id = {step.step: step for step in plan.plan}
        step = by_id.get(number)
        if step is None:
            detail = f"the plan has no step {number} (its steps are {sorted(by_id)})"
            raise RequestRejected(detail, code="unknown_step")
        ids = earlier_of(plan.plan, number)
        target = StepToFill(step, goal, [by_id[item] for item in sorted(ids)])
        filled = await self.filler.fill(target, deadline, Spend())
        return SpecializeResponse(
            plan_id=plan.plan_id,
            step=number,
            required_arm=step.required_arm,
            input=filled.input,
            source=filled.source,
            model=filled.model,
            request_id=request_id,
            warnings=[] if filled.reason is None else [_by_rule_note(step, filled)],
        )


def _by_rule_note(step: PlanStep, filled: FilledInput) -> PlanNote:
    return PlanNote(code="input_by_rule", detail=f"step {step.step}: {filled.reason}"[:500])
