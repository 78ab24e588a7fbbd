"""docs/mcp.md's client example (examples/mcp_client.py, shown whole in the docs) as a user runs
it: against the real service process over loopback (no model: the rule-based planner answers),
with the SDK the service installs (mcp 1.x) and with the one `pip install mcp` gets today (2.x,
installed from PyPI into a virtual environment of its own, kept in pytest's cache so a run pays
for it once), printing exactly what the docs say it prints."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.service import serving

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "mcp_client.py"
DOC = REPO / "docs" / "mcp.md"
_VERSION = "import importlib.metadata as m; print(m.version('mcp'))"


def trying_it() -> tuple[str, str]:
    """The code and what it prints: the python and text blocks of the docs' "Trying it"."""
    section = DOC.read_text().split("\n## Trying it\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, re.DOTALL)
    (code,) = [text for kind, text in blocks if kind == "python"]
    (printed,) = [text for kind, text in blocks if kind == "text"]
    return code, printed


def test_the_docs_show_the_example_file_whole() -> None:
    code, _ = trying_it()
    assert code == EXAMPLE.read_text()


def sdk_version(python: Path | str) -> str | None:
    found = subprocess.run(
        [str(python), "-c", _VERSION], capture_output=True, text=True, timeout=60, check=False
    )
    return found.stdout.strip() if found.returncode == 0 else None


def python_with_mcp_2(cache: pytest.Cache) -> Path:
    """A Python with mcp>=2 from PyPI: a virtual environment in pytest's cache, made when it
    is not there yet (about a minute and a half)."""
    venv = cache.mkdir("mcp2-venv")
    python = venv / "bin" / "python"
    installed = sdk_version(python) if python.exists() else None
    if installed is not None and int(installed.split(".")[0]) >= 2:
        return python
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=120)
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "mcp>=2"],
        check=True,
        timeout=900,
    )
    return python


@pytest.fixture
def url() -> Iterator[str]:
    for http in serving({}):
        yield str(http.base_url).rstrip("/") + "/mcp"


@pytest.mark.slow
@pytest.mark.parametrize("sdk", ["1.x", "2.x"])
def test_the_example_prints_what_the_docs_say(
    sdk: str, url: str, request: pytest.FixtureRequest
) -> None:
    python = Path(sys.executable) if sdk == "1.x" else python_with_mcp_2(request.config.cache)
    assert (sdk_version(python) or "").startswith(sdk[0] + ".")
    ran = subprocess.run(
        [str(python), str(EXAMPLE), url], capture_output=True, text=True, timeout=120, check=False
    )
    assert ran.returncode == 0, ran.stderr
    _, printed = trying_it()
    assert ran.stdout == printed
