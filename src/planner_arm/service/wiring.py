"""The composition root: the one place where the process's object graph is built.

`build_runtime(settings)` makes every collaborator from the settings (the model client and its
guard, the attempt loop, the fallback gate, the toolboxes, the strategies, the cache, the
store, idempotency, the recorder) and hands each what it uses through its constructor. The
app's lifespan and every command of the CLI call it, so a plan made in-process is made by the
very objects the HTTP service uses. With tracing on, the model client's HTTP pool is
instrumented, the model client and the fallback get the tracer, and the store is wrapped in
spans.
"""

from __future__ import annotations

import asyncio
import functools
import random
from dataclasses import dataclass, field
from importlib.metadata import version as package_version
from typing import Literal

import httpx
import structlog

from planner_arm.clock import Clock
from planner_arm.config import Settings
from planner_arm.llm.chain import CallTime, ModelChain, ModelHealth
from planner_arm.llm.client import LLMClient, build_http_client
from planner_arm.llm.guarded import GuardedLLM
from planner_arm.llm.retry import RetryPolicy
from planner_arm.metrics import PlannerMetrics
from planner_arm.plan.tool_inputs import load_checker
from planner_arm.plan.weighed import BuildLane
from planner_arm.service.cache import CachingPlanner, settings_fingerprint
from planner_arm.service.idempotency import Idempotency
from planner_arm.service.recorder import PlanRecorder, TrafficStats
from planner_arm.service.records import StoreGuard
from planner_arm.service.service import PlanService, Strategies
from planner_arm.store.base import NO_CAPS, OwnerCaps, PlanStore
from planner_arm.store.memory import MemoryStore
from planner_arm.strategies.answering import Answers, FallbackGate
from planner_arm.strategies.expand import Expander, SubPlanner
from planner_arm.strategies.flat import FlatPlanner
from planner_arm.strategies.hierarchical import HierarchicalPlanner
from planner_arm.strategies.iterative import IterativePlanner
from planner_arm.strategies.prompts.plans import PROMPT_VERSION, example_texts
from planner_arm.strategies.replan import Replanner
from planner_arm.strategies.specialize import Specializer
from planner_arm.strategies.toolbox import Toolboxes
from planner_arm.tracing import NO_TRACING, Tracing


