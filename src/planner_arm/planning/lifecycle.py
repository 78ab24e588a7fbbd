"""A plan's life after the first answer: what the planning endpoints call.

`PlanLifecycle` puts the plan store and idempotency around the planner and the replanner:
every answer of /plan and /replan is stored for GET /plan/{id}; a request with an
Idempotency-Key is planned once; /plan/validate checks an edited plan. A failing store never
costs a plan: writes fail soft (logged, counted, and a warning in the answer), reads that have
no other source answer 503 `store_unavailable`.
"""

from __future__ import annotations

from typing import Any

from planner_arm.config import Settings
from planner_arm.errors import PlanNotFound, StoreUnavailable
from planner_arm.llm.prompts import PROMPT_VERSION
from planner_arm.metrics import PlannerMetrics
from planner_arm.pipeline.assembly import validated_response, with_warning
from planner_arm.plan.arms import ArmResolver
from planner_arm.plan.edited import check_edited_plan
from planner_arm.plan.expand_schemas import ExpandRequest
from planner_arm.plan.replan_schemas import ReplanRequest
from planner_arm.plan.schemas import PlanRequest, PlanResponse
from planner_arm.plan.specialize_schemas import SpecializeRequest, SpecializeResponse
from planner_arm.plan.validate_schemas import ValidateRequest, ValidateResponse, ValidationProblem
from planner_arm.plan.validation import PlanRules
from planner_arm.planning.cache import CachingPlanner
from planner_arm.planning.expand import Expander
from planner_arm.planning.idempotency import Idempotency
from planner_arm.planning.listener import PlanListener
from planner_arm.planning.planner import PlannerArm
from planner_arm.planning.replan import Replanner
from planner_arm.planning.specialize_plan import PlanSpecializer
from planner_arm.planning.store_failures import note_store_failure
from planner_arm.store.base import PlanStore


