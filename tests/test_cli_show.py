"""`planner-arm show`: a plan drawn in the terminal by stage, or as Mermaid flowchart text."""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from planner_arm.cli import cli
from planner_arm.plan.drawing import mermaid_title
from support.stub_model import PLAN

runner = CliRunner()
WIDE = {"COLUMNS": "200"}  # one step a line: no wrapping inside an action


def answer(**changes: Any) -> dict[str, Any]:
    """A whole plan answer (PlanResponse JSON) around the stub model's 4-step plan."""
    body: dict[str, Any] = {
        "plan": json.loads(json.dumps(PLAN["plan"])),
        "rationale": "Locate, fix and test in parallel, then validate.",
        "confidence": 0.9,
        "total_estimated_duration": 150,
        "complexity_score": 0.5,
        "plan_id": "p-123",
        "request_id": "r-1",
        "parallel_stages": [[1], [2, 3], [4]],
        "critical_path_duration": 110,
        "estimated_cost": {"llm_usd": 0.0009, "prompt_tokens": 900, "completion_tokens": 300},
        "metadata": {
            "source": "fallback",
            "model": None,
            "attempts": 2,
            "repairs": [],
            "warnings": [{"code": "llm_unavailable", "detail": "the model did not answer"}],
            "latency_ms": 12.0,
            "prompt_version": "v1",
        },
    }
    body.update(changes)
    return body


def plan_file(tmp_path: Path, body: dict[str, Any]) -> str:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    return str(path)


def test_show_draws_each_step_in_its_stage_with_the_critical_path(tmp_path: Path) -> None:
    result = runner.invoke(cli, ["show", "--file", plan_file(tmp_path, answer())], env=WIDE)
    assert result.exit_code == 0, result.output
    out = result.output
    lines = out.splitlines()
    for step in PLAN["plan"]:
        assert step["action"] in out
    # Stages in order, each step under its own.
    where = {name: i for i, line in enumerate(lines) for name in ("stage 1", "stage 2", "stage 3")
             if line.strip().endswith(name)}  # fmt: skip
    step_line = {s["step"]: next(i for i, line in enumerate(lines) if s["action"] in line)
                 for s in PLAN["plan"]}  # fmt: skip
    assert where["stage 1"] < step_line[1] < where["stage 2"] < step_line[2] < step_line[3]
    assert step_line[3] < where["stage 3"] < step_line[4]
    # The critical path 1 -> 2 -> 4 (20 + 60 + 30 s) is starred; step 3 (40 s) is not.
    starred = {n for n, i in step_line.items() if re.search(rf"★ {n} ", lines[i])}
    assert starred == {1, 2, 4}
    assert lines[step_line[2] + 1].strip().endswith("after 1 · 60 s · tier 3")
    assert "critical path 1 → 2 → 4: 110 s (150 s one after another)" in out
    assert "source rule-based" in out
    assert "warning llm_unavailable: the model did not answer" in out


def test_show_prints_the_goal_and_constraints_above_the_drawing(tmp_path: Path) -> None:
    body = answer(
        goal="Fix the [bold]login[/bold] bug", constraints=["No schema change", "Be quick"]
    )
    result = runner.invoke(cli, ["show", "--file", plan_file(tmp_path, body)], env=WIDE)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[:4] == [
        "goal: Fix the [bold]login[/bold] bug",
        "constraint: No schema change",
        "constraint: Be quick",
        "plan p-123 · version 1 · flat · source rule-based",
    ]
    # An answer from before answers carried the goal: the drawing alone, as before.
    result = runner.invoke(cli, ["show", "--file", plan_file(tmp_path, answer())], env=WIDE)
    assert result.output.splitlines()[0].startswith("plan p-123 ")


