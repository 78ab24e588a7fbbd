"""The sections of the configuration: one validated model per section of
`planner-config.yaml` (`model`, `planning`, `server`, `auth`, ...), each refusing unknown keys.

`planner_arm.config` composes them into `Settings` and loads them; import them from there.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    StringConstraints,
    field_validator,
    model_validator,
)

ResponseFormat = Literal["json_object", "json_schema", "none"]
# Where the provider serves its models: the built-in prices are its list prices.
PROVIDER_HOSTS = ("api.openai.com",)


class Section(BaseModel):
    """A config section: unknown keys are typos, so they are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelSettings(Section):
    provider: Literal["openai"] = "openai"  # the OpenAI API, or a compatible server
    name: str = Field("gpt-3.5-turbo", min_length=1)
    # Tried in order after `name` when it fails hard (auth, unknown model, bad answers).
    fallback_models: list[str] = Field(default_factory=list)
    temperature: float = Field(0.3, ge=0.0, le=2.0)
    max_tokens: int = Field(2000, ge=64, le=32_000)
    base_url: str | None = None
    response_format: ResponseFormat = "json_object"
    # One call's own bound; the request deadline (less the reserves in `retry`) may cut it.
    call_timeout_seconds: float = Field(30.0, gt=0, le=300)
    # Do the built-in prices (OpenAI's) apply to the models? none: where OpenAI serves them
    # (no base_url, or api.openai.com); true: a gateway that forwards to OpenAI; false: never.
    priced_by_provider: bool | None = None

    @property
    def chain(self) -> list[str]:
        """Every model to try, in order, without repeats."""
        return list(dict.fromkeys([self.name, *self.fallback_models]))

    @field_validator("base_url")
    @classmethod
    def _base_url_names_a_server(cls, url: str | None) -> str | None:
        # Without a scheme the SDK reads `localhost:8000/v1` as a path: every call would fail
        # and every plan fall back, while the service looked configured.
        if url is None or not url.strip():
            return None
        url = url.strip()
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                "must be an http:// or https:// URL naming a host, such as http://localhost:8000/v1"
            )
        return url

    @property
    def provider_prices_apply(self) -> bool:
        """Are the calls billed at the provider's prices: `priced_by_provider` when set, else
        whether they go to the provider's own API (no base URL, or OpenAI's)?"""
        if self.priced_by_provider is not None:
            return self.priced_by_provider
        return self.base_url is None or urlsplit(self.base_url).hostname in PROVIDER_HOSTS


class SpecializeSettings(Section):
    """Stage 2: filling each step's arm input (`"specialize": true`, POST /plan/specialize)."""

    # Steps of one plan whose inputs are asked of the model at the same time.
    max_concurrency: int = Field(4, ge=1, le=64)


class PlanningSettings(Section):
    min_steps: int = Field(3, ge=1, le=50)
    max_steps: int = Field(7, ge=1, le=50)
    require_validation_step: bool = True
    # Which rules a tool set gets. agents: the built-in agents' rules above (a final judge
    # step, min_steps..max_steps); tools: a plan of tool calls, tool_min_steps..tool_max_steps
    # steps, no final check; auto: agents when the arms include `judge`, else tools.
    profile: Literal["auto", "agents", "tools"] = "auto"
    tool_min_steps: int = Field(1, ge=1, le=50)
    tool_max_steps: int = Field(10, ge=1, le=50)
    # Past this many tools, the prompt lists only the tools most relevant to the request (a
    # lexical shortlist over names and descriptions, plus any tool the request names); 0: all.
    tool_shortlist: int = Field(40, ge=0, le=1_000)
    # Worked examples (config `examples`, a request's `examples`) shown to the model: the few
    # most similar to the request among those over the tools at hand, within this many
    # characters of prompt.
    tool_examples: int = Field(2, ge=0, le=10)
    tool_examples_chars: int = Field(3_000, ge=0, le=50_000)
    # The final judge step must depend, directly or through others, on every other step.
    require_dependency_check: bool = True
    # The whole request's budget: every LLM call, retry and wait fits inside it.
    timeout_seconds: float = Field(10.0, gt=0, le=300)
    # POST /replan: refused once a plan's chain has this many; each step output shown cut.
    max_replans: int = Field(3, ge=0, le=100)
    replan_output_chars: int = Field(500, ge=0, le=10_000)
    # strategy iterative: at most this many steps a stage; the /replan round after
    # iterative_max_rounds rounds plans only the final check, whatever the model proposes.
    iterative_stage_steps: int = Field(3, ge=1, le=10)
    iterative_max_rounds: int = Field(10, ge=1, le=100)

    @model_validator(mode="after")
    def _steps_in_order(self) -> PlanningSettings:
        if self.min_steps > self.max_steps:
            raise ValueError(f"min_steps ({self.min_steps}) is above max_steps ({self.max_steps})")
        if self.tool_min_steps > self.tool_max_steps:
            raise ValueError(
                f"tool_min_steps ({self.tool_min_steps}) is above "
                f"tool_max_steps ({self.tool_max_steps})"
            )
        return self


