#!/usr/bin/env bash
# Sets up everything the tests need (see bootstrap.sh), then runs the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh --test
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
