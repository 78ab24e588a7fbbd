"""The answers of the probes and of /capabilities: what an operator or an orchestrator reads
about the service itself, not about a plan."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class HealthResponse(BaseModel):
    status: Literal["healthy"]
    version: str
    model: str | None = Field(description="The first model of the chain; null with no model")
    timestamp: str
    uptime_seconds: float
    llm: Literal["configured", "degraded", "disabled"] = Field(
        description="degraded: some model's circuit is open, so it is being skipped"
    )
    store: Literal["memory", "redis", "degraded"] = Field(
        "memory", description="Where plans are kept; degraded: Redis does not answer now"
    )
    circuits: dict[str, str] = Field(
        description="Circuit state per model: closed, half_open or open"
    )


class ReadyResponse(BaseModel):
    status: Literal["ready", "starting", "stopping"]


class ArmInfo(BaseModel):
    id: str
    capabilities: list[str]
    description: str
    input_schema: dict[str, Any] = Field(
        default_factory=dict,
        description="The JSON Schema of a step's `input` for this arm (stage 2); an arm "
        "configured without a model of its own takes {instruction, inputs_from}",
    )


class CapabilitiesResponse(BaseModel):
    arm_id: Literal["planner"]
    capabilities: list[str]
    cost_tier: int
    average_latency_ms: float = Field(
        description="Mean latency of the recent plan requests that were planned (by the model "
        "or the fallback); repeats from the cache are left out"
    )
    model_latency_ms: float | None = Field(
        description="Mean latency of the recent plans the model made; null until one is made"
    )
    success_rate: float = Field(
        ge=0,
        le=1,
        description="The share of recent plan requests answered with a plan (a "
        "rule-based plan counts: the caller got one)",
    )
    model_success_rate: float | None = Field(
        None,
        ge=0,
        le=1,
        description="The share of recent requests a model was asked for that it answered with "
        "a usable plan (a fallback after a model failure counts against it); null until a "
        "model has been asked",
    )
    measured: bool = Field(description="False until this process has served a plan request")
    plans_by_source: dict[str, int]
    arms: list[ArmInfo]
    min_steps: int
    max_steps: int
    models: list[str]
    llm: Literal["configured", "degraded", "disabled"] = Field(
        description="As /health says: degraded while some model's circuit is open"
    )
    timeout_seconds: float = Field(
        description="The planning deadline: a plan request is answered within about this long"
    )