class RetrySettings(Section):
    max_llm_calls: int = Field(3, ge=1, le=10)
    repairs_per_model: int = Field(1, ge=0, le=5)
    backoff_base_seconds: float = Field(0.25, ge=0, le=30)
    backoff_max_seconds: float = Field(2.0, ge=0, le=60)
    # Fraction of each backoff that is randomised, so clients do not retry in lockstep.
    jitter: float = Field(0.5, ge=0, le=1)
    # Kept from each call for the next model (at most half of what is left) and the fallback.
    next_model_reserve_seconds: float = Field(3.0, ge=0, le=300)
    fallback_reserve_seconds: float = Field(0.1, ge=0, le=10)


class FallbackSettings(Section):
    enabled: bool = True
    # Low and fixed, so a caller can tell a rule-based plan from a model's.
    confidence: float = Field(0.35, ge=0, le=1)


class Price(Section):
    input_per_million: float = Field(ge=0)
    output_per_million: float = Field(ge=0)


# A host name or address as a Host header names it, without a port: `planner.internal`,
# `10.0.0.7`, `[fd00::7]`.
HostName = Annotated[str, StringConstraints(pattern=r"^([A-Za-z0-9_.-]+|\[[0-9A-Fa-f:.]+\])$")]


class ServerSettings(Section):
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=1, le=65535)
    max_body_bytes: int = Field(64 * 1024, ge=1024)
    # How deep a JSON body may nest arrays and objects (every route, /mcp too).
    max_json_depth: int = Field(64, ge=2, le=200)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["auto", "json", "console"] = "auto"
    # Origins a browser may call from; none means no CORS headers at all.
    cors_allow_origins: list[str] = Field(default_factory=list)
    # Host names /mcp answers besides loopback and `host` (each on any port); a request with
    # another Host, or an Origin of another host, is refused (DNS rebinding).
    mcp_allowed_hosts: list[HostName] = Field(default_factory=list)
    # Peers whose X-Forwarded-For / X-Forwarded-Proto name the client (a reverse proxy):
    # addresses or networks, or "*"; the failed-key limit counts the address they name.
    forwarded_allow_ips: list[str] = Field(default_factory=lambda: ["127.0.0.1"])
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
    # The slots are shared fairly among the principals that want them; a principal may take
    # idle slots past its share, but these last ones only with none under way, or below its
    # share and holding no more calls than slots are free: however many principals flood,
    # another finds a free slot at once. Applied with API keys configured; at most
    # max_in_flight - 1.
    reserved_slots: int = Field(8, ge=0, le=10_000)


class CircuitSettings(Section):
    """Per model: after repeated failures the model is skipped for a cooldown."""

    enabled: bool = True
    consecutive_failures: int = Field(5, ge=1, le=1000)
    failure_rate: float = Field(0.5, gt=0, le=1)
    min_calls: int = Field(10, ge=1, le=10_000)
    window_seconds: float = Field(60.0, gt=0, le=3600)
    cooldown_seconds: float = Field(30.0, gt=0, le=3600)
    max_retry_after_seconds: float = Field(300.0, gt=0, le=86_400)


# The name in an entry `tenant:key`.
TENANT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
# Names that read as the start of a key (`sk-...`, `pk_...`, `Bearer ...`): `sk:abc` may be one
# key with a colon as well as the key `abc` of tenant `sk`.
KEY_LIKE_NAMES = frozenset(
    {"sk", "pk", "rk", "ak", "key", "apikey", "api-key", "api_key", "token", "secret", "bearer"}
)
TENANT_RULE = "1-32 of a-z, 0-9, _ and -, starting with a letter or a digit"


def read_key_entry(text: str) -> tuple[str | None, str]:
    """An entry of the API keys as (tenant, key): `tenant:key` names the tenant, a plain key
    (no `:`) is a tenant of its own. ValueError, never quoting the key, for an entry that
    reads two ways: a name that is no tenant's or reads as a key's start, an empty key, or a
    key with a space."""
    name, colon, key = text.partition(":")
    if not colon:
        name, key = "", text
    elif not TENANT_NAME.fullmatch(name):
        raise ValueError(
            f"the text before ':' is not a tenant name ({TENANT_RULE}); a key of its own holds "
            "no ':'"
        )
    elif name in KEY_LIKE_NAMES:
        raise ValueError(
            f"the tenant name {name!r} reads as the start of a key ({name}-..., {name}_...): "
            "give the tenant another name"
        )
    if not key or any(character.isspace() for character in key):
        raise ValueError("the key is empty or holds a space")
    return name or None, key


