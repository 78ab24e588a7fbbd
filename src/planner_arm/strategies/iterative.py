"""The iterative strategy: an answer holds only the next stage of the plan; the orchestrator
runs it and reports back through /replan for the one after.

/plan: the planner makes the whole plan as usual (one model call, with every repair, retry
and the fallback) and the answer keeps its first stage. /replan: the replanner's revision
(the model's, or by rule the goal's rule-based plan less the steps already done) keeps the
finished steps and the next stage. A streamed answer sends the stage's steps once it is cut,
never a step of the whole plan the stage leaves out.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner_arm.pipeline.assembly import with_warning
from planner_arm.plan.arms import ArmResolver
from planner_arm.plan.dag import Stage, first_stage_steps, next_stage
from planner_arm.plan.estimation import critical_path_duration, parallel_stages, total_duration
from planner_arm.plan.replan import ReplanScope, plan_diff
from planner_arm.plan.schemas import PlanRequest, PlanResponse, PlanStep
from planner_arm.plan.validation import PlanRules
from planner_arm.strategies.flat import FlatPlanner
from planner_arm.strategies.job import Job, PlanListener

NEXT_STAGE_ONLY = "next_stage_only"


class _StageListener:
    """The stream's listener, told when an answer begins but not its steps as they are
    written: the stage is known only once the whole plan is."""

    def __init__(self, listener: PlanListener) -> None:
        self._listener = listener

    @property
    def plan_id(self) -> str:
        return self._listener.plan_id

    def begin(self, model: str) -> None:
        self._listener.begin(model)

    def text(self, delta: str) -> None:
        pass

    def check_with(self, resolver: ArmResolver, rules: PlanRules) -> None:
        self._listener.check_with(resolver, rules)


@dataclass
class IterativePlanner:
    """The first stage of the flat planner's plan, numbered 1..n; `complete` when it is all."""

    flat: FlatPlanner
    stage_steps: int

    async def plan(self, job: Job[PlanRequest]) -> PlanResponse:
        held = None if job.listener is None else _StageListener(job.listener)
        whole = await self.flat.plan(job.heard_by(held))
        stage = next_stage(whole.plan, (), self.stage_steps)
        return restaged(whole, first_stage_steps(stage.steps), stage)


def next_round(
    revised: PlanResponse, previous: PlanResponse, scope: ReplanScope, stage_steps: int
) -> PlanResponse:
    """A replan's revision cut to the finished steps and the next stage."""
    done = scope.finished
    stage = next_stage(revised.plan, done, stage_steps)
    kept = {*done, *(step.step for step in stage.steps)}
    steps = [step for step in revised.plan if step.step in kept]
    response = restaged(revised, steps, stage)
    return response.model_copy(update={"diff": plan_diff(list(previous.plan), steps)})


def restaged(response: PlanResponse, steps: list[PlanStep], stage: Stage) -> PlanResponse:
    """`response` holding `steps` only, its estimates made again for them."""
    cut = response.model_copy(
        update={
            "plan": steps,
            "total_estimated_duration": total_duration(steps),
            "parallel_stages": parallel_stages(steps),
            "critical_path_duration": critical_path_duration(steps),
            "strategy": "iterative",
            "complete": stage.complete,
        }
    )
    if stage.complete:
        return cut
    detail = (
        f"{_steps(len(stage.steps))} can start now; {_steps(stage.left)} more planned after. "
        "Run these, then /replan with their states and strategy iterative for the next stage"
    )
    return with_warning(cut, NEXT_STAGE_ONLY, detail)


def _steps(count: int) -> str:
    return f"{count} step" if count == 1 else f"{count} steps"
