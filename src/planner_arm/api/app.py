"""create_app(): the FastAPI application with its lifespan, middleware and error handlers."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import structlog
from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from planner_arm.api.errors import install_error_handlers
from planner_arm.api.expand_routes import expand_router
from planner_arm.api.lifecycle_routes import lifecycle_router
from planner_arm.api.middleware import BodyLimitMiddleware, HTTPMetricsMiddleware
from planner_arm.api.openapi_docs import customise_openapi
from planner_arm.api.request_context import RequestContextMiddleware
from planner_arm.api.routes import planning_router, router
from planner_arm.api.specialize_routes import specialize_router
from planner_arm.api.state import Services, service_version
from planner_arm.clock import Clock
from planner_arm.config import Settings, load_settings
from planner_arm.llm.client import LLMClient
from planner_arm.llm.prompts import PROMPT_VERSION
from planner_arm.llm.warm_up import rehearse_model_call
from planner_arm.logging import configure_logging
from planner_arm.metrics import PlannerMetrics
from planner_arm.plan.expand_schemas import ExpandRequest
from planner_arm.plan.replan_schemas import ReplanRequest
from planner_arm.plan.schemas import request_model_for
from planner_arm.planning.cache import CachingPlanner
from planner_arm.planning.lifecycle import PlanLifecycle
from planner_arm.planning.planner import PlannerArm
from planner_arm.planning.recorder import PlanRecorder
from planner_arm.planning.replan import Replanner
from planner_arm.planning.strategies import StrategyPlanner
from planner_arm.planning.traffic import TrafficStats
from planner_arm.store.factory import build_store

log = structlog.get_logger("planner_arm.api.app")


def create_app(
    settings: Settings | None = None,
    *,
    http_client: httpx.AsyncClient | None = None,
    clock: Clock | None = None,
    rng: random.Random | None = None,
) -> FastAPI:
    """Builds the app; the lifespan builds the LLM client and planner and closes them.

    `http_client`, `clock` and `rng` are for tests: a client whose calls respx can see, a
    fake clock, a seeded random source for backoff jitter.
    """
    settings = settings or load_settings()
    configure_logging(settings.server.log_level, settings.server.log_format)
    metrics = PlannerMetrics(
        service_version(), PROMPT_VERSION, longest_seconds=settings.planning.timeout_seconds
    )
    services = Services(settings=settings, metrics=metrics, stats=TrafficStats())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if settings.llm_enabled:
            services.llm = LLMClient(settings, http_client)
            # Before ready: the first plan request is then no slower than the tenth.
            await rehearse_model_call()
        else:
            log.warning(
                "llm_disabled",
                reason="no OPENAI_API_KEY and no base URL",
                serving="rule-based planner",
            )
        recorder = PlanRecorder(metrics, services.stats)
        planner = PlannerArm(settings, services.llm, metrics, clock, rng, recorder=recorder)
        services.planner = planner
        services.store = build_store(settings, planner.clock)
        # With Redis every replica answers from one cache; in memory the cache's own LRU is
        # faster than a round trip through the store's JSON records.
        shared = services.store if services.store.kind == "redis" else None
        services.plans = CachingPlanner(
            StrategyPlanner(planner), settings, metrics, planner.clock, recorder, shared
        )
        services.lifecycle = PlanLifecycle(
            planner, services.plans, Replanner(planner), services.store, settings, metrics
        )
        services.state = "ready"
        metrics.ready.set(1)
        log.info(
            "service_started",
            version=service_version(),
            model=settings.model.name,
            llm="configured" if settings.llm_enabled else "disabled",
            store=services.store.kind,
        )
        try:
            yield
        finally:
            services.begin_shutdown()
            if services.llm is not None:
                await services.llm.aclose()
            if services.store is not None:
                await services.store.close()
            log.info("service_stopped")

    app = FastAPI(
        title="planner-arm",
        version=service_version(),
        summary="Turns a goal into a validated, executable plan of arm steps.",
        lifespan=lifespan,
    )
    app.state.services = services
    keys_required = bool(settings.auth.api_keys)
    planning = planning_router(request_model_for(settings.limits), keys_required)
    lifecycle = lifecycle_router(request_model_for(settings.limits, ReplanRequest), keys_required)
    specialize = specialize_router(keys_required)
    app.include_router(planning)
    app.include_router(specialize)
    app.include_router(lifecycle)
    expand = expand_router(request_model_for(settings.limits, ExpandRequest), keys_required)
    app.include_router(expand)
    app.include_router(router)
    # What the metrics match a request against when a layer before routing answered it.
    known_routes = [
        *app.routes,
        *planning.routes,
        *specialize.routes,
        *lifecycle.routes,
        *expand.routes,
        *router.routes,
    ]
    arm_ids = [arm.id for arm in settings.arms]
    app.openapi = customise_openapi(app.openapi, arm_ids)  # type: ignore[method-assign]
    install_error_handlers(app)
    # Added innermost first. Outside in: the request id (every later layer and error can use
    # it), the metrics (which then count 413s too), the body limit, then the routes.
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.server.max_body_bytes)
    app.add_middleware(HTTPMetricsMiddleware, metrics=metrics, routes=known_routes)
    if settings.server.cors_allow_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.server.cors_allow_origins,
            allow_methods=["GET", "POST"],
            allow_headers=[
                "Authorization",
                "Cache-Control",
                "Content-Type",
                "X-API-Key",
                "X-Request-ID",
            ],
            expose_headers=["X-Request-ID"],
        )
    app.add_middleware(RequestContextMiddleware)
    return app
