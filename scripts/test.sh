#!/usr/bin/env bash
# Sets up .venv with the dev tools, then lint, format check, type check (scripts/lint.sh, which
# also does the set-up) and the test suite; its arguments go to pytest.
#
#   bash scripts/test.sh          the whole suite (about 5 minutes on 2 cores)
#   bash scripts/test.sh fast     the loop while you work: every test but the slow ones (a
#                                 service process, a browser, real time, the mcp 2.x install),
#                                 about 2 minutes; then the whole suite before you push
set -euo pipefail
cd "$(dirname "$0")/.."
# Debian packages the tests run for real: redis-server (the Redis store's tests) and chromium
# with a font (the plan page's browser test; Playwright drives it and downloads no browser),
# curl and jq (the documented examples, tests/test_doc_examples.py).
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v curl >/dev/null 2>&1 || missing+=(curl)
command -v jq >/dev/null 2>&1 || missing+=(jq)
command -v chromium >/dev/null 2>&1 || missing+=(chromium fonts-dejavu-core)
if [ "${#missing[@]}" -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "test: installing ${missing[*]} (Debian packages) for the tests that run them" >&2
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo -n"
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null
  else
    echo "test: ${missing[*]} not installed and there is no apt-get; their tests skip (under CI they fail)" >&2
  fi
fi
bash scripts/lint.sh
if [ "${1:-}" = "fast" ]; then
  shift
  echo "test: the test suite without the slow tests (-m 'not slow')" >&2
  exec .venv/bin/pytest -m "not slow" "$@"
fi
echo "test: the test suite" >&2
exec .venv/bin/pytest "$@"
