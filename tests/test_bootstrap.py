"""scripts/bootstrap.sh as a newcomer runs it: which Python it takes, what it says when there is none, and a
.venv from a wrong Python rebuilt. A copy of the script runs in a temp tree with ``--venv-only``, so nothing
is installed; fake interpreters are shell scripts that print a version."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from scripts.gen_docs import fast_left_out

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
    for script in ("bootstrap.sh", "language.sh"):
        shutil.copy(REPO / "scripts" / script, tmp_path / "scripts" / script)
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
        stdin=subprocess.DEVNULL,
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


# --- a second run installs nothing that has not changed ------------------------------------------------


def logging_venv(tree: Path, log: Path) -> None:
    """A .venv whose Python is the real one, except that ``-m pip`` only writes its arguments to ``log``."""
    python = tree / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\n[ "$1 $2" = "-m pip" ] && {{ echo "$*" >> "{log}"; exit 0; }}\nexec "{sys.executable}" "$@"\n', "utf-8")
    python.chmod(0o755)


def installs(log: Path) -> list[str]:
    """The pip commands run since the last look, and the log emptied."""
    lines = log.read_text("utf-8").splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return lines


def test_a_second_bootstrap_skips_pip_until_pyproject_changes(tree: Path, tmp_path: Path) -> None:
    folder = only(tmp_path, "id")
    real_python(folder / "python3.12")
    log = tmp_path / "pip.log"
    logging_venv(tree, log)
    (tree / "pyproject.toml").write_text("[project]\nname = 'x'\n", "utf-8")

    assert bootstrap(tree, str(folder)).returncode == 0
    assert installs(log) == ["-m pip install -q --upgrade pip", "-m pip install -q -e ."]
    again = bootstrap(tree, str(folder))
    assert again.returncode == 0 and installs(log) == []
    assert "pyproject.toml 与上次安装时相同：跳过 pip install（删除 .venv/.bootstrap-stamp 可强制重装）。" in again.stdout.splitlines()

    assert bootstrap(tree, str(folder), "--test").returncode == 0  # the test extras are new
    assert installs(log)[-1] == "-m pip install -q -e .[test,build]"
    assert bootstrap(tree, str(folder)).returncode == 0  # and hold what a plain install needs
    assert installs(log) == []

    (tree / "pyproject.toml").write_text("[project]\nname = 'x'\nversion = '2'\n", "utf-8")
    assert bootstrap(tree, str(folder), "--test").returncode == 0
    assert installs(log)[-1] == "-m pip install -q -e .[test,build]"


def test_npm_ci_runs_again_only_for_a_changed_lock_file(tree: Path, tmp_path: Path) -> None:
    folder = only(tmp_path, "id", "mkdir")
    real_python(folder / "python3.12")
    log = tmp_path / "npm.log"
    logging_venv(tree, tmp_path / "pip.log")
    (tree / "pyproject.toml").write_text("[project]\nname = 'x'\n", "utf-8")
    # npm ci empties node_modules and fills it again.
    (folder / "npm").write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nrm -rf "$3/node_modules" && mkdir -p "$3/node_modules"\n', "utf-8")
    (folder / "npm").chmod(0o755)
    lock = tree / "tests" / "citeproc" / "package-lock.json"
    lock.parent.mkdir(parents=True)
    lock.write_text('{"lockfileVersion": 3}', "utf-8")

    assert bootstrap(tree, str(folder), "--test").returncode == 0
    assert installs(log) == ["ci --prefix tests/citeproc --no-audit --no-fund --loglevel=error"]
    again = bootstrap(tree, str(folder), "--test")
    assert again.returncode == 0 and installs(log) == []
    assert "tests/citeproc/package-lock.json 与上次安装时相同：跳过 npm ci。" in again.stdout.splitlines()
    lock.write_text('{"lockfileVersion": 3, "packages": {}}', "utf-8")
    assert bootstrap(tree, str(folder), "--test").returncode == 0
    assert len(installs(log)) == 1


# --- cnki-mcp on PATH, and the script's language --------------------------------------------------------


HAN = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture
def installed(tree: Path, tmp_path: Path) -> Path:
    """A tree whose pip (fake) prints an English notice, with a .venv/bin/cnki-mcp that prints its arguments."""
    python = tree / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\n[ "$1 $2" = "-m pip" ] && {{ echo "DEPRECATION: an English notice" >&2; exit 0; }}\n'
                      f'exec "{sys.executable}" "$@"\n', "utf-8")
    python.chmod(0o755)
    binary = tree / ".venv" / "bin" / "cnki-mcp"
    binary.write_text('#!/bin/sh\necho "cnki-mcp $*"\n', "utf-8")
    binary.chmod(0o755)
    (tree / "pyproject.toml").write_text("[project]\nname = 'x'\n", "utf-8")
    (tmp_path / "home").mkdir()
    return tree


def linking(tree: Path, tmp_path: Path, *args: str, on_path: str = ".local/bin", **env: str) -> subprocess.CompletedProcess[str]:
    """bootstrap.sh in a throwaway HOME whose ``on_path`` folder is on PATH (none when "")."""
    folder = tmp_path / "only"
    if not folder.exists():
        real_python(only(tmp_path, "id", "mkdir", "ln", "readlink") / "python3.12")
    home = tmp_path / "home"
    path = f"{folder}:{home / on_path}" if on_path else str(folder)
    return bootstrap(tree, path, *args, HOME=str(home), SHELL="/bin/zsh", **{"CNKI_LANG": "", "LANG": "C.UTF-8", **env})


def test_cnki_mcp_is_linked_into_local_bin_and_the_last_line_names_it(installed: Path, tmp_path: Path) -> None:
    done = linking(installed, tmp_path)
    link = tmp_path / "home" / ".local" / "bin" / "cnki-mcp"
    assert done.returncode == 0, done.stderr
    assert link.is_symlink() and os.readlink(link) == str(installed / ".venv" / "bin" / "cnki-mcp")
    assert done.stdout.splitlines()[-1] == "完成。下一步：cnki-mcp setup"
    again = linking(installed, tmp_path)  # already there: nothing said, the same next step
    assert again.stdout.splitlines()[-1] == "完成。下一步：cnki-mcp setup" and os.readlink(link) == str(installed / ".venv" / "bin" / "cnki-mcp")


def test_home_bin_serves_when_it_is_the_folder_on_path(installed: Path, tmp_path: Path) -> None:
    done = linking(installed, tmp_path, on_path="bin")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "home" / "bin" / "cnki-mcp").is_symlink()
    assert not (tmp_path / "home" / ".local" / "bin").exists()


def test_a_file_already_there_is_left_alone(installed: Path, tmp_path: Path) -> None:
    mine = tmp_path / "home" / ".local" / "bin" / "cnki-mcp"
    mine.parent.mkdir(parents=True)
    mine.write_text("#!/bin/sh\necho mine\n", "utf-8")
    done = linking(installed, tmp_path, "--link")
    assert done.returncode == 0, done.stderr
    assert not mine.is_symlink() and mine.read_text("utf-8") == "#!/bin/sh\necho mine\n"
    assert f"{mine} 已存在，不是指向本仓库的链接：不覆盖它（请用 .venv/bin/cnki-mcp）。" in done.stdout.splitlines()
    assert done.stdout.splitlines()[-1] == "完成。下一步：.venv/bin/cnki-mcp setup"


def test_a_dangling_link_to_a_moved_checkout_is_renewed(installed: Path, tmp_path: Path) -> None:
    link = tmp_path / "home" / ".local" / "bin" / "cnki-mcp"
    link.parent.mkdir(parents=True)
    link.symlink_to(tmp_path / "gone" / ".venv" / "bin" / "cnki-mcp")
    assert linking(installed, tmp_path).returncode == 0
    assert os.readlink(link) == str(installed / ".venv" / "bin" / "cnki-mcp")


def test_no_link_links_nothing(installed: Path, tmp_path: Path) -> None:
    done = linking(installed, tmp_path, "--no-link")
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "home" / ".local" / "bin").exists()
    assert done.stdout.splitlines()[-1] == "完成。下一步：.venv/bin/cnki-mcp setup"


def test_without_a_user_bin_on_path_the_line_to_add_it_is_shown(installed: Path, tmp_path: Path) -> None:
    done = linking(installed, tmp_path, on_path="")
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "home" / ".local" / "bin").exists()
    assert """  echo 'export PATH="$HOME/.local/bin:$PATH"' >> ~/.zshrc""" in lines
    assert lines[-1] == "完成。下一步：.venv/bin/cnki-mcp setup"


def test_setup_runs_the_venvs_own_binary_with_its_arguments(installed: Path, tmp_path: Path) -> None:
    done = linking(installed, tmp_path, "--no-link", "--setup", "--client", "claude-code")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == ["完成。现在运行 .venv/bin/cnki-mcp setup ……", "cnki-mcp setup --client claude-code"]


def test_an_unknown_option_is_refused(installed: Path, tmp_path: Path) -> None:
    done = linking(installed, tmp_path, "--frobnicate")
    assert done.returncode == 2
    assert done.stderr.startswith("错误：不认识的参数 --frobnicate。")


def test_pip_notices_stay_in_the_log_and_every_line_is_chinese(installed: Path, tmp_path: Path) -> None:
    done = linking(installed, tmp_path, "--no-link")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert all(HAN.search(line) for line in done.stdout.splitlines()), done.stdout
    assert "DEPRECATION: an English notice" in (installed / ".venv" / "bootstrap-pip.log").read_text("utf-8")


@pytest.mark.parametrize("env", [{"CNKI_LANG": "en"}, {"CNKI_LANG": "", "LANG": "en_US.UTF-8"}])
def test_english_when_asked_the_way_the_cli_is(installed: Path, tmp_path: Path, env: dict[str, str]) -> None:
    done = linking(installed, tmp_path, **env)
    assert done.returncode == 0, done.stderr
    assert not any(HAN.search(line) for line in done.stdout.splitlines()), done.stdout
    assert done.stdout.splitlines()[-1] == "Done. Next: cnki-mcp setup"


def test_cnki_lang_outranks_an_english_locale(installed: Path, tmp_path: Path) -> None:
    done = linking(installed, tmp_path, "--no-link", CNKI_LANG="zh", LANG="en_US.UTF-8")
    assert done.stdout.splitlines()[-1] == "完成。下一步：.venv/bin/cnki-mcp setup"


@pytest.mark.parametrize(("env", "english"), [({"CNKI_LANG": ""}, False), ({"CNKI_LANG": "en"}, True)])
def test_what_the_test_setup_cannot_install_is_said_in_one_language(installed: Path, tmp_path: Path, env: dict[str, str],
                                                                    english: bool) -> None:
    """No chromium, no Chinese font, no npm and no apt-get: three notes, each in the script's language."""
    done = linking(installed, tmp_path, "--test", **env)
    notes = done.stderr.splitlines()
    assert done.returncode == 0, done.stderr
    assert len(notes) == 3 and all(bool(HAN.search(note)) is not english for note in notes), notes
    assert "fonts-wqy-microhei" in notes[1]
    assert not (tmp_path / "home" / ".local" / "bin").exists()  # --test links nothing


