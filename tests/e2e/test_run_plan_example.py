"""docs/api.md's first MCP example (examples/run_plan.py, shown whole in the docs) as a user
runs it: its own MCP server (examples/library_mcp.py, pydantic models with an enum and nested
models) over stdio, the real service process over loopback (no model: the rule-based planner
answers), with mcp 1.x and 2.x on the client side, printing exactly what the docs say."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.doc_examples import program_and_output
from support.mcp_sdk import SDKS, python_for
from support.service import serving

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "run_plan.py"
DOC = REPO / "docs" / "api.md"


def documented() -> tuple[str, str]:
    return program_and_output(DOC, "### Over an MCP server's tools")


def test_the_docs_show_the_example_file_whole() -> None:
    code, _ = documented()
    assert code == EXAMPLE.read_text()


@pytest.fixture
def url() -> Iterator[str]:
    for http in serving({}):
        yield str(http.base_url).rstrip("/")


@pytest.mark.slow
@pytest.mark.parametrize("sdk", SDKS)
def test_the_example_runs_the_plan_and_prints_what_the_docs_say(
    sdk: str, url: str, request: pytest.FixtureRequest
) -> None:
    python = python_for(sdk, request.config.cache)
    ran = subprocess.run(
        [str(python), str(EXAMPLE), url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"},
    )
    assert ran.returncode == 0, ran.stderr
    _, printed = documented()
    assert ran.stdout == printed
