"""create_app(): the FastAPI application with its lifespan, middleware and error handlers.

The lifespan builds the whole service through the composition root (`build_service`), warms
the model client, serves it over MCP at /mcp too, yields the typed `State` every request sees,
and closes what it built.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import structlog
from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from starlette.routing import Route

from planner_arm.api.auth import KeyRing, RequestRates
from planner_arm.api.deps import Readiness, State
from planner_arm.api.errors import install_error_handlers
from planner_arm.api.mcp import MCP_PATH, MCPEndpoint
from planner_arm.api.middleware import (
    BodyLimitMiddleware,
    HTTPMetricsMiddleware,
    RequestContextMiddleware,
)
from planner_arm.api.openapi.responses import customise_openapi
from planner_arm.api.routes import build_routers
from planner_arm.clock import Clock
from planner_arm.config import Settings, load_settings
from planner_arm.llm.client import rehearse_model_call
from planner_arm.logging import configure_logging
from planner_arm.planning.wiring import build_service, service_metrics, service_version

log = structlog.get_logger("planner_arm.api.app")


def create_app(
    settings: Settings | None = None,
    *,
    http_client: httpx.AsyncClient | None = None,
    clock: Clock | None = None,
    rng: random.Random | None = None,
) -> FastAPI:
    """Builds the app; its lifespan builds the service and closes it.

    `http_client`, `clock` and `rng` are for tests: a client whose calls respx can see, a
    fake clock, a seeded random source for backoff jitter.
    """
    settings = settings or load_settings()
    configure_logging(settings.server.log_level, settings.server.log_format)
    metrics = service_metrics(settings, service_version())
    keys = KeyRing.from_settings(settings.auth)
    # A rate per principal where there are several; one anonymous caller has no one to crowd.
    rates = RequestRates(settings.tenants, clock or Clock()) if keys.enabled else None
    readiness = Readiness(metrics, keys, rates)
    mcp = MCPEndpoint()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[State]:
        service = build_service(
            settings, metrics=metrics, http_client=http_client, clock=clock, rng=rng
        )
        if service.llm is not None:
            # Before ready: the first plan request is then no slower than the tenth.
            await rehearse_model_call()
        else:
            log.warning(
                "llm_disabled",
                reason="no OPENAI_API_KEY and no base URL",
                serving="rule-based planner",
            )
        readiness.ready()
        log.info(
            "service_started",
            version=service_version(),
            model=settings.model.name if service.llm is not None else None,
            llm="configured" if service.llm is not None else "disabled",
            store=service.store.kind,
        )
        try:
            async with mcp.serving(service):
                yield State(service=service, readiness=readiness)
        finally:
            readiness.begin_shutdown()
            await service.aclose()
            log.info("service_stopped")

    app = FastAPI(
        title="planner-arm",
        version=service_version(),
        summary="Turns a goal into a validated, executable plan of arm steps.",
        lifespan=lifespan,
    )
    # The server's SIGTERM handler turns it before the lifespan's state is torn down.
    app.state.readiness = readiness
    routers = build_routers(settings)
    for router in routers:
        app.include_router(router)
    app.router.routes.append(Route(MCP_PATH, mcp, methods=["POST"], include_in_schema=False))
    app.openapi = customise_openapi(app.openapi, settings.arm_ids)  # type: ignore[method-assign]
    install_error_handlers(app)
    # Added innermost first. Outside in: the request id (every later layer and error can use
    # it), the metrics (which then count 413s too), the body limit, then the routes.
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.server.max_body_bytes)
    # What the metrics match a request against when a layer before routing answered it.
    routes = [*app.routes, *(route for router in routers for route in router.routes)]
    app.add_middleware(HTTPMetricsMiddleware, metrics=metrics, routes=routes)
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
