"""scripts/bootstrap.sh as a newcomer runs it: which Python it takes, what it says when there is none, and a
.venv from a wrong Python rebuilt. A copy of the script runs in a temp tree with ``--venv-only``, so nothing
is installed; fake interpreters are shell scripts that print a version."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="bash and shell-script interpreters")


def fake_python(path: Path, version: str = "3.10.12") -> Path:
    """An interpreter that answers every question with ``Python <version>``, the way a 3.10 on PATH would."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\necho "Python {version}"\n', "utf-8")
    path.chmod(0o755)
    return path


def real_python(path: Path) -> Path:
    """A name on PATH for the interpreter running the tests (3.11 or newer)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n', "utf-8")
    path.chmod(0o755)
    return path


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "bootstrap.sh", tmp_path / "scripts" / "bootstrap.sh")
    return tmp_path


def only(tmp_path: Path, *tools: str) -> Path:
    """A PATH folder holding just the tools the script needs, so no real python3.x is found."""
    folder = tmp_path / "only"
    folder.mkdir(exist_ok=True)
    for tool in ("bash", "dirname", "rm", "cat", *tools):
        found = shutil.which(tool)
        assert found, tool
        (folder / tool).symlink_to(found)
    return folder


def bootstrap(tree: Path, path: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {key: value for key, value in os.environ.items() if key not in ("PYTHON", "VIRTUAL_ENV")}
    return subprocess.run(
        ["/bin/bash", str(tree / "scripts" / "bootstrap.sh"), *args],
        capture_output=True, text=True, env={**clean, "PATH": path, **env}, timeout=300, cwd=tree.parent,
    )


def test_python_3_10_first_on_path_and_nothing_newer_is_a_chinese_message(tree: Path, tmp_path: Path) -> None:
    folder = only(tmp_path)
    fake_python(folder / "python3")
    done = bootstrap(tree, str(folder), "--venv-only")
    lines = done.stderr.splitlines()
    assert done.returncode == 1
    assert lines[0] == "错误：cnki-mcp 需要 Python 3.11 或更新版本（找到的是 python3 3.10）。"
    assert "  - 官方安装包：https://www.python.org/downloads/" in lines
    assert "  - macOS（Homebrew）：brew install python@3.12" in lines
    assert "  - Debian / Ubuntu：sudo apt install python3.11 python3.11-venv" in lines
    assert "  - 用 uv：uv python install 3.12" in lines
    assert not (tree / ".venv").exists()


@pytest.mark.slow  # builds a real venv
def test_a_newer_python_is_preferred_over_python3_at_3_10(tree: Path, tmp_path: Path) -> None:
    folder = only(tmp_path)
    fake_python(folder / "python3")
    newer = real_python(folder / "python3.12")
    done = bootstrap(tree, str(folder), "--venv-only")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == f"使用 Python {sys.version_info[0]}.{sys.version_info[1]}：{newer}"
    assert (tree / ".venv" / "bin" / "python").is_file()


@pytest.mark.slow  # builds a real venv
def test_a_venv_made_by_python_3_10_is_rebuilt(tree: Path, tmp_path: Path) -> None:
    folder = only(tmp_path)
    real_python(folder / "python3.11")
    fake_python(tree / ".venv" / "bin" / "python")
    done = bootstrap(tree, str(folder), "--venv-only")
    assert done.returncode == 0, done.stderr
    assert "已有的 .venv 是用 Python 3.10 建立的，低于 3.11：删除后重建。" in done.stdout.splitlines()
    rebuilt = subprocess.run([str(tree / ".venv" / "bin" / "python"), "-c", "import sys; print(sys.version_info >= (3, 11))"],
                             capture_output=True, text=True, timeout=60)
    assert rebuilt.stdout == "True\n"


def test_python_env_that_is_too_old_is_named(tree: Path, tmp_path: Path) -> None:
    folder = only(tmp_path)
    old = fake_python(tmp_path / "old" / "python")
    done = bootstrap(tree, str(folder), "--venv-only", PYTHON=str(old))
    assert done.returncode == 1
    assert done.stderr.splitlines()[0] == f"错误：cnki-mcp 需要 Python 3.11 或更新版本（找到的是 {old} 3.10）。"


@pytest.mark.slow  # builds a real venv
def test_uv_finds_a_python_when_path_has_none(tree: Path, tmp_path: Path) -> None:
    folder = only(tmp_path)
    fake_python(folder / "python3")
    managed = real_python(tmp_path / "uv-pythons" / "python3.12")
    (folder / "uv").write_text(f'#!/bin/sh\n[ "$1 $2" = "python find" ] && echo "{managed}"\n', "utf-8")
    (folder / "uv").chmod(0o755)
    done = bootstrap(tree, str(folder), "--venv-only")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].endswith(f"：{managed}")


def test_the_powershell_bootstrap_is_utf8_with_bom_and_knows_the_same_pythons() -> None:
    data = (REPO / "scripts" / "bootstrap.ps1").read_bytes()
    text = data.decode("utf-8-sig")
    # Windows PowerShell 5.1 reads a file without a BOM as ANSI, which garbles the Chinese messages.
    assert data.startswith(b"\xef\xbb\xbf")
    assert "'-3.13', '-3.12', '-3.11'" in text and "uv python find '>=3.11'" in text
    assert "-m venv .venv" in text and "pip install -q -e ." in text


@pytest.mark.skipif(shutil.which("pwsh") is None, reason="PowerShell is not installed here (CI checks it)")
def test_the_powershell_bootstrap_parses() -> None:
    script = REPO / "scripts" / "bootstrap.ps1"
    check = ("$e = $null; [System.Management.Automation.Language.Parser]::ParseFile("
             f"'{script}', [ref]$null, [ref]$e) | Out-Null; if ($e) {{ $e; exit 1 }}")
    done = subprocess.run(["pwsh", "-NoProfile", "-Command", check], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


# --- what the READMEs tell a newcomer ------------------------------------------------------------------


def _fenced_blocks(text: str) -> list[list[str]]:
    blocks, current = [], None
    for line in text.splitlines():
        if line.startswith("```"):
            if current is None:
                current = []
            else:
                blocks.append(current)
                current = None
        elif current is not None:
            current.append(line)
    return blocks


@pytest.mark.parametrize(("readme", "heading"), [("README.md", "## 两条命令"), ("README.en.md", "## Two commands")])
def test_the_readme_starts_from_a_clone_and_keeps_two_commands(readme: str, heading: str) -> None:
    text = (REPO / readme).read_text("utf-8")
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    clone, commands = _fenced_blocks(section)[:2]
    assert clone == ["git clone https://github.com/cnki-mcp/cnki-mcp.git && cd cnki-mcp"]
    assert [line for line in commands if line and not line.startswith("#")] == [
        "bash scripts/bootstrap.sh && .venv/bin/cnki-mcp setup",
        "bash scripts/test.sh",
    ]
    assert "scripts\\bootstrap.ps1" in section
    for script in ("scripts/bootstrap.sh", "scripts/test.sh", "scripts/bootstrap.ps1"):
        assert (REPO / script).is_file()


@pytest.mark.parametrize(("readme", "releases", "pypi"), [
    ("README.md", "还没有发布过版本时发行页是空的", "第一个版本发布之前 PyPI 上还没有 `cnki-browser-mcp`"),
    ("README.en.md", "Until a version has been tagged the releases page is empty", "Before the\n> first release `cnki-browser-mcp` is not on PyPI"),
])
def test_the_readme_says_when_releases_and_pypi_exist(readme: str, releases: str, pypi: str) -> None:
    text = (REPO / readme).read_text("utf-8")
    assert releases in text and pypi in text
    for link in ("docs/faq.md", "docs/clients.zh.md"):
        assert link in text and (REPO / link).is_file()
