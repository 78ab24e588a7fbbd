from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from planner_arm.cli import cli
from planner_arm.config import ConfigError, Settings, default_settings_dict, load_settings
from planner_arm.llm.chain import NO_MODEL_DETAIL
from support.invariants import DEFAULT_ARMS

REPO = Path(__file__).resolve().parents[1]


def test_defaults_follow_the_seed() -> None:
    settings = load_settings()
    assert settings.model.name == "gpt-3.5-turbo"
    assert settings.model.temperature == 0.3
    assert settings.model.max_tokens == 2000
    assert (settings.planning.min_steps, settings.planning.max_steps) == (3, 7)
    assert settings.planning.timeout_seconds == 10
    assert settings.retry.max_llm_calls == 3
    assert tuple(settings.arm_ids) == DEFAULT_ARMS
    assert not settings.llm_enabled


def test_shipped_config_file_matches_the_defaults() -> None:
    shipped = yaml.safe_load((REPO / "planner-config.yaml").read_text())
    assert shipped == default_settings_dict()


def test_seed_environment_variables_override_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "planner.yaml"
    config.write_text("model: {name: from-file, temperature: 0.1}\nplanning: {max_steps: 6}\n")
    monkeypatch.setenv("PLANNER_CONFIG", str(config))
    monkeypatch.setenv("LLM_MODEL", "from-env")
    monkeypatch.setenv("MAX_PLAN_STEPS", "5")
    monkeypatch.setenv("MIN_PLAN_STEPS", "2")
    monkeypatch.setenv("MAX_TOKENS", "1000")
    monkeypatch.setenv("TIMEOUT_SECONDS", "4.5")
    monkeypatch.setenv("LOG_LEVEL", "debug")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-abc")
    monkeypatch.setenv("LLM_BASE_URL", "http://localhost:11434/v1")
    settings = load_settings()
    assert settings.model.name == "from-env"
    assert settings.model.temperature == 0.1  # the file's, no variable set
    assert (settings.planning.min_steps, settings.planning.max_steps) == (2, 5)
    assert settings.model.max_tokens == 1000
    assert settings.planning.timeout_seconds == 4.5
    assert settings.server.log_level == "DEBUG"
    assert settings.api_key is not None
    assert settings.api_key.get_secret_value() == "sk-abc"
    assert "sk-abc" not in repr(settings)
    assert settings.model.base_url == "http://localhost:11434/v1"
    assert settings.llm_enabled


def test_nested_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANNER_RETRY__MAX_LLM_CALLS", "2")
    monkeypatch.setenv("PLANNER_FALLBACK__ENABLED", "false")
    settings = load_settings()
    assert settings.retry.max_llm_calls == 2
    assert settings.fallback.enabled is False


def test_base_url_alone_turns_the_llm_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")
    assert load_settings().llm_enabled


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"MIN_PLAN_STEPS": "8"}, "planning: min_steps (8) is above max_steps (7)"),
        ({"PLANNING_TEMPERATURE": "7"}, "model.temperature"),
        ({"MAX_PLAN_STEPS": "many"}, "planning.max_steps"),
        ({"TIMEOUT_SECONDS": "-1"}, "planning.timeout_seconds"),
        ({"LLM_RESPONSE_FORMAT": "xml"}, "model.response_format"),
    ],
)
def test_bad_values_name_the_field(
    monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], message: str
) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("arm_aliases: {admin: root}\n", "arm_aliases: points at unknown arm(s) ['root']"),
        ("model: {temprature: 0.2}\n", "model.temprature"),
        (
            "planning: {profile: agents}\n"
            "arms: [{id: coder, capabilities: [code], description: Writes code}]\n",
            "the agents profile needs an arm with id 'judge'",
        ),
        ("planning: [1, 2]\n", "planning"),
        ("- just\n- a list\n", "must hold a mapping"),
        ("model: {name: [unclosed\n", "not valid YAML"),
        ("model: {provider: anthropic}\n", "model.provider: Input should be 'openai'"),
    ],
)
def test_bad_files_name_the_problem(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, text: str, message: str
) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(text)
    monkeypatch.setenv("PLANNER_CONFIG", str(config))
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert message in str(caught.value)


