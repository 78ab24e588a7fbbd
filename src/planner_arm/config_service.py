"""Config sections about how the service runs: its server, its connections to the model,
the circuits in front of models, and the plan store.

Part of the settings that `planner_arm.config` builds (and re-exports); nothing here reads the
environment.
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator


class Section(BaseModel):
    """A config section: unknown keys are typos, so they are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerSettings(Section):
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=1, le=65535)
    max_body_bytes: int = Field(64 * 1024, ge=1024)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["auto", "json", "console"] = "auto"
    # Origins a browser may call from; none means no CORS headers at all.
    cors_allow_origins: list[str] = Field(default_factory=list)
    # On SIGTERM: /ready turns 503, requests in flight get this long to finish.
    drain_seconds: float = Field(15.0, ge=0, le=300)


class ConnectionSettings(Section):
    """The one pooled HTTP client to the LLM, and how many calls may be in flight."""

    max_connections: int = Field(100, ge=1, le=10_000)
    max_keepalive_connections: int = Field(20, ge=0, le=10_000)
    keepalive_expiry_seconds: float = Field(30.0, ge=0, le=3600)
    connect_timeout_seconds: float = Field(5.0, gt=0, le=60)
    max_in_flight: int = Field(64, ge=1, le=10_000)
    # A request waits at most this long (and never past its deadline) for a free call slot;
    # then the fallback answers instead of a queue that grows without end.
    queue_timeout_seconds: float = Field(1.0, ge=0, le=60)


class CircuitSettings(Section):
    """Per model: after repeated failures the model is skipped for a cooldown."""

    enabled: bool = True
    consecutive_failures: int = Field(5, ge=1, le=1000)
    failure_rate: float = Field(0.5, gt=0, le=1)
    min_calls: int = Field(10, ge=1, le=10_000)
    window_seconds: float = Field(60.0, gt=0, le=3600)
    cooldown_seconds: float = Field(30.0, gt=0, le=3600)


class StoreSettings(Section):
    """Where plans, idempotency records and the plan cache live: memory, or a shared Redis."""

    # redis://[user:password@]host:port/db or rediss://...; none keeps everything in memory.
    # A secret because it may carry the password.
    url: SecretStr | None = None
    ttl_seconds: float = Field(86_400.0, gt=0, le=30 * 86_400)
    # Per kind of record (plans, idempotency keys, cache entries) in the memory backend.
    max_entries: int = Field(10_000, ge=1, le=10_000_000)
    # Each Redis command and connect; a Redis that hangs costs a request at most about this.
    socket_timeout_seconds: float = Field(0.5, gt=0, le=30)
    key_prefix: str = Field("planner-arm", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    # How often a request waiting on another one's idempotency key looks again (Redis).
    poll_interval_seconds: float = Field(0.05, gt=0, le=5)

    @model_validator(mode="after")
    def _redis_url(self) -> StoreSettings:
        # Raised at section level so the error line never echoes the URL and its password.
        if self.url is None:
            return self
        parts = urlsplit(self.url.get_secret_value().strip())
        if parts.scheme not in ("redis", "rediss"):
            raise ValueError(
                f"url must start with redis:// or rediss:// (got scheme {parts.scheme!r})"
            )
        if not parts.hostname:
            raise ValueError("url names no host (expected redis://host:port/db)")
        return self
