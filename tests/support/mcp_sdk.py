"""The MCP SDKs a test runs the service or an example with: the one the service installs
(1.x, this environment) and the one `pip install mcp` gets today (2.x).

The 2.x Python is a virtual environment of pytest's cache (`.pytest_cache/d/mcp2-venv`),
made once (about a minute and a half, from the package index) with mcp>=2 and what only 2.x
needs, the rest at the versions constraints.txt pins; after its own packages it reads this
checkout's `src` and this environment's packages, so it runs the service and the client of
this checkout with the 2.x SDK."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SDKS = ("1.x", "2.x")
_VERSION = "import importlib.metadata as m; print(m.version('mcp'))"


def sdk_version(python: Path | str) -> str | None:
    """The version of mcp `python` has, or None."""
    found = subprocess.run(
        [str(python), "-c", _VERSION], capture_output=True, text=True, timeout=60, check=False
    )
    return found.stdout.strip() if found.returncode == 0 else None


def python_with_mcp_2(cache: pytest.Cache) -> Path:
    """The 2.x Python: made when the cache does not hold it yet, failing with what it needs
    when it cannot be made."""
    venv = cache.mkdir("mcp2-venv")
    python = venv / "bin" / "python"
    if not (venv / "ready").exists():
        _make(venv, python)
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # After its own site-packages, so that its mcp (and what only 2.x needs) comes first.
    ours = [str(REPO / "src"), sysconfig.get_paths()["purelib"]]
    (Path(site) / "planner_arm_checkout.pth").write_text("\n".join(ours) + "\n")
    return python


def _make(venv: Path, python: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=120)
    pins = (REPO / "constraints.txt").read_text().splitlines()
    constraints = venv / "constraints.txt"
    constraints.write_text("\n".join(pin for pin in pins if not pin.startswith("mcp==")) + "\n")
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    made = subprocess.run(
        [*pip, "mcp>=2", "-c", str(constraints)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if made.returncode != 0:
        pytest.fail(
            "the tests on mcp 2.x need mcp>=2 and its dependencies from the package index "
            f"(as pip is configured on this machine), installed once into {venv}; pip "
            f"failed:\n{made.stderr[-2000:]}"
        )
    (venv / "ready").write_text("")


def python_for(sdk: str, cache: pytest.Cache) -> Path:
    """The Python an example runs with for `sdk` ("1.x" or "2.x"), checked to have it."""
    python = Path(sys.executable) if sdk == "1.x" else python_with_mcp_2(cache)
    assert (sdk_version(python) or "").startswith(sdk[0] + "."), f"no mcp {sdk} in {python}"
    return python
