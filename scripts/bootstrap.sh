#!/usr/bin/env bash
# Prepares a development checkout: a virtualenv in .venv with cnki-mcp installed in editable mode.
#   bash scripts/bootstrap.sh             the server and its CLI, then offers to link cnki-mcp into ~/.local/bin
#   bash scripts/bootstrap.sh --setup [ARGS]  the same, then runs `cnki-mcp setup ARGS` (the venv's own binary)
#   bash scripts/bootstrap.sh --link / --no-link  link (or not) without asking
#   bash scripts/bootstrap.sh --test      also the test tools, PyInstaller, Chromium, a CJK font, the citeproc-js
#                                         oracle, the mcpb CLI and the MCP conformance suite (links nothing)
#   bash scripts/bootstrap.sh --venv-only only choose the Python and (re)build .venv, install nothing
# A run after a finished one installs nothing that has not changed: pip is skipped while .venv/.bootstrap-stamp
# matches pyproject.toml, the checkout's path and the venv's Python; `npm ci` while node_modules/.lock-stamp
# matches package-lock.json and node. Delete a stamp (or .venv) to force the install again.
# The Python: $PYTHON if set, else the first of python3.13, python3.12, python3.11, python3, python that is
# 3.11 or newer, else one uv already has (`uv python find`). A .venv made by an older Python is rebuilt.
# Messages are Chinese, English with CNKI_LANG=en (or, CNKI_LANG unset, an English LC_ALL/LC_MESSAGES/LANG: the
# CLI's rule). What pip, npm and apt print goes to logs under .venv, shown only when they fail.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/language.sh  # english=1 or 0, and say "中文" "English"

with_tests=0
venv_only=0
link=ask
run_setup=0
setup_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --test) with_tests=1 ;;
    --venv-only) venv_only=1 ;;
    --link) link=yes ;;
    --no-link) link=no ;;
    --setup) run_setup=1; shift; setup_args=("$@"); break ;;
    *)
      say "错误：不认识的参数 $1。可用：--setup [setup 的参数]、--link、--no-link、--test、--venv-only。" \
          "error: unknown option $1. Known: --setup [setup's options], --link, --no-link, --test, --venv-only." >&2
      exit 2 ;;
  esac
  shift
done

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
  if [ "$english" = 1 ]; then
    cat >&2 <<EOF
error: cnki-mcp needs Python 3.11 or newer${1:+ (found $1)}.
Install one, then run bash scripts/bootstrap.sh again:
  - installers: https://www.python.org/downloads/
  - macOS (Homebrew): brew install python@3.12
  - Debian / Ubuntu: sudo apt install python3.11 python3.11-venv
  - with uv: uv python install 3.12
Or name the interpreter: PYTHON=/path/to/python3.12 bash scripts/bootstrap.sh
EOF
  else
    cat >&2 <<EOF
错误：cnki-mcp 需要 Python 3.11 或更新版本${1:+（找到的是 $1）}。
请先安装一个，再重新运行 bash scripts/bootstrap.sh：
  - 官方安装包：https://www.python.org/downloads/
  - macOS（Homebrew）：brew install python@3.12
  - Debian / Ubuntu：sudo apt install python3.11 python3.11-venv
  - 用 uv：uv python install 3.12
也可以用 PYTHON=/path/to/python3.12 bash scripts/bootstrap.sh 指定解释器。
EOF
  fi
  exit 1
}

