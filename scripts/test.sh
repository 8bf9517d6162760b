#!/usr/bin/env bash
# Sets up everything the tests need (see bootstrap.sh; a second run installs nothing unchanged), then runs them.
#   bash scripts/test.sh          the whole suite (CI runs this)
#   bash scripts/test.sh --fast   the quick loop: leaves out the e2e, browser, slow and packaging tests
# Further arguments go to pytest (bash scripts/test.sh --fast tests/test_jobs.py -x; add -n 0 to run in one process).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/language.sh  # english=1 or 0, and say "中文" "English"

# The markers --fast leaves out (pyproject.toml describes them; tests/conftest.py sets e2e and browser by rule).
FAST=(-m "not e2e and not browser and not slow and not packaging")

selection=()
if [ "${1:-}" = --fast ]; then
  shift
  selection=("${FAST[@]}")
fi

bash scripts/bootstrap.sh --test
status=0
# One worker per logical CPU (at most 4; pytest-xdist), each test file on one worker (a module's server and browser are started once).
PARALLEL=(-n logical --maxprocesses=4 --dist loadfile)
.venv/bin/python -m pytest -q -p no:cacheprovider "${PARALLEL[@]}" ${selection[@]+"${selection[@]}"} "$@" || status=$?  # (bash 3.2 calls an empty array unset)
# pytest's 5: no test was collected or every one was deselected. Never a pass; with --fast say why.
if [ "$status" = 5 ] && [ ${#selection[@]} -gt 0 ]; then
  say "没有测试被选中：--fast 不运行 e2e、browser、slow 和 packaging 测试；去掉 --fast 即可运行它们。" \
    "No test was selected: --fast leaves out the e2e, browser, slow and packaging tests; drop --fast to run them." >&2
fi
exit "$status"
