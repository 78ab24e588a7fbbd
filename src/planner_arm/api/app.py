"""create_app(): the FastAPI application with its lifespan, middleware and error handlers.

The lifespan builds the whole service through the composition root (`build_runtime`), starts
warming the model client once ready, serves it over MCP at /mcp too, yields the typed `State`
every request sees, and closes what it built; it warns (`serving_without_keys`) when the service
listens beyond loopback with no API keys. Without keys every route but the probes answers only
to the hosts /mcp answers to (`api/hosts.py`). /docs and /redoc load their files from the
service itself. With tracing configured, each request is a server span (the FastAPI
instrumentation, which continues a caller's `traceparent`; credential headers redacted), and the
spans still buffered are exported on the way out.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import structlog
from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from fastapi.telemetry import TelemetryConfig
from starlette.routing import Route

from planner_arm.api.auth import (
    KeyCheck,
    KeyRing,
    RequestRates,
    log_key_entries,
    serving_without_keys,
)
from planner_arm.api.deps import Readiness, State
from planner_arm.api.errors import install_error_handlers
from planner_arm.api.hosts import AnsweredHosts, HostCheckMiddleware
from planner_arm.api.mcp import MCP_PATH, MCPEndpoint
from planner_arm.api.middleware import (
    BodyLimitMiddleware,
    HTTPMetricsMiddleware,
    RequestContextMiddleware,
)
from planner_arm.api.openapi.responses import customise_openapi
from planner_arm.api.routes import build_routers
from planner_arm.clock import Clock
from planner_arm.config import Settings, TracingSettings, load_settings, publish_redacted_headers
from planner_arm.logging import configure_logging
from planner_arm.plan.weighed import BuildLane
from planner_arm.service.wiring import build_runtime, service_metrics, service_version
from planner_arm.tracing import Tracing, start_tracing

log = structlog.get_logger("planner_arm.api.app")

NO_NATIVE_TELEMETRY: TelemetryConfig = {"tracing": False, "metrics": False, "logs": False}
# Requests that get no span: probes and scrapes (regular expressions, comma-separated).
PROBE_URLS = r"/health(\?|$),/ready(\?|$),/metrics(\?|$)"
# Where /docs and /redoc load their scripts, style and icon from: this service, never a CDN.
DOCS_ASSETS = "/docs-assets"
# And what the browser lets those pages load: from this service only (their own start-up
# script and styles inline; ReDoc's search worker a blob). So nothing reaches another host,
# not even ReDoc's "by Redocly" logo, which it would fetch from a CDN.
DOCS_POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


def create_app(
    settings: Settings | None = None,
    *,
    http_client: httpx.AsyncClient | None = None,
    clock: Clock | None = None,
    rng: random.Random | None = None,
    tracing: Tracing | None = None,
    build_lane: BuildLane | None = None,
) -> FastAPI:
    """Builds the app; its lifespan builds the service and closes it.

    `http_client`, `clock` and `rng` are for tests: a client whose calls respx can see, a
    fake clock, a seeded random source for backoff jitter. `tracing` too (a provider with an
    in-memory exporter); by default the settings' `OTEL_*` variables say what it is, and the
    lifespan shuts it down at the end. `build_lane` too: one whose tool-set builds a test
    holds.
    """
    settings = settings or load_settings()
    configure_logging(settings.server.log_level, settings.server.log_format)
    # Before anything is instrumented: the instrumentations read it when they are set up.
    publish_redacted_headers(settings.tracing)
    owns_tracing = tracing is None
    tracing = tracing or start_tracing(settings.tracing, service_version())
    metrics = service_metrics(settings, service_version())
    keys = KeyCheck(KeyRing.from_settings(settings.auth), settings.auth, clock or Clock())
    # A rate per principal; without keys, the anonymous one's is every caller's together.
    rates = RequestRates(settings.tenants, clock or Clock())
    readiness = Readiness(metrics, keys, rates)
    mcp = MCPEndpoint(settings.server)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[State]:
        runtime = build_runtime(
            settings,
            metrics=metrics,
            http_client=http_client,
            clock=clock,
            rng=rng,
            tracing=tracing,
            build_lane=build_lane,
        )
        if runtime.llm is None:
            log.warning(
                "llm_disabled",
                reason="no OPENAI_API_KEY and no LLM_BASE_URL",
                serving="rule-based planner",
            )
        log_key_entries(settings.auth)
        readiness.ready()
        # After ready: the model client's SDK loads and rehearses beside the first requests.
        runtime.start_warm_up()
        log.info(
            "service_started",
            version=service_version(),
            model=settings.model.name if runtime.llm is not None else None,
            llm="configured" if runtime.llm is not None else "disabled",
            store=runtime.store.kind,
            tracing="otlp" if tracing.enabled else "off",
        )
        if serving_without_keys(settings):
            log.warning(
                "serving_without_keys",
                host=settings.server.host,
                reason="no API keys: anyone who reaches this address plans as the one "
                "anonymous caller and reads its plans",
                fix="set PLANNER_API_KEYS (or PLANNER_API_KEYS_FILE), or listen on 127.0.0.1",
                requests_per_second=settings.tenants.requests_per_second,
            )
        try:
            async with mcp.serving(runtime):
                yield State(runtime=runtime, readiness=readiness)
        finally:
            readiness.begin_shutdown()
            await runtime.aclose()
            log.info("service_stopped")
            if owns_tracing:
                tracing.shutdown()

    app = FastAPI(
        title="planner-arm",
        version=service_version(),
        summary="Turns a goal into a validated, executable plan of arm steps.",
        lifespan=lifespan,
        # FastAPI's own telemetry stays off: the OpenTelemetry instrumentation below makes the
        # request spans, and untraced, the per-request look for a global provider is skipped.
        telemetry=NO_NATIVE_TELEMETRY,
        # Served by _serve_api_docs instead, with their files from this service.
        docs_url=None,
        redoc_url=None,
    )
    # The server's SIGTERM handler turns it before the lifespan's state is torn down.
    app.state.readiness = readiness
    routers = build_routers(settings)
    for router in routers:
        app.include_router(router)
    app.router.routes.append(Route(MCP_PATH, mcp, methods=["POST"], include_in_schema=False))
    _serve_api_docs(app)
    app.openapi = customise_openapi(app.openapi, settings.arm_ids)  # type: ignore[method-assign]
    install_error_handlers(app)
    # Added innermost first. Outside in: the request id (every later layer and error can use
    # it), the metrics (which then count 421s and 413s too), without keys the Host check, the
    # body limit, then the routes.
    app.add_middleware(
        BodyLimitMiddleware,
        max_bytes=settings.server.max_body_bytes,
        max_json_depth=settings.server.max_json_depth,
    )
    if not keys.keys.enabled:
        # Without keys nothing else tells the service's own callers from a web page that
        # reaches it by a rebound name; with keys such a page has none to send.
        app.add_middleware(HostCheckMiddleware, hosts=AnsweredHosts.of(settings.server))
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
    _instrument(app, tracing, settings.tracing)
    return app


def _serve_api_docs(app: FastAPI) -> None:
    """The API explorer (/docs, Swagger UI) and reference (/redoc), whose scripts, style and
    icon this service serves itself (from the fastapi-offline package), so they work with no
    network beyond the service; their Content-Security-Policy allows nothing from elsewhere."""
    app.mount(
        DOCS_ASSETS,
        StaticFiles(packages=[("fastapi_offline", "static")]),
        name="docs-assets",
    )
    openapi_url = app.openapi_url or "/openapi.json"
    redirect_url = app.swagger_ui_oauth2_redirect_url or "/docs/oauth2-redirect"

    def kept_in(page: HTMLResponse) -> HTMLResponse:
        page.headers["Content-Security-Policy"] = DOCS_POLICY
        return page

    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        page = get_swagger_ui_html(
            openapi_url=f"{root}{openapi_url}",
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=f"{root}{redirect_url}",
            swagger_js_url=f"{root}{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{root}{DOCS_ASSETS}/favicon.png",
            swagger_ui_parameters=app.swagger_ui_parameters,
        )
        return kept_in(page)

    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        page = get_redoc_html(
            openapi_url=f"{root}{openapi_url}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{DOCS_ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{DOCS_ASSETS}/favicon.png",
            with_google_fonts=False,
        )
        return kept_in(page)

    app.get("/docs", include_in_schema=False)(swagger_ui)
    app.get(redirect_url, include_in_schema=False)(swagger_ui_redirect)
    app.get("/redoc", include_in_schema=False)(redoc)


def _instrument(app: FastAPI, tracing: Tracing, settings: TracingSettings) -> None:
    """A server span for each request but the probes', outside every middleware; the
    credential headers' values never reach it, whatever headers it is told to capture."""
    if tracing.provider is None:
        return
    # Imported here: an untraced process never loads the instrumentation.
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    FastAPIInstrumentor.instrument_app(
        app,
        tracer_provider=tracing.provider,
        excluded_urls=PROBE_URLS,
        # One span per request: not one more for each chunk of the body sent or received.
        exclude_spans=["receive", "send"],
        http_capture_headers_sanitize_fields=settings.redacted_headers,
    )