def test_show_prints_caller_text_as_it_is(tmp_path: Path) -> None:
    body = answer()
    body["plan"][0]["action"] = "Read [bold]docs[/bold] and [/red] notes"
    result = runner.invoke(cli, ["show", "--file", plan_file(tmp_path, body)], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "Read [bold]docs[/bold] and [/red] notes" in result.output


# Model or caller text that would act on a terminal: a colour, a cleared screen, a new window
# title with its bell, a CSI in C1, a bidi override, and line breaks of every kind.
ESCAPES = "\x1b[31mred\x1b[0m \x1b[2J\x1b]0;owned\x07 \x9b1m \u202eevil\u202c a\x85b\u2028c\nd"


def hostile_answer() -> dict[str, Any]:
    body = answer(plan_id=f"p-{ESCAPES}", goal=f"Fix {ESCAPES}", constraints=[f"Keep {ESCAPES}"])
    body["plan"][1]["action"] = f"Patch it {ESCAPES}"
    body["plan"][2]["required_arm"] = f"coder{ESCAPES}"
    body["metadata"]["model"] = f"model {ESCAPES}"
    body["metadata"]["warnings"] = [{"code": "llm_unavailable", "detail": f"said {ESCAPES}"}]
    return body


def acts_on_a_terminal(text: str) -> list[str]:
    """The characters of `text` a terminal would act on rather than show."""
    kept = {"\n"}  # the drawing's own line ends
    unseen = set("\u202e\u202c\u2028")  # a bidi override and its end, a line separator
    return [
        f"U+{ord(ch):04X}"
        for ch in text
        if ch not in kept and (unicodedata.category(ch) == "Cc" or ch in unseen)
    ]


def test_show_prints_no_control_sequence_from_the_plan(tmp_path: Path) -> None:
    result = runner.invoke(cli, ["show", "--file", plan_file(tmp_path, hostile_answer())], env=WIDE)
    assert result.exit_code == 0, result.output
    assert acts_on_a_terminal(result.output) == []
    # What was there is still seen: each as its escape, a line break as a space.
    lines = result.output.splitlines()
    (patch,) = [line for line in lines if "Patch it" in line]
    assert patch.endswith(
        "Patch it \\u001b[31mred\\u001b[0m \\u001b[2J\\u001b]0;owned\\u0007 \\u009b1m "
        "\\u202eevil\\u202c a b c d"
    )
    assert "warning llm_unavailable: said \\u001b[31mred" in result.output
    assert lines[0].startswith("goal: Fix \\u001b[31mred\\u001b[0m \\u001b[2J")
    assert lines[1].startswith("constraint: Keep \\u001b[31mred")
    assert lines[2].startswith("plan p-\\u001b[31mred")


def test_show_mermaid_prints_no_control_sequence_directive_or_comment(tmp_path: Path) -> None:
    body = hostile_answer()
    body["plan"][0]["action"] = '%%{init: {"theme": "dark"}}%% step"] s9 --> s1 %% hidden'
    path = plan_file(tmp_path, body)
    result = runner.invoke(cli, ["show", "--mermaid", "--file", path])
    assert result.exit_code == 0, result.output
    assert acts_on_a_terminal(result.stdout) == []
    assert "%" not in result.stdout
    lines = result.stdout.splitlines()
    assert lines[:2] == ["---", f"title: {mermaid_title(body['goal'])}"]
    assert yaml.safe_load(lines[1])["title"].startswith("Fix \\u001b[31mred")
    nodes = [int(m.group(1)) for line in lines if (m := NODE.match(line))]
    edges = sorted((int(m.group(1)), int(m.group(2))) for line in lines if (m := EDGE.match(line)))
    assert nodes == [1, 2, 3, 4]
    assert edges == [(1, 2), (1, 3), (2, 4), (3, 4)]


NODE = re.compile(r'^    s(\d+)\["(.*)"\]$')
EDGE = re.compile(r"^  s(\d+) --> s(\d+)$")


def test_show_mermaid_is_a_flowchart_of_the_plan(tmp_path: Path) -> None:
    body = answer()
    body["plan"][2]["action"] = 'Write a "regression" test <em>#1</em> & more'
    result = runner.invoke(cli, ["show", "--mermaid", "--file", plan_file(tmp_path, body)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "flowchart TD"
    nodes = {int(m.group(1)): m.group(2) for line in lines if (m := NODE.match(line))}
    edges = sorted((int(m.group(1)), int(m.group(2))) for line in lines if (m := EDGE.match(line)))
    assert sorted(nodes) == [1, 2, 3, 4]
    assert edges == [(1, 2), (1, 3), (2, 4), (3, 4)]
    assert nodes[3] == (
        "3 · coder<br/>Write a #34;regression#34; test #60;em#62;#35;1#60;/em#62; #38; more"
        "<br/>40 s · tier 3"
    )
    assert "  class s1,s2,s4 critical" in lines


def test_show_reads_standard_input() -> None:
    result = runner.invoke(cli, ["show", "--mermaid", "--file", "-"], input=json.dumps(answer()))
    assert result.exit_code == 0, result.output
    assert result.stdout.count(" --> ") == 4


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["show"], "give a plan_id (with --url) or --file"),
        (["show", "p-1"], "give its --url"),
        (["show", "p-1", "--file", "x.json"], "give a plan_id (with --url) or --file"),
        (["show", "--file", "/no/such/plan.json"], "cannot read"),
    ],
)
def test_show_says_what_it_needs(args: list[str], said: str) -> None:
    result = runner.invoke(cli, args)
    assert result.exit_code == 1
    assert "cannot show" in result.output
    assert said in result.output


def test_show_refuses_a_file_that_is_not_a_plan_answer(tmp_path: Path) -> None:
    result = runner.invoke(cli, ["show", "--file", plan_file(tmp_path, {"plan": []})])
    assert result.exit_code == 1
    assert "cannot show" in result.output


CLI_DOC = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def documented_drawings() -> tuple[str, str]:
    """docs/cli.md's `show` examples: the terminal drawing (its command line dropped) and the
    Mermaid text of the same plan."""
    text = CLI_DOC.read_text(encoding="utf-8")
    section = text[text.index("## Drawing a plan: `show`") :]
    blocks = re.findall(r"^```(\w*)\n(.*?)^```$", section, re.S | re.M)
    terminal, mermaid = [body for language, body in blocks if not language][:2]
    command, _, drawing = terminal.partition("\n")
    assert command == "$ .venv/bin/planner-arm show --file plan.json"
    return drawing, mermaid


def test_the_documented_drawings_are_what_show_prints(tmp_path: Path) -> None:
    # The doc's commands: plan with no model key, then show the answer at 100 columns.
    args = ["plan", "Deploy the billing service to staging", "-c", "No downtime", "--json"]
    made = runner.invoke(cli, args)
    assert made.exit_code == 0, made.output
    body = json.loads(made.stdout)
    path = plan_file(tmp_path, body)
    drawn = runner.invoke(cli, ["show", "--file", path], env={"COLUMNS": "100"})
    charted = runner.invoke(cli, ["show", "--file", path, "--mermaid"])
    assert drawn.exit_code == charted.exit_code == 0, drawn.output + charted.output
    drawing, mermaid = documented_drawings()
    documented_id = re.search(r"^plan (\w+) ·", drawing, re.M)[1]  # type: ignore[index]
    printed = drawn.stdout.replace(body["plan_id"], documented_id)

    def lines(text: str) -> list[str]:
        return [line.rstrip() for line in text.splitlines()]

    assert lines(printed) == lines(drawing)
    assert charted.stdout == mermaid
