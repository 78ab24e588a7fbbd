#!/usr/bin/env bash
# Sets up .venv and starts the service on http://127.0.0.1:8080 (rule-based with no API key).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/planner-arm serve "$@"
