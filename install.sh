#!/usr/bin/env bash
# Set up rgt in ./.venv. `./install.sh --mcp` adds the MCP server's SDK; `./install.sh --dev` adds the test and docs tools (pytest, vermin,
# watchdog, mkdocs) and installs the checkout editable (re-run ./install.sh after a `git pull`
# otherwise). Quiet on success: pip's own chatter (build-backend warnings, index notices)
# buried the one line a user needs; on a failure everything pip said is shown, in full.
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-python3}"
extra=""
editable=""
case "${1:-}" in
  "") ;;
  --dev) extra="[dev]"; editable="-e" ;;   # editable: the tests and your edits use the checkout
  --mcp) extra="[mcp]" ;;                  # the tool and the MCP SDK, still a plain install
  *) echo "Error: unknown option: $1" >&2
     echo "Hint: ./install.sh (the tool), ./install.sh --mcp (with the MCP server's SDK) or ./install.sh --dev (the tool, the tests and the docs)" >&2
     exit 2 ;;
esac
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
  echo "Error: rgt-client needs Python >= 3.10 (found $("$PY" --version 2>&1))" >&2
  echo "Hint: PYTHON=/path/to/python3.11 ./install.sh" >&2
  exit 1
fi
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! "$PY" -m venv .venv >"$log" 2>&1; then
  cat "$log" >&2
  echo "Error: could not create .venv with $PY" >&2
  echo "Hint: on Debian/Ubuntu: apt-get install python3-venv" >&2
  exit 1
fi
# An old pip cannot build from pyproject.toml alone; failing to upgrade it is not fatal by itself.
.venv/bin/python -m pip install --upgrade pip >"$log" 2>&1 || true
# A user's install is a plain one: an editable install's import hook cost every `rgt-client` call
# about 12 ms before it could even start its ssh (a tenth of what `status` adds to `ssh HOST true`).
if ! .venv/bin/python -m pip install $editable ".${extra}" >"$log" 2>&1; then
  cat "$log" >&2
  echo "Error: pip could not install rgt (its full output is above)" >&2
  exit 1
fi
echo "rgt installed in $(pwd)/.venv"
echo "  try it:     .venv/bin/rgt-client demo"
echo "  the agent:  .venv/bin/rgt-agent --help"
if [ "$extra" = "[mcp]" ]; then
  echo "  for agents: .venv/bin/rgt-client mcp --hosts HOST   (docs/agents.md)"
elif [ -n "$extra" ]; then
  echo "  the tests:  .venv/bin/python -m pytest -q"
  echo "  the docs:   .venv/bin/mkdocs serve"
fi
