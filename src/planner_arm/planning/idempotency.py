"""Idempotency-Key: the same request with the same key is planned once, on any replica.

The first request claims the key in the store and plans; a request with the same key and the
same body gets the stored answer (same plan_id, no model call), also while the first is still
planning: it waits for the answer, or, when the first gave the key up (it failed, or its lease
ran out), plans itself. The same key with another body is refused. Without a
working store the request is still planned, and the answer warns that the key was not kept.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass

from pydantic import BaseModel

from planner_arm.clock import Clock, Deadline
from planner_arm.errors import IdempotencyInProgress, IdempotencyKeyReused, StoreUnavailable
from planner_arm.metrics import PlannerMetrics
from planner_arm.pipeline.assembly import with_warning
from planner_arm.plan.schemas import PlanResponse
from planner_arm.store.base import (
    Claimed,
    Conflict,
    InProgress,
    PlanStore,
    Replay,
    note_store_failure,
)

# The claim outlives the planning deadline a little, so a replica that died mid-plan does not
# hold the key for the whole record TTL.
CLAIM_MARGIN_SECONDS = 5.0


def body_fingerprint(kind: str, request: BaseModel) -> str:
    """What "the same body" means: the endpoint and every field but the caller's request id,
    which a client retrying the same request may well change."""
    body = request.model_dump(mode="json", exclude={"request_id"})
    encoded = json.dumps([kind, body], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(encoded.encode()).hexdigest()


@dataclass
class Idempotency:
    # `record_ttl`: how long an answer is kept for its key; `timeout`: the request
    # deadline, which the first caller's claim outlives a little.
    store: PlanStore
    _: KW_ONLY
    record_ttl: float
    timeout: float
    metrics: PlannerMetrics
    clock: Clock

    async def run(
        self,
        kind: str,
        key: str | None,
        request: BaseModel,
        work: Callable[[], Awaitable[PlanResponse]],
        request_id: str,
    ) -> PlanResponse:
        """`work()`'s answer, or the answer already given to this key and body (the same plan
        and plan_id, under this request's id, as its header and log lines have it)."""
        if key is None:
            return await work()
        fingerprint = body_fingerprint(kind, request)
        lease = self.timeout + CLAIM_MARGIN_SECONDS
        try:
            outcome = await self.store.claim(key, fingerprint, lease_seconds=lease)
            if isinstance(outcome, InProgress):
                # A waiting request gives up a little after the first one's own deadline.
                wait = Deadline(lease, self.clock)
                outcome = await self.store.wait(key, fingerprint, wait, lease_seconds=lease)
        except StoreUnavailable as error:
            return await self._without_store(work, error)
        if isinstance(outcome, Replay):
            self.metrics.idempotent_replays.inc()
            replayed = PlanResponse.model_validate(outcome.response)
            return replayed.model_copy(update={"request_id": request_id})
        if isinstance(outcome, Conflict):
            raise IdempotencyKeyReused(
                "This Idempotency-Key was used with a different request body; use a new "
                "key for a new request."
            )
        if isinstance(outcome, InProgress):
            raise IdempotencyInProgress(
                "A request with this Idempotency-Key is still being planned; try again."
            )
        return await self._first(outcome, work)

    async def _first(
        self, claim: Claimed, work: Callable[[], Awaitable[PlanResponse]]
    ) -> PlanResponse:
        try:
            response = await work()
        except BaseException:
            # Planning failed (or the caller left): free the key so a retry can plan.
            try:
                await self.store.release(claim)
            except StoreUnavailable as error:
                self._failed("release", error)
            raise
        try:
            await self.store.complete(claim, response.model_dump(mode="json"), self.record_ttl)
        except StoreUnavailable as error:
            self._failed("complete", error)
            return _unkept(response, error)
        return response

    async def _without_store(
        self, work: Callable[[], Awaitable[PlanResponse]], error: StoreUnavailable
    ) -> PlanResponse:
        self._failed("claim", error)
        return _unkept(await work(), error)

    def _failed(self, operation: str, error: StoreUnavailable) -> None:
        note_store_failure(self.metrics, operation, error)


def _unkept(response: PlanResponse, error: StoreUnavailable) -> PlanResponse:
    return with_warning(
        response, "idempotency_not_kept", f"the store is unavailable ({error.detail})"
    )
