"""The plan store seen through traces: each record operation of a store in its own span.

`TracedStore` wraps either backend when tracing is on (the composition root puts it there);
each read and write of a plan, an idempotency record or a cache entry is a `store.<operation>`
span, a failure marked with `error.type`. The probes' `ping` and `healthy` and `close` pass
through unrecorded: they are not part of a request.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from planner_arm.clock import Deadline
from planner_arm.errors import StoreUnavailable
from planner_arm.store.base import Claimed, ClaimOutcome, JSONObject, PlanStore, StoreKind


class TracedStore:
    """`store`, with a span around each record operation."""

    def __init__(self, store: PlanStore, tracer: trace.Tracer) -> None:
        self._store = store
        self._tracer = tracer
        # A Redis command is a call out of the process; the memory store's is not.
        self._kind = SpanKind.CLIENT if store.kind == "redis" else SpanKind.INTERNAL
        self._system = {"db.system.name": "redis"} if store.kind == "redis" else {}

    @property
    def kind(self) -> StoreKind:
        return self._store.kind

    @contextmanager
    def _span(self, operation: str) -> Iterator[None]:
        attributes = {"db.operation.name": operation, "planner.store": self.kind, **self._system}
        with self._tracer.start_as_current_span(
            f"store.{operation}", kind=self._kind, attributes=attributes
        ) as span:
            try:
                yield
            except StoreUnavailable as error:
                span.set_attribute("error.type", error.code)
                span.set_status(Status(StatusCode.ERROR, error.detail))
                raise

    async def put_plan(self, plan_id: str, record: JSONObject, ttl: float | None = None) -> None:
        with self._span("put_plan"):
            await self._store.put_plan(plan_id, record, ttl)

    async def get_plan(self, plan_id: str) -> JSONObject | None:
        with self._span("get_plan"):
            return await self._store.get_plan(plan_id)

    async def claim(self, key: str, fingerprint: str, *, lease_seconds: float) -> ClaimOutcome:
        with self._span("claim"):
            return await self._store.claim(key, fingerprint, lease_seconds=lease_seconds)

    async def wait(
        self, key: str, fingerprint: str, deadline: Deadline, *, lease_seconds: float
    ) -> ClaimOutcome:
        with self._span("wait"):
            return await self._store.wait(key, fingerprint, deadline, lease_seconds=lease_seconds)

    async def complete(
        self, claim: Claimed, response: JSONObject, ttl: float | None = None
    ) -> bool:
        with self._span("complete"):
            return await self._store.complete(claim, response, ttl)

    async def release(self, claim: Claimed) -> None:
        with self._span("release"):
            await self._store.release(claim)

    async def cache_get(self, key: str) -> JSONObject | None:
        with self._span("cache_get"):
            return await self._store.cache_get(key)

    async def cache_put(self, key: str, value: JSONObject, ttl: float) -> None:
        with self._span("cache_put"):
            await self._store.cache_put(key, value, ttl)

    async def ping(self) -> None:
        await self._store.ping()

    async def healthy(self) -> bool:
        return await self._store.healthy()

    async def close(self) -> None:
        await self._store.close()