choose_python() {
  local found="" candidate version
  if [ -n "${PYTHON:-}" ]; then
    version=$(python_version "$PYTHON")
    good_version "$version" || no_python "$PYTHON ${version:-$(say 无法运行 "does not run")}"
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
say "使用 Python $(python_version "$python")：$python" "Using Python $(python_version "$python"): $python"

# A .venv from another Python (an older one, a deleted one) fails the same way on every run: rebuild it.
if [ -e .venv ] || [ -L .venv/bin/python ]; then
  venv_version=$( [ -x .venv/bin/python ] && python_version .venv/bin/python || true )
  if ! good_version "$venv_version"; then
    say "已有的 .venv 是用 Python ${venv_version:-（无法运行）} 建立的，低于 3.11：删除后重建。" \
        "The existing .venv was made by Python ${venv_version:-(which no longer runs)}, older than 3.11: rebuilding it."
    rm -rf .venv
  fi
fi
if [ ! -x .venv/bin/python ]; then
  if ! venv_said=$("$python" -m venv .venv 2>&1); then
    rm -rf .venv
    printf '%s\n' "$venv_said" >&2
    say "错误：无法用 $python 建立虚拟环境（上面是它的输出）。Debian / Ubuntu 上请先安装 venv 模块：sudo apt install python$(python_version "$python")-venv" \
        "error: $python could not make a virtualenv (its output is above). On Debian / Ubuntu install the venv module first: sudo apt install python$(python_version "$python")-venv" >&2
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
# Runs "$@" with its output in the log $1 (appended); on failure shows the log and stops with a line saying so.
logged() {
  local log=$1
  shift
  if ! "$@" >>"$log" 2>&1; then
    cat "$log" >&2
    say "错误：$* 失败；上面是它的输出（也在 $log 中）。" "error: $* failed; its output is above (and in $log)." >&2
    exit 1
  fi
}

# An install with the test extras also holds everything a plain one needs.
if [ "$installed" = "$wanted" ] || [ "$installed" = "$with_extras" ]; then
  say "pyproject.toml 与上次安装时相同：跳过 pip install（删除 $python_stamp_file 可强制重装）。" \
      "pyproject.toml is as it was at the last install: pip install skipped (delete $python_stamp_file to force it)."
else
  rm -f "$python_stamp_file"
  # pip and setuptools print notices in English (a newer pip, deprecations): they go to the log, which is
  # shown when an install fails.
  pip_log=.venv/bootstrap-pip.log
  : > "$pip_log"
  say "正在安装 cnki-mcp 及其依赖（pip 的输出写入 $pip_log）……" "Installing cnki-mcp and its dependencies (pip's output goes to $pip_log)…"
  export PIP_DISABLE_PIP_VERSION_CHECK=1
  logged "$pip_log" .venv/bin/python -m pip install -q --upgrade pip
  logged "$pip_log" .venv/bin/python -m pip install -q -e "$extras"
  if [ -s "$pip_log" ]; then
    say "安装完成；pip 和 setuptools 留下的英文提示（不影响使用）在 $pip_log 中。" "Installed; the notices pip and setuptools left (harmless) are in $pip_log."
  fi
  echo "$wanted" > "$python_stamp_file"
fi

if [ "$with_tests" = 1 ]; then
  apt_log=.venv/bootstrap-apt.log
  # Integration tests drive a real Chromium; Debian's package is the one CI uses.
  if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      say "正在安装 Debian 的 chromium（apt 的输出写入 $apt_log）……" "Installing Debian's chromium (apt's output goes to $apt_log)…"
      logged "$apt_log" apt-get update -q
      logged "$apt_log" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium
    else
      say "提示：没有找到 chromium，浏览器测试会被跳过（请安装 Debian 的 chromium）。" \
          "note: no chromium found; the browser tests will be skipped (install Debian's chromium)." >&2
    fi
  fi
  # A CJK font, so the facet chart's tests also draw Chinese labels (the no-font path is tested either way).
  # WenQuanYi Micro Hei (5 MB installed) covers the chart's labels; fonts-noto-cjk would be 90 MB.
  if ! { command -v fc-list >/dev/null 2>&1 && [ -n "$(fc-list :lang=zh file 2>/dev/null)" ]; }; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      say "正在安装中文字体 fonts-wqy-microhei（apt 的输出写入 $apt_log）……" \
          "Installing the Chinese font fonts-wqy-microhei (apt's output goes to $apt_log)…"
      # Not fatal: without the font the chart is drawn with numbered bars, and its tests cover that path.
      { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q fonts-wqy-microhei; } >>"$apt_log" 2>&1 ||
        say "提示：无法安装 fonts-wqy-microhei（见 $apt_log）；图表测试只画编号的条形。" \
            "note: fonts-wqy-microhei could not be installed (see $apt_log); the chart tests draw numbered bars only." >&2
    else
      say "提示：没有找到中文字体；图表测试只画编号的条形（请安装 fonts-wqy-microhei）。" \
          "note: no Chinese font found; the chart tests draw numbered bars only (install fonts-wqy-microhei)." >&2
    fi
  fi
  # Node packages the tests use, each pinned by its lock file: the citeproc-js oracle, the official
  # MCP Bundle CLI (mcpb) that validates the .mcpb the release build writes, and the official MCP
  # conformance suite (with the Node 22 it needs, as the npm package node).
  if command -v npm >/dev/null 2>&1; then
    npm_log=.venv/bootstrap-npm.log
    for folder in tests/citeproc tests/mcpb tests/conformance; do
      [ -f "$folder/package-lock.json" ] || continue
      wanted=$( { node --version 2>/dev/null || true; cat "$folder/package-lock.json"; } | digest)
      if [ "$(cat "$folder/node_modules/.lock-stamp" 2>/dev/null || true)" = "$wanted" ]; then
        say "$folder/package-lock.json 与上次安装时相同：跳过 npm ci。" "$folder/package-lock.json is as it was at the last install: npm ci skipped."
      else
        say "正在为 $folder 运行 npm ci（输出写入 $npm_log）……" "Running npm ci for $folder (output goes to $npm_log)…"
        logged "$npm_log" npm ci --prefix "$folder" --no-audit --no-fund --loglevel=error
        echo "$wanted" > "$folder/node_modules/.lock-stamp"
      fi
    done
  else
    say "提示：没有找到 npm；citeproc、mcpb 和 conformance 测试会被跳过（请安装 Debian 的 npm）。" \
        "note: no npm found; the citeproc, mcpb and conformance tests will be skipped (install Debian's npm)." >&2
  fi
  exit 0
fi

# --- cnki-mcp on PATH ------------------------------------------------------------------------------
# A link in the first of ~/.local/bin, ~/bin that PATH holds, so the README's `cnki-mcp …` runs as shown.
# A file there that is not our link is never replaced; without such a folder on PATH nothing is linked and
# the line that puts ~/.local/bin on PATH is shown.
binary="$PWD/.venv/bin/cnki-mcp"
next=.venv/bin/cnki-mcp

# The folder to link into ("" when none is on PATH).
link_folder() {
  local folder
  for folder in "$HOME/.local/bin" "$HOME/bin"; do
    case ":$PATH:" in *":$folder:"* | *":$folder/:"*) echo "$folder"; return ;; esac
  done
}

