"""benchmarks/live_model.py's report: per plan, why it fell back; in all, the kept share and the
calls per plan (no model is run here: the answers are hand-made)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def live_model() -> ModuleType:
    sys.path.insert(0, str(BENCHMARKS))  # live_model imports its neighbour load.py
    try:
        return importlib.import_module("live_model")
    finally:
        sys.path.remove(str(BENCHMARKS))


def answer(source: str, attempts: int, warnings: list[tuple[str, str]]) -> dict[str, Any]:
    notes = [{"code": code, "detail": detail} for code, detail in warnings]
    metadata = {"source": source, "attempts": attempts, "repairs": [], "warnings": notes}
    return {"metadata": metadata, "plan": [{"step": 1}, {"step": 2}]}


def test_the_report_says_why_each_plan_fell_back(
    live_model: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    results = [
        ("Write the user guide", answer("llm", 1, []), 40.0),
        (
            "Audit the payment service",
            answer("fallback", 3, [("fallback_used", "invalid_plan: 3 answers broke the rules")]),
            120.0,
        ),
        (
            "Add rate limiting",
            answer("fallback", 2, [("fallback_used", "deadline: the deadline passed")]),
            240.0,
        ),
        ("Upgrade Python", answer("llm", 2, [("constraint_unaddressed", "x")]), 50.0),
    ]
    live_model.report(results)
    out = capsys.readouterr().out
    assert "fell back: invalid_plan: 3 answers broke the rules" in out
    assert "fell back: deadline: the deadline passed" in out
    assert out.count("fell back:") == 2
    assert "kept from the model: 2/4 (50%)   calls per plan: 2.00" in out
    assert "fell back because: invalid_plan 1, deadline 1" in out
