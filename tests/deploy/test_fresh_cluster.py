"""docs/deploy.md's "From zero" on a machine without a cluster: its commands checked against the
manifests of k8s/ in the order a newcomer runs them, and its steps 7 and 8 run against what the
base deploys: a real redis-server with the flags of redis-deployment.yaml and two planners
(the base's two replicas, in process) with the pod's variables and the Secrets of step 2.
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from planner_arm.config import load_settings
from support.app import running_app
from support.manifests import K8S, NAMESPACE, REPO, by_kind_and_name, render
from support.redis_server import RedisServer

DEPLOY_DOC = REPO / "docs" / "deploy.md"


def from_zero() -> list[list[str]]:
    """The commands of the first bash block of "From zero", each split as the shell would
    (continued lines joined, comments dropped)."""
    text = DEPLOY_DOC.read_text()
    section = text[text.index("### From zero\n") :]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "From zero has a bash block"
    joined = block[1].replace("\\\n", " ")
    return [shlex.split(line) for line in joined.splitlines() if line.strip() and line[0] != "#"]


COMMANDS = from_zero()


def where(predicate: Any) -> list[int]:
    return [index for index, command in enumerate(COMMANDS) if predicate(command)]


def option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def created_secrets() -> dict[str, dict[str, str]]:
    """`kubectl create secret generic NAME -n NS --from-literal=KEY=VALUE ...` by name."""
    created: dict[str, dict[str, str]] = {}
    for index in where(lambda c: c[:4] == ["kubectl", "create", "secret", "generic"]):
        command = COMMANDS[index]
        assert option(command, "-n") == NAMESPACE
        literals = [arg.removeprefix("--from-literal=") for arg in command if "=" in arg]
        created[command[4]] = dict(literal.split("=", 1) for literal in literals)
    return created


def base() -> dict[tuple[str, str], dict[str, Any]]:
    return by_kind_and_name(render(K8S))


def secret_refs(objects: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        item["valueFrom"]["secretKeyRef"]
        for (kind, _), doc in objects.items()
        if kind == "Deployment"
        for container in doc["spec"]["template"]["spec"]["containers"]
        for item in container.get("env", [])
        if "secretKeyRef" in item.get("valueFrom", {})
    ]


def test_the_steps_go_namespace_secrets_apply_wait_forward_then_requests() -> None:
    (namespace,) = where(lambda c: c[:3] == ["kubectl", "apply", "-f"])
    creates = where(lambda c: c[:3] == ["kubectl", "create", "secret"])
    (apply,) = where(lambda c: c[:3] == ["kubectl", "apply", "-k"])
    waits = where(lambda c: c[:3] == ["kubectl", "rollout", "status"])
    (forward,) = where(lambda c: c[:2] == ["kubectl", "port-forward"])
    requests = where(lambda c: c[0] == "curl")
    assert namespace == 0
    assert namespace < min(creates) <= max(creates) < apply < min(waits)
    assert max(waits) < forward < min(requests)
    assert len(COMMANDS) == 1 + len(creates) + 1 + len(waits) + 1 + len(requests)
    # The namespace file is the base's Namespace, and the base is the folder applied.
    path = COMMANDS[namespace][3]
    assert (REPO / path).is_file()
    assert ("Namespace", NAMESPACE) in by_kind_and_name(render(K8S))
    assert (REPO / COMMANDS[apply][3]).resolve() == K8S


def test_every_secret_the_pods_read_is_created_and_nothing_else() -> None:
    refs = secret_refs(base())
    created = created_secrets()
    for ref in refs:
        if not ref["optional"]:
            assert ref["key"] in created.get(ref["name"], {}), ref
    read = {(ref["name"], ref["key"]) for ref in refs}
    made = {(name, key) for name, keys in created.items() for key in keys}
    assert made <= read  # a key no pod reads would be a step for nothing
    assert {(name, key) for name, key in read} == made  # the optional model key too


def test_each_deployment_is_waited_for_and_the_service_forwarded() -> None:
    objects = base()
    waited = {
        option(command, "-n") + "/" + command[-1].removeprefix("deployment/")
        for command in COMMANDS
        if command[:3] == ["kubectl", "rollout", "status"]
    }
    deployments = {f"{NAMESPACE}/{name}" for kind, name in objects if kind == "Deployment"}
    assert waited == deployments
    (forward,) = [c for c in COMMANDS if c[:2] == ["kubectl", "port-forward"]]
    assert option(forward, "-n") == NAMESPACE
    service = objects["Service", forward[-2].removeprefix("service/")]
    local, remote = forward[-1].split(":")
    assert int(remote) in {port["port"] for port in service["spec"]["ports"]}
    for command in COMMANDS:
        if command[0] == "curl":
            assert urlsplit(f"http://{command[2]}").port == int(local)


def pod_environment(redis_url: str) -> dict[str, str]:
    """The planner pod's variables as the base sets them, with the Secrets of step 2; the
    store URL pointed at the test's Redis, the config file at the ConfigMap's source."""
    objects = base()
    (container,) = objects["Deployment", "planner-arm"]["spec"]["template"]["spec"]["containers"]
    created = created_secrets()
    env: dict[str, str] = {}
    for item in container["env"]:
        if "value" in item:
            env[item["name"]] = item["value"]
            continue
        ref = item["valueFrom"]["secretKeyRef"]
        value = created[ref["name"]][ref["key"]]
        if ref["optional"]:
            continue  # step 3: no model here (the rule-based planner answers)
        # "$(openssl rand -hex 32)" is the shell's: a random secret of the same kind.
        env[item["name"]] = secrets.token_hex(32) if value.startswith("$(") else value
    store = urlsplit(env["PLANNER_STORE_URL"])
    assert store.hostname == "planner-arm-redis"
    env["PLANNER_STORE_URL"] = urlunsplit(urlsplit(redis_url)._replace(path=store.path))
    env["PLANNER_CONFIG"] = str(K8S / Path(env["PLANNER_CONFIG"]).name)
    return env


def redis_flags() -> list[str]:
    objects = base()
    (container,) = objects["Deployment", "planner-arm-redis"]["spec"]["template"]["spec"][
        "containers"
    ]
    args: list[str] = container["args"]
    assert args[0] == "redis-server"
    return args[1:]


def header_options(command: list[str]) -> dict[str, str]:
    values = [command[i + 1] for i, arg in enumerate(command) if arg == "-H"]
    return dict(value.split(": ", 1) for value in values)


def curl(name: str) -> list[list[str]]:
    return [c for c in COMMANDS if c[0] == "curl" and urlsplit(f"http://{c[2]}").path == name]


async def test_steps_7_and_8_against_two_replicas_sharing_the_bases_redis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = RedisServer(tmp_path, *redis_flags()).start()
    try:
        for name, value in pod_environment(server.url).items():
            monkeypatch.setenv(name, value)
        settings = load_settings()
        async with running_app(settings) as one, running_app(settings) as two:
            await _steps_7_and_8(one, two)
    finally:
        server.stop()


async def _steps_7_and_8(one: Any, two: Any) -> None:
    assert len(curl("/ready")) == len(curl("/health")) == 1
    answer = await one.get("/ready")
    assert answer.text == '{"status":"ready"}'  # as step 7 says
    health = (await two.get("/health")).json()
    assert (health["store"], health["store_eviction_policy"], health["auth"]) == (
        "redis",
        "noeviction",
        "keys",
    )
    (plan,) = curl("/plan")
    headers = header_options(plan)
    key = headers["X-API-Key"]
    assert key in created_secrets()["planner-api-keys"]["keys"].split(",")
    name = "X-API-Key"
    body = json.loads(option(plan, "-d"))
    made = await one.post("/plan", json=body, headers=headers)
    assert made.status_code == 200, made.text
    plan_id = made.json()["plan_id"]
    (fetch,) = [c for c in COMMANDS if c[0] == "curl" and "<plan_id>" in c[2]]
    assert header_options(fetch) == {name: key}
    path = urlsplit(f"http://{fetch[2]}").path.replace("<plan_id>", plan_id)
    # The other replica holds it: the shared store.
    fetched = await two.get(path, headers={name: key})
    assert fetched.status_code == 200
    assert fetched.json() == made.json()
    replanned = await two.post(
        "/replan",
        json={**body, "plan_id": plan_id, "step_states": {"1": "completed", "2": "failed"}},
        headers={name: key},
    )
    assert replanned.status_code == 200, replanned.text
    assert replanned.json()["parent_plan_id"] == plan_id
    keyed = {name: key, "Idempotency-Key": "from-zero-1"}
    first = await one.post("/plan", json=body, headers=keyed)
    again = await two.post("/plan", json=body, headers=keyed)
    assert first.status_code == again.status_code == 200
    assert again.json()["plan_id"] == first.json()["plan_id"]
