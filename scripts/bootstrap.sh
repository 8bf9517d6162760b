#!/usr/bin/env bash
# Prepares a development checkout: a virtualenv in .venv with cnki-mcp installed in editable mode.
#   bash scripts/bootstrap.sh          the server and its CLI
#   bash scripts/bootstrap.sh --test   also the test tools, PyInstaller, Chromium, the citeproc-js oracle and the mcpb CLI
set -euo pipefail
cd "$(dirname "$0")/.."

with_tests=0
[ "${1:-}" = "--test" ] && with_tests=1

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
if [ "$with_tests" = 1 ]; then
  .venv/bin/python -m pip install -q -e '.[test,build]'
else
  .venv/bin/python -m pip install -q -e .
fi

if [ "$with_tests" = 1 ]; then
  # Integration tests drive a real Chromium; Debian's package is the one CI uses.
  if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      apt-get update -q
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium
    else
      echo "warning: no chromium found; browser tests will be skipped (install Debian's chromium)" >&2
    fi
  fi
  # Node packages the tests use, each pinned by its lock file: the citeproc-js oracle and the official
  # MCP Bundle CLI (mcpb) that validates the .mcpb the release build writes.
  if command -v npm >/dev/null 2>&1; then
    for folder in tests/citeproc tests/mcpb; do
      if [ -f "$folder/package-lock.json" ]; then
        npm ci --prefix "$folder" --no-audit --no-fund --loglevel=error
      fi
    done
  else
    echo "warning: no npm found; the citeproc and mcpb tests will be skipped (install Debian's npm)" >&2
  fi
fi
