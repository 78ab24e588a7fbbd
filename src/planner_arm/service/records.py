"""The store as one request sees it: its caller's records, within its deadline, behind a breaker.

`StoreGuard` is shared by every request: each store operation runs under the time the request
has left (at least `GRACE_SECONDS`, so a plan made at the last moment can still be stored) and
at most the store's own operation timeout; after a failure the store is treated as down for
`down_seconds` (the circuit of llm/guarded.py, with one failure enough to open it), so later
requests do not each wait out a timeout. A full Redis (StoreFull) or an owner over its quota is
an answer from a working store and does not open the breaker.

`Records` is one request's view: the principal whose records these are and the request's
deadline, passed down explicitly from the API layer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from pydantic import BaseModel, Field, field_validator
from pydantic_core import PydanticSerializationError

from planner_arm.circuit import Circuit, CircuitState
from planner_arm.clock import Clock, Deadline
from planner_arm.config import CircuitSettings
from planner_arm.errors import StoreFull, StoreUnavailable, TenantQuotaExceeded
from planner_arm.plan.schemas import PlanResponse
from planner_arm.principal import Principal
from planner_arm.store.base import Claimed, ClaimOutcome, JSONObject, PlanStore, encode

T = TypeVar("T")

# The least time a store operation gets, even when the request's deadline has (nearly) come.
GRACE_SECONDS = 0.2
# The most a /health probe of the store takes.
HEALTH_PROBE_SECONDS = 0.25


class StoreGuard:
    """Bounds every store operation in time and skips the store while it is down."""

    def __init__(
        self,
        store: PlanStore,
        *,
        operation_timeout: float,
        down_seconds: float,
        clock: Clock,
        tracer: trace.Tracer | None = None,
    ) -> None:
        """`tracer`: each operation is a `store.<operation>` span (when tracing is on)."""
        self.store = store
        self._tracer = tracer
        # A store's operation is a call out of the process when it names a database system.
        system = store.system
        self._span_kind = SpanKind.INTERNAL if system is None else SpanKind.CLIENT
        self._span_attributes: dict[str, str] = {"planner.store": store.kind}
        if system is not None:
            self._span_attributes["db.system.name"] = system
        self._operation_timeout = operation_timeout
        self._down_seconds = down_seconds
        self._log = structlog.get_logger("planner_arm.service.records").bind()
        settings = CircuitSettings(
            consecutive_failures=1, cooldown_seconds=down_seconds, max_retry_after_seconds=1
        )
        self._circuit = Circuit("store", settings, clock, self._changed)

    @property
    def down(self) -> bool:
        """True while the store is skipped after a failure."""
        return self._circuit.state is CircuitState.OPEN

    def time_for(self, deadline: Deadline | None) -> float:
        """How long one operation may take for a request with `deadline`."""
        if deadline is None:
            return self._operation_timeout
        return min(self._operation_timeout, max(deadline.remaining(), GRACE_SECONDS))

    async def run(
        self, call: Callable[[], Awaitable[T]], seconds: float, operation: str = "store"
    ) -> T:
        """`call()` within `seconds`; StoreUnavailable at once while the store is down."""
        if self._tracer is None:
            return await self._bounded(call, seconds, operation)
        attributes = {"db.operation.name": operation, **self._span_attributes}
        with self._tracer.start_as_current_span(
            f"store.{operation}", kind=self._span_kind, attributes=attributes
        ) as span:
            try:
                return await self._bounded(call, seconds, operation)
            except StoreUnavailable as error:
                span.set_attribute("error.type", error.code)
                span.set_status(Status(StatusCode.ERROR, error.detail))
                raise

    async def _bounded(self, call: Callable[[], Awaitable[T]], seconds: float, operation: str) -> T:
        if not self._circuit.allow():
            raise StoreUnavailable(
                f"the plan store failed moments ago and is not asked again for up to "
                f"{self._down_seconds:g} s"
            )
        try:
            async with asyncio.timeout(seconds):
                result = await call()
        except (StoreFull, TenantQuotaExceeded):
            self._circuit.record_success()  # the store answered
            raise
        except StoreUnavailable:
            self._circuit.record_failure()
            raise
        except TimeoutError as exc:
            self._circuit.record_failure()
            raise StoreUnavailable(
                f"the plan store did not answer within {seconds:.2f} s ({operation})"
            ) from exc
        except BaseException:
            self._circuit.release()
            raise
        self._circuit.record_success()
        return result

    async def status(self) -> tuple[bool, str | None]:
        """Whether the store answers now, and its eviction policy when it says. Asked even
        while the store is skipped: /health is also the probe that finds it back (and closes
        the circuit), or finds it still down (and keeps it open)."""
        try:
            async with asyncio.timeout(min(self._operation_timeout, HEALTH_PROBE_SECONDS)):
                policy = await self.store.eviction_policy()
        except (StoreUnavailable, TimeoutError):
            self._circuit.record_failure()
            return False, None
        self._circuit.record_success()
        return True, policy

    def _changed(self, _: str, state: CircuitState) -> None:
        if state is CircuitState.OPEN:
            self._log.warning("store_marked_down", for_seconds=self._down_seconds)
        elif state is CircuitState.CLOSED:
            self._log.info("store_back")


class StoredRequest(BaseModel):
    """Of a stored plan's request, what a later request on the plan reads: its goal,
    constraints, context and strategy, and (a replan's) each reported step's status."""

    goal: str | None = None
    constraints: list[str] = Field(default_factory=list)
    context: dict[str, Any] = Field(default_factory=dict)
    strategy: str | None = None
    step_states: dict[str, str] = Field(default_factory=dict)

    @field_validator("step_states", mode="before")
    @classmethod
    def _statuses(cls, value: Any) -> Any:
        # A record kept whole states ({"status": ...}) before only the statuses were kept.
        if isinstance(value, dict):
            return {
                step: state.get("status") if isinstance(state, dict) else state
                for step, state in value.items()
            }
        return value


class StoredPlan(BaseModel):
    """A plan record as the store keeps it: the answer, and what it answered."""

    response: PlanResponse
    request: StoredRequest = Field(default_factory=StoredRequest)

    def as_text(self) -> str:
        """The record's JSON as the store holds it (no `step_states` when none were
        reported), written by pydantic in one pass."""
        exclude = None if self.request.step_states else {"request": {"step_states"}}
        try:
            return self.model_dump_json(exclude=exclude)
        except PydanticSerializationError:  # a lone surrogate: only Python's encoder keeps it
            return encode(self.model_dump(mode="json", exclude=exclude))


@dataclass(frozen=True)
class Records:
    """One principal's records in the store, within one request's deadline."""

    guard: StoreGuard
    owner: Principal
    deadline: Deadline

    def _run(self, call: Callable[[], Awaitable[T]], operation: str) -> Awaitable[T]:
        return self.guard.run(call, self.guard.time_for(self.deadline), operation)

    async def put_plan(self, plan_id: str, record: StoredPlan) -> None:
        store = self.guard.store
        text = record.as_text()
        await self._run(lambda: store.put_plan(self.owner, plan_id, text), "put_plan")

    async def get_plan(self, plan_id: str) -> StoredPlan | None:
        store = self.guard.store
        data = await self._run(lambda: store.get_plan(self.owner, plan_id), "get_plan")
        return None if data is None else StoredPlan.model_validate(data)

    async def claim(self, key: str, fingerprint: str, lease: float) -> ClaimOutcome:
        store = self.guard.store
        return await self._run(
            lambda: store.claim(self.owner, key, fingerprint, lease_seconds=lease), "claim"
        )

    async def wait(self, key: str, fingerprint: str, until: Deadline, lease: float) -> ClaimOutcome:
        """Waits for the key's holder until `until`: a wait, not one operation, so it is
        bounded by that deadline rather than by the operation timeout."""
        store = self.guard.store
        return await self.guard.run(
            lambda: store.wait(self.owner, key, fingerprint, until, lease_seconds=lease),
            until.remaining() + GRACE_SECONDS,
            "wait",
        )

    async def complete(self, claim: Claimed, response: JSONObject, ttl: float) -> bool:
        store = self.guard.store
        return await self._run(lambda: store.complete(claim, response, ttl), "complete")

    async def renew(self, claim: Claimed, lease: float) -> bool:
        store = self.guard.store
        return await self._run(lambda: store.renew(claim, lease), "renew")

    async def release(self, claim: Claimed) -> None:
        store = self.guard.store
        await self._run(lambda: store.release(claim), "release")

    async def cache_get(self, key: str) -> JSONObject | None:
        store = self.guard.store
        return await self._run(lambda: store.cache_get(self.owner, key), "cache_get")

    async def cache_put(self, key: str, value: JSONObject, ttl: float) -> None:
        store = self.guard.store
        await self._run(lambda: store.cache_put(self.owner, key, value, ttl), "cache_put")
