"""Prometheus metrics of one service instance, in their own registry.

A registry per app (instead of the process-wide default) lets each test build a fresh app and
read exact counts, and keeps two apps in one process from sharing numbers. Label values are
all from small fixed sets: route templates, sources, outcome and reason codes, model names
from config.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST as PROMETHEUS_CONTENT_TYPE
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    generate_latest,
)

__all__ = ["PROMETHEUS_CONTENT_TYPE", "PlannerMetrics"]

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
# Past 30 s, as far as the request timeout reaches (it may be up to 300 s).
_LONG_LATENCY_BUCKETS = (60, 120, 180, 300)
_TOKEN_BUCKETS = (16, 64, 256, 1024, 4096, 16384, 65536)


def latency_buckets(longest_seconds: float) -> tuple[float, ...]:
    """The latency buckets, reaching at least `longest_seconds` (the request timeout), so a
    slow request lands in a bucket that says how slow rather than only in +Inf."""
    buckets = list(_LATENCY_BUCKETS)
    for edge in _LONG_LATENCY_BUCKETS:
        if buckets[-1] >= longest_seconds:
            break
        buckets.append(edge)
    return tuple(buckets)


class PlannerMetrics:
    def __init__(self, version: str, prompt_version: str, longest_seconds: float = 30.0) -> None:
        """`longest_seconds`: the longest a request or a model call may take (the timeout)."""
        buckets = latency_buckets(longest_seconds)
        self.registry = CollectorRegistry(auto_describe=True)
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        r = self.registry

        def counter(name: str, doc: str, *labels: str) -> Counter:
            return Counter(name, doc, labels, registry=r)

        def histogram(name: str, doc: str, edges: tuple[float, ...], *labels: str) -> Histogram:
            return Histogram(name, doc, labels, buckets=edges, registry=r)

        self.http_requests = counter(
            "planner_http_requests",
            "HTTP requests served, by route template and status.",
            "method",
            "route",
            "status",
        )
        self.http_latency = histogram(
            "planner_http_request_duration_seconds",
            "HTTP request latency by route template.",
            buckets,
            "method",
            "route",
        )
        self.plans = counter("planner_plans", "Plans answered, by where they came from.", "source")
        self.plan_steps = histogram(
            "planner_plan_steps", "Steps per plan answered.", (1, 2, 3, 4, 5, 6, 7, 8, 10, 15, 20)
        )
        self.llm_calls = counter(
            "planner_llm_calls", "LLM calls, by model and outcome.", "model", "outcome"
        )
        self.llm_latency = histogram(
            "planner_llm_call_duration_seconds", "LLM call latency by model.", buckets, "model"
        )
        self.llm_tokens = counter(
            "planner_llm_tokens", "Tokens used by planning calls.", "model", "type"
        )
        self.llm_cost = counter(
            "planner_llm_cost_usd", "Estimated USD spent on planning calls.", "model"
        )
        self.parse_failures = counter(
            "planner_parse_failures", "Model answers that held no usable plan, by reason.", "reason"
        )
        self.repairs = counter(
            "planner_repairs", "Local fixes applied to model answers, by kind.", "reason"
        )
        self.retries = counter("planner_retries", "LLM calls repeated, by reason.", "reason")
        self.fallbacks = counter(
            "planner_fallbacks", "Plans answered by the rule-based planner, by reason.", "reason"
        )
        self.build_info = Info("planner_build", "Version of this service.", registry=r)
        self.build_info.info({"version": version, "prompt_version": prompt_version})
        self.ready = Gauge("planner_ready", "1 when the service takes traffic.", registry=r)
        self.circuit_state = Gauge(
            "planner_llm_circuit_state",
            "Circuit of each model: 0 closed, 1 half-open (probing), 2 open (skipped).",
            ["model"],
            registry=r,
        )
        self.circuit_opened = counter(
            "planner_llm_circuit_opened", "Times a model's circuit opened.", "model"
        )
        self.llm_in_flight = Gauge("planner_llm_in_flight", "LLM calls under way now.", registry=r)
        self.hang_checks = counter(
            "planner_llm_hang_checks",
            "The guard's own one-line calls to a model whose calls the deadline cut, by outcome.",
            "model",
            "outcome",
        )
        self.tool_sets_kept = Gauge(
            "planner_tool_sets_kept", "Tool sets of requests kept built.", registry=r
        )
        self.tool_sets_kept_bytes = Gauge(
            "planner_tool_sets_kept_bytes",
            "Measured bytes of the tool sets kept built (tool_sets.max_bytes bounds them).",
            registry=r,
        )
        self.cache_requests = counter(
            "planner_cache_requests",
            "Plan requests by cache outcome: hit, coalesced (joined an identical request in "
            "flight), miss, bypass (the caller opted out).",
            "result",
        )
        self.replans = counter(
            "planner_replans", "Replans answered, by source (llm, fallback).", "source"
        )
        self.expansions = counter(
            "planner_expansions",
            "Sub-plans made for a step (/plan/expand, hierarchical nodes), by source.",
            "source",
        )
        self.validations = counter(
            "planner_validations",
            "Edited plans checked by /plan/validate, by outcome (valid, invalid).",
            "outcome",
        )
        self.specializations = counter(
            "planner_specializations",
            "Step inputs filled (stage 2), by source: llm, or rule.",
            "source",
        )
        self.store_errors = counter(
            "planner_store_errors",
            "Plan store operations that failed (the answer went out without them).",
            "operation",
        )
        self.idempotent_replays = counter(
            "planner_idempotent_replays",
            "Requests answered with the stored answer of their Idempotency-Key.",
        )
        self.stream_first_step = histogram(
            "planner_stream_first_step_seconds",
            "Seconds from a streamed plan's start to its first step event.",
            buckets,
        )
        self.streams = counter(
            "planner_streams",
            "Streamed plan answers (SSE, NDJSON), by how they ended: plan, error or disconnected.",
            "outcome",
        )
        # OpenTelemetry GenAI semantic-convention names, for dashboards built on them.
        self.genai_tokens = histogram(
            "gen_ai_client_token_usage",
            "Tokens per LLM call (OpenTelemetry GenAI).",
            _TOKEN_BUCKETS,
            "gen_ai_operation_name",
            "gen_ai_request_model",
            "gen_ai_token_type",
        )
        self.genai_duration = histogram(
            "gen_ai_client_operation_duration_seconds",
            "LLM call duration (OpenTelemetry GenAI).",
            buckets,
            "gen_ai_operation_name",
            "gen_ai_request_model",
            "error_type",
        )

    def child(self, metric: Any, *labels: str) -> Any:
        """`metric.labels(*labels)`, remembered: the library's own lookup takes a lock and
        checks the values on every call, which adds up on the per-request path."""
        key = (id(metric), labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*labels)
        return found

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def record_llm_call(
        self,
        model: str,
        outcome: str,
        seconds: float,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        usd: float = 0.0,
    ) -> None:
        child = self.child
        child(self.llm_calls, model, outcome).inc()
        child(self.llm_latency, model).observe(seconds)
        error_type = "" if outcome == "ok" else outcome
        child(self.genai_duration, "chat", model, error_type).observe(seconds)
        if outcome != "ok":
            return
        child(self.llm_tokens, model, "prompt").inc(prompt_tokens)
        child(self.llm_tokens, model, "completion").inc(completion_tokens)
        child(self.llm_cost, model).inc(usd)
        child(self.genai_tokens, "chat", model, "input").observe(prompt_tokens)
        child(self.genai_tokens, "chat", model, "output").observe(completion_tokens)
