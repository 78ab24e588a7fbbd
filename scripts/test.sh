#!/usr/bin/env bash
# Sets up .venv with the dev tools, then lint, format check, type check and the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev
.venv/bin/ruff check src tests benchmarks scripts
.venv/bin/ruff format --check src tests benchmarks scripts
.venv/bin/mypy
.venv/bin/pytest "$@"
