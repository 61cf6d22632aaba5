#!/usr/bin/env bash
# Set up rgt in ./.venv. `./install.sh --dev` adds the test tools (pytest, vermin, watchdog).
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-python3}"
extra=""
if [ "${1:-}" = "--dev" ]; then extra="[dev]"; fi
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
  echo "Error: rgt-client needs Python >= 3.10 (found $("$PY" --version 2>&1))" >&2
  echo "Hint: PYTHON=/path/to/python3.11 ./install.sh" >&2
  exit 1
fi
"$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q -e ".${extra}"
echo "rgt installed in $(pwd)/.venv"
echo "  try it:     .venv/bin/rgt-client demo"
echo "  the agent:  .venv/bin/rgt-agent --help"
if [ -n "$extra" ]; then echo "  the tests:  .venv/bin/python -m pytest -q"; fi
