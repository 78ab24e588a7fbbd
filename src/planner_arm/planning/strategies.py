"""How deep a plan goes: the request's `strategy` picks who plans it.

flat is the planner's one list of steps; hierarchical (phases, each expanded into a sub-plan)
and iterative (only the next stage) are built on the same planner. Whatever the strategy, the
answer names it, so a stored plan says how it was made.
"""

from __future__ import annotations

from planner_arm.plan.schemas import PlanRequest, PlanResponse
from planner_arm.planning.hierarchical import HierarchicalPlanner
from planner_arm.planning.iterative import plan_first_stage
from planner_arm.planning.listener import PlanListener
from planner_arm.planning.planner import PlannerArm


class StrategyPlanner:
    def __init__(self, planner: PlannerArm) -> None:
        self._planner = planner
        self._hierarchical = HierarchicalPlanner(planner)

    async def plan(
        self, request: PlanRequest, request_id: str, listener: PlanListener | None = None
    ) -> PlanResponse:
        if request.strategy == "hierarchical":
            return await self._hierarchical.plan(request, request_id, listener)
        if request.strategy == "iterative":
            return await plan_first_stage(self._planner, request, request_id, listener)
        return await self._planner.plan(request, request_id, listener)
