"""The plan service: what every planning endpoint (and the CLI in this process) calls.

One request's journey: the request deadline is built here, once, and passed down; an
Idempotency-Key is claimed (the same key and body are answered once); /plan goes through the
cache and single flight to its strategy (flat, hierarchical, iterative), then stage 2 when it
asks for inputs; /replan, /plan/expand and /plan/specialize start from the plan sent, or the
one stored under `plan_id`; every answer is recorded once and stored for GET /plan/{id}. A
request that plans gets its job here, once (`strategies/job.py`): its toolbox held and
resolved, its bill, its notes; every strategy takes it.

Every call names its principal (the API layer resolves it from the caller's key; in-process
callers such as the CLI are the anonymous principal): it reads and writes only that
principal's records, so another's plan id reads exactly like an unknown one. A failing store
never costs a plan: every store operation runs within the request's deadline, writes fail soft
(logged, counted, and a warning in the answer), reads that have no other source answer 503
`store_unavailable`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import KW_ONLY, dataclass
from typing import Protocol, TypeVar, get_args

from anyio import to_thread
from pydantic import BaseModel

from planner_arm.clock import Clock, Deadline
from planner_arm.errors import PlanningFailed, PlanNotFound, RequestRejected, StoreUnavailable
from planner_arm.limits import ArmSpec
from planner_arm.llm.usage import Usage
from planner_arm.metrics import PlannerMetrics
from planner_arm.pipeline.assembly import notes, validated_response, with_warning
from planner_arm.plan.arms import ArmResolver
from planner_arm.plan.edited import EditCheck, EditError, check_edited_plan
from planner_arm.plan.endpoint_schemas import (
    ExpandRequest,
    ReplanRequest,
    SpecializeRequest,
    SpecializeResponse,
    ValidateRequest,
    ValidateResponse,
    ValidationProblem,
)
from planner_arm.plan.schemas import PlanNote, PlanRequest, PlanResponse
from planner_arm.plan.schemas import Strategy as StrategyName
from planner_arm.plan.tool_inputs import step_input_problems
from planner_arm.plan.tools import arm_specs
from planner_arm.plan.unsourced import texts_of
from planner_arm.plan.validation import PlanRules
from planner_arm.principal import ANONYMOUS, Principal
from planner_arm.service.cache import CachingPlanner
from planner_arm.service.idempotency import Idempotency
from planner_arm.service.recorder import PlanRecorder
from planner_arm.service.records import Records, StoredPlan, StoredRequest, StoreGuard
from planner_arm.service.stream import PlanStream
from planner_arm.store.base import note_store_failure
from planner_arm.strategies.expand import Expander
from planner_arm.strategies.job import Job, PlanListener
from planner_arm.strategies.prompts.plans import PROMPT_VERSION
from planner_arm.strategies.prompts.specialize import SpecializeBrief
from planner_arm.strategies.replan import Replanner
from planner_arm.strategies.specialize import Specializer
from planner_arm.strategies.toolbox import RequestToolbox, Toolboxes

R = TypeVar("R", bound=BaseModel)
P = TypeVar("P", bound=PlanRequest)

# What a stored plan keeps of its request: what a later replan or specialize reads (the goal
# and its limits; of a replan, each reported step's status, so a finished step gets no new
# input). Step outputs, budgets and the plan sent back are not kept.
STORED_REQUEST_FIELDS = {"goal", "constraints", "context", "strategy"}


class Strategy(Protocol):
    """Who makes a plan for a /plan request: flat, hierarchical or iterative."""

    async def plan(self, job: Job[PlanRequest]) -> PlanResponse: ...


class Strategies:
    """How deep a plan goes: the request's `strategy` names who plans it (the wiring gives
    each strategy by its name); stage 2 then fills each step's input when the request asks for
    it, within the same deadline. Whatever the strategy, the answer names it, so a stored plan
    says how it was made."""

    def __init__(self, by_name: Mapping[StrategyName, Strategy], specializer: Specializer) -> None:
        # Every name a request may give has its strategy: a missing one fails here, at
        # start-up, not on the first request that names it.
        missing = sorted(set(get_args(StrategyName)) - set(by_name))
        if missing:
            raise ValueError(f"no strategy for {', '.join(missing)}")
        self._by_name = dict(by_name)
        self.specializer = specializer

    async def plan(self, job: Job[PlanRequest]) -> PlanResponse:
        request = job.request
        response = await self._by_name[request.strategy].plan(job)
        if job.listener is not None:  # a streamed answer announced its plan_id before the plan
            response = response.model_copy(update={"plan_id": job.listener.plan_id})
        if request.specialize:
            response = await self.specializer.specialize(job, response, brief_of(request))
        return response


def brief_of(request: PlanRequest) -> SpecializeBrief:
    """What stage 2 tells the model about the whole plan, from the request that made it; and
    what else the request gave that an input may quote (its worked examples, a replan's
    reports of the steps and its reason)."""
    given = [text for example in request.examples or () for text in texts_of(example.model_dump())]
    if isinstance(request, ReplanRequest):
        states = request.step_states.values()
        given += [text for state in states for text in (state.output, state.error) if text]
        given += [request.reason] if request.reason else []
    return SpecializeBrief(request.goal, request.constraints, request.context, given)


@dataclass
class PlanService:
    _: KW_ONLY
    cache: CachingPlanner
    strategies: Strategies
    replanner: Replanner
    expander: Expander
    specializer: Specializer
    guard: StoreGuard
    idempotency: Idempotency
    recorder: PlanRecorder
    rules: PlanRules
    resolver: ArmResolver
    metrics: PlannerMetrics
    clock: Clock
    timeout_seconds: float
    toolboxes: Toolboxes

    @property
    def store_kind(self) -> str:
        return self.guard.store.kind

    def stream(self, plan_id: str, request_id: str) -> PlanStream:
        """The events of one streamed answer, its steps checked with the configured arms and
        rules until the planner names the request's own tools (`check_with`)."""
        return PlanStream(
            plan_id=plan_id,
            request_id=request_id,
            arms=self.resolver,
            rules=self.rules,
            metrics=self.metrics,
            clock=self.clock,
        )

    def admit_tool_set(self, principal: Principal) -> None:
        """ToolSetsBusy when the principal, or the service, has its most requests waiting for
        their tool sets to be built: asked before a request's body is read, since reading a
        large tool set is most of what a refused request costs."""
        self.toolboxes.slots.admit(principal.id)

    def _records(self, principal: Principal) -> Records:
        """The principal's records, within a deadline built now: one per request."""
        return Records(self.guard, principal, Deadline(self.timeout_seconds, self.clock))

    @asynccontextmanager
    async def _held(
        self,
        request: P,
        request_id: str,
        records: Records,
        listener: PlanListener | None = None,
    ) -> AsyncIterator[Job[P]]:
        """The request's job, its tool set held while it plans (built first when it is not
        kept) and what it plans with resolved once."""
        streamed = listener is not None
        toolboxes = self.toolboxes
        async with toolboxes.held(
            request, records.owner.id, records.deadline, streamed=streamed
        ) as box:
            toolbox = await toolboxes.for_request(request, box, records.owner.id, records.deadline)
            if listener is not None:
                listener.check_with(toolbox.resolver, toolbox.rules)
            cap = request.budget.max_llm_usd if request.budget is not None else None
            yield job_of(request, request_id, records, toolbox, cap, listener)

    async def plan(
        self,
        request: PlanRequest,
        request_id: str,
        *,
        use_cache: bool,
        idempotency_key: str | None = None,
        listener: PlanListener | None = None,
        principal: Principal = ANONYMOUS,
    ) -> PlanResponse:
        records = self._records(principal)
        if request.tools is not None:  # read before the cache's key names them
            await self.toolboxes.tool_set(request)

        async def planned() -> PlanResponse:
            async with self._held(request, request_id, records, listener) as job:
                return await self.strategies.plan(job)

        def cached() -> Awaitable[PlanResponse]:
            streamed = listener is not None
            return self.cache.plan(
                request, request_id, records, planned, use_cache=use_cache, streamed=streamed
            )

        return await self._answered("plan", request, request_id, idempotency_key, records, cached)

    async def replan(
        self,
        request: ReplanRequest,
        request_id: str,
        *,
        idempotency_key: str | None = None,
        principal: Principal = ANONYMOUS,
    ) -> PlanResponse:
        records = self._records(principal)
        # The request as planned: a stored plan's goal is the replan's, whatever the body says.
        read = request

        async def revised() -> PlanResponse:
            nonlocal read
            previous, record = await self._previous(request.previous, request.plan_id, records)
            read, overruled = replan_goal(request, previous, record)
            replan_count, verified = await self._replan_count(previous, record, records)
            async with self._held(read, request_id, records) as job:
                response = await self._revision(job, previous, replan_count, verified)
            if overruled:
                detail = "the stored request's goal was used, not the body's"
                response = with_warning(response, "stored_request_used", detail)
            return response

        return await self._answered(
            "replan", request, request_id, idempotency_key, records, revised, lambda: read
        )

    async def _revision(
        self, job: Job[ReplanRequest], previous: PlanResponse, replan_count: int, verified: bool
    ) -> PlanResponse:
        request = job.request
        previous = marked(previous, job.toolbox.rules)
        # Refuse a bad request (unknown steps, the replan limit) before any model call.
        scope = self.replanner.scope(job, previous, replan_count)
        response = await self.replanner.replan(job, previous, scope, replan_count)
        self.metrics.child(self.metrics.replans, response.metadata.source).inc()
        if request.specialize:  # pending steps get an input; reported ones stay as sent
            finished = reported_steps(request)
            response = await self.specializer.specialize(job, response, brief_of(request), finished)
        if not verified:
            detail = (
                f"the plan {previous.plan_id!r} and its parent are not in the store: its "
                f"replans were counted as {replan_count} from the plan itself"
            )
            response = with_warning(response, "replan_chain_unverified", detail)
        return response

    async def expand(
        self,
        request: ExpandRequest,
        request_id: str,
        *,
        idempotency_key: str | None = None,
        principal: Principal = ANONYMOUS,
    ) -> PlanResponse:
        """One step replaced by its sub-plan: a new version of the plan, stored."""
        records = self._records(principal)

        async def expanded() -> PlanResponse:
            previous, _ = await self._previous(request.previous, request.plan_id, records)
            async with self._held(request, request_id, records) as job:
                return await self._expansion(job, previous)

        return await self._answered(
            "expand", request, request_id, idempotency_key, records, expanded
        )

    async def _expansion(self, job: Job[ExpandRequest], previous: PlanResponse) -> PlanResponse:
        request = job.request
        previous = marked(previous, job.toolbox.rules)
        self.expander.check(job, previous)  # refuse a bad request before any call
        response = await self.expander.expand(job, previous)
        # A plan with inputs keeps them whole: the new steps get one, and the inputs that
        # read the replaced step's output are made again (`input_replaced`).
        if request.specialize or any(step.input is not None for step in previous.plan):
            response = await self.specializer.specialize(job, response, brief_of(request))
        return response

    async def specialize(
        self, body: SpecializeRequest, request_id: str, *, principal: Principal = ANONYMOUS
    ) -> SpecializeResponse:
        """One step's input (POST /plan/specialize), of the plan sent or the one stored. The
        principal's record of the plan, whichever way it came, is the authority on what the
        plan is for and what became of its steps (`specialize_brief`)."""
        records = self._records(principal)
        plan, record = await self._previous(body.previous, body.plan_id, records)
        unread: list[PlanNote] = []
        if record is None:  # the plan came whole: what the store knows of it, if anything
            record, unread = await self._record_of_sent(plan, records)
        stored = record.request if record is not None else None
        status = stored.step_states.get(str(body.step)) if stored is not None else None
        if status is not None and status != "pending":
            raise RequestRejected(
                f"step {body.step} was reported {status}: only a pending step gets an input",
                code="completed_step",
            )
        brief, overruled = specialize_brief(body, stored)
        job = job_of(body, request_id, records, self.toolboxes.configured.plain)
        tools = arm_specs(body.tools) if body.tools else None
        answer = await self.specializer.one_step(job, plan, body.step, brief, tools)
        if overruled:
            detail = f"the stored request's {' and '.join(overruled)} were used, not the body's"
            unread.append(PlanNote(code="stored_request_used", detail=detail))
        return answer.model_copy(update={"warnings": [*answer.warnings, *unread]})

    async def _record_of_sent(
        self, plan: PlanResponse, records: Records
    ) -> tuple[StoredPlan | None, list[PlanNote]]:
        """The principal's record of a plan sent whole, None when the store has none; a store
        that does not answer costs the record, not the answer (a warning says so)."""
        try:
            return await records.get_plan(plan.plan_id), []
        except StoreUnavailable as error:
            note_store_failure(self.metrics, "get_plan", error)
            detail = f"the plan store is unavailable ({error.detail}): only the plan sent was read"
            return None, [PlanNote(code="plan_record_unread", detail=detail)]

    async def get(self, plan_id: str, *, principal: Principal = ANONYMOUS) -> PlanResponse:
        """The principal's stored plan; another principal's id is answered like an unknown
        one (the same lookup, the same 404)."""
        record = await self._read(plan_id, self._records(principal))
        if record is None:
            raise PlanNotFound(f"No plan with id {plan_id!r} is stored (or it has expired).")
        return record.response

    async def validate(
        self, body: ValidateRequest, request_id: str, *, principal: Principal = ANONYMOUS
    ) -> ValidateResponse:
        """The edited plan checked over the configured arms, or over the request's tools
        (their tool set built, or taken from those kept, as /plan's). Nothing is stored."""
        planned = body.as_planned
        # Checking hundreds of steps is CPU work: off the event loop.
        if planned is None or planned.tools is None:
            answer = await to_thread.run_sync(
                validate_edited, body, self.rules, self.resolver, request_id
            )
        else:
            deadline = self._records(principal).deadline
            await self.toolboxes.tool_set(planned)
            async with self.toolboxes.held(planned, principal.id, deadline) as box:
                answer = await to_thread.run_sync(
                    validate_edited, body, box.rules, box.resolver, request_id, box.arms
                )
        outcome = "valid" if answer.valid else "invalid"
        self.metrics.child(self.metrics.validations, outcome).inc()
        return answer

    async def _answered(
        self,
        kind: str,
        request: PlanRequest,
        request_id: str,
        idempotency_key: str | None,
        records: Records,
        work: Callable[[], Awaitable[PlanResponse]],
        as_read: Callable[[], PlanRequest] | None = None,
    ) -> PlanResponse:
        """`work()`'s answer, recorded and stored, once per idempotency key (when it has one).
        The body as sent names the idempotent request; it is stored as `work` read it
        (`as_read`, after `work`), when that differs."""

        async def run() -> PlanResponse:
            response = await self._recorded(request, records.deadline, work)
            return await self._stored(response, as_read() if as_read else request, records)

        if idempotency_key is None:
            return await run()
        return await self.idempotency.run(kind, idempotency_key, request, run, request_id, records)

    async def _recorded(
        self,
        request: PlanRequest,
        deadline: Deadline,
        work: Callable[[], Awaitable[PlanResponse]],
    ) -> PlanResponse:
        """`work()`'s answer, recorded once: planned, repeated (a cache hit or a follower of a
        shared run carries `cached_plan_id`), or failed."""
        try:
            response = await work()
        except PlanningFailed:
            self.recorder.failed(deadline.elapsed_ms())
            raise
        repeat = response.metadata.cached_plan_id is not None
        self.recorder.planned(response, request, repeat=repeat)
        return response

    async def _previous(
        self, sent: PlanResponse | None, plan_id: str | None, records: Records
    ) -> tuple[PlanResponse, StoredPlan | None]:
        """The plan a follow-up request starts from: the one sent, or the one stored under
        `plan_id` (the request models take exactly one of the two), with its stored record."""
        if sent is not None:
            return sent, None
        assert plan_id is not None  # the request model requires one of the two
        record = await self._read(plan_id, records)
        if record is None:
            raise PlanNotFound(
                f"No plan with id {plan_id!r} is stored (or it has expired); "
                "send the whole plan as `previous` instead."
            )
        return record.response, record

    async def _replan_count(
        self, previous: PlanResponse, record: StoredPlan | None, records: Records
    ) -> tuple[int, bool]:
        """The replans of the chain of the plan to revise (`record`: its stored record, when
        it came by `plan_id`), and whether the store vouched for that count.

        A plan this service stored is read from the store, so a caller cannot reset the
        count by editing `replan_count` in the plan it sends back. A plan the store does not
        know is counted from what it shows: never below its own count, its version less one
        (each replan adds one; an iterative round that only reports progress adds a version
        without counting, so not for an iterative plan), or one when it names a parent."""
        if record is not None:
            return previous.replan_count, True
        counted = await self._counted_replans(previous, records)
        if counted is not None:
            return counted, True
        versions = previous.version - 1 if previous.strategy != "iterative" else 0
        shown = max(
            previous.replan_count,
            versions,
            1 if previous.parent_plan_id is not None else 0,
        )
        return shown, False

    async def _counted_replans(self, previous: PlanResponse, records: Records) -> int | None:
        """The replans of `previous`'s chain as stored: its own record, else its parent's plus
        one, so neither an edited count nor a made-up plan_id resets the limit. None when the
        store knows neither (the plan came from elsewhere, or the store is down)."""
        try:
            own = await records.get_plan(previous.plan_id)
            if own is not None:
                return own.response.replan_count
            if previous.parent_plan_id is None:
                return None
            parent = await records.get_plan(previous.parent_plan_id)
        except StoreUnavailable as error:
            note_store_failure(self.metrics, "get_plan", error)
            return None
        if parent is None:
            return None
        return parent.response.replan_count + 1

    async def _read(self, plan_id: str, records: Records) -> StoredPlan | None:
        try:
            return await records.get_plan(plan_id)
        except StoreUnavailable as error:
            note_store_failure(self.metrics, "get_plan", error)
            raise

    async def _stored(
        self, response: PlanResponse, request: PlanRequest, records: Records
    ) -> PlanResponse:
        """`response`, stored for GET /plan/{id}; when the store fails, the answer says so.
        A principal past its cap of plan bytes is refused (429 tenant_quota_exceeded). The
        answer says what it is for: the request's goal and constraints."""
        response = response.model_copy(
            update={"goal": request.goal, "constraints": request.constraints}
        )
        asked = StoredRequest.model_validate(
            request.model_dump(mode="json", include=STORED_REQUEST_FIELDS)
        )
        if isinstance(request, ReplanRequest) and request.step_states:
            asked.step_states = {step: state.status for step, state in request.step_states.items()}
        record = StoredPlan(response=response, request=asked)
        try:
            await records.put_plan(response.plan_id, record)
        except StoreUnavailable as error:
            note_store_failure(self.metrics, "put_plan", error)
            detail = f"the plan store is unavailable ({error.detail})"
            return with_warning(response, "plan_not_stored", detail)
        return response


