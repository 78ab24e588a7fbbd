"""docs/mcp.md's client example (examples/mcp_client.py, shown whole in the docs) as a user runs
it: against the real service process over loopback (no model: the rule-based planner answers),
with the SDK the service installs (mcp 1.x) and with the one `pip install mcp` gets today (2.x,
installed from the package index into a virtual environment of its own, kept in pytest's cache
so a run pays for it once: support/mcp_sdk.py), printing exactly what the docs say it prints."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.doc_examples import program_and_output
from support.mcp_sdk import SDKS, python_for
from support.service import serving

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "mcp_client.py"
DOC = REPO / "docs" / "mcp.md"


def trying_it() -> tuple[str, str]:
    return program_and_output(DOC, "## Trying it")


def test_the_docs_show_the_example_file_whole() -> None:
    code, _ = trying_it()
    assert code == EXAMPLE.read_text()


@pytest.fixture
def url() -> Iterator[str]:
    for http in serving({}):
        yield str(http.base_url).rstrip("/") + "/mcp"


@pytest.mark.slow
@pytest.mark.parametrize("sdk", SDKS)
def test_the_example_prints_what_the_docs_say(
    sdk: str, url: str, request: pytest.FixtureRequest
) -> None:
    python = python_for(sdk, request.config.cache)
    ran = subprocess.run(
        [str(python), str(EXAMPLE), url], capture_output=True, text=True, timeout=120, check=False
    )
    assert ran.returncode == 0, ran.stderr
    _, printed = trying_it()
    assert ran.stdout == printed
