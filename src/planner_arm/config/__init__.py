"""Settings: the built-in defaults, then `planner-config.yaml`, then environment variables.

This package is the only place that reads the environment. Each section of
`planner-config.yaml` is a validated model (`sections.py`; unknown keys are typos, so they are
refused); everything is validated when the settings are built, so a bad value stops start-up
with one line that names the field.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, get_args, get_origin

import yaml
from pydantic import BaseModel, Field, SecretStr, ValidationError, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from planner_arm.config.near_miss import near_miss
from planner_arm.config.sections import (
    CREDENTIAL_HEADERS as CREDENTIAL_HEADERS,
)
from planner_arm.config.sections import (
    SANITIZE_FIELDS_VARIABLE as SANITIZE_FIELDS_VARIABLE,
)
from planner_arm.config.sections import (
    AuthSettings as AuthSettings,
)
from planner_arm.config.sections import (
    CacheSettings as CacheSettings,
)
from planner_arm.config.sections import (
    CircuitSettings as CircuitSettings,
)
from planner_arm.config.sections import (
    ConnectionSettings as ConnectionSettings,
)
from planner_arm.config.sections import (
    ExpansionSettings as ExpansionSettings,
)
from planner_arm.config.sections import (
    FallbackSettings as FallbackSettings,
)
from planner_arm.config.sections import (
    HostName as HostName,
)
from planner_arm.config.sections import (
    ModelSettings as ModelSettings,
)
from planner_arm.config.sections import (
    PlanningSettings as PlanningSettings,
)
from planner_arm.config.sections import (
    Price as Price,
)
from planner_arm.config.sections import (
    ResponseFormat as ResponseFormat,
)
from planner_arm.config.sections import (
    RetrySettings as RetrySettings,
)
from planner_arm.config.sections import (
    Section as Section,
)
from planner_arm.config.sections import (
    ServerSettings as ServerSettings,
)
from planner_arm.config.sections import (
    SpecializeSettings as SpecializeSettings,
)
from planner_arm.config.sections import (
    StoreSettings as StoreSettings,
)
from planner_arm.config.sections import (
    TenantSettings as TenantSettings,
)
from planner_arm.config.sections import (
    ToolSetSettings as ToolSetSettings,
)
from planner_arm.config.sections import (
    TracingSettings as TracingSettings,
)
from planner_arm.defaults import DEFAULT_ARM_ALIASES, DEFAULT_ARMS, DEFAULT_PRICING

# Re-exported: the shapes a request shares with the configuration live with the limits.
from planner_arm.limits import ArmSpec as ArmSpec
from planner_arm.limits import LimitsSettings as LimitsSettings
from planner_arm.limits import WorkedExample as WorkedExample


def _default_arms() -> list[ArmSpec]:
    return [ArmSpec(**arm) for arm in DEFAULT_ARMS]


def _default_pricing() -> dict[str, Price]:
    return {model: Price(**price) for model, price in DEFAULT_PRICING.items()}


class Settings(BaseSettings):
    """Everything the service can be told. Build with `load_settings()`."""

    model_config = SettingsConfigDict(extra="forbid", frozen=True)

    model: ModelSettings = Field(default_factory=ModelSettings)
    planning: PlanningSettings = Field(default_factory=PlanningSettings)
    specialize: SpecializeSettings = Field(default_factory=SpecializeSettings)
    retry: RetrySettings = Field(default_factory=RetrySettings)
    fallback: FallbackSettings = Field(default_factory=FallbackSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    connection: ConnectionSettings = Field(default_factory=ConnectionSettings)
    circuit: CircuitSettings = Field(default_factory=CircuitSettings)
    cache: CacheSettings = Field(default_factory=CacheSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    limits: LimitsSettings = Field(default_factory=LimitsSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    tenants: TenantSettings = Field(default_factory=TenantSettings)
    tool_sets: ToolSetSettings = Field(default_factory=ToolSetSettings)
    expansion: ExpansionSettings = Field(default_factory=ExpansionSettings)
    tracing: TracingSettings = Field(default_factory=TracingSettings)
    arms: list[ArmSpec] = Field(default_factory=_default_arms, min_length=1)
    arm_aliases: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_ARM_ALIASES))
    examples: list[WorkedExample] = Field(default_factory=list, max_length=10_000)
    pricing: dict[str, Price] = Field(default_factory=_default_pricing)
    api_key: SecretStr | None = None

    @property
    def arm_ids(self) -> list[str]:
        return [arm.id for arm in self.arms]

    @property
    def prices_that_apply(self) -> dict[str, Price]:
        """The prices the model's calls are counted at. The built-in prices are the provider's
        list prices: they apply where the provider serves the model. Elsewhere (a local or a
        private server) only a price of the operator's own applies: an entry of `pricing` that
        is not a copy of a built-in one."""
        if self.model.provider_prices_apply:
            return dict(self.pricing)
        return {
            name: price
            for name, price in self.pricing.items()
            if DEFAULT_PRICING.get(name) != price.model_dump()
        }

    @property
    def llm_enabled(self) -> bool:
        """A key, or a base URL of a local server that needs none, turns the LLM on."""
        return self.api_key is not None or self.model.base_url is not None

    @model_validator(mode="after")
    def _principal_secret_with_redis(self) -> Settings:
        if self.auth.enabled and self.store.url is not None and self.auth.principal_secret is None:
            raise ValueError(
                "auth: principal_secret is required when API keys are configured with a Redis "
                "store: without it the names of the records in Redis derive from the keys "
                "alone, and a key can be checked against them offline (set "
                "PLANNER_AUTH__PRINCIPAL_SECRET to a random string of 16 or more characters, "
                "the same on every replica)"
            )
        return self

    @model_validator(mode="after")
    def _arms_consistent(self) -> Settings:
        ids = self.arm_ids
        if len(set(ids)) != len(ids):
            raise ValueError(f"arms: duplicate arm id in {ids}")
        if self.planning.profile == "agents" and "judge" not in ids:
            raise ValueError("arms: the agents profile needs an arm with id 'judge'")
        unknown = sorted({t for t in self.arm_aliases.values() if t not in ids})
        own_arms = "arms" in self.model_fields_set
        if unknown and "arm_aliases" in self.model_fields_set and not own_arms:
            raise ValueError(f"arm_aliases: points at unknown arm(s) {unknown}")
        if unknown:
            # The built-in table (or a copy of it next to the caller's own arms) serves the
            # built-in arms; the aliases of arms that are not there simply do not apply.
            kept = {k: v for k, v in self.arm_aliases.items() if v in ids}
            object.__setattr__(self, "arm_aliases", kept)
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # First wins: explicit arguments, the flat variables (LLM_MODEL, ...), then
        # PLANNER_SECTION__FIELD
        # variables, then the YAML file named by PLANNER_CONFIG, then the defaults above.
        nested_env = EnvSettingsSource(
            settings_cls, env_prefix="PLANNER_", env_nested_delimiter="__"
        )
        config_file = os.environ.get("PLANNER_CONFIG", "").strip() or None
        return (
            init_settings,
            FlatEnvironmentSource(settings_cls),
            WithoutModelKey(settings_cls, nested_env),
            WithoutModelKey(settings_cls, YamlConfigSettingsSource(settings_cls, config_file)),
        )


# The model's key comes only from its own variables (MODEL_KEY_VARIABLES): never from the
# file, nor from PLANNER_API_KEY, one letter from the service's own keys (PLANNER_API_KEYS),
# which would hand those to the model's provider and leave the service without keys.
MODEL_KEY_FIELD = "api_key"
MODEL_KEY_VARIABLES = ("OPENAI_API_KEY", "LLM_API_KEY")


class WithoutModelKey(PydanticBaseSettingsSource):
    """A source of settings (the nested variables, the file) that never sets the model's key."""

    def __init__(self, settings_cls: type[BaseSettings], source: PydanticBaseSettingsSource):
        super().__init__(settings_cls)
        self.source = source

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # __call__ takes the source's whole mapping

    def __call__(self) -> dict[str, Any]:
        return {name: value for name, value in self.source().items() if name != MODEL_KEY_FIELD}


