"""Offline checks of the optional Redis plan store in k8s/components/redis.

Like the base's checks (test_deploy.py): each manifest against the Kubernetes schemas (strict),
the patches against the objects they change, names, ports and labels against each other and
the app; and, when kubectl or kustomize is here, an overlay of base + component is rendered.
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from planner_arm.config import ConfigError, load_settings
from planner_arm.service.wiring import build_store
from support.app import FakeClock

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "k8s"
COMPONENT = K8S / "components" / "redis"
K8S_VERSION = "1.30"
KUSTOMIZATION: dict[str, Any] = yaml.safe_load((COMPONENT / "kustomization.yaml").read_text())
OBJECTS = {
    doc["kind"]: doc
    for name in KUSTOMIZATION["resources"]
    for doc in yaml.safe_load_all((COMPONENT / name).read_text())
    if doc
}
BASE = {
    doc["kind"]: doc
    for name in yaml.safe_load((K8S / "kustomization.yaml").read_text())["resources"]
    for doc in yaml.safe_load_all((K8S / name).read_text())
    if doc
}
PATCHES = {patch["path"]: patch for patch in KUSTOMIZATION["patches"]}
REDIS_POD = OBJECTS["Deployment"]["spec"]["template"]
(REDIS,) = REDIS_POD["spec"]["containers"]
REDIS_PORT = REDIS["ports"][0]["containerPort"]


def validate(doc: dict[str, Any]) -> None:
    try:
        import kubernetes_validate
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("kubernetes-validate is not installed")
        pytest.skip("kubernetes-validate is not installed")
    assert kubernetes_validate.validate(doc, K8S_VERSION, strict=True) == K8S_VERSION


def patched_env() -> dict[str, dict[str, Any]]:
    """The variables the component adds to the planner's container, by name."""
    patch = yaml.safe_load((COMPONENT / "planner-store-url.yaml").read_text())
    (container,) = patch["spec"]["template"]["spec"]["containers"]
    return {variable["name"]: variable for variable in container["env"]}


def store_url() -> str:
    value: str = patched_env()["PLANNER_STORE_URL"]["value"]
    return value


