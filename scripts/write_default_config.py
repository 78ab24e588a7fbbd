"""Writes planner-config.yaml (and its copy for kustomize) from the built-in defaults.

    .venv/bin/python scripts/write_default_config.py

Run it after changing a default in config.py; tests fail while the files and defaults differ.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from planner_arm.config import default_settings_dict

ROOT = Path(__file__).resolve().parents[1]
HEADER = """\
# planner-arm configuration. These are the built-in defaults: the service runs the same
# without this file. Point PLANNER_CONFIG at a copy to change them; environment variables
# (LLM_MODEL, MAX_PLAN_STEPS, TIMEOUT_SECONDS, ... see the README) override the file.
# The API key is never read from here: set OPENAI_API_KEY.
"""


class _Dumper(yaml.SafeDumper):
    """Lists of plain values on one line; everything else in block style."""


def _list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    flow = all(isinstance(item, str | int | float) for item in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(list, _list)


def main() -> None:
    defaults = default_settings_dict()
    text = HEADER + yaml.dump(
        defaults, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=96
    )
    assert yaml.safe_load(text) == defaults
    for path in (ROOT / "planner-config.yaml", ROOT / "k8s" / "planner-config.yaml"):
        path.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
