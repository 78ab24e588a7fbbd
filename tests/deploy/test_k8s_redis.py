"""Offline checks of the Redis plan store in the k8s/ base: the store every planner replica
shares (plans, Idempotency-Key records, the plan cache).

Like the rest of the base's checks (test_deploy.py): each manifest against the Kubernetes
schemas (strict), the planner's variables and NetworkPolicy against the Redis objects, names,
ports and labels against each other and the app, Redis's memory against the callers' caps;
and the base rendered by kubectl (or kustomize).
"""

from __future__ import annotations

import copy
from urllib.parse import urlsplit

import pytest
import yaml

from planner_arm.config import ConfigError, load_settings
from planner_arm.service.wiring import build_store
from support.app import FakeClock
from support.manifests import (
    K8S,
    by_kind_and_name,
    manifest_files,
    render,
    validate,
)

OBJECTS = by_kind_and_name([doc for docs in manifest_files().values() for doc in docs])
REDIS = {kind: doc for (kind, name), doc in OBJECTS.items() if name == "planner-arm-redis"}
PLANNER = {kind: doc for (kind, name), doc in OBJECTS.items() if name == "planner-arm"}
REDIS_POD = REDIS["Deployment"]["spec"]["template"]
(REDIS_CONTAINER,) = REDIS_POD["spec"]["containers"]
REDIS_PORT = REDIS_CONTAINER["ports"][0]["containerPort"]
(PLANNER_CONTAINER,) = PLANNER["Deployment"]["spec"]["template"]["spec"]["containers"]
ENV = {item["name"]: item for item in PLANNER_CONTAINER["env"]}
MIB = 1024 * 1024


def store_url() -> str:
    value: str = ENV["PLANNER_STORE_URL"]["value"]
    return value


def redis_arg(name: str) -> str:
    args: list[str] = REDIS_CONTAINER["args"]
    return args[args.index(name) + 1]


