"""Idempotency-Key: the same request with the same key is planned once, on any replica.

Keys are the caller's own: two principals using the same key never meet. The first request
claims the key in the store and plans, renewing its lease while it works; a request with the
same key and the same body gets the stored answer (same plan_id, no model call), also while
the first is still planning: it waits for the answer within its own deadline (then 409
`idempotency_in_progress` with Retry-After), or, when the first gave the key up (it failed, or
its lease ran out), plans itself. The same key with another body is refused.

Exactly one answer per key: when the first caller finds, on completing, that its claim is no
longer its own (Redis was flushed or restarted, or the replica stalled past its lease and
another caller took the key), it answers what the store holds for the key, waiting for it
within its deadline, never its own plan. When nothing can be kept (the store does not answer,
or the key holds another body's answer) the answer says so: `idempotency_not_kept`.

A keyed request's planning runs to its end even when its caller goes away (a streamed answer
whose client disconnects): the answer is kept for the key, so the retry that follows gets it
without a second model call.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field

import structlog
from pydantic import BaseModel

from planner_arm.clock import Clock, Deadline
from planner_arm.errors import IdempotencyInProgress, IdempotencyKeyReused, StoreUnavailable
from planner_arm.metrics import PlannerMetrics
from planner_arm.pipeline.assembly import with_warning
from planner_arm.plan.schemas import PlanResponse
from planner_arm.service.records import Records
from planner_arm.store.base import (
    Claimed,
    ClaimOutcome,
    Conflict,
    InProgress,
    Replay,
    note_store_failure,
)

# The claim outlives the planning deadline a little, so a replica that died mid-plan does not
# hold the key for the whole record TTL.
CLAIM_MARGIN_SECONDS = 5.0
# A working caller renews its claim this many times a lease, so a slow store round trip or a
# busy event loop never lets a healthy claim lapse.
RENEWALS_PER_LEASE = 3
# A request that arrived with the first one waits this much past its own deadline: the first
# stores its answer just after its deadline (a store operation gets at least 0.2 s).
WAIT_GRACE_SECONDS = 0.25
# Retry-After of a 409 idempotency_in_progress: the first request's deadline came before the
# waiter's, so its answer is there by then, or its claim lapses with its lease.
IN_PROGRESS_RETRY_SECONDS = 1.0

Work = Callable[[], Awaitable[PlanResponse]]


def body_fingerprint(kind: str, request: BaseModel) -> str:
    """What "the same body" means: the endpoint and every field but the caller's request id,
    which a client retrying the same request may well change."""
    body = request.model_dump(mode="json", exclude={"request_id"})
    encoded = json.dumps([kind, body], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(encoded.encode()).hexdigest()


def key_hash(key: str) -> str:
    """What a log line says about an Idempotency-Key: a short hash, not the caller's text."""
    return hashlib.sha256(key.encode()).hexdigest()[:16]


