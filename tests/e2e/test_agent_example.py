"""examples/agent.py as a person uses it: against the real service (no model), its own MCP
server over stdio, the writes asked about on the terminal (stdin here), with mcp 1.x and 2.x."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.mcp_sdk import SDKS, python_for
from support.service import serving

REPO = Path(__file__).resolve().parents[2]
AGENT = REPO / "examples" / "agent.py"


@pytest.fixture
def url() -> Iterator[str]:
    for http in serving({}):
        yield str(http.base_url).rstrip("/")


def run_agent(python: Path, url: str, answers: str) -> str:
    ran = subprocess.run(
        [str(python), str(AGENT), url],
        input=answers,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"},
    )
    assert ran.returncode == 0, ran.stderr
    return ran.stdout


@pytest.mark.slow
@pytest.mark.parametrize("sdk", SDKS)
def test_the_agent_asks_before_the_write_replans_the_failure_and_says_what_it_did(
    sdk: str, url: str, request: pytest.FixtureRequest
) -> None:
    printed = run_agent(python_for(sdk, request.config.cache), url, "y\ny\n")
    lines = printed.splitlines()
    assert "  3. place_hold [writes] after [1, 2]: " in "\n".join(lines)
    assert any(line.startswith("  as a page: http://") for line in lines)
    # Asked twice: before the call that failed, and before the replanned one.
    assert printed.count('place_hold writes {"book_id": "B-300", "member_id": "M-7"}') == 2
    assert any(line.startswith("replanned after a failure: plan ") for line in lines)
    assert lines[-4:-3] == ["done:"]
    assert lines[-1].startswith('  4. place_hold completed: {"hold_id": "H-1"')


@pytest.mark.slow
def test_a_no_leaves_the_write_undone(url: str, request: pytest.FixtureRequest) -> None:
    printed = run_agent(python_for("1.x", request.config.cache), url, "n\n")
    assert "stopped: some steps could not run" in printed
    assert "  3. place_hold blocked: not approved: place_hold writes" in printed
