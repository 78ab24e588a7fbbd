"""Identical requests answered once: a TTL cache of model plans, and single flight.

Identical means the same goal, constraints and context (white space folded), the same tools
and worked examples, under the same models, prompt, planning settings (the profile among them)
and configured examples. Only model plans are cached: a fallback plan is what
the service says when the model failed, and the next request should try the model again.
Concurrent identical requests share the one planning task of the first (single flight), so ten
at once cost one LLM call. Entries and shared runs are the caller's own: a principal is never
answered from another's plan (nor told its id). With a Redis store the entries live there, so
every replica answers from one cache; a Redis that fails is a miss, never an error. In memory
the cache is bounded in entries and in bytes, each principal's entries within its own cap and
its fair share of the bound. It keeps a plan as its JSON's UTF-8 bytes, weighed by what they
hold, and reads a hit back into a response: the response object itself holds about four times
its JSON (every field a Python object), which the bound would not see.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from planner_arm.clock import Clock
from planner_arm.config import CacheSettings, Settings
from planner_arm.errors import StoreUnavailable
from planner_arm.metrics import PlannerMetrics
from planner_arm.plan.schemas import EstimatedCost, PlanRequest, PlanResponse
from planner_arm.service.records import Records
from planner_arm.store.base import note_store_failure, owned, utf8
from planner_arm.store.memory import FairShareMap, held_size
from planner_arm.strategies.prompts.plans import PROMPT_VERSION

_NO_COST = EstimatedCost(llm_usd=0.0, prompt_tokens=0, completion_tokens=0)


def _fold(text: str) -> str:
    return " ".join(text.split())


def settings_fingerprint(settings: Settings) -> str:
    """What changes a plan besides the request: models, prompt, planning rules (the profile
    among them), arms and the configured worked examples."""
    relevant = settings.model_dump(
        mode="json", include={"model", "planning", "arms", "arm_aliases", "retry", "examples"}
    )
    relevant["prompt_version"] = PROMPT_VERSION
    return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()


def request_key(request: PlanRequest, fingerprint: str) -> str:
    """Requests with the same key get the same plan; a budget is part of the request, so a
    plan cached for another budget (or none) is never handed to a request with a budget."""
    material: list[Any] = [
        fingerprint,
        _fold(request.goal),
        [_fold(c) for c in request.constraints],
        request.context,
    ]
    # Each part below is appended only when given, so requests without it keep their key.
    if request.budget is not None:
        material.append(request.budget.model_dump(mode="json"))
    if request.tool_set is not None:  # the tools a plan is over: their content's digest
        material.append({"tools": request.tool_set[0]})
    if request.examples:
        material.append({"examples": [ex.model_dump(mode="json") for ex in request.examples]})
    depth: dict[str, Any] = {"strategy": request.strategy, "specialize": request.specialize}
    if request.strategy == "hierarchical":
        depth["max_depth"] = request.max_depth
    if depth != {"strategy": "flat", "specialize": False}:  # likewise, only when asked
        material.append(depth)
    encoded = json.dumps(material, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(encoded.encode()).hexdigest()


# Parts of a model plan made by rule because a call failed or the deadline came (a node of a
# hierarchical plan, an input): like a fallback plan, it is not what the next request gets.
_TRANSIENT = ("deadline", "llm_unavailable", "circuit_open", "saturated")


def cacheable(response: PlanResponse) -> bool:
    """A model plan none of whose parts stood in for a model that failed or ran out of time."""
    if response.metadata.source != "llm":
        return False
    for warning in response.metadata.warnings:
        if warning.code == "fallback_used":
            return False
        if warning.code in ("node_not_expanded", "input_by_rule") and any(
            word in warning.detail for word in _TRANSIENT
        ):
            return False
    return True


class PlanCache(FairShareMap[bytes]):
    """Least-recently-used plans, each good for `ttl` seconds on the injected clock, each
    principal's in a map of its own (at most `owner_max_bytes`, its own oldest out first),
    all within `max_entries` and (when given) `max_bytes`, shared fairly."""

    def __init__(
        self,
        ttl: float,
        max_entries: int,
        clock: Clock,
        max_bytes: int | None = None,
        owner_max_bytes: int | None = None,
    ) -> None:
        super().__init__(
            max_entries,
            clock,
            max_bytes=max_bytes,
            size=held_size,
            owner_max_bytes=owner_max_bytes,
        )
        self._ttl = ttl

    def keep(self, owner: str, key: str, response: PlanResponse) -> None:
        self.put(owner, key, utf8(response.model_dump_json()), self._ttl)

    def found(self, owner: str, key: str) -> PlanResponse | None:
        """The owner's plan under `key`, read afresh from what the cache holds; or None."""
        held = self.get(owner, key)
        return None if held is None else PlanResponse.model_validate_json(held)


