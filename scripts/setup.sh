#!/usr/bin/env bash
# Creates .venv with Python 3.11+ and installs planner-arm (with test tools when given "dev").
set -euo pipefail
cd "$(dirname "$0")/.."
python_bin=""
for candidate in python3.11 python3.12 python3.13 python3; do
  if command -v "$candidate" >/dev/null 2>&1 &&
     "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    python_bin=$candidate
    break
  fi
done
[ -n "$python_bin" ] || { echo "setup: Python 3.11 or newer is needed" >&2; exit 1; }
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $("$python_bin" --version)" >&2
  "$python_bin" -m venv .venv
fi
extra=""
[ "${1:-}" = "dev" ] && extra="[dev]"
# pip is quiet, so say what the wait is for: the first run downloads everything.
echo "setup: installing planner-arm${extra} and its pinned dependencies into .venv" \
  "(about 30 s the first time, a few seconds after)" >&2
.venv/bin/python -m pip install --quiet --disable-pip-version-check \
  -c constraints.txt -e ".${extra}"
