#!/usr/bin/env bash
# Sets up .venv with the dev tools, then lint, format check, type check (scripts/lint.sh, which
# also does the set-up) and the test suite; its arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
# The Redis store's tests run against a real redis-server (the Debian package).
if ! command -v redis-server >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "test: installing redis-server (the Debian package) for the Redis store's tests" >&2
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo -n"
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      redis-server >/dev/null
  else
    echo "test: redis-server is not installed and there is no apt-get; its tests skip (under CI they fail)" >&2
  fi
fi
bash scripts/lint.sh
echo "test: the test suite" >&2
.venv/bin/pytest "$@"