def test_no_python_in_english(tree: Path, tmp_path: Path) -> None:
    folder = only(tmp_path)
    fake_python(folder / "python3")
    done = bootstrap(tree, str(folder), "--venv-only", CNKI_LANG="en")
    assert done.returncode == 1
    assert done.stderr.splitlines()[0] == "error: cnki-mcp needs Python 3.11 or newer (found python3 3.10)."
    assert not HAN.search(done.stderr)


# --- scripts/test.sh -----------------------------------------------------------------------------------


@pytest.fixture
def test_tree(tmp_path: Path) -> Path:
    """scripts/test.sh beside a bootstrap that does nothing and a .venv Python that prints its arguments and
    exits with $PYTEST_EXIT."""
    (tmp_path / "scripts").mkdir()
    for script in ("test.sh", "language.sh"):
        shutil.copy(REPO / "scripts" / script, tmp_path / "scripts" / script)
    (tmp_path / "scripts" / "bootstrap.sh").write_text("exit 0\n", "utf-8")
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\nexit "${PYTEST_EXIT:-0}"\n', "utf-8")
    python.chmod(0o755)
    return tmp_path


def run_tests(tree: Path, *args: str, exit_code: int = 0, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["/bin/bash", str(tree / "scripts" / "test.sh"), *args], capture_output=True, text=True,
                          env={**os.environ, "PYTEST_EXIT": str(exit_code), **env}, timeout=60)