class PlanLifecycle:
    def __init__(
        self,
        planner: PlannerArm,
        plans: CachingPlanner,
        replanner: Replanner,
        store: PlanStore,
        settings: Settings,
        metrics: PlannerMetrics,
    ) -> None:
        self._planner = planner
        self._plans = plans
        self._replanner = replanner
        self._store = store
        self._metrics = metrics
        self._idempotency = Idempotency(store, settings, metrics, planner.clock)
        self._specializer = PlanSpecializer(planner)

    @property
    def planner(self) -> PlannerArm:
        return self._planner

    @property
    def store_kind(self) -> str:
        return self._store.kind

    async def plan(
        self,
        request: PlanRequest,
        request_id: str,
        *,
        use_cache: bool,
        idempotency_key: str | None = None,
        listener: PlanListener | None = None,
    ) -> PlanResponse:
        async def run() -> PlanResponse:
            response = await self._plans.plan(
                request, request_id, use_cache=use_cache, listener=listener
            )
            return await self._stored(response, request)

        return await self._idempotency.run("plan", idempotency_key, request, run, request_id)

    async def replan(
        self, request: ReplanRequest, request_id: str, *, idempotency_key: str | None = None
    ) -> PlanResponse:
        async def run() -> PlanResponse:
            deadline = self._specializer.deadline()  # the inputs are filled within it too
            previous, replan_count = await self._previous(request)
            # Refuse a bad request (unknown steps, the replan limit) before any model call.
            self._replanner.scope(request, previous, replan_count)
            response = await self._replanner.replan(
                request, previous, request_id, replan_count=replan_count
            )
            self._metrics.child(self._metrics.replans, response.metadata.source).inc()
            if request.specialize:  # kept steps keep a valid input, the others get one
                response = await self._specializer.specialize(
                    response, request.goal, deadline, request.budget
                )
            return await self._stored(response, request)

        return await self._idempotency.run("replan", idempotency_key, request, run, request_id)

    async def get(self, plan_id: str) -> PlanResponse:
        record = await self._read(plan_id)
        if record is None:
            raise PlanNotFound(f"No plan with id {plan_id!r} is stored (or it has expired).")
        return PlanResponse.model_validate(record["response"])

    def validate(self, body: ValidateRequest, request_id: str) -> ValidateResponse:
        answer = validate_edited(body, self._planner.rules, self._planner.resolver, request_id)
        outcome = "valid" if answer.valid else "invalid"
        self._metrics.child(self._metrics.validations, outcome).inc()
        return answer

    async def _previous(self, request: ReplanRequest) -> tuple[PlanResponse, int | None]:
        """The plan to revise, and the replans of its chain as this service counted them.

        A plan this service stored is read from the store, so a caller cannot reset the
        count by editing `replan_count` in the plan it sends back."""
        if request.previous is not None:
            return request.previous, await self._counted_replans(request.previous)
        assert request.plan_id is not None  # the request model requires one of the two
        stored = PlanResponse.model_validate((await self._record(request.plan_id))["response"])
        return stored, stored.replan_count

    async def _counted_replans(self, previous: PlanResponse) -> int | None:
        """The replans of `previous`'s chain as stored: its own record, else its parent's plus
        one, so neither an edited count nor a made-up plan_id resets the limit. None when the
        store knows neither (the plan came from elsewhere, or the store is down)."""
        try:
            own = await self._store.get_plan(previous.plan_id)
            if own is not None:
                return PlanResponse.model_validate(own["response"]).replan_count
            if previous.parent_plan_id is None:
                return None
            parent = await self._store.get_plan(previous.parent_plan_id)
        except StoreUnavailable as error:
            self._store_failed("get_plan", error)
            return None
        if parent is None:
            return None
        return PlanResponse.model_validate(parent["response"]).replan_count + 1

    async def _read(self, plan_id: str) -> dict[str, Any] | None:
        try:
            return await self._store.get_plan(plan_id)
        except StoreUnavailable as error:
            self._store_failed("get_plan", error)
            raise

    async def _stored(self, response: PlanResponse, request: PlanRequest) -> PlanResponse:
        """`response`, stored for GET /plan/{id}; when the store fails, the answer says so."""
        record = {
            "response": response.model_dump(mode="json"),
            "request": request.model_dump(mode="json", exclude={"previous"}),
        }
        try:
            await self._store.put_plan(response.plan_id, record)
        except StoreUnavailable as error:
            self._store_failed("put_plan", error)
            detail = f"the plan store is unavailable ({error.detail})"
            return with_warning(response, "plan_not_stored", detail)
        return response

    def _store_failed(self, operation: str, error: StoreUnavailable) -> None:
        note_store_failure(self._metrics, operation, error)

    async def expand(
        self, request: ExpandRequest, request_id: str, *, idempotency_key: str | None = None
    ) -> PlanResponse:
        """One step replaced by its sub-plan: a new version of the plan, stored."""

        async def run() -> PlanResponse:
            previous = request.previous
            if previous is None:
                assert request.plan_id is not None  # the request model requires one of the two
                previous = PlanResponse.model_validate(
                    (await self._record(request.plan_id))["response"]
                )
            expander = Expander(self._planner)
            expander.check(request, previous)  # refuse a bad request before any model call
            deadline = self._specializer.deadline()  # the inputs are filled within it too
            response = await expander.expand(request, previous, request_id)
            # A plan with inputs keeps them whole: the new steps get one, and the inputs
            # that read the replaced step's output are made again (`input_replaced`).
            if request.specialize or any(step.input is not None for step in previous.plan):
                response = await self._specializer.specialize(
                    response, request.goal, deadline, request.budget
                )
            return await self._stored(response, request)

        return await self._idempotency.run("expand", idempotency_key, request, run, request_id)

    async def specialize(self, body: SpecializeRequest, request_id: str) -> SpecializeResponse:
        """One step's input (POST /plan/specialize), of the plan sent or the one stored."""
        if body.previous is not None:
            plan, goal = body.previous, body.goal
        else:
            assert body.plan_id is not None  # the request model requires one of the two
            record = await self._record(body.plan_id)
            plan = PlanResponse.model_validate(record["response"])
            goal = body.goal or (record.get("request") or {}).get("goal")
        return await self._specializer.one_step(plan, body.step, goal, request_id)

    async def _record(self, plan_id: str) -> dict[str, Any]:
        """The stored record of `plan_id`; PlanNotFound, saying what to send instead."""
        record = await self._read(plan_id)
        if record is None:
            raise PlanNotFound(
                f"No plan with id {plan_id!r} is stored (or it has expired); "
                "send the whole plan as `previous` instead."
            )
        return record


def validate_edited(
    body: ValidateRequest, rules: PlanRules, resolver: ArmResolver, request_id: str
) -> ValidateResponse:
    """POST /plan/validate's answer, also the CLI's: every problem, or the plan as /plan
    would answer it."""
    check = check_edited_plan(body.plan, rules, resolver, fix=body.fix)
    plan = None
    if check.valid:
        plan = validated_response(check, request_id=request_id, prompt_version=PROMPT_VERSION)
    return ValidateResponse(
        valid=check.valid,
        errors=[ValidationProblem(**error.as_dict()) for error in check.errors],
        warnings=check.warnings,
        plan=plan,
    )