def job_of(
    request: R,
    request_id: str,
    records: Records,
    toolbox: RequestToolbox,
    cap_usd: float | None = None,
    listener: PlanListener | None = None,
) -> Job[R]:
    """The job of one request: the principal's, within the request's deadline (`records`),
    its model calls on a bill of their own with the caller's cap on dollars (`cap_usd`)."""
    usage = Usage(records.owner.id, cap_usd)
    job = Job(
        request,
        request_id,
        records.deadline,
        toolbox,
        usage,
        principal=records.owner,
        listener=listener,
    )
    if isinstance(request, PlanRequest):
        for warning in request.tool_warnings:
            job.notes.warn_once(warning)
    return job


def marked(previous: PlanResponse, rules: PlanRules) -> PlanResponse:
    """A plan sent back, each step saying whether it writes as the tools it is planned over
    say (what the caller or an earlier tool set said is not kept)."""
    return previous.model_copy(update={"plan": rules.marked(previous.plan)})


def replan_goal(
    request: ReplanRequest, previous: PlanResponse, record: StoredPlan | None
) -> tuple[ReplanRequest, bool]:
    """The replan request with its plan's goal, and whether it overruled the body's. A stored
    plan (`record`) keeps its own goal, as /plan/specialize keeps a stored request's: a body
    that leaves the goal out gets it, one that names another is overruled. A plan sent whole
    is the caller's to change: its body's goal stands (the request model gave it the plan's
    own when the body had none)."""
    if record is None:
        return request, False
    stored = previous.goal or record.request.goal
    if not stored:
        if not request.goal:
            raise RequestRejected(
                f"goal is required: the stored plan {previous.plan_id!r} names no goal",
                code="invalid_request",
            )
        return request, False
    overruled = bool(request.goal) and request.goal != stored
    return request.model_copy(update={"goal": stored}), overruled