def test_the_whole_suite_and_the_fast_loop_pass_their_arguments_to_pytest(test_tree: Path) -> None:
    whole = run_tests(test_tree, "tests/test_jobs.py")
    fast = run_tests(test_tree, "--fast", "-x")
    assert whole.returncode == fast.returncode == 0
    parallel = ["-n", "logical", "--maxprocesses=4", "--dist", "loadfile"]
    assert whole.stdout.splitlines() == ["-m", "pytest", "-q", "-p", "no:cacheprovider", *parallel, "tests/test_jobs.py"]
    assert fast.stdout.splitlines() == [
        "-m", "pytest", "-q", "-p", "no:cacheprovider", *parallel,
        "-m", "not e2e and not browser and not slow and not packaging", "-x",
    ]


def test_the_fast_loop_leaves_out_only_declared_markers() -> None:
    markers = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["tool"]["pytest"]["ini_options"]["markers"]
    left_out = fast_left_out()
    assert left_out == {"e2e", "browser", "slow", "packaging"}
    assert left_out <= {marker.split(":")[0] for marker in markers}


@pytest.mark.parametrize(("args", "said"), [(("--fast", "tests/test_e2e_store.py"), True), (("tests/none.py",), False)])
def test_nothing_selected_is_exit_5_and_the_fast_loop_says_why(test_tree: Path, args: tuple[str, ...], said: bool) -> None:
    done = run_tests(test_tree, *args, exit_code=5)
    assert done.returncode == 5
    assert ("没有测试被选中：--fast 不运行 e2e、browser、slow 和 packaging 测试；去掉 --fast 即可运行它们。" in done.stderr) is said


