"""`python -m planner_arm` and the `planner-arm` command: the command line.

A plain `pip install planner-arm` is the Python client only; the commands need the service's
dependencies, so without them this says how to get them rather than failing on an import.
"""

from __future__ import annotations

import sys

SERVER_EXTRA_HINT = (
    "planner-arm: the command line needs the service's dependencies "
    "(missing: {missing}); install them with: pip install 'planner-arm[server]'"
)


def main() -> None:
    try:
        from planner_arm.cli import main as run
    except ModuleNotFoundError as missing:
        if missing.name is None or missing.name.split(".")[0] == "planner_arm":
            raise
        sys.exit(SERVER_EXTRA_HINT.format(missing=missing.name))
    run()


if __name__ == "__main__":
    main()