class ConfigError(Exception):
    """A configuration that cannot start the service; the message names the field."""


# The flat environment variables (the documented table in docs/configuration.md), each with
# where it lands.
ENV_FIELDS: dict[str, tuple[str, ...]] = {
    "LLM_MODEL": ("model", "name"),
    "LLM_FALLBACK_MODELS": ("model", "fallback_models"),
    "PLANNING_TEMPERATURE": ("model", "temperature"),
    "MAX_TOKENS": ("model", "max_tokens"),
    "LLM_RESPONSE_FORMAT": ("model", "response_format"),
    "OPENAI_BASE_URL": ("model", "base_url"),
    "LLM_BASE_URL": ("model", "base_url"),
    "MIN_PLAN_STEPS": ("planning", "min_steps"),
    "MAX_PLAN_STEPS": ("planning", "max_steps"),
    "TIMEOUT_SECONDS": ("planning", "timeout_seconds"),
    "FALLBACK_ENABLED": ("fallback", "enabled"),
    "CACHE_ENABLED": ("cache", "enabled"),
    "CACHE_TTL_SECONDS": ("cache", "ttl_seconds"),
    "DRAIN_SECONDS": ("server", "drain_seconds"),
    "LOG_LEVEL": ("server", "log_level"),
    "LOG_FORMAT": ("server", "log_format"),
    "HOST": ("server", "host"),
    "PORT": ("server", "port"),
    "PLANNER_API_KEYS": ("auth", "api_keys"),
    "PLANNER_API_KEYS_FILE": ("auth", "api_keys_file"),
    "CORS_ALLOW_ORIGINS": ("server", "cors_allow_origins"),
    "MCP_ALLOWED_HOSTS": ("server", "mcp_allowed_hosts"),
    "FORWARDED_ALLOW_IPS": ("server", "forwarded_allow_ips"),
    "PLANNER_STORE_URL": ("store", "url"),
    **dict.fromkeys(MODEL_KEY_VARIABLES, (MODEL_KEY_FIELD,)),
    "OTEL_SDK_DISABLED": ("tracing", "sdk_disabled"),
    "OTEL_SERVICE_NAME": ("tracing", "service_name"),
    "OTEL_EXPORTER_OTLP_ENDPOINT": ("tracing", "otlp_endpoint"),
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ("tracing", "otlp_traces_endpoint"),
    "OTEL_TRACES_EXPORTER": ("tracing", "exporter"),
    SANITIZE_FIELDS_VARIABLE: ("tracing", "sanitize_fields"),
}
# The flat variables that hold comma-separated lists.
_LIST_VARIABLES = {"LLM_FALLBACK_MODELS", "PLANNER_API_KEYS", "CORS_ALLOW_ORIGINS"}
_LIST_VARIABLES |= {"MCP_ALLOWED_HOSTS", "FORWARDED_ALLOW_IPS", SANITIZE_FIELDS_VARIABLE}


