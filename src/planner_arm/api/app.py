"""create_app(): the FastAPI application with its lifespan, middleware and error handlers."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from planner_arm.api.middleware import BodyLimitMiddleware, HTTPMetricsMiddleware
from planner_arm.api.routes import error_response, planning_router, router
from planner_arm.api.state import Services, service_version
from planner_arm.clock import Clock
from planner_arm.config import Settings, load_settings
from planner_arm.errors import (
    PayloadTooLarge,
    PlannerError,
    PlanningFailed,
    RequestRejected,
    Unauthorized,
)
from planner_arm.llm.client import LLMClient
from planner_arm.llm.prompts import PROMPT_VERSION
from planner_arm.logging import RequestContextMiddleware, configure_logging
from planner_arm.metrics import PlannerMetrics
from planner_arm.plan.schemas import request_model_for
from planner_arm.planning.cache import CachingPlanner
from planner_arm.planning.planner import PlannerArm
from planner_arm.planning.recorder import PlanRecorder
from planner_arm.planning.traffic import TrafficStats

log = structlog.get_logger("planner_arm.api.app")

_PLANNING_FAILED_STATUS = {"llm_unavailable": 503, "deadline_exceeded": 504, "invalid_plan": 502}


def _status_for(error: PlannerError) -> int:
    if isinstance(error, PayloadTooLarge):
        return 413
    if isinstance(error, Unauthorized):
        return 401
    if isinstance(error, RequestRejected):
        return 422
    if isinstance(error, PlanningFailed):
        return _PLANNING_FAILED_STATUS.get(error.code, 503)
    if error.code == "not_ready":
        return 503
    return 500


def _request_id(request: Request) -> str:
    return str(request.scope.get("state", {}).get("request_id", ""))


def _field_errors(exc: RequestValidationError) -> list[dict[str, Any]]:
    """Where and what, without echoing the caller's input back or linking to docs."""
    return [
        {"loc": list(err.get("loc", ())), "msg": err.get("msg", ""), "type": err.get("type", "")}
        for err in exc.errors()
    ]


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(PlannerError)
    async def planner_error(request: Request, exc: PlannerError) -> JSONResponse:
        status = _status_for(exc)
        detail: Any = exc.detail
        if isinstance(exc, PlanningFailed) and exc.errors:
            detail = f"{exc.detail}; problems: " + "; ".join(exc.errors)
        log.warning("request_failed", status=status, error=exc.code)
        response = error_response(status, exc.code, detail, _request_id(request))
        if isinstance(exc, Unauthorized):
            response.headers["WWW-Authenticate"] = 'Bearer realm="planner-arm"'
        return response

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(422, "invalid_request", _field_errors(exc), _request_id(request))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:
            # FastAPI's answer to a body its JSON parser gives up on (nested too deeply).
            detail = [
                {
                    "loc": ["body"],
                    "msg": "the body could not be parsed as JSON",
                    "type": "json_invalid",
                }
            ]
            return error_response(422, "invalid_request", detail, _request_id(request))
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        response = error_response(exc.status_code, code, str(exc.detail), _request_id(request))
        if exc.headers:
            response.headers.update(exc.headers)
        return response

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        # Logged with its trace for us; the caller gets the shape and no internals.
        log.exception("unhandled_error", error_type=type(exc).__name__)
        return error_response(
            500, "internal_error", "an unexpected error occurred", _request_id(request)
        )


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
    metrics = PlannerMetrics(service_version(), PROMPT_VERSION)
    services = Services(settings=settings, metrics=metrics, stats=TrafficStats())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if settings.llm_enabled:
            services.llm = LLMClient(settings, http_client)
        else:
            log.warning(
                "llm_disabled",
                reason="no OPENAI_API_KEY and no base URL",
                serving="rule-based planner",
            )
        recorder = PlanRecorder(metrics, services.stats)
        planner = PlannerArm(settings, services.llm, metrics, clock, rng, recorder=recorder)
        services.planner = planner
        services.plans = CachingPlanner(planner, settings, metrics, planner.clock, recorder)
        services.state = "ready"
        metrics.ready.set(1)
        log.info(
            "service_started",
            version=service_version(),
            model=settings.model.name,
            llm="configured" if settings.llm_enabled else "disabled",
        )
        try:
            yield
        finally:
            services.begin_shutdown()
            if services.llm is not None:
                await services.llm.aclose()
            log.info("service_stopped")

    app = FastAPI(
        title="planner-arm",
        version=service_version(),
        summary="Turns a goal into a validated, executable plan of arm steps.",
        lifespan=lifespan,
    )
    app.state.services = services
    app.include_router(planning_router(request_model_for(settings.limits)))
    app.include_router(router)
    _install_error_handlers(app)
    # Added innermost first. Outside in: the request id (every later layer and error can use
    # it), the metrics (which then count 413s too), the body limit, then the routes.
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.server.max_body_bytes)
    app.add_middleware(HTTPMetricsMiddleware, metrics=metrics)
    if settings.server.cors_allow_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.server.cors_allow_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type", "X-API-Key", "X-Request-ID"],
            expose_headers=["X-Request-ID"],
        )
    app.add_middleware(RequestContextMiddleware)
    return app
