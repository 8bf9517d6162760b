#!/usr/bin/env bash
# Prepares a development checkout: a virtualenv in .venv with cnki-mcp installed in editable mode.
#   bash scripts/bootstrap.sh             the server and its CLI
#   bash scripts/bootstrap.sh --test      also the test tools, PyInstaller, Chromium, the citeproc-js oracle, the mcpb CLI
#                                         and the MCP conformance suite
#   bash scripts/bootstrap.sh --venv-only only choose the Python and (re)build .venv, install nothing
# A run after a finished one installs nothing that has not changed: pip is skipped while .venv/.bootstrap-stamp
# matches pyproject.toml, the checkout's path and the venv's Python; `npm ci` while node_modules/.lock-stamp
# matches package-lock.json and node. Delete a stamp (or .venv) to force the install again.
# The Python: $PYTHON if set, else the first of python3.13, python3.12, python3.11, python3, python that is
# 3.11 or newer, else one uv already has (`uv python find`). A .venv made by an older Python is rebuilt.
set -euo pipefail
cd "$(dirname "$0")/.."

with_tests=0
venv_only=0
case "${1:-}" in
  --test) with_tests=1 ;;
  --venv-only) venv_only=1 ;;
esac

# "3.12" from whatever the interpreter prints ("3.12", "Python 3.12.4"); empty when it does not run.
python_version() {
  local out
  out=$("$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || return 0
  [[ $out =~ ([0-9]+)\.([0-9]+) ]] && echo "${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"
  return 0
}

# True for 3.11 and newer.
good_version() {
  [[ $1 =~ ^([0-9]+)\.([0-9]+)$ ]] || return 1
  local major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]}
  (( major > 3 || (major == 3 && minor >= 11) ))
}

no_python() {
  cat >&2 <<EOF
错误：cnki-mcp 需要 Python 3.11 或更新版本${1:+（找到的是 $1）}。
请先安装一个，再重新运行 bash scripts/bootstrap.sh：
  - 官方安装包：https://www.python.org/downloads/
  - macOS（Homebrew）：brew install python@3.12
  - Debian / Ubuntu：sudo apt install python3.11 python3.11-venv
  - 用 uv：uv python install 3.12
也可以用 PYTHON=/path/to/python3.12 bash scripts/bootstrap.sh 指定解释器。
EOF
  exit 1
}

choose_python() {
  local found="" candidate version
  if [ -n "${PYTHON:-}" ]; then
    version=$(python_version "$PYTHON")
    good_version "$version" || no_python "$PYTHON ${version:-无法运行}"
    echo "$PYTHON"
    return
  fi
  for candidate in python3.13 python3.12 python3.11 python3 python; do
    command -v "$candidate" >/dev/null 2>&1 || continue
    version=$(python_version "$candidate")
    if good_version "$version"; then
      command -v "$candidate"
      return
    fi
    [ -n "$found" ] || found="$candidate $version"
  done
  if command -v uv >/dev/null 2>&1; then
    candidate=$(uv python find '>=3.11' 2>/dev/null || true)
    if [ -n "$candidate" ] && good_version "$(python_version "$candidate")"; then
      echo "$candidate"
      return
    fi
  fi
  no_python "$found"
}

python=$(choose_python)
echo "使用 Python $(python_version "$python")：$python"

# A .venv from another Python (an older one, a deleted one) fails the same way on every run: rebuild it.
if [ -e .venv ] || [ -L .venv/bin/python ]; then
  venv_version=$( [ -x .venv/bin/python ] && python_version .venv/bin/python || true )
  if ! good_version "$venv_version"; then
    echo "已有的 .venv 是用 Python ${venv_version:-（无法运行）} 建立的，低于 3.11：删除后重建。"
    rm -rf .venv
  fi
fi
if [ ! -x .venv/bin/python ]; then
  if ! "$python" -m venv .venv; then
    rm -rf .venv
    echo "错误：无法用 $python 建立虚拟环境。Debian / Ubuntu 上请先安装 venv 模块：sudo apt install python$(python_version "$python")-venv" >&2
    exit 1
  fi
fi
[ "$venv_only" = 1 ] && exit 0

# The SHA-256 of standard input.
digest() {
  .venv/bin/python -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())'
}

# What an install of the Python packages depends on: the extras, where the checkout is (the editable install
# points there), the venv's Python and pyproject.toml.
python_stamp() {
  { echo "$1"; pwd; .venv/bin/python -VV; cat pyproject.toml; } | digest
}

python_stamp_file=.venv/.bootstrap-stamp
installed=$(cat "$python_stamp_file" 2>/dev/null || true)
with_extras=$(python_stamp test)
if [ "$with_tests" = 1 ]; then
  wanted=$with_extras
  extras='.[test,build]'
else
  wanted=$(python_stamp plain)
  extras=.
fi
# An install with the test extras also holds everything a plain one needs.
if [ "$installed" = "$wanted" ] || [ "$installed" = "$with_extras" ]; then
  echo "pyproject.toml 与上次安装时相同：跳过 pip install（删除 $python_stamp_file 可强制重装）。"
else
  rm -f "$python_stamp_file"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e "$extras"
  echo "$wanted" > "$python_stamp_file"
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
  # A CJK font, so the facet chart's tests also draw Chinese labels (the no-font path is tested either way).
  if ! { command -v fc-list >/dev/null 2>&1 && [ -n "$(fc-list :lang=zh file 2>/dev/null)" ]; }; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      # Not fatal: without the font the chart is drawn with numbered bars, and its tests cover that path.
      { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q fonts-noto-cjk; } ||
        echo "warning: fonts-noto-cjk could not be installed; the chart tests draw numbered bars only" >&2
    else
      echo "warning: no Chinese font found; the chart tests draw numbered bars only (install fonts-noto-cjk)" >&2
    fi
  fi
  # Node packages the tests use, each pinned by its lock file: the citeproc-js oracle, the official
  # MCP Bundle CLI (mcpb) that validates the .mcpb the release build writes, and the official MCP
  # conformance suite (with the Node 22 it needs, as the npm package node).
  if command -v npm >/dev/null 2>&1; then
    for folder in tests/citeproc tests/mcpb tests/conformance; do
      [ -f "$folder/package-lock.json" ] || continue
      wanted=$( { node --version 2>/dev/null || true; cat "$folder/package-lock.json"; } | digest)
      if [ "$(cat "$folder/node_modules/.lock-stamp" 2>/dev/null || true)" = "$wanted" ]; then
        echo "$folder/package-lock.json 与上次安装时相同：跳过 npm ci。"
      else
        npm ci --prefix "$folder" --no-audit --no-fund --loglevel=error
        echo "$wanted" > "$folder/node_modules/.lock-stamp"
      fi
    done
  else
    echo "warning: no npm found; the citeproc, mcpb and conformance tests will be skipped (install Debian's npm)" >&2
  fi
fi
