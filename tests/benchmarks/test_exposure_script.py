"""benchmarks/exposure.py, run whole for a second: its figures are the limits it reports on."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "exposure.py"

pytestmark = pytest.mark.slow


def figure(printed: str, label: str) -> int:
    found = re.search(rf"^  {re.escape(label)} +(\d+)", printed, re.MULTILINE)
    assert found is not None, f"no {label!r} in:\n{printed}"
    return int(found.group(1))


def test_the_script_reports_what_the_limits_let_through() -> None:
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--seconds", "1", "--addresses", "300"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    printed = run.stdout
    # One second of guessing: the ten at once, no more, and the right key is not checked.
    assert figure(printed, "keys checked (401)") == figure(printed, "allowed by the limit") == 10
    assert figure(printed, "the right key after it") == 429
    # Without keys: plans, but no more than the rate's burst and its second allow.
    assert 0 < figure(printed, "planned (200)") <= figure(printed, "allowed by the rate")
    assert figure(printed, "addresses kept") == 300