def specialize_brief(
    body: SpecializeRequest, stored: StoredRequest | None
) -> tuple[SpecializeBrief, list[str]]:
    """What the model is told about the whole plan for one step's input, and what of the
    body's the stored request overruled. A stored request wins: its goal; its constraints,
    with the body's added after them; its context, with the body's other keys added. The
    body's fields alone describe a plan the store does not hold."""
    given_context = body.context or {}
    if stored is None:
        return SpecializeBrief(body.goal, body.constraints or [], given_context), []
    brief = SpecializeBrief(
        stored.goal or body.goal,
        list(dict.fromkeys([*stored.constraints, *(body.constraints or [])])),
        {**given_context, **stored.context},
    )
    overruled = []
    if body.goal not in (None, brief.goal):
        overruled.append("goal")
    clashing = sorted(key for key, value in given_context.items() if brief.context[key] != value)
    if clashing:
        overruled.append(f"context {clashing}")
    return brief, overruled


def reported_steps(request: ReplanRequest) -> frozenset[int]:
    """The steps the caller reported anything but pending for: their inputs are history."""
    return frozenset(
        int(key)
        for key, state in request.step_states.items()
        if key.isascii() and key.isdigit() and state.status != "pending"
    )


def validate_edited(
    body: ValidateRequest,
    rules: PlanRules,
    resolver: ArmResolver,
    request_id: str,
    tools: Sequence[ArmSpec] | None = None,
) -> ValidateResponse:
    """POST /plan/validate's answer: every problem, or the plan as /plan would answer it,
    with the goal and constraints sent. Over `tools`, the steps' inputs are checked too."""
    check = check_edited_plan(body.plan, rules, resolver, fix=body.fix)
    if check.valid and check.steps and tools is not None:
        errors = [
            EditError("invalid_input", number, f"step {number}: {problem}")
            for number, problem in step_input_problems(check.steps, tools)
        ]
        check = EditCheck(False, errors, check.warnings, None) if errors else check
    plan = None
    if check.valid:
        plan = validated_response(check, request_id=request_id, prompt_version=PROMPT_VERSION)
        plan = plan.model_copy(update={"goal": body.goal, "constraints": body.constraints or []})
    return ValidateResponse(
        valid=check.valid,
        errors=[ValidationProblem(**error.as_dict()) for error in check.errors],
        warnings=notes(check.warnings),
        plan=plan,
    )