def _env_value(name: str, raw: str) -> Any:
    if name in _LIST_VARIABLES:
        return [part.strip() for part in raw.split(",") if part.strip()]
    if name == "LOG_LEVEL":
        return raw.strip().upper()
    if name in ("OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER"):
        return raw.strip().lower()
    return raw.strip()


class FlatEnvironmentSource(PydanticBaseSettingsSource):
    """The flat variable names of the documented table (`LLM_MODEL`, `MAX_PLAN_STEPS`, ...)."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # __call__ builds the whole nested mapping at once

    def __call__(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for name, path in ENV_FIELDS.items():
            raw = os.environ.get(name)
            if raw is None or raw.strip() == "":
                continue
            target = data
            for key in path[:-1]:
                target = target.setdefault(key, {})
            target[path[-1]] = _env_value(name, raw)
        return data


def _setting_variable(loc: tuple[str | int, ...]) -> str | None:
    """The environment variable that gave the setting at `loc` its value, None for the file.
    Of two table variables for one setting the later one in the table wins, as it does when
    the settings are read."""
    named = [
        name
        for name, path in ENV_FIELDS.items()
        if tuple(loc[: len(path)]) == path and os.environ.get(name, "").strip()
    ]
    if named:
        return named[-1]
    nested = "PLANNER_" + "__".join(str(part) for part in loc).upper()
    return nested if os.environ.get(nested, "").strip() else None


def _describe(error: ValidationError) -> str:
    first = error.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "settings"
    message = first["msg"].removeprefix("Value error, ")
    bad = first.get("input")
    if field == "settings":
        return message
    variable = _setting_variable(first["loc"])
    if variable is not None:  # the operator set a variable, not the field: name both
        field = f"{field} ({variable})"
    if isinstance(bad, dict | list):
        return f"{field}: {message}"
    return f"{field}: {message} (got {bad!r})"


# The PLANNER_ variables that are not a PLANNER_<SECTION>__<FIELD> path.
_FLAT_PLANNER_VARIABLES = {"PLANNER_CONFIG"} | {n for n in ENV_FIELDS if n.startswith("PLANNER_")}


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The settings model a field holds (`X` or `X | None`), None for a plain value."""
    for candidate in (annotation, *get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _takes_any_key(annotation: Any) -> bool:
    """A mapping (`pricing`, `arm_aliases`): its keys are the operator's, any name goes."""
    return get_origin(annotation) is dict


def _is_setting_path(parts: list[str], model: type[BaseModel]) -> bool:
    """Do `parts` (lower case) name a field of `model`, or a field within one?"""
    field = model.model_fields.get(parts[0])
    if field is None:
        return False
    rest = parts[1:]
    if not rest or _takes_any_key(field.annotation):
        return True
    inner = _model_in(field.annotation)
    return inner is not None and _is_setting_path(rest, inner)


def _setting_variables(model: type[BaseModel], prefix: str) -> list[str]:
    """Every PLANNER_<SECTION>__<FIELD> name (one level of sections), for suggestions."""
    names = []
    for name, field in model.model_fields.items():
        if prefix == "PLANNER_" and name == MODEL_KEY_FIELD:
            continue
        names.append(f"{prefix}{name.upper()}")
        inner = _model_in(field.annotation)
        if inner is not None and prefix == "PLANNER_":
            names += _setting_variables(inner, f"{prefix}{name.upper()}__")
    return names


@cache
def _planner_variables() -> tuple[str, ...]:
    """Every PLANNER_ name the service reads: the table's, then the nested ones."""
    return (*sorted(_FLAT_PLANNER_VARIABLES), *_setting_variables(Settings, "PLANNER_"))


def _unknown_planner_variable(name: str) -> ConfigError | None:
    """Why a PLANNER_ variable is refused: it names no setting (`PLANNER_PLANING__MAX_STEPS`),
    and would be ignored while the service ran on the default. None for a setting's name."""
    # The table's variables are read by their exact name, the nested ones in any case.
    if name in _FLAT_PLANNER_VARIABLES:
        return None
    parts = name[len("PLANNER_") :].lower().split("__")
    if all(parts) and parts[0] != MODEL_KEY_FIELD and _is_setting_path(parts, Settings):
        return None
    known = _planner_variables()
    meant = near_miss(name, known)
    if meant is None:
        # Matched without the prefix every name shares, so only a near miss is suggested.
        by_rest = {known_name[len("PLANNER_") :]: known_name for known_name in known}
        close = difflib.get_close_matches(name[len("PLANNER_") :].upper(), by_rest, n=1)
        meant = by_rest[close[0]] if close else None
    hint = f"did you mean {meant}?" if meant else "see docs/configuration.md"
    return ConfigError(
        f"{name}: no such setting (PLANNER_<SECTION>__<FIELD> names a field of a section); {hint}"
    )


# What Kubernetes sets in a pod for each Service of its namespace ("service links"): the
# Service planner-arm gives PLANNER_ARM_SERVICE_HOST=10.0.0.7, PLANNER_ARM_PORT=tcp://...
_SERVICE_LINK = re.compile(
    r"(?!.*__)[A-Z][A-Z0-9_]*_(?:SERVICE_HOST|SERVICE_PORT(?:_[A-Z0-9_]+)?|"
    r"PORT(?:_[0-9]+_(?:TCP|UDP|SCTP)(?:_PROTO|_PORT|_ADDR)?)?)"
)
_SERVICE_LINK_VALUE = re.compile(
    r"[0-9a-fA-F.:]+|(?:tcp|udp|sctp)(?:://\[?[0-9a-fA-F.:]+\]?:[0-9]+)?"
)


def is_service_link(name: str, value: str) -> bool:
    """Whether a variable is one Kubernetes set for a Service: its name (no `__`, which a
    setting's has) and its value (an address, a port, a protocol or a URL of them) both have
    the shape, so a setting's typo that happens to end in _PORT is still refused."""
    return bool(_SERVICE_LINK.fullmatch(name) and _SERVICE_LINK_VALUE.fullmatch(value.strip()))


def check_variables(environ: Mapping[str, str]) -> None:
    """Refuse a variable the service would ignore though it was meant for it, as a typo in the
    file is refused: a PLANNER_ one that names no setting, and any other a slip away from a
    variable of the table (`LLM_BASEURL`, `OPENAI_APIKEY`). An empty one counts as unset, like
    the variables of the table. Never the value in the message: it may be a key."""
    for name in sorted(environ):
        value = environ[name]
        if not value.strip() or name in ENV_FIELDS or is_service_link(name, value):
            continue
        if name.upper().startswith("PLANNER_"):
            refused = _unknown_planner_variable(name)
            if refused is not None:
                raise refused
            continue
        meant = near_miss(name, ENV_FIELDS)
        if meant is not None:
            raise ConfigError(
                f"{name}: no such variable, so the service would run without its value; "
                f"did you mean {meant}?"
            )


def load_settings(**overrides: Any) -> Settings:
    """Build the settings, or raise ConfigError with one line naming the bad field.

    `overrides` (section -> dict of fields) win over file and environment; tests use them.
    """
    check_variables(os.environ)
    config_file = os.environ.get("PLANNER_CONFIG", "").strip()
    if config_file:
        path = Path(config_file)
        if not path.is_file():
            raise ConfigError(f"PLANNER_CONFIG: no file at {path}")
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise ConfigError(f"PLANNER_CONFIG: {path} is not valid YAML: {exc}") from exc
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"PLANNER_CONFIG: {path} must hold a mapping at the top level")
        if isinstance(loaded, dict) and MODEL_KEY_FIELD in loaded:
            raise ConfigError(
                f"{MODEL_KEY_FIELD}: the model's key is not read from the file ({path}): set "
                f"{' or '.join(MODEL_KEY_VARIABLES)}"
            )
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from exc


def publish_redacted_headers(tracing: TracingSettings) -> None:
    """Puts the headers to redact in this process's environment, where the instrumentations
    read them (the httpx one, which sees the model's key, reads nothing else)."""
    os.environ[SANITIZE_FIELDS_VARIABLE] = ",".join(tracing.redacted_headers)


def default_settings_dict() -> dict[str, Any]:
    """The built-in defaults as plain data: the shipped planner-config.yaml must match it."""
    data = Settings.model_construct().model_dump(
        mode="json", exclude={"api_key", "auth", "tracing"}
    )
    # The built-in arms leave a tool's optional fields out.
    data["arms"] = [
        {key: value for key, value in arm.items() if key not in _TOOL_ONLY or value}
        for arm in data["arms"]
    ]
    return data


_TOOL_ONLY = {"input_schema", "consumes", "produces", "title", "output_schema", "annotations"}
