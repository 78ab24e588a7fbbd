"""benchmarks/tool_graph_build.py on a small synthetic set: its tools and examples are what it
says, and it prints each figure."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "tool_graph_build.py"


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tool_graph_build", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["tool_graph_build"] = module
    spec.loader.exec_module(module)
    return module


script = load_script()


def test_the_synthetic_tools_name_their_ids_and_the_examples_stay_within_the_limits() -> None:
    specs = script.tool_set(8)
    assert [spec.id for spec in specs[:4]] == [
        "search_customer0",
        "get_customer0",
        "update_customer0",
        "delete_customer0",
    ]
    assert "by its customer0 id" in specs[1].description
    examples = script.examples(specs, 101, seed=1)
    assert len(examples) == 101
    assert max(len(example.steps) for example in examples) == 50
    assert {step.tool for example in examples for step in example.steps} <= {s.id for s in specs}


def test_it_prints_each_figure(capsys: pytest.CaptureFixture[str]) -> None:
    assert script.main(["--tools", "20", "--examples", "30", "--rounds", "1", "--plans", "3"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("20 tools, 30 worked examples")
    for figure in (
        r"build: median \d+ ms",
        r"memory: [\d.]+ MiB held",
        r"one plan: median [\d.]+ ms",
    ):
        assert re.search(figure, printed), figure