class AuthSettings(Section):
    """API keys for the planning endpoints; none configured means no key is asked for.

    An entry `tenant:key` names the tenant the key belongs to (`read_key_entry`): the keys of
    one tenant share its plans, so a key can be rotated without losing them. A plain `key`
    (no `:`) is a tenant of its own; a key belongs to one tenant only. An entry that could be
    read two ways stops start-up.
    Records are filed under a keyed hash of the tenant (or key), never the key itself;
    `principal_secret` keys that hash (the same on every replica of one store), else a fixed
    derivation anyone can repeat: so a Redis store with keys needs one. Wrong keys are
    counted per client address (the last `tracked_addresses`): past `max_failed_keys` within
    `failed_keys_window_seconds`, the address is refused (429) without checking its key."""

    api_keys: list[SecretStr] = Field(default_factory=list)
    # A mounted secret: one key a line; blank lines and lines starting with # are skipped.
    api_keys_file: Path | None = None
    principal_secret: SecretStr | None = None
    max_failed_keys: int = Field(10, ge=1, le=100_000)
    failed_keys_window_seconds: float = Field(60.0, gt=0, le=86_400)
    tracked_addresses: int = Field(10_000, ge=1, le=10_000_000)

    @model_validator(mode="after")
    def _read_keys_file(self) -> AuthSettings:
        if self.api_keys_file is None:
            return self
        try:
            text = self.api_keys_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read {self.api_keys_file}: {exc.strerror}") from None
        from_file = [
            SecretStr(line.strip())
            for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")
        ]
        object.__setattr__(self, "api_keys", [*self.api_keys, *from_file])
        return self

    @model_validator(mode="after")
    def _secrets_sound(self) -> AuthSettings:
        # Raised at section level so the error line never echoes a key or the secret.
        secret = self.principal_secret
        if secret is not None and len(secret.get_secret_value()) < 16:
            raise ValueError("principal_secret must be 16 or more characters")
        for number, configured in enumerate(self.api_keys, start=1):
            try:
                read_key_entry(configured.get_secret_value().strip())
            except ValueError as problem:
                raise ValueError(
                    f"API key entry {number} (counting PLANNER_API_KEYS, then the lines of "
                    f"PLANNER_API_KEYS_FILE): {problem}"
                ) from None
        owners: dict[str, set[str]] = {}
        for tenant, key in self.key_entries:
            owners.setdefault(key, set()).add(tenant or "a plain key entry")
        shared = [sorted(names) for names in owners.values() if len(names) > 1]
        if shared:
            raise ValueError(
                "one API key is listed for more than one tenant ("
                + "; ".join(" and ".join(names) for names in shared)
                + "): give each tenant keys of its own"
            )
        return self

    @property
    def enabled(self) -> bool:
        return bool(self.api_keys)

    @property
    def key_entries(self) -> list[tuple[str | None, str]]:
        """Each configured key with its tenant (None for a plain key, its own tenant)."""
        return [read_key_entry(key.get_secret_value().strip()) for key in self.api_keys]


class CacheSettings(Section):
    enabled: bool = True
    ttl_seconds: float = Field(300.0, gt=0, le=86_400)
    max_entries: int = Field(1024, ge=1, le=1_000_000)
    # The in-process cache's bound on the bytes its plans hold (a Redis store keeps them in
    # Redis).
    max_bytes: int = Field(8 * 1024 * 1024, ge=64 * 1024, le=16 * 1024**3)


class TenantSettings(Section):
    """What one principal (an API key, or a tenant's keys) may use, so none crowds out the
    others. Without keys every caller is the one anonymous principal, and the request rate
    applies to it: to all of them together."""

    # Planning requests a second, per principal (or for the anonymous caller) and per
    # replica; 0 turns the limit off.
    requests_per_second: float = Field(20.0, ge=0, le=100_000)
    # Requests a principal may send at once above its rate.
    burst: int = Field(40, ge=1, le=100_000)
    # Bytes of stored plans a principal may hold, as the store counts what each holds; past
    # it a plan is refused (429). 0 turns the cap off.
    max_plan_bytes: int = Field(16 * 1024 * 1024, ge=0, le=1024**4)
    # Bytes of idempotency records (the answers kept for its keys) a principal may hold; past
    # it its own oldest answers go. 0 turns the cap off.
    max_idempotency_bytes: int = Field(4 * 1024 * 1024, ge=0, le=1024**4)
    # Bytes of plan cache entries a principal may hold; past it its own oldest go. 0: off.
    max_cache_bytes: int = Field(2 * 1024 * 1024, ge=0, le=1024**4)