def test_missing_config_file_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANNER_CONFIG", "/nonexistent/planner.yaml")
    with pytest.raises(ConfigError, match=r"no file at /nonexistent/planner\.yaml"):
        load_settings()


def test_model_chain_has_no_repeats(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_MODEL", "a")
    monkeypatch.setenv("LLM_FALLBACK_MODELS", "b, a, c")
    assert load_settings().model.chain == ["a", "b", "c"]


def test_the_seeds_config_file_still_loads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The seed's example file, keys and all: provider and require_dependency_check are read.
    seed = """
model:
  provider: "openai"
  name: "gpt-3.5-turbo"
  temperature: 0.3
  max_tokens: 2000
planning:
  min_steps: 3
  max_steps: 7
  require_validation_step: true
  require_dependency_check: false
"""
    config = tmp_path / "seed.yaml"
    config.write_text(seed)
    monkeypatch.setenv("PLANNER_CONFIG", str(config))
    settings = load_settings()
    assert settings.model.provider == "openai"
    assert settings.planning.require_dependency_check is False


def test_which_source_wins_when_two_name_one_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The README's order: table variables, then PLANNER_<SECTION>__<FIELD>, then the file;
    of two table variables for one setting, the LLM_ one."""
    config = tmp_path / "planner.yaml"
    config.write_text("model:\n  name: from-file\n  temperature: 0.1\n")
    monkeypatch.setenv("PLANNER_CONFIG", str(config))
    monkeypatch.setenv("PLANNER_MODEL__NAME", "from-nested")
    monkeypatch.setenv("PLANNER_MODEL__TEMPERATURE", "0.2")
    monkeypatch.setenv("LLM_MODEL", "from-table")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    monkeypatch.setenv("LLM_API_KEY", "sk-llm")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://openai.invalid/v1")
    monkeypatch.setenv("LLM_BASE_URL", "http://llm.invalid/v1")
    settings = load_settings()
    assert settings.model.name == "from-table"
    assert settings.model.temperature == 0.2  # no table variable: the nested one beats the file
    assert settings.api_key is not None
    assert settings.api_key.get_secret_value() == "sk-llm"
    assert settings.model.base_url == "http://llm.invalid/v1"


@pytest.mark.parametrize(
    ("env", "url"),
    [
        ({}, None),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"},
            "http://collector:4318/v1/traces",
        ),
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://traces:4318/spans",
            },
            "http://traces:4318/spans",
        ),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "TRUE"}, None),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, None),
    ],
)
def test_tracing_follows_the_otel_variables(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], url: str | None
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert load_settings().tracing.traces_url == url


def test_the_service_name_defaults_to_planner_arm(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings().tracing.service_name == "planner-arm"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "planner-eu")
    assert load_settings().tracing.service_name == "planner-eu"


def test_keys_with_a_redis_store_need_a_principal_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANNER_API_KEYS", "acme:k-0123456789")
    monkeypatch.setenv("PLANNER_STORE_URL", "redis://redis.internal:6379/0")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    said = str(caught.value)
    assert said.startswith("auth: principal_secret is required when API keys are configured")
    assert "PLANNER_AUTH__PRINCIPAL_SECRET" in said
    assert "k-0123456789" not in said
    # With the secret it starts; without keys, or in memory, none is needed.
    monkeypatch.setenv("PLANNER_AUTH__PRINCIPAL_SECRET", "s" * 16)
    assert load_settings().auth.principal_secret is not None
    monkeypatch.delenv("PLANNER_AUTH__PRINCIPAL_SECRET")
    assert load_settings(store={"url": None}).auth.enabled
    monkeypatch.delenv("PLANNER_API_KEYS")
    assert load_settings().store.url is not None


def test_a_short_principal_secret_is_refused_without_being_shown() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(auth={"principal_secret": "tooshort-secret"})
    assert str(caught.value) == "auth: principal_secret must be 16 or more characters"


@pytest.mark.parametrize(
    ("keys", "tenants"),
    [
        (["acme:k-shared-0123", "globex:k-shared-0123"], "acme and globex"),
        (["k-shared-0123", "globex:k-shared-0123"], "a plain key entry and globex"),
        (["acme:k-1", "beta:k-shared-0123", "zeta:k-shared-0123"], "beta and zeta"),
    ],
)
def test_one_key_for_two_tenants_stops_start_up(keys: list[str], tenants: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(auth={"api_keys": keys})
    said = str(caught.value)
    assert said.startswith(f"auth: one API key is listed for more than one tenant ({tenants})")
    assert "k-shared" not in said


def test_a_key_listed_twice_for_one_tenant_is_one_key() -> None:
    settings = load_settings(auth={"api_keys": ["acme:k-1", "acme:k-1", "k-2", "k-2"]})
    entries = [("acme", "k-1"), ("acme", "k-1"), (None, "k-2"), (None, "k-2")]
    assert settings.auth.key_entries == entries


@pytest.mark.parametrize(
    "url", ["localhost:8000/v1", "127.0.0.1:8000", "ftp://models/v1", "http://"]
)
def test_a_model_url_without_a_scheme_and_host_stops_start_up(
    monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    monkeypatch.setenv("LLM_BASE_URL", url)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    said = str(caught.value)
    # The variable the operator set is named beside the field it sets.
    assert said.startswith("model.base_url (LLM_BASE_URL): must be an http:// or https:// URL")
    assert repr(url) in said


def test_a_model_url_in_the_file_is_checked_too(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "planner.yaml"
    config.write_text("model: {base_url: 'localhost:8000/v1'}\n")
    monkeypatch.setenv("PLANNER_CONFIG", str(config))
    with pytest.raises(ConfigError, match=r"^model\.base_url: must be an http"):
        load_settings()


@pytest.mark.parametrize(
    ("url", "by_provider"),
    [
        (None, True),
        ("https://api.openai.com/v1", True),
        ("http://localhost:8000/v1", False),
        ("https://llm.internal.example/v1", False),
    ],
)
def test_which_model_urls_are_the_providers(
    monkeypatch: pytest.MonkeyPatch, url: str | None, by_provider: bool
) -> None:
    if url is not None:
        monkeypatch.setenv("LLM_BASE_URL", url)
    assert load_settings().model.provider_prices_apply is by_provider


@pytest.mark.parametrize(
    ("name", "suggested"),
    [
        ("PLANNER_PLANING__MAX_STEPS", "PLANNER_PLANNING__MAX_STEPS"),
        ("PLANNER_RETRY__MAX_CALLS", "PLANNER_RETRY__MAX_LLM_CALLS"),
        ("PLANNER_STORE_URl", "PLANNER_STORE_URL"),
        ("PLANNER_MAX_STEPS", "PLANNER_PLANNING__MAX_STEPS"),
        ("PLANNER_MODEL__BASE_URL__HOST", "PLANNER_MODEL__BASE_URL"),
    ],
)
def test_an_unknown_planner_variable_stops_start_up(
    monkeypatch: pytest.MonkeyPatch, name: str, suggested: str
) -> None:
    monkeypatch.setenv(name, "5")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    said = str(caught.value)
    assert said.startswith(f"{name}: no such setting")
    assert said.endswith(f"did you mean {suggested}?")


def test_an_unknown_planner_variable_far_from_any_setting_points_at_the_docs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PLANNER_XYZZY", "1")
    with pytest.raises(ConfigError, match=r"^PLANNER_XYZZY: no such setting.*docs/configuration"):
        load_settings()


@pytest.mark.parametrize(
    ("name", "section", "field"),
    [
        ("PLANNER_PLANNING__MAX_STEPS", "planning", "max_steps"),
        ("planner_planning__max_steps", "planning", "max_steps"),  # read in any case
        ("PLANNER_LIMITS__MAX_CONSTRAINTS", "limits", "max_constraints"),
    ],
)
def test_known_planner_variables_pass(
    monkeypatch: pytest.MonkeyPatch, name: str, section: str, field: str
) -> None:
    monkeypatch.setenv(name, "5")
    assert getattr(getattr(load_settings(), section), field) == 5


def test_a_mappings_keys_are_the_operators(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANNER_PRICING__LOCAL_QWEN__INPUT_PER_MILLION", "1")
    monkeypatch.setenv("PLANNER_PRICING__LOCAL_QWEN__OUTPUT_PER_MILLION", "2")
    assert load_settings().pricing["local_qwen"].output_per_million == 2


def test_an_empty_unknown_planner_variable_counts_as_unset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PLANNER_PLANING__MAX_STEPS", " ")
    assert load_settings().planning.max_steps == 7


SERVICE_KEY = "sk-service-key-0123456789"


def test_the_service_key_under_a_singular_name_never_becomes_the_models(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PLANNER_API_KEY", SERVICE_KEY)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    said = str(caught.value)
    assert said.startswith("PLANNER_API_KEY: no such setting")
    assert said.endswith("did you mean PLANNER_API_KEYS?")
    assert SERVICE_KEY not in said
    # Whatever builds the settings, the variable is not read as the model's key.
    assert Settings().api_key is None


def test_the_models_key_is_not_read_from_the_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "planner.yaml"
    config.write_text(f"api_key: {SERVICE_KEY}\n")
    monkeypatch.setenv("PLANNER_CONFIG", str(config))
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value) == (
        f"api_key: the model's key is not read from the file ({config}): set OPENAI_API_KEY "
        "or LLM_API_KEY"
    )
    assert Settings().api_key is None


@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("LLM_BASEURL", "LLM_BASE_URL"),
        ("OPENAI_APIKEY", "OPENAI_API_KEY"),
        ("TIMEOUT_SECOND", "TIMEOUT_SECONDS"),
        ("OPENIA_API_KEY", "OPENAI_API_KEY"),  # two letters swapped
        ("LLM_API_KEYS", "LLM_API_KEY"),
        ("LOGLEVEL", "LOG_LEVEL"),
        ("llm_model", "LLM_MODEL"),  # the table's names are read in capitals only
        ("PLANER_API_KEYS", "PLANNER_API_KEYS"),
        ("OTEL_EXPORTER_OTLP_ENDPIONT", "OTEL_EXPORTER_OTLP_ENDPOINT"),
    ],
)
def test_a_variable_a_slip_away_from_the_tables_stops_start_up(
    monkeypatch: pytest.MonkeyPatch, name: str, meant: str
) -> None:
    monkeypatch.setenv(name, SERVICE_KEY)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value) == (
        f"{name}: no such variable, so the service would run without its value; "
        f"did you mean {meant}?"
    )


def test_check_config_reports_a_slip_as_start_up_does(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_BASEURL", "http://localhost:8000/v1")
    result = CliRunner().invoke(cli, ["check-config"])
    assert result.exit_code == 2
    assert "LLM_BASEURL: no such variable" in result.output
    assert "did you mean LLM_BASE_URL?" in result.output


# Another program's variables, and what Kubernetes sets for the Services planner-arm and
# planner-arm-redis: none is a slip of the service's own.
NEIGHBOURS = {
    "HOSTNAME": "planner-arm-5d8f7-x2x9z",
    "HOME": "/",
    "OPENAI_ORG_ID": "org-1",
    "OPENAI_API_BASE": "https://example.invalid/v1",
    "OTEL_EXPORTER_OTLP_HEADERS": "a=b",
    "OTEL_LOGS_EXPORTER": "none",
    "LOG_FILE": "/var/log/planner.log",
    "MAX_WORKERS": "4",
    "KUBERNETES_SERVICE_HOST": "10.96.0.1",
    "PLANNER_ARM_SERVICE_HOST": "10.96.0.7",
    "PLANNER_ARM_SERVICE_PORT": "8080",
    "PLANNER_ARM_SERVICE_PORT_HTTP": "8080",
    "PLANNER_ARM_PORT": "tcp://10.96.0.7:8080",
    "PLANNER_ARM_PORT_8080_TCP": "tcp://10.96.0.7:8080",
    "PLANNER_ARM_PORT_8080_TCP_PROTO": "tcp",
    "PLANNER_ARM_PORT_8080_TCP_PORT": "8080",
    "PLANNER_ARM_PORT_8080_TCP_ADDR": "10.96.0.7",
    "PLANNER_ARM_REDIS_PORT_6379_TCP_ADDR": "fd00::7",
}


def test_other_programs_and_kubernetes_variables_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in NEIGHBOURS.items():
        monkeypatch.setenv(name, value)
    assert load_settings().server.port == 8080
    # A setting's typo is refused even when it ends as a Service's variable does.
    monkeypatch.setenv("PLANNER_SERVR__PORT", "9000")
    with pytest.raises(ConfigError, match="did you mean PLANNER_SERVER__PORT"):
        load_settings()


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        # The key `abc` of a tenant `sk`, or one key `sk:abc`?
        ("sk:abc", "the tenant name 'sk' reads as the start of a key (sk-..., sk_...)"),
        ("Acme Corp:k1", "the text before ':' is not a tenant name (1-32 of a-z, 0-9, _ and -"),
        ("ACME:k1", "the text before ':' is not a tenant name"),
        ("acme:", "the key is empty or holds a space"),
        ("acme: k1", "the key is empty or holds a space"),
    ],
)
def test_an_api_key_entry_that_reads_two_ways_stops_start_up(
    monkeypatch: pytest.MonkeyPatch, entry: str, problem: str
) -> None:
    monkeypatch.setenv("PLANNER_API_KEYS", f"acme:k-2024,{entry}")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    said = str(caught.value)
    assert said.startswith(
        "auth: API key entry 2 (counting PLANNER_API_KEYS, then the lines of "
        "PLANNER_API_KEYS_FILE): "
    )
    assert problem in said
    assert "abc" not in said
    assert "k1" not in said


def test_plain_keys_and_a_tenants_keys_are_read_one_way() -> None:
    keys = ["acme:k-2024", "sk-proj-0123456789", "globex:k:with:colons", "k_9"]
    assert load_settings(auth={"api_keys": keys}).auth.key_entries == [
        ("acme", "k-2024"),
        (None, "sk-proj-0123456789"),
        ("globex", "k:with:colons"),  # a tenant's name holds no ':', so the first one ends it
        (None, "k_9"),
    ]


def _readme_variables() -> set[str]:
    readme = (REPO / "README.md").read_text()
    return set(re.findall(r"^\| `([A-Z_]+)`", readme, re.MULTILINE)) | set(
        re.findall(r"^\| `[A-Z_]+`, `([A-Z_]+)`", readme, re.MULTILINE)
    )


def test_the_no_model_message_names_the_variables_the_readme_does() -> None:
    named = set(re.findall(r"\b[A-Z][A-Z_]{3,}\b", NO_MODEL_DETAIL))
    assert named == {"OPENAI_API_KEY", "LLM_BASE_URL"}
    assert named <= _readme_variables()


def test_the_readme_names_the_model_wherever_it_points_at_a_compatible_server() -> None:
    """A local server answers 404 to the default model name: every command of the README
    and the configuration reference that sets a base URL sets LLM_MODEL too."""
    for doc in ("README.md", "docs/configuration.md"):
        text = (REPO / doc).read_text().replace("\\\n", " ").replace("\n", " ")
        commands = re.findall(r"LLM_BASE_URL=\S+ (?:[A-Z_]+=\S+ )*(?:bash|\.venv)", text)
        assert commands, doc
        for command in commands:
            assert "LLM_MODEL=" in command, (doc, command)