@dataclass
class Runtime:
    """The built object graph of one process: what the API and the CLI use, and what its
    lifespan closes. The parts are named so a test can reach the one it exercises."""

    settings: Settings
    metrics: PlannerMetrics
    clock: Clock
    stats: TrafficStats
    store: PlanStore
    guard: StoreGuard
    plans: PlanService
    flat: FlatPlanner
    replanner: Replanner
    specializer: Specializer
    models: ModelChain
    llm: LLMClient | None = None
    closed: bool = field(default=False, init=False)
    # The model client's warm-up, running beside the first requests (None without a model).
    warming: asyncio.Task[None] | None = field(default=None, init=False)

    def start_warm_up(self) -> None:
        """In the background, once: with a model configured, the SDK's import (in a thread of
        its own) and one rehearsal of the model client's whole path (no network); then the
        tool-schema checker's imports, in a worker thread. Readiness waits for none of it (the
        rule-based answer needs none of it); a model call made before the SDK is in waits
        for its import, and nothing else."""
        if self.warming is not None:
            return
        if self.llm is not None:
            self.llm.sdk.start()
        self.warming = asyncio.get_running_loop().create_task(self._warm_up())

    async def _warm_up(self) -> None:
        log = structlog.get_logger("planner_arm.service")
        if self.llm is not None:
            try:
                await self.llm.warm_up()
            except Exception as error:  # a failed rehearsal costs nothing else
                log.warning("model_client_warm_up_failed", error=str(error)[:200])
        # The first request with tools would otherwise import jsonschema on the event loop.
        await asyncio.to_thread(load_checker)

    async def warmed(self) -> None:
        """Returns once the warm-up is over (at once when there is none)."""
        if self.warming is not None:
            await asyncio.shield(self.warming)

    def model_health(self) -> ModelHealth:
        """Each model's circuit now; empty when no model is configured."""
        return self.models.health()

    def llm_status(self) -> Literal["configured", "degraded", "disabled"]:
        if not self.models.configured:
            return "disabled"
        return "degraded" if self.model_health().degraded else "configured"

    async def store_status(self) -> tuple[Literal["memory", "redis", "degraded"], str | None]:
        """The store's kind, or `degraded` when it does not answer now (plans still go out);
        and Redis's eviction policy when it says (`unknown` when it may not be read)."""
        answers, policy = await self.guard.status()
        return (self.store.kind if answers else "degraded"), policy

    async def aclose(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.warming is not None:
            self.warming.cancel()
        await self.models.aclose()
        if self.llm is not None:
            await self.llm.aclose()
        await self.store.close()


@functools.cache
def service_version() -> str:
    """The installed version, read once: reading the package metadata stats the files of
    every path entry, and each call gives up the interpreter lock to any worker thread
    (every `/health` names the version)."""
    return package_version("planner-arm")


def service_metrics(settings: Settings, version: str) -> PlannerMetrics:
    """The process's metrics registry (the app builds it first: its middleware counts every
    request, the ones answered before the lifespan's service exists included)."""
    return PlannerMetrics(
        version, PROMPT_VERSION, longest_seconds=settings.planning.timeout_seconds
    )


def owner_caps(settings: Settings) -> OwnerCaps:
    """What one principal may hold of each kind of record: the `tenants` caps, where there is
    someone to crowd out (API keys configured); none for the one anonymous caller."""
    tenants = settings.tenants
    if not settings.auth.enabled:
        return NO_CAPS
    return OwnerCaps(
        plan_bytes=tenants.max_plan_bytes or None,
        idempotency_bytes=tenants.max_idempotency_bytes or None,
        cache_bytes=tenants.max_cache_bytes or None,
    )


def build_store(settings: Settings, clock: Clock) -> PlanStore:
    """The store the settings ask for: Redis when `store.url` is set, else memory. Nothing
    connects until the first command."""
    config = settings.store
    caps = owner_caps(settings)
    if config.url is None:
        return MemoryStore(
            ttl_seconds=config.ttl_seconds,
            max_entries=config.max_entries,
            max_bytes=config.max_bytes,
            caps=caps,
            poll_interval_seconds=config.poll_interval_seconds,
            clock=clock,
        )
    # Imported here: a process without Redis configured never loads the client library.
    from planner_arm.store.redis_backend import RedisStore, redis_client

    client = redis_client(config.url.get_secret_value().strip(), config.socket_timeout_seconds)
    return RedisStore(
        client,
        clock=clock,
        ttl_seconds=config.ttl_seconds,
        key_prefix=config.key_prefix,
        poll_interval_seconds=config.poll_interval_seconds,
        operation_timeout_seconds=config.socket_timeout_seconds,
        caps=caps,
    )


def _llm_client(
    settings: Settings, http_client: httpx.AsyncClient | None, tracing: Tracing
) -> LLMClient:
    """The model client; with tracing on, its pool sends the trace context to the model."""
    if tracing.enabled:
        http_client = http_client or build_http_client(settings)
        tracing.instrument_client(http_client)
    return LLMClient(settings, http_client, tracing.tracer() if tracing.enabled else None)


def _model_chain(
    settings: Settings,
    llm: LLMClient | None,
    metrics: PlannerMetrics,
    clock: Clock,
    rng: random.Random,
) -> ModelChain:
    retry = settings.retry
    return ModelChain(
        GuardedLLM(llm, settings, metrics, clock) if llm is not None else None,
        models=settings.model.chain,
        retry=retry,
        call_time=CallTime(
            call_timeout=settings.model.call_timeout_seconds,
            next_model_reserve=retry.next_model_reserve_seconds,
            fallback_reserve=retry.fallback_reserve_seconds,
        ),
        policy=RetryPolicy(retry, clock, rng),
        pricing=settings.prices_that_apply,
        max_tokens=settings.model.max_tokens,
        metrics=metrics,
    )


def build_runtime(
    settings: Settings,
    *,
    metrics: PlannerMetrics | None = None,
    http_client: httpx.AsyncClient | None = None,
    clock: Clock | None = None,
    rng: random.Random | None = None,
    tracing: Tracing = NO_TRACING,
    build_lane: BuildLane | None = None,
) -> Runtime:
    """The whole object graph for `settings`. `http_client`, `clock` and `rng` are for tests:
    a client whose calls respx can see, a fake clock, a seeded source of backoff jitter.
    `tracing` is the process's tracer provider (the app starts it; none by default);
    `build_lane` the lane tool-set builds take (tests hold its builds)."""
    metrics = metrics or service_metrics(settings, service_version())
    clock = clock or Clock()
    rng = rng or random.Random()  # noqa: S311 - backoff jitter, not a secret
    llm = _llm_client(settings, http_client, tracing) if settings.llm_enabled else None
    models = _model_chain(settings, llm, metrics, clock, rng)
    answers = Answers(models, FallbackGate(settings.fallback.enabled, metrics), tracing.tracer())
    toolboxes = Toolboxes(settings, metrics, build_lane)
    configured = toolboxes.configured
    flat = FlatPlanner(answers=answers, example_texts=example_texts())
    subplans = SubPlanner(answers)
    hierarchical = HierarchicalPlanner(
        answers=answers,
        subplans=subplans,
        concurrency=settings.expansion.concurrency,
        max_plan_steps=settings.expansion.max_plan_steps,
        metrics=metrics,
    )
    specializer = Specializer(
        answers, max_concurrency=settings.specialize.max_concurrency, metrics=metrics
    )
    store = build_store(settings, clock)
    guard = StoreGuard(
        store,
        operation_timeout=settings.store.socket_timeout_seconds,
        down_seconds=settings.store.down_seconds,
        clock=clock,
        tracer=tracing.tracer() if tracing.enabled else None,
    )
    strategies = Strategies(
        {
            "flat": flat,
            "hierarchical": hierarchical,
            "iterative": IterativePlanner(flat, settings.planning.iterative_stage_steps),
        },
        specializer,
    )
    # With a shared store every replica answers from one cache; in memory the cache's own
    # LRU is faster than a round trip through the store's JSON records.
    shared = store.shared
    cache = CachingPlanner(
        settings.cache,
        settings_fingerprint(settings),
        metrics,
        clock,
        shared,
        owner_max_bytes=owner_caps(settings).cache_bytes,
    )
    replanner = Replanner(answers=answers, planning=settings.planning)
    expander = Expander(
        subplans,
        max_plan_steps=settings.expansion.max_plan_steps,
        fallback_confidence=settings.fallback.confidence,
        metrics=metrics,
    )
    stats = TrafficStats()
    plans = PlanService(
        cache=cache,
        strategies=strategies,
        replanner=replanner,
        expander=expander,
        specializer=specializer,
        guard=guard,
        idempotency=Idempotency(
            record_ttl=settings.store.ttl_seconds,
            timeout=settings.planning.timeout_seconds,
            metrics=metrics,
            clock=clock,
        ),
        recorder=PlanRecorder(metrics, stats),
        rules=configured.rules,
        resolver=configured.resolver,
        metrics=metrics,
        clock=clock,
        timeout_seconds=settings.planning.timeout_seconds,
        toolboxes=toolboxes,
    )
    return Runtime(
        settings=settings,
        metrics=metrics,
        clock=clock,
        stats=stats,
        store=store,
        guard=guard,
        plans=plans,
        flat=flat,
        replanner=replanner,
        specializer=specializer,
        llm=llm,
        models=models,
    )
