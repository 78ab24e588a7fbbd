"""The CLI with --url and examples/orchestrate.py against a real service process (the
embedded default: no model, the rule-based planner), through the typed client."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from planner_arm.cli import cli
from support.invariants import assert_valid_plan
from support.service import serving

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
GOAL = "Fix authentication bug and add tests"
runner = CliRunner()


@pytest.fixture
def service() -> Iterator[httpx.Client]:
    yield from serving({})


def test_plan_get_validate_and_replan_through_the_service(
    service: httpx.Client, tmp_path: Path
) -> None:
    url = str(service.base_url)
    planned = runner.invoke(cli, ["plan", GOAL, "--url", url, "--json"])
    assert planned.exit_code == 0, planned.output
    plan = json.loads(planned.stdout)
    assert_valid_plan(plan)
    # The service stored it: the CLI fetches it back, and the service answers the same.
    fetched = runner.invoke(cli, ["get", plan["plan_id"], "--url", url, "--json"])
    assert json.loads(fetched.stdout) == service.get(f"/plan/{plan['plan_id']}").json()

    path = tmp_path / "plan.json"
    path.write_text(planned.stdout)
    checked = runner.invoke(cli, ["validate", str(path), "--url", url])
    assert (checked.exit_code, checked.stdout.split()[0]) == (0, "valid")

    states = ["--state", "1=completed:found it", "--state", "2=failed:patch broke login"]
    replanned = runner.invoke(
        cli, ["replan", "--goal", GOAL, "--plan-id", plan["plan_id"], *states, "--url", url,
              "--json"],
    )  # fmt: skip
    assert replanned.exit_code == 0, replanned.output
    revised = json.loads(replanned.stdout)
    assert revised["parent_plan_id"] == plan["plan_id"]
    assert revised["plan"][0] == plan["plan"][0]


def test_an_unknown_plan_is_a_clear_error(service: httpx.Client) -> None:
    result = runner.invoke(cli, ["get", "no-such-plan", "--url", str(service.base_url)])
    assert result.exit_code == 1
    assert "plan_not_found" in result.output


def test_the_example_orchestrator_runs_replans_and_finishes(service: httpx.Client) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "orchestrate.py"), GOAL,
         "--url", str(service.base_url), "--pause", "0"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "replanned after step" in done.stdout
    assert "steps completed, plan version 2" in done.stdout