@dataclass
class Idempotency:
    # `record_ttl`: how long an answer is kept for its key; `timeout`: the request
    # deadline, which the first caller's claim outlives a little.
    _: KW_ONLY
    record_ttl: float
    timeout: float
    metrics: PlannerMetrics
    clock: Clock
    # How the renewal waits between renewals: real time by default, as Redis expires a
    # lease on its own clock; a test passes a sleep it drives by hand.
    renew_sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep)

    def __post_init__(self) -> None:
        self._log = structlog.get_logger("planner_arm.service.idempotency").bind()
        # Keyed plannings whose caller left: kept here until they finish and store their answer.
        self._orphans: set[asyncio.Task[PlanResponse]] = set()

    @property
    def lease(self) -> float:
        return self.timeout + CLAIM_MARGIN_SECONDS

    async def run(
        self,
        kind: str,
        key: str,
        request: BaseModel,
        work: Work,
        request_id: str,
        records: Records,
    ) -> PlanResponse:
        """`work()`'s answer, or the answer already given to this key and body (the same plan
        and plan_id, under this request's id, as its header and log lines have it)."""
        fingerprint = body_fingerprint(kind, request)
        try:
            outcome = await records.claim(key, fingerprint, self.lease)
            if isinstance(outcome, InProgress):
                # A waiting request waits within its own deadline, not the first one's lease.
                wait = Deadline(records.deadline.remaining() + WAIT_GRACE_SECONDS, self.clock)
                outcome = await records.wait(key, fingerprint, wait, self.lease)
        except StoreUnavailable as error:
            self._failed("claim", error)
            return _unkept(await work(), _down(error))
        if isinstance(outcome, Claimed):
            return await self._first(outcome, work, records, request_id)
        return self._answer(outcome, request_id)

    def _answer(self, outcome: ClaimOutcome, request_id: str) -> PlanResponse:
        if isinstance(outcome, Replay):
            self.metrics.idempotent_replays.inc()
            replayed = PlanResponse.model_validate(outcome.response)
            return replayed.model_copy(update={"request_id": request_id})
        if isinstance(outcome, Conflict):
            raise IdempotencyKeyReused(
                "This Idempotency-Key was used with a different request body; use a new "
                "key for a new request."
            )
        raise IdempotencyInProgress(
            "A request with this Idempotency-Key is still being planned; try again.",
            retry_after=IN_PROGRESS_RETRY_SECONDS,
        )

    async def _first(
        self, claim: Claimed, work: Work, records: Records, request_id: str
    ) -> PlanResponse:
        # The planning is a task of its own: a caller that goes away does not stop it, so the
        # key still gets its one answer and the retry no second model call.
        task = asyncio.create_task(self._plan_and_keep(claim, work, records, request_id))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                self._orphans.add(task)
                task.add_done_callback(self._orphan_done)
            raise

    def _orphan_done(self, task: asyncio.Task[PlanResponse]) -> None:
        self._orphans.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a failure was logged where it happened

    async def _plan_and_keep(
        self, claim: Claimed, work: Work, records: Records, request_id: str
    ) -> PlanResponse:
        renewing = asyncio.create_task(self._renew(claim, records))
        try:
            response = await work()
        except BaseException:
            renewing.cancel()
            # Planning failed: free the key so a retry can plan.
            try:
                await records.release(claim)
            except StoreUnavailable as error:
                self._failed("release", error)
            raise
        renewing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewing
        try:
            kept = await records.complete(claim, response.model_dump(mode="json"), self.record_ttl)
        except StoreUnavailable as error:
            self._failed("complete", error)
            return _unkept(response, _down(error))
        if kept:
            return response
        return await self._claim_lost(claim, response, records, request_id)

    async def _renew(self, claim: Claimed, records: Records) -> None:
        lease = self.lease
        while True:
            await self.renew_sleep(lease / RENEWALS_PER_LEASE)
            try:
                if not await records.renew(claim, lease):
                    return  # lost: completing will find out and answer what the key holds
            except StoreUnavailable as error:
                self._failed("renew", error)

    async def _claim_lost(
        self, claim: Claimed, mine: PlanResponse, records: Records, request_id: str
    ) -> PlanResponse:
        """Another caller holds the key now: its answer is the key's answer, not ours."""
        try:
            # Within what is left of this request's own deadline.
            outcome = await records.wait(claim.key, claim.fingerprint, records.deadline, self.lease)
            if isinstance(outcome, Claimed):  # the key is free again (flushed): ours stands
                if await records.complete(outcome, mine.model_dump(mode="json"), self.record_ttl):
                    self._lost(claim, "own_plan_kept")
                    return mine
                outcome = InProgress()
        except StoreUnavailable as error:
            self._failed("complete", error)
            self._lost(claim, "own_plan_not_kept")
            return _unkept(mine, _down(error))
        if isinstance(outcome, Conflict):
            self._lost(claim, "own_plan_not_kept")
            return _unkept(mine, "the key now holds the answer to another request body")
        self._lost(claim, "stored_answer" if isinstance(outcome, Replay) else "in_progress")
        return self._answer(outcome, request_id)

    def _lost(self, claim: Claimed, answered: str) -> None:
        self._log.warning("idempotency_claim_lost", key_hash=key_hash(claim.key), answered=answered)

    def _failed(self, operation: str, error: StoreUnavailable) -> None:
        note_store_failure(self.metrics, operation, error)


def _down(error: StoreUnavailable) -> str:
    return f"the store is unavailable ({error.detail})"


def _unkept(response: PlanResponse, why: str) -> PlanResponse:
    return with_warning(response, "idempotency_not_kept", why)
