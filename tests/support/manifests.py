"""The Kubernetes manifests of k8s/ for the deploy tests: read, rendered and validated offline.

`render(directory)` runs `kubectl kustomize` (or `kustomize build`); `overlay(tmp_path,
components)` renders the base with components through an overlay of the user's own, next to
it, as docs/deploy.md shows. `validate(doc)` checks one object against the Kubernetes schemas
kubernetes-validate ships (strict: an unknown field fails). Without the tool the test skips,
and under CI (CI set) it fails instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "k8s"
COMPONENTS = K8S / "components"
K8S_VERSION = "1.30"
NAMESPACE = "octollm"
Manifest = dict[str, Any]


def missing(what: str) -> None:
    message = f"{what} is not installed (a dev dependency: pip install -e '.[dev]')"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def validate(doc: Manifest) -> None:
    try:
        import kubernetes_validate
    except ImportError:
        missing("kubernetes-validate")
    assert kubernetes_validate.validate(doc, K8S_VERSION, strict=True) == K8S_VERSION


def manifest_files(directory: Path = K8S) -> dict[str, list[Manifest]]:
    """The objects of each resource file a kustomization lists, by file name."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    return {
        name: [doc for doc in yaml.safe_load_all((directory / name).read_text()) if doc]
        for name in kustomization["resources"]
    }


def by_kind_and_name(docs: list[Manifest]) -> dict[tuple[str, str], Manifest]:
    return {(doc["kind"], doc["metadata"]["name"]): doc for doc in docs}


def shipped_components() -> list[str]:
    return sorted(p.parent.name for p in COMPONENTS.glob("*/kustomization.yaml"))


def render(directory: Path) -> list[Manifest]:
    """`kubectl kustomize directory` (or `kustomize build`), as objects."""
    if kustomize := shutil.which("kustomize"):
        command = [kustomize, "build", str(directory)]
    elif kubectl := shutil.which("kubectl"):
        command = [kubectl, "kustomize", str(directory)]
    else:
        missing("kubectl (or kustomize)")
    run = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    return [doc for doc in yaml.safe_load_all(run.stdout) if doc]


def overlay(tmp_path: Path, components: list[str]) -> list[Manifest]:
    """The base with `components` (names under k8s/components), rendered through an overlay
    next to it: kustomize takes only relative paths, and no overlay inside its base's folder."""
    base = os.path.relpath(K8S, tmp_path)
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [base],
        "components": [f"{base}/components/{name}" for name in components],
    }
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return render(tmp_path)
