"""Every combination of k8s/ a user can apply, rendered as kubectl would: the base alone, the
base with each component, and with all of them (from an overlay next to k8s/, as
docs/deploy.md shows). None runs the planner on the memory store with more than one replica or
under an autoscaler (a GET /plan/{id}, a replan by id or an Idempotency-Key would reach the
other replica, which does not hold it); each creates its namespace and applies on a fresh
cluster (no object of a CRD outside the opt-in component that needs it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from support.manifests import K8S, NAMESPACE, overlay, render, shipped_components, validate

COMBINATIONS = [[], *([name] for name in shipped_components()), shipped_components()]
# The kinds a fresh cluster does not know until an operator's CRDs are installed, and the
# component that brings each.
CRD_KINDS = {"ServiceMonitor": "servicemonitor"}


def rendered(tmp_path: Path, components: list[str]) -> list[dict[str, Any]]:
    return overlay(tmp_path, components) if components else render(K8S)


def planners(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Deployments that run the planner image."""
    return [
        doc
        for doc in docs
        if doc["kind"] == "Deployment"
        and any(
            c["image"].startswith("octollm/planner-arm:")
            for c in doc["spec"]["template"]["spec"]["containers"]
        )
    ]


def memory_store_replicas(docs: list[dict[str, Any]]) -> list[str]:
    """What runs more than one planner, or lets an HPA run more, without a shared store whose
    Service is in the same render."""
    services = {doc["metadata"]["name"] for doc in docs if doc["kind"] == "Service"}
    scaled = {
        doc["spec"]["scaleTargetRef"]["name"]
        for doc in docs
        if doc["kind"] == "HorizontalPodAutoscaler"
    }
    problems = []
    for deployment in planners(docs):
        name = deployment["metadata"]["name"]
        replicas = deployment["spec"].get("replicas", 1)
        if replicas <= 1 and name not in scaled:
            continue
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        env = {item["name"]: item for item in container.get("env", [])}
        url = env.get("PLANNER_STORE_URL", {}).get("value")
        if url is None or urlsplit(url).hostname not in services:
            under = "an HPA" if name in scaled else f"replicas: {replicas}"
            problems.append(f"{name}: {under} on the memory store (store URL {url!r})")
    return problems


@pytest.mark.parametrize("components", COMBINATIONS, ids=lambda c: "+".join(["base", *c]))
def test_no_combination_scales_the_memory_store(tmp_path: Path, components: list[str]) -> None:
    docs = rendered(tmp_path, components)
    assert planners(docs), "the planner is in every combination"
    assert memory_store_replicas(docs) == []


@pytest.mark.parametrize("components", COMBINATIONS, ids=lambda c: "+".join(["base", *c]))
def test_every_combination_creates_its_namespace(tmp_path: Path, components: list[str]) -> None:
    docs = rendered(tmp_path, components)
    namespaces = [doc for doc in docs if doc["kind"] == "Namespace"]
    assert [doc["metadata"]["name"] for doc in namespaces] == [NAMESPACE]
    assert docs[0]["kind"] == "Namespace", "applied before the objects that live in it"
    for doc in docs:
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["namespace"] == NAMESPACE, doc["metadata"]["name"]


@pytest.mark.parametrize("components", COMBINATIONS, ids=lambda c: "+".join(["base", *c]))
def test_only_the_opt_in_components_need_a_crd(tmp_path: Path, components: list[str]) -> None:
    for doc in rendered(tmp_path, components):
        if doc["kind"] in CRD_KINDS:
            assert CRD_KINDS[doc["kind"]] in components, doc["kind"]
        else:
            validate(doc)  # a kind a cluster knows without any CRD


def test_the_check_catches_replicas_and_an_hpa_on_the_memory_store() -> None:
    deployment = {
        "kind": "Deployment",
        "metadata": {"name": "planner-arm"},
        "spec": {
            "replicas": 2,
            "template": {"spec": {"containers": [{"image": "octollm/planner-arm:0.1.0"}]}},
        },
    }
    hpa = {
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "planner-arm"},
        "spec": {"scaleTargetRef": {"name": "planner-arm"}},
    }
    assert memory_store_replicas([deployment]) == [
        "planner-arm: replicas: 2 on the memory store (store URL None)"
    ]
    deployment["spec"]["replicas"] = 1
    assert memory_store_replicas([deployment]) == []
    assert memory_store_replicas([deployment, hpa]) == [
        "planner-arm: an HPA on the memory store (store URL None)"
    ]
    # A store URL naming no Service of the render is no shared store either.
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": "PLANNER_STORE_URL", "value": "redis://elsewhere:6379/0"}]
    assert len(memory_store_replicas([deployment, hpa])) == 1
    service = {"kind": "Service", "metadata": {"name": "elsewhere"}}
    assert memory_store_replicas([deployment, hpa, service]) == []
