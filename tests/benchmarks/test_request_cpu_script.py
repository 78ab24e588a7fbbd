"""benchmarks/request_cpu.py on a few requests: each is a model plan, the CPU per request is
printed, and the profile it writes holds the request's path."""

from __future__ import annotations

import pstats
import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "request_cpu.py"

pytestmark = pytest.mark.slow  # a process of its own that plans 320 times


def test_it_prints_the_cpu_per_request_and_writes_the_profile(tmp_path: Path) -> None:
    profile = tmp_path / "requests.prof"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--requests", "20", "--profile", str(profile)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(
        r"CPU per POST /plan, in process, client included: \d+ µs \(under cProfile\)\n", done.stdout
    )
    called = {name for _, _, name in pstats.Stats(str(profile)).stats}  # type: ignore[attr-defined]
    assert {"read_plan_answer", "create_completion", "put_plan"} <= called
