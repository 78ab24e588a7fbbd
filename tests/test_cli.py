from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner_arm.cli import cli
from support.invariants import assert_valid_plan

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
    assert str(uuid.UUID(body["request_id"])) == body["request_id"]


def test_each_plan_run_has_a_request_id_of_its_own() -> None:
    ids = [
        json.loads(runner.invoke(cli, ["plan", "Write the user guide", "--json"]).stdout)[
            "request_id"
        ]
        for _ in range(2)
    ]
    assert ids[0] != ids[1]
    assert all(str(uuid.UUID(given)) == given for given in ids)


def test_plan_refuses_a_blank_goal() -> None:
    result = runner.invoke(cli, ["plan", "   "])
    assert result.exit_code == 1
    assert "cannot plan" in result.output


def test_check_config_ok() -> None:
    result = runner.invoke(cli, ["check-config"])
    assert result.exit_code == 0
    assert "llm=disabled" in result.output
    assert "profile=agents steps=3-7 tools=6 keys=0 tenants=0" in result.output


def test_check_config_prints_the_bounds_a_tools_config_plans_with(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    tools = [{"id": f"tool_{n}", "description": f"Tool number {n}"} for n in range(12)]
    keys = tmp_path / "keys"
    keys.write_text("ops:key-one\nops:key-two\n# a comment\nplain-key\n")
    config = tmp_path / "tools.yaml"
    config.write_text(json.dumps({"arms": tools}))
    monkeypatch.setenv("PLANNER_CONFIG", str(config))
    monkeypatch.setenv("PLANNER_API_KEYS_FILE", str(keys))
    monkeypatch.setenv("LLM_BASE_URL", "http://127.0.0.1:8000/v1")
    result = runner.invoke(cli, ["check-config"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "ok: models=['gpt-3.5-turbo'] llm=configured base_url=http://127.0.0.1:8000/v1"
    )
    # The tools profile's bounds, not the agents' 3-7; two tenants: "ops" and the plain key.
    assert lines[1] == "profile=tools steps=1-10 tools=12 keys=3 tenants=2 timeout=10.0s"
    assert lines[2].endswith("'tool_9', '+2 more']")


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


def _plan_file(tmp_path: Path, goal: str = "Fix authentication bug and add tests") -> Path:
    result = runner.invoke(cli, ["plan", goal, "--json"])
    assert result.exit_code == 0, result.output
    path = tmp_path / "plan.json"
    path.write_text(result.stdout)
    return path


def test_validate_checks_an_edited_plan_file(tmp_path: Path) -> None:
    answer = json.loads(_plan_file(tmp_path).read_text())
    good = runner.invoke(cli, ["validate", str(_plan_file(tmp_path))])
    assert good.exit_code == 0, good.output
    assert good.stdout.startswith("valid")
    answer["plan"][1]["depends_on"] = [answer["plan"][1]["step"]]
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(answer["plan"]))
    bad = runner.invoke(cli, ["validate", str(edited)])
    assert bad.exit_code == 1
    assert "invalid" in bad.stdout
    assert "self_dependency" in bad.stdout
    answer["plan"][0]["colour"] = "red"
    edited.write_text(json.dumps(answer["plan"]))
    noted = runner.invoke(cli, ["validate", str(edited), "--fix"])
    assert "warning ignored_step_fields: plan[0]: colour" in noted.stdout


def test_replan_in_process_keeps_the_finished_step(tmp_path: Path) -> None:
    path = _plan_file(tmp_path)
    first = json.loads(path.read_text())
    result = runner.invoke(
        cli,
        [
            "replan", "--goal", "Fix authentication bug and add tests", "--previous", str(path),
            "--state", "1=completed:auth/login.py", "--state", "2=failed:the patch broke login",
            "--json",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    revised = json.loads(result.stdout)
    assert_valid_plan(revised, consecutive=False)
    assert revised["parent_plan_id"] == first["plan_id"]
    assert revised["plan"][0] == first["plan"][0]  # the finished step, as it was
    assert 1 in revised["diff"]["kept"]


def test_replan_takes_the_goal_the_plan_names(tmp_path: Path) -> None:
    path = _plan_file(tmp_path, "Write the user guide for the CLI")
    result = runner.invoke(
        cli, ["replan", "--previous", str(path), "--state", "1=failed:boom", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["goal"] == "Write the user guide for the CLI"


def test_replan_without_a_service_needs_the_plan_file() -> None:
    result = runner.invoke(
        cli, ["replan", "--goal", "G", "--plan-id", "abc", "--state", "1=failed"]
    )
    assert result.exit_code == 1
    assert "--previous" in result.output


def test_get_needs_a_running_service() -> None:
    result = runner.invoke(cli, ["get", "abc"])
    assert result.exit_code == 1
    assert "--url" in result.output


def test_a_bad_state_is_named() -> None:
    result = runner.invoke(cli, ["replan", "--goal", "G", "--previous", "-", "--state", "one"])
    assert result.exit_code == 1
    assert "N=status" in result.output


def test_replan_through_a_service_needs_one_plan() -> None:
    arguments = ["replan", "--goal", "G", "--state", "1=failed", "--url", "http://127.0.0.1:9"]
    result = runner.invoke(cli, arguments)
    assert result.exit_code == 1
    assert "exactly one of --plan-id and --previous" in result.output


@pytest.mark.parametrize("command", [[], ["plan"], ["replan"], ["validate"], ["serve"]])
def test_help_names_values_in_words(command: list[str]) -> None:
    result = runner.invoke(cli, [*command, "--help"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert "<" not in result.stdout  # no <str>, <bool>, <list[str]>
    assert "FLAG" in result.stdout  # --help itself, and every on/off option


def test_help_shows_a_repeatable_option_and_an_argument() -> None:
    shown = runner.invoke(cli, ["plan", "--help"], env={"COLUMNS": "120"}).stdout
    assert "TEXT ..." in shown  # --constraint, repeatable
    assert "{GOAL}" in shown


def test_validate_names_each_problems_step_once(tmp_path: Path) -> None:
    answer = json.loads(_plan_file(tmp_path).read_text())
    answer["plan"][1]["required_arm"] = "nobody"
    answer["plan"][1]["depends_on"] = [99]
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(answer["plan"]))
    result = runner.invoke(cli, ["validate", str(edited)], env={"COLUMNS": "200"})
    assert result.exit_code == 1
    number = answer["plan"][1]["step"]
    assert f"  unknown_arm: step {number}: required_arm 'nobody'" in result.stdout
    assert f"  dangling_dependency: step {number} depends on step 99" in result.stdout
    assert f"step {number}: step {number}" not in result.stdout
