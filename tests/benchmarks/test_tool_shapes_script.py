"""benchmarks/tool_shapes.py on a few tools: each shape is read as that many arms, and each
figure is printed."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "tool_shapes.py"


def test_it_reads_each_shape_and_prints_each_figure(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("tool_shapes", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["tool_shapes"] = module
    spec.loader.exec_module(module)
    assert module.main(["--tools", "5", "--rounds", "2"]) == 0
    printed = capsys.readouterr().out
    for name in ("ours", "openai", "mcp", "anthropic", "jsonschema check", "rule-based"):
        assert re.search(rf"{name}.*median +[\d.]+ ms", printed), name