# The planning of one request: run when the cache has no plan for it.
Work = Callable[[], Awaitable[PlanResponse]]


class CachingPlanner:
    """Cache, then single flight, then the planning. A repeated answer carries the id of the
    plan it repeats in `metadata.cached_plan_id`."""

    def __init__(
        self,
        cache: CacheSettings,
        fingerprint: str,
        metrics: PlannerMetrics,
        clock: Clock,
        shared: bool = False,
        owner_max_bytes: int | None = None,
    ) -> None:
        """`fingerprint`: what changes a plan besides the request (`settings_fingerprint`).
        `shared`: the entries live in the store, for every replica (Redis); else they stay in
        this process, at most `owner_max_bytes` of them each principal's."""
        self._shared = shared
        self._ttl = cache.ttl_seconds
        self._enabled = cache.enabled
        self._metrics = metrics
        self._clock = clock
        self._fingerprint = fingerprint
        self._cache = PlanCache(
            cache.ttl_seconds, cache.max_entries, clock, cache.max_bytes, owner_max_bytes
        )
        self._in_flight: dict[str, asyncio.Task[PlanResponse]] = {}
        self._followers: dict[str, int] = {}  # requests waiting on another's planning

    async def plan(
        self,
        request: PlanRequest,
        request_id: str,
        records: Records,
        work: Work,
        *,
        use_cache: bool,
        streamed: bool = False,
    ) -> PlanResponse:
        """`work()`'s plan for `request`, or a repeat of one made for the same request.
        `records`: the caller's, whose cache entries these are (and whose deadline a repeat's
        latency is measured from). `streamed`: the caller watches this request's own model
        calls; a cache hit or a shared run has none to watch."""
        if not self._enabled:
            return await work()
        key = request_key(request, self._fingerprint)
        flight = owned(records.owner, key)  # in this process: runs per principal
        if use_cache:
            cached = await self._cached(key, records)
            if cached is not None:
                self._metrics.child(self._metrics.cache_requests, "hit").inc()
                return self._repeat(cached, request_id, records)
            leader = self._in_flight.get(flight)
            if leader is not None:
                self._metrics.child(self._metrics.cache_requests, "coalesced").inc()
                self._followers[flight] = self._followers.get(flight, 0) + 1
                try:
                    shared = await asyncio.shield(leader)
                finally:
                    self._followers[flight] -= 1
                    if not self._followers[flight]:
                        del self._followers[flight]
                return self._repeat(shared, request_id, records)
        outcome = "miss" if use_cache else "bypass"
        self._metrics.child(self._metrics.cache_requests, outcome).inc()

        # A task of its own, which also stores its answer: a caller that goes away cancels
        # neither the others' answer nor the cache entry.
        task = asyncio.create_task(self._plan_and_store(key, work, records))
        if use_cache:
            self._in_flight[flight] = task
            task.add_done_callback(lambda _: self._in_flight.pop(flight, None))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            # A streamed answer's caller left: its model call goes too, unless another
            # request is waiting for the same plan.
            if streamed and not self._followers.get(flight):
                task.cancel()
            raise

    async def _plan_and_store(self, key: str, work: Work, records: Records) -> PlanResponse:
        response = await work()
        if cacheable(response):
            await self._keep(key, response, records)
        return response

    async def _cached(self, key: str, records: Records) -> PlanResponse | None:
        if not self._shared:
            return self._cache.found(records.owner.id, key)
        try:
            record = await records.cache_get(key)
        except StoreUnavailable as error:
            note_store_failure(self._metrics, "cache_get", error)
            return None
        return None if record is None else PlanResponse.model_validate(record)

    async def _keep(self, key: str, response: PlanResponse, records: Records) -> None:
        if not self._shared:
            self._cache.keep(records.owner.id, key, response)
            return
        try:
            await records.cache_put(key, response.model_dump(mode="json"), self._ttl)
        except StoreUnavailable as error:
            note_store_failure(self._metrics, "cache_put", error)

    def _repeat(self, original: PlanResponse, request_id: str, records: Records) -> PlanResponse:
        """The same plan for another caller: its own ids and latency, no new cost, marked as a
        repeat of the original."""
        # A shared fallback plan stays what it is, a fallback; a model plan is a cache answer.
        source = "cache" if original.metadata.source == "llm" else original.metadata.source
        metadata = original.metadata.model_copy(
            update={
                "source": source,
                "attempts": 0,
                "cached_plan_id": original.plan_id,
                "latency_ms": round(records.deadline.elapsed_ms(), 3),
            }
        )
        return original.model_copy(
            update={
                "plan_id": uuid.uuid4().hex,
                "request_id": request_id,
                "estimated_cost": _NO_COST,
                "metadata": metadata,
            }
        )
