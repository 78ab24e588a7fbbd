from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from invariants import assert_valid_plan
from planner_arm.cli import cli

runner = CliRunner()


def test_plan_prints_a_table() -> None:
    result = runner.invoke(cli, ["plan", "Fix authentication bug and add tests", "-c", "No DB"])
    assert result.exit_code == 0, result.output
    assert "judge" in result.output
    assert "source=fallback" in result.output


def test_plan_json_is_a_valid_plan() -> None:
    result = runner.invoke(cli, ["plan", "Write the user guide for the CLI", "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert_valid_plan(body)
    assert body["request_id"] == "cli"


def test_plan_refuses_a_blank_goal() -> None:
    result = runner.invoke(cli, ["plan", "   "])
    assert result.exit_code == 1
    assert "cannot plan" in result.output


def test_check_config_ok() -> None:
    result = runner.invoke(cli, ["check-config"])
    assert result.exit_code == 0
    assert "llm=disabled" in result.output
    assert "steps=3-7" in result.output


def test_check_config_names_the_bad_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANNING_TEMPERATURE", "7")
    result = runner.invoke(cli, ["check-config"])
    assert result.exit_code == 2
    assert "model.temperature" in result.output
    assert "Traceback" not in result.output


def test_plan_takes_a_context_and_a_request_id() -> None:
    result = runner.invoke(
        cli,
        [
            "plan",
            "Deploy the billing service",
            "--context",
            '{"environment": "staging"}',
            "--request-id",
            "job-42",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert_valid_plan(body)
    assert body["request_id"] == "job-42"


@pytest.mark.parametrize(
    ("context", "message"),
    [("{not json", "--context is not JSON"), ("[1, 2]", "--context must be a JSON object")],
)
def test_plan_names_a_bad_context(context: str, message: str) -> None:
    result = runner.invoke(cli, ["plan", "Deploy the billing service", "--context", context])
    assert result.exit_code == 1
    assert message in result.output
