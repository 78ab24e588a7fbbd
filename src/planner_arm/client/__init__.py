"""A typed Python client of planner-arm, sync (`PlannerClient`) and async
(`AsyncPlannerClient`), on httpx, with the service's own request and answer models.

```python
from planner_arm.client import PlannerClient

with PlannerClient("http://localhost:8080", api_key=None) as planner:
    plan = planner.plan("Fix authentication bug and add tests")
```

`run_plan` (and `run_plan_sync`) run a plan over an agent's tools (an MCP client session):
data flowing between the steps, writes only with a yes, a replan when a call fails.

Errors are `PlannerError` subclasses (see `planner_arm.client.errors`). This package imports
the service's models (`planner_arm.plan`), never the service itself.
"""

from __future__ import annotations

from planner_arm.client.async_client import AsyncPlannerClient
from planner_arm.client.drivers import run_plan, run_plan_sync
from planner_arm.client.errors import (
    BudgetExceeded,
    Conflict,
    InvalidRequest,
    PlannerError,
    PlanNotFound,
    ServerError,
    TransportError,
    Unauthorized,
    Unavailable,
)
from planner_arm.client.events import PlanEvent
from planner_arm.client.runner import NEEDS_APPROVAL, NOT_APPROVED, PlanRun, RunEvent, StepRun
from planner_arm.client.sync_client import PlannerClient
from planner_arm.plan.endpoint_schemas import (
    CapabilitiesResponse,
    HealthResponse,
    SpecializeResponse,
    StepState,
    ValidateResponse,
)
from planner_arm.plan.schemas import Budget, PlanResponse, PlanStep

__all__ = [
    "NEEDS_APPROVAL",
    "NOT_APPROVED",
    "AsyncPlannerClient",
    "Budget",
    "BudgetExceeded",
    "CapabilitiesResponse",
    "Conflict",
    "HealthResponse",
    "InvalidRequest",
    "PlanEvent",
    "PlanNotFound",
    "PlanResponse",
    "PlanRun",
    "PlanStep",
    "PlannerClient",
    "PlannerError",
    "RunEvent",
    "ServerError",
    "SpecializeResponse",
    "StepRun",
    "StepState",
    "TransportError",
    "Unauthorized",
    "Unavailable",
    "ValidateResponse",
    "run_plan",
    "run_plan_sync",
]
