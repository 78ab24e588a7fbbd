#!/usr/bin/env bash
# Lint, format check and type check: ruff check and ruff format --check over src, tests,
# benchmarks, scripts and examples, then mypy (its paths, src and examples, are in
# pyproject.toml). It first runs scripts/setup.sh dev, which installs the dev tools into .venv
# only when they are missing or the dependencies changed, so it works on a fresh clone too.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev
paths=(src tests benchmarks scripts examples)
echo "lint: ruff check, ruff format --check, mypy" >&2
.venv/bin/ruff check "${paths[@]}"
.venv/bin/ruff format --check "${paths[@]}"
.venv/bin/mypy