def test_the_principal_secret_comes_with_the_store(monkeypatch: pytest.MonkeyPatch) -> None:
    ref = ENV["PLANNER_AUTH__PRINCIPAL_SECRET"]["valueFrom"]["secretKeyRef"]
    # The Secret the keys come from, so one Secret holds both.
    keys_ref = ENV["PLANNER_API_KEYS"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": keys_ref["name"], "key": "principal-secret", "optional": False}
    # What the pod's settings are with the keys and the store: without the secret the
    # service refuses to start, with it it starts.
    monkeypatch.setenv("PLANNER_API_KEYS", "acme:k-0123456789")
    monkeypatch.setenv("PLANNER_STORE_URL", store_url())
    with pytest.raises(ConfigError, match="principal_secret is required"):
        load_settings()
    monkeypatch.setenv("PLANNER_AUTH__PRINCIPAL_SECRET", "a-random-secret-0123456789")
    assert load_settings().auth.principal_secret is not None


def test_the_base_holds_redis_with_its_service_and_policy() -> None:
    assert set(REDIS) == {"Deployment", "Service", "NetworkPolicy"}


@pytest.mark.parametrize("kind", ["Deployment", "Service", "NetworkPolicy"])
def test_redis_manifest_matches_the_kubernetes_schema(kind: str) -> None:
    validate(REDIS[kind])


def test_the_planner_is_pointed_at_the_redis_service(
    monkeypatch: pytest.MonkeyPatch, fake_clock: FakeClock
) -> None:
    url = urlsplit(store_url())
    service = REDIS["Service"]
    assert url.scheme == "redis"
    assert url.hostname == service["metadata"]["name"]
    assert url.port == service["spec"]["ports"][0]["port"]
    # The value the pod gets starts the service with the Redis store.
    monkeypatch.setenv("PLANNER_STORE_URL", store_url())
    assert build_store(load_settings(), fake_clock.as_clock()).kind == "redis"


def test_the_service_and_policies_connect_only_planner_and_redis() -> None:
    redis_labels = REDIS_POD["metadata"]["labels"].items()
    planner_labels = PLANNER["Deployment"]["spec"]["template"]["metadata"]["labels"].items()
    service = REDIS["Service"]["spec"]
    assert service["selector"].items() <= redis_labels
    assert service["ports"][0]["targetPort"] in (REDIS_CONTAINER["ports"][0]["name"], REDIS_PORT)
    assert REDIS["Deployment"]["spec"]["selector"]["matchLabels"].items() <= redis_labels
    assert not PLANNER["NetworkPolicy"]["spec"]["podSelector"]["matchLabels"].items() <= (
        redis_labels
    )

    policy = REDIS["NetworkPolicy"]["spec"]
    assert policy["podSelector"]["matchLabels"].items() <= redis_labels
    assert set(policy["policyTypes"]) == {"Ingress", "Egress"}
    assert policy["egress"] == []
    (rule,) = policy["ingress"]
    (peer,) = rule["from"]
    assert set(peer) == {"podSelector"}
    assert peer["podSelector"]["matchLabels"].items() <= planner_labels
    assert [(p["protocol"], p["port"]) for p in rule["ports"]] == [("TCP", REDIS_PORT)]


def test_the_planner_may_reach_redis_and_nothing_more() -> None:
    rules = [
        rule
        for rule in PLANNER["NetworkPolicy"]["spec"]["egress"]
        if any(port["port"] == REDIS_PORT for port in rule["ports"])
    ]
    (rule,) = rules
    (peer,) = rule["to"]
    assert set(peer) == {"podSelector"}
    assert peer["podSelector"]["matchLabels"].items() <= REDIS_POD["metadata"]["labels"].items()
    assert [(p["protocol"], p["port"]) for p in rule["ports"]] == [("TCP", REDIS_PORT)]
    # Without the rule the policy is the one of a planner with no store, and still valid.
    policy = copy.deepcopy(PLANNER["NetworkPolicy"])
    policy["spec"]["egress"].remove(rule)
    validate(policy)


def test_redis_runs_locked_down_and_keeps_nothing() -> None:
    image = REDIS_CONTAINER["image"]
    assert image.startswith("redis:7.2.")
    assert "latest" not in image
    security = REDIS_POD["spec"]["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    box = REDIS_CONTAINER["securityContext"]
    assert box["readOnlyRootFilesystem"] is True
    assert box["allowPrivilegeEscalation"] is False
    assert box["capabilities"]["drop"] == ["ALL"]
    assert REDIS_POD["spec"]["automountServiceAccountToken"] is False
    (mount,) = REDIS_CONTAINER["volumeMounts"]
    volumes = {v["name"]: v for v in REDIS_POD["spec"]["volumes"]}
    assert mount["mountPath"] == "/data"
    assert "emptyDir" in volumes[mount["name"]]
    assert redis_arg("--save") == ""
    assert redis_arg("--appendonly") == "no"
    assert redis_arg("--maxmemory-policy") == "noeviction"
    assert "limits" in REDIS_CONTAINER["resources"]


def _bytes(size: str) -> int:
    """A Redis size (`256mb`: MiB) or a Kubernetes quantity (`384Mi`) in bytes."""
    units = {"kb": 1024, "mb": MIB, "gb": 1024 * MIB, "Ki": 1024, "Mi": MIB, "Gi": 1024 * MIB}
    for unit, factor in units.items():
        if size.endswith(unit):
            return int(size.removesuffix(unit)) * factor
    return int(size)


def test_redis_memory_holds_the_callers_caps_under_its_limit() -> None:
    # noeviction: no caller within its caps should meet a full Redis. The shipped caps of one
    # caller, times the callers the comment promises, plus a tenth for Redis's own use.
    shipped = yaml.safe_load((K8S / "planner-config.yaml").read_text())["tenants"]
    per_caller = sum(
        shipped[cap] for cap in ("max_plan_bytes", "max_idempotency_bytes", "max_cache_bytes")
    )
    assert per_caller == 22 * MIB
    maxmemory = _bytes(redis_arg("--maxmemory"))
    assert maxmemory >= 10 * per_caller * 1.1
    # The container's limit leaves Redis room beyond maxmemory (buffers, fragmentation).
    limit = _bytes(REDIS_CONTAINER["resources"]["limits"]["memory"])
    assert limit >= maxmemory * 1.25
    assert _bytes(REDIS_CONTAINER["resources"]["requests"]["memory"]) <= limit


def test_the_rendered_base_wires_the_planner_to_redis() -> None:
    rendered = by_kind_and_name(render(K8S))
    names = set(rendered)
    assert {("Deployment", "planner-arm-redis"), ("Service", "planner-arm-redis")} <= names
    assert ("NetworkPolicy", "planner-arm-redis") in names
    for doc in rendered.values():
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["namespace"] == "octollm"
        assert doc["metadata"]["labels"]["app.kubernetes.io/part-of"] == "octollm"
        validate(doc)
    planner = rendered["Deployment", "planner-arm"]["spec"]["template"]["spec"]
    env = {item["name"]: item for item in planner["containers"][0]["env"]}
    assert env["PLANNER_STORE_URL"] == ENV["PLANNER_STORE_URL"]
    assert env["PLANNER_AUTH__PRINCIPAL_SECRET"] == ENV["PLANNER_AUTH__PRINCIPAL_SECRET"]
    egress = rendered["NetworkPolicy", "planner-arm"]["spec"]["egress"]
    assert any(rule["ports"] == [{"protocol": "TCP", "port": REDIS_PORT}] for rule in egress)