def test_the_fast_loops_reason_speaks_english_with_cnki_lang_en(test_tree: Path) -> None:
    done = run_tests(test_tree, "--fast", "tests/test_e2e_store.py", exit_code=5, CNKI_LANG="en")
    assert done.stderr.splitlines()[-1] == (
        "No test was selected: --fast leaves out the e2e, browser, slow and packaging tests; drop --fast to run them."
    )


def test_a_failing_run_keeps_its_exit_code(test_tree: Path) -> None:
    assert run_tests(test_tree, "--fast", exit_code=1).returncode == 1


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
        "bash scripts/bootstrap.sh --setup",
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


@pytest.mark.parametrize("readme", ["README.md", "README.en.md"])
def test_the_readme_gives_the_one_line_installs_from_the_repository(readme: str) -> None:
    text = (REPO / readme).read_text("utf-8")
    commands = [line for block in _fenced_blocks(text) for line in block]
    assert "pipx install git+https://github.com/cnki-mcp/cnki-mcp && cnki-mcp setup" in commands
    assert any(line.startswith("uvx --from git+https://github.com/cnki-mcp/cnki-mcp cnki-mcp setup") for line in commands)
    assert 'claude mcp add -s user cnki -- "$(command -v cnki-mcp)"' in commands


def test_the_commands_pages_show_are_cnki_mcp_not_the_venv_path() -> None:
    """One way of writing the command in every code block: `cnki-mcp …` (bootstrap links it onto PATH; the text
    says once to read it as `.venv/bin/cnki-mcp` without the link)."""
    pages = [REPO / "README.md", REPO / "README.en.md", *sorted((REPO / "docs").glob("*.md"))]
    shown = [(page.name, line) for page in pages for block in _fenced_blocks(page.read_text("utf-8")) for line in block
             if ".venv/bin/cnki-mcp" in line or ".venv\\Scripts\\cnki-mcp" in line]
    assert shown == []