# The line that puts ~/.local/bin on PATH for the person's shell.
path_line() {
  case "${SHELL##*/}" in
    zsh) echo "echo 'export PATH=\"\$HOME/.local/bin:\$PATH\"' >> ~/.zshrc" ;;
    fish) echo "fish_add_path ~/.local/bin" ;;
    bash)
      if [[ ${OSTYPE:-} == darwin* ]]; then
        echo "echo 'export PATH=\"\$HOME/.local/bin:\$PATH\"' >> ~/.bash_profile"
      else
        echo "echo 'export PATH=\"\$HOME/.local/bin:\$PATH\"' >> ~/.bashrc"
      fi ;;
    *) echo "echo 'export PATH=\"\$HOME/.local/bin:\$PATH\"' >> ~/.profile" ;;
  esac
}

if [ "$link" != no ]; then
  folder=$(link_folder)
  if [ -z "$folder" ]; then
    say "没有把 cnki-mcp 链接到你的命令目录：PATH 中没有 ~/.local/bin 或 ~/bin。要直接输入 cnki-mcp，运行下面这行，打开新终端后再运行本脚本：" \
        "cnki-mcp was not linked: PATH holds neither ~/.local/bin nor ~/bin. To type plain cnki-mcp, run this line, open a new terminal and run this script again:"
    echo "  $(path_line)"
  else
    target="$folder/cnki-mcp"
    current=""
    [ -L "$target" ] && current=$(readlink "$target")
    if [ "$current" = "$binary" ]; then
      next=cnki-mcp
    elif [ -e "$target" ] || { [ -L "$target" ] && [ "${current%/.venv/bin/cnki-mcp}" = "$current" ]; }; then
      say "$target 已存在，不是指向本仓库的链接：不覆盖它（请用 $next）。" \
          "$target exists and is not a link to this checkout: left as it is (use $next)."
    else
      # Nothing there, or a dangling link to another checkout's .venv (a moved or deleted clone).
      answer=y
      if [ "$link" = ask ] && [ -t 0 ]; then
        printf '%s' "$(say "把 cnki-mcp 链接到 $target，以后直接输入 cnki-mcp？[Y/n] " "Link cnki-mcp as $target, so plain cnki-mcp works? [Y/n] ")"
        read -r answer || answer=n
      fi
      case "$answer" in
        "" | [Yy]*)
          mkdir -p "$folder"
          ln -sf "$binary" "$target"
          say "已链接：$target → $binary" "Linked: $target → $binary"
          next=cnki-mcp ;;
      esac
    fi
  fi
fi

if [ "$run_setup" = 1 ]; then
  say "完成。现在运行 $next setup ……" "Done. Running $next setup now…"
  exec .venv/bin/cnki-mcp setup ${setup_args[@]+"${setup_args[@]}"}  # (bash 3.2 calls an empty array unset)
fi
say "完成。下一步：$next setup" "Done. Next: $next setup"