def test_the_principal_secret_comes_with_the_store(monkeypatch: pytest.MonkeyPatch) -> None:
    env = patched_env()
    assert set(env) == {"PLANNER_STORE_URL", "PLANNER_AUTH__PRINCIPAL_SECRET"}
    ref = env["PLANNER_AUTH__PRINCIPAL_SECRET"]["valueFrom"]["secretKeyRef"]
    # The Secret the base's keys come from, so one Secret holds both.
    base = {
        item["name"]: item
        for item in BASE["Deployment"]["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    keys_ref = base["PLANNER_API_KEYS"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": keys_ref["name"], "key": "principal-secret", "optional": False}
    # What the pod's settings are with the keys and the store: without the secret the
    # service refuses to start, with it it starts.
    monkeypatch.setenv("PLANNER_API_KEYS", "acme:k-0123456789")
    monkeypatch.setenv("PLANNER_STORE_URL", store_url())
    with pytest.raises(ConfigError, match="principal_secret is required"):
        load_settings()
    monkeypatch.setenv("PLANNER_AUTH__PRINCIPAL_SECRET", "a-random-secret-0123456789")
    assert load_settings().auth.principal_secret is not None


def test_the_component_is_a_component_with_its_own_namespace_and_labels() -> None:
    assert KUSTOMIZATION["kind"] == "Component"
    assert KUSTOMIZATION["namespace"] == "octollm"
    assert all(labels["includeSelectors"] is False for labels in KUSTOMIZATION["labels"])
    on_disk = {p.name for p in COMPONENT.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(KUSTOMIZATION["resources"]) | set(PATCHES) == on_disk
    assert set(OBJECTS) == {"Deployment", "Service", "NetworkPolicy"}


@pytest.mark.parametrize("kind", ["Deployment", "Service", "NetworkPolicy"])
def test_redis_manifest_matches_the_kubernetes_schema(kind: str) -> None:
    validate(OBJECTS[kind])


def test_the_planner_is_pointed_at_the_redis_service(
    monkeypatch: pytest.MonkeyPatch, fake_clock: FakeClock
) -> None:
    patch = yaml.safe_load((COMPONENT / "planner-store-url.yaml").read_text())
    base = BASE["Deployment"]
    assert (patch["kind"], patch["metadata"]["name"]) == ("Deployment", base["metadata"]["name"])
    (patched,) = patch["spec"]["template"]["spec"]["containers"]
    (container,) = base["spec"]["template"]["spec"]["containers"]
    assert patched["name"] == container["name"]
    assert "PLANNER_STORE_URL" not in {item["name"] for item in container["env"]}
    url = urlsplit(store_url())
    service = OBJECTS["Service"]
    assert url.hostname == service["metadata"]["name"]
    assert url.port == service["spec"]["ports"][0]["port"]
    # The value the pod gets starts the service with the Redis store.
    monkeypatch.setenv("PLANNER_STORE_URL", store_url())
    assert build_store(load_settings(), fake_clock.as_clock()).kind == "redis"


def test_the_service_and_policies_connect_only_planner_and_redis() -> None:
    redis_labels = REDIS_POD["metadata"]["labels"].items()
    planner_labels = BASE["Deployment"]["spec"]["template"]["metadata"]["labels"].items()
    service = OBJECTS["Service"]["spec"]
    assert service["selector"].items() <= redis_labels
    assert service["ports"][0]["targetPort"] in (REDIS["ports"][0]["name"], REDIS_PORT)
    assert OBJECTS["Deployment"]["spec"]["selector"]["matchLabels"].items() <= redis_labels
    assert not BASE["NetworkPolicy"]["spec"]["podSelector"]["matchLabels"].items() <= redis_labels

    policy = OBJECTS["NetworkPolicy"]["spec"]
    assert policy["podSelector"]["matchLabels"].items() <= redis_labels
    assert set(policy["policyTypes"]) == {"Ingress", "Egress"}
    assert policy["egress"] == []
    (rule,) = policy["ingress"]
    (peer,) = rule["from"]
    assert set(peer) == {"podSelector"}
    assert peer["podSelector"]["matchLabels"].items() <= planner_labels
    assert [(p["protocol"], p["port"]) for p in rule["ports"]] == [("TCP", REDIS_PORT)]


def test_the_planner_may_reach_redis_and_nothing_more() -> None:
    assert PATCHES["planner-egress-to-redis.yaml"]["target"] == {
        "kind": "NetworkPolicy",
        "name": BASE["NetworkPolicy"]["metadata"]["name"],
    }
    (operation,) = yaml.safe_load((COMPONENT / "planner-egress-to-redis.yaml").read_text())
    assert (operation["op"], operation["path"]) == ("add", "/spec/egress/-")
    policy = copy.deepcopy(BASE["NetworkPolicy"])
    policy["spec"]["egress"].append(operation["value"])
    validate(policy)
    (peer,) = operation["value"]["to"]
    assert peer["podSelector"]["matchLabels"].items() <= REDIS_POD["metadata"]["labels"].items()
    assert [(p["protocol"], p["port"]) for p in operation["value"]["ports"]] == [
        ("TCP", REDIS_PORT)
    ]


def test_redis_runs_locked_down_and_keeps_nothing() -> None:
    image = REDIS["image"]
    assert image.startswith("redis:7.2.")
    assert "latest" not in image
    security = REDIS_POD["spec"]["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    box = REDIS["securityContext"]
    assert box["readOnlyRootFilesystem"] is True
    assert box["allowPrivilegeEscalation"] is False
    assert box["capabilities"]["drop"] == ["ALL"]
    assert REDIS_POD["spec"]["automountServiceAccountToken"] is False
    (mount,) = REDIS["volumeMounts"]
    volumes = {v["name"]: v for v in REDIS_POD["spec"]["volumes"]}
    assert mount["mountPath"] == "/data"
    assert "emptyDir" in volumes[mount["name"]]
    args = REDIS["args"]
    assert args[args.index("--save") + 1] == ""
    assert args[args.index("--appendonly") + 1] == "no"
    assert args[args.index("--maxmemory-policy") + 1] == "noeviction"
    assert "limits" in REDIS["resources"]


def test_base_plus_component_renders_valid_objects(tmp_path: Path) -> None:
    if kustomize := shutil.which("kustomize"):
        command = [kustomize, "build"]
    elif kubectl := shutil.which("kubectl"):
        command = [kubectl, "kustomize"]
    else:
        pytest.skip("no kustomize or kubectl here; the manifests are checked file by file")
    overlay = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        # Kustomize takes only relative paths, and no overlay inside its base's folder.
        "resources": [os.path.relpath(K8S, tmp_path)],
        "components": [os.path.relpath(COMPONENT, tmp_path)],
    }
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(overlay))
    run = subprocess.run(
        [*command, str(tmp_path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert run.returncode == 0, run.stderr
    rendered = [doc for doc in yaml.safe_load_all(run.stdout) if doc]
    names = {(doc["kind"], doc["metadata"]["name"]) for doc in rendered}
    assert {("Deployment", "planner-arm-redis"), ("Service", "planner-arm-redis")} <= names
    assert ("NetworkPolicy", "planner-arm-redis") in names
    for doc in rendered:
        assert doc["metadata"]["namespace"] == "octollm"
        assert doc["metadata"]["labels"]["app.kubernetes.io/part-of"] == "octollm"
        if doc["kind"] != "ServiceMonitor":
            validate(doc)
    planner = {doc["kind"]: doc for doc in rendered if doc["metadata"]["name"] == "planner-arm"}
    env = planner["Deployment"]["spec"]["template"]["spec"]["containers"][0]["env"]
    base_env = BASE["Deployment"]["spec"]["template"]["spec"]["containers"][0]["env"]
    added = list(patched_env().values())  # the store's URL and the principal secret
    assert sorted(env, key=str) == sorted([*base_env, *added], key=str)
    egress = planner["NetworkPolicy"]["spec"]["egress"]
    assert egress[:-1] == BASE["NetworkPolicy"]["spec"]["egress"]
    assert egress[-1]["ports"] == [{"protocol": "TCP", "port": REDIS_PORT}]
