"""`Strategies` takes each strategy by its name: a request is planned by the one it names, and
a mapping that leaves a name out is refused when the service is built."""

from __future__ import annotations

import pytest

from planner_arm.plan.schemas import PlanRequest, PlanResponse, Strategy
from planner_arm.service.service import Strategies
from planner_arm.service.wiring import Runtime
from planner_arm.strategies.job import Job
from support.factories import make_service, request_job


class Named:
    """A strategy that notes the names of the requests it plans, planning them flat."""

    def __init__(self, name: str, runtime: Runtime, heard: list[str]) -> None:
        self.name = name
        self.runtime = runtime
        self.heard = heard

    async def plan(self, job: Job[PlanRequest]) -> PlanResponse:
        self.heard.append(self.name)
        return await self.runtime.flat.plan(job)


async def test_a_request_is_planned_by_the_strategy_it_names() -> None:
    runtime = make_service(llm=False)
    heard: list[str] = []
    names: tuple[Strategy, ...] = ("flat", "hierarchical", "iterative")
    strategies = Strategies(
        {name: Named(name, runtime, heard) for name in names},
        runtime.specializer,
    )
    for name in names[::-1]:
        request = PlanRequest(goal="Fix the login bug", strategy=name)
        answer = await strategies.plan(request_job(runtime, request))
        assert answer.plan
    assert heard == ["iterative", "hierarchical", "flat"]


def test_a_strategy_left_out_is_refused_at_start_up() -> None:
    runtime = make_service(llm=False)
    with pytest.raises(ValueError, match="no strategy for hierarchical, iterative"):
        Strategies({"flat": runtime.flat}, runtime.specializer)
