"""The client without the service: `planner_arm.client` imports nothing of the server, and a
plain `pip install` of this project into a new virtual environment (httpx and pydantic, no
server extra) is a working client of a running service."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.invariants import assert_valid_plan
from support.service import serving
from support.stub_model import StubLLM

ROOT = Path(__file__).resolve().parents[2]
# The service's own dependencies: none of them may load with the client.
SERVER_ONLY = {
    "fastapi",
    "starlette",
    "uvicorn",
    "openai",
    "redis",
    "structlog",
    "yaml",
    "pydantic_settings",
    "prometheus_client",
    "json_repair",
    "typer",
    "mcp",
}
CLIENT_MODULES = {
    "planner_arm",
    "planner_arm.errors",
    "planner_arm.limits",
    "planner_arm.plan",
    # The reference grammar `{{steps.N.output...}}` the runner resolves (pydantic only).
    "planner_arm.plan.inputs",
    "planner_arm.plan.output_fields",
    "planner_arm.plan.tools",
    # What a tool's schema may hold: the standard library only, read as the tools are.
    "planner_arm.tool_schema",
    # The shapes a tool is accepted in (pydantic only).
    "planner_arm.tool_shapes",
}
CLIENT_PACKAGES = ("planner_arm.client", "planner_arm.plan.schemas", "planner_arm.plan.endpoint")
LOADED = """
import json, sys
import planner_arm.client
print(json.dumps(sorted(sys.modules)))
"""
USE = """
import importlib.util, json, sys
from planner_arm.client import PlannerClient, PlanNotFound

with PlannerClient(sys.argv[1]) as planner:
    plan = planner.plan("Fix authentication bug and add tests")
    try:
        planner.get("no-such-plan")
    except PlanNotFound as error:
        code = error.code
server_deps = [name for name in sys.argv[2:] if importlib.util.find_spec(name) is not None]
print(json.dumps({"plan": plan.model_dump(mode="json"), "code": code, "server": server_deps}))
"""


def test_the_client_imports_nothing_of_the_server() -> None:
    loaded = json.loads(
        subprocess.run(
            [sys.executable, "-c", LOADED], capture_output=True, text=True, check=True
        ).stdout
    )
    ours = {name for name in loaded if name.split(".")[0] == "planner_arm"}
    outside = {name for name in ours if not name.startswith(CLIENT_PACKAGES)}
    assert outside <= CLIENT_MODULES
    assert "planner_arm.client.sync_client" in ours
    assert SERVER_ONLY.isdisjoint(name.split(".")[0] for name in loaded)


@pytest.fixture
def url(stub: StubLLM) -> Iterator[str]:
    for http in serving({"OPENAI_BASE_URL": stub.base_url}):
        yield str(http.base_url)


@pytest.mark.slow
def test_a_plain_install_is_a_working_client(url: str, tmp_path: Path) -> None:
    project = tmp_path / "project"  # a copy: the build writes into the tree it builds
    shutil.copytree(ROOT / "src", project / "src", ignore=shutil.ignore_patterns("*.egg-info"))
    for name in ("pyproject.toml", "README.md", "constraints.txt"):
        shutil.copy(ROOT / name, project / name)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet"]
    subprocess.run([*install, "-c", str(project / "constraints.txt"), str(project)], check=True)

    used = subprocess.run(
        [str(python), "-c", USE, url, *sorted(SERVER_ONLY)],
        capture_output=True,
        text=True,
        check=True,
    )
    command = subprocess.run(
        [str(venv / "bin" / "planner-arm"), "--help"], capture_output=True, text=True
    )

    answer = json.loads(used.stdout)
    assert answer["server"] == []
    assert answer["plan"]["metadata"]["source"] == "llm"
    assert_valid_plan(answer["plan"])
    assert answer["code"] == "plan_not_found"
    assert command.returncode == 1
    assert "pip install 'planner-arm[server]'" in command.stderr
