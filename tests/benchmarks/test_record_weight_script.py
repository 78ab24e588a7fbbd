"""benchmarks/record_weight.py, run whole on a few records: every row within its target."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "record_weight.py"

pytestmark = pytest.mark.slow


def test_the_script_measures_every_kind_of_record_within_its_target() -> None:
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--records", "300"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    rows = [line for line in run.stdout.splitlines() if "held/counted" in line]
    kinds = {line[:28].strip() for line in rows}
    assert "memory  plan  1 KB emoji" in kinds
    assert "memory  plan cache" in kinds
    if shutil.which("redis-server"):
        assert {"redis   answers kept", "redis   cache entries"} <= kinds
    assert rows
    assert all(line.endswith("PASS") for line in rows), run.stdout
    assert run.stdout.rstrip().endswith("PASS")
