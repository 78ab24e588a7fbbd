"""The iterative strategy: an answer holds only the next stage of the plan; the orchestrator
runs it and reports back through /replan for the one after.

/plan: the planner makes the whole plan as usual (one model call, with every repair, retry
and the fallback) and the answer keeps its first stage. /replan: the replanner's revision
(the model's, or by rule the goal's rule-based plan less the steps already done) keeps the
finished steps and the next stage. A streamed answer sends the stage's steps once it is cut,
never a step of the whole plan the stage leaves out.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from planner_arm.errors import BudgetExceeded
from planner_arm.pipeline.assembly import with_warning
from planner_arm.plan.estimation import critical_path_duration, parallel_stages, total_duration
from planner_arm.plan.iterative_stage import Stage, first_stage_steps, next_stage
from planner_arm.plan.partial_plan import extended, rest_of
from planner_arm.plan.replan_merge import plan_diff
from planner_arm.plan.replan_scope import ReplanScope
from planner_arm.plan.schemas import PlanRequest, PlanResponse, PlanStep
from planner_arm.plan.validation import validate_plan
from planner_arm.planning.budget_fit import budgeted_fallback
from planner_arm.planning.fallback import fallback_plan
from planner_arm.planning.listener import PlanListener
from planner_arm.planning.planner import PlannerArm

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


async def plan_first_stage(
    planner: PlannerArm, request: PlanRequest, request_id: str, listener: PlanListener | None
) -> PlanResponse:
    """The first stage of the plan for `request`, numbered 1..n; `complete` when it is all."""
    held = None if listener is None else _StageListener(listener)
    whole = await planner.plan(request, request_id, held)
    stage = next_stage(whole.plan, (), planner.settings.planning.iterative_stage_steps)
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


def scopes_with_rest(
    planner: PlannerArm, request: PlanRequest, scope: ReplanScope
) -> Iterator[ReplanScope]:
    """For the rule-based replan of a partial plan: its scope with the rest of the goal's
    rule-based plan, then with less of it, down to the scope alone (a rule-based revision
    must fit the plan rules)."""
    if not scope.partial:
        yield scope
        return
    rest = rest_of(scope, _whole_plan_by_rule(planner, request))
    for size in range(len(rest), -1, -1):
        yield extended(scope, rest[:size])


def _whole_plan_by_rule(planner: PlannerArm, request: PlanRequest) -> Sequence[PlanStep]:
    planning, resolver, rules = planner.settings.planning, planner.resolver, planner.rules
    goal, constraints, context = request.goal, request.constraints, request.context
    try:
        return budgeted_fallback(
            goal, constraints, context, planning=planning, resolver=resolver, rules=rules,
            budget=request.budget,
        )[1].steps  # fmt: skip
    except BudgetExceeded:  # the replan checks the budget on its own revision
        draft = fallback_plan(goal, constraints, context, planning=planning, resolver=resolver)
        return validate_plan(draft, rules).steps


def _steps(count: int) -> str:
    return f"{count} step" if count == 1 else f"{count} steps"
