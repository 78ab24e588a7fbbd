#!/usr/bin/env bash
# Creates .venv with Python 3.11+ and installs planner-arm with the service (`[server]`; with
# the test tools too when given "dev").
#
# pip runs only when needed: .venv/.setup-stamp holds a hash of pyproject.toml and
# constraints.txt and the extra installed ("dev" or "plain"); while the hash matches, a plain
# request is satisfied by either install and a "dev" request by a dev install. The whole
# check-and-install holds an exclusive lock on .venv/.setup.lock, so replicas started at the
# same moment install one after another, never into the venv at once. It prints one line:
# what it installed, or that .venv was up to date.
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
extra="[server]"
wanted=plain
if [ "${1:-}" = "dev" ]; then
  extra="[dev]"
  wanted=dev
fi

mkdir -p .venv
exec 9>.venv/.setup.lock
# The lock is the open file's, held until this script exits (fd 9 closes with it).
if command -v flock >/dev/null 2>&1; then
  flock 9
else
  "$python_bin" -c 'import fcntl; fcntl.flock(9, fcntl.LOCK_EX)'
fi

stamp=.venv/.setup-stamp
hash=$("$python_bin" -c '
import hashlib, sys
digest = hashlib.sha256()
for name in sys.argv[1:]:
    with open(name, "rb") as source:
        digest.update(source.read())
print(digest.hexdigest())' pyproject.toml constraints.txt)
installed=""
[ -f "$stamp" ] && installed=$(cat "$stamp")
if [ -x .venv/bin/python ] && [ -x .venv/bin/planner-arm ] &&
   { [ "$installed" = "$hash dev" ] || [ "$installed" = "$hash $wanted" ]; }; then
  [ "$installed" = "$hash dev" ] && extra="[dev]"
  echo "setup: .venv is up to date (planner-arm${extra}), nothing to install" >&2
  exit 0
fi

if [ ! -x .venv/bin/python ]; then
  reason="a new .venv with $("$python_bin" --version), about 30 s"
  "$python_bin" -m venv .venv
elif [ -z "$installed" ]; then
  reason="no record of an install in .venv"
elif [ "${installed%% *}" != "$hash" ]; then
  reason="pyproject.toml or constraints.txt changed"
elif [ ! -x .venv/bin/planner-arm ]; then
  reason="planner-arm is missing from .venv"
else
  reason="the dev tools were asked for"
fi
# pip is quiet, so say what the wait is for: the first run downloads everything.
echo "setup: installing planner-arm${extra} into .venv (${reason})" >&2
rm -f "$stamp"
.venv/bin/python -m pip install --quiet --disable-pip-version-check \
  -c constraints.txt -e ".${extra}"
echo "$hash $wanted" >"$stamp"
