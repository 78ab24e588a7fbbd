"""benchmarks/tool_sets.py: the tool sets it sends are as large as the limits let them be, and
the service takes them (a benchmark of refused requests would measure nothing)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from planner_arm.config import load_settings
from planner_arm.plan.schemas import request_model_for

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "tool_sets.py"


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tool_sets_benchmark", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["tool_sets_benchmark"] = module
    spec.loader.exec_module(module)
    return module


bench = load_script()


@pytest.mark.parametrize(("tools", "max_body"), [(300, 64 * 1024), (500, 1024 * 1024)])
def test_each_set_is_as_large_as_the_limits_allow_and_accepted(tools: int, max_body: int) -> None:
    limits = load_settings().limits
    body = bench.tool_set_body("probe", tools, max_body, limits.max_tools_bytes)
    request = request_model_for(limits).model_validate(json.loads(body))
    assert request.tools is not None
    assert len(request.tools) == tools
    counted = len(json.dumps([tool.model_dump(mode="json") for tool in request.tools]))
    room = min(max_body, limits.max_tools_bytes)
    assert len(body) <= max_body
    assert 0.9 * room <= counted <= limits.max_tools_bytes


def test_every_set_is_new() -> None:
    first, second = (
        json.loads(bench.tool_set_body(name, 300, 64 * 1024, 512 * 1024)) for name in ("one", "two")
    )
    assert not {tool["id"] for tool in first["tools"]} & {tool["id"] for tool in second["tools"]}