class ToolSetSettings(Section):
    """The tool sets requests bring (`tools`): each is built once, off the event loop, and
    kept by content for the requests that bring it again."""

    # Kept built at most: this many, and this many bytes of their measured weight; past
    # either, the least recently used set of the principal holding the most goes first.
    max_kept: int = Field(64, ge=1, le=10_000)
    max_bytes: int = Field(64 * 1024 * 1024, ge=1024 * 1024, le=64 * 1024**3)
    # Each tool's words as the search index reads them, shared by the sets that have the
    # same tool: at most this many bytes.
    shared_bytes: int = Field(8 * 1024 * 1024, ge=0, le=16 * 1024**3)
    # Tool sets (and their search indexes) built at once in the process, and by one
    # principal; a request waits for a build slot (a freed one goes to the principal served
    # least recently) within its deadline, else 429 `tool_sets_busy`. Builds are Python code
    # under the interpreter lock: a second at once takes turns with the first and the loop.
    max_builds: int = Field(1, ge=1, le=64)
    max_builds_per_principal: int = Field(1, ge=1, le=64)
    # Requests waiting for their tool sets to be built (each holds its parsed tools): at most
    # this many per principal, and this many in all past which only a principal below its
    # share of them is let in; a request past its bound is refused at once, 429
    # `tool_sets_busy`.
    max_waiting_per_principal: int = Field(8, ge=1, le=10_000)
    max_waiting: int = Field(32, ge=1, le=100_000)


class StoreSettings(Section):
    """Where plans, idempotency records and the plan cache live: memory, or a shared Redis."""

    # redis://[user:password@]host:port/db or rediss://...; none keeps everything in memory.
    # A secret because it may carry the password.
    url: SecretStr | None = None
    ttl_seconds: float = Field(86_400.0, gt=0, le=30 * 86_400)
    # Per kind of record (plans, idempotency keys, cache entries) in the memory backend: at
    # most this many, and at most `max_bytes` of what they hold; the least recently used go
    # first.
    max_entries: int = Field(10_000, ge=1, le=10_000_000)
    max_bytes: int = Field(24 * 1024 * 1024, ge=64 * 1024, le=16 * 1024**3)
    # Each Redis command and connect; a Redis that hangs costs a request at most this.
    socket_timeout_seconds: float = Field(0.5, gt=0, le=30)
    # After a store failure the store is not asked again for this long (answers go out
    # without it, GET /plan/{id} answers 503 at once).
    down_seconds: float = Field(5.0, gt=0, le=600)
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


class ExpansionSettings(Section):
    """Deeper plans: POST /plan/expand and the hierarchical strategy."""

    # Sub-plans asked of the model at once for one hierarchical plan.
    concurrency: int = Field(4, ge=1, le=32)
    # The most steps a hierarchical or expanded plan may have (each sub-plan keeps 3-7).
    max_plan_steps: int = Field(50, ge=3, le=500)


# Headers that carry a credential: the service's API key, the model's key (OpenAI sends
# `Authorization`, Azure OpenAI `api-key`), cookies. The instrumentations match each as a
# regular expression anywhere in a header's name, case-insensitively.
CREDENTIAL_HEADERS = ("authorization", "x-api-key", "api-key", "cookie")
SANITIZE_FIELDS_VARIABLE = "OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_SANITIZE_FIELDS"


class TracingSettings(Section):
    """OpenTelemetry traces, set by the standard `OTEL_*` variables. Off unless an OTLP
    endpoint is named: with none, no span is exported, so none is made."""

    # OTEL_SDK_DISABLED=true turns tracing off whatever else is set.
    sdk_disabled: bool = False
    service_name: str = Field("planner-arm", min_length=1)
    # OTEL_EXPORTER_OTLP_ENDPOINT: the collector's base URL; spans go to <it>/v1/traces.
    otlp_endpoint: str | None = None
    # OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: the full URL for spans; wins over the base URL.
    otlp_traces_endpoint: str | None = None
    # OTEL_TRACES_EXPORTER: `otlp` (the default) or `none`.
    exporter: Literal["otlp", "none"] = "otlp"
    # OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_SANITIZE_FIELDS: headers (regular expressions)
    # whose captured values are redacted, on top of the credential headers, always redacted.
    sanitize_fields: list[str] = Field(default_factory=list)

    @property
    def redacted_headers(self) -> list[str]:
        """Every header whose captured value a span shows as [REDACTED]."""
        return list(dict.fromkeys([*CREDENTIAL_HEADERS, *self.sanitize_fields]))

    @property
    def traces_url(self) -> str | None:
        """Where spans are sent (OTLP over HTTP, protobuf), or None when tracing is off."""
        if self.sdk_disabled or self.exporter == "none":
            return None
        if self.otlp_traces_endpoint:
            return self.otlp_traces_endpoint
        if self.otlp_endpoint:
            return self.otlp_endpoint.rstrip("/") + "/v1/traces"
        return None
