"""`setup`, `config` and `help`, driven through click as a user would run them, in a temp HOME."""

from __future__ import annotations

import json
import stat
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
from click.testing import CliRunner, Result

from cnki_mcp import clients, discovery, setup
from cnki_mcp.errors import CnkiError

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="fake browsers are shell scripts")
OVERRIDES = ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "KIMI_CODE_HOME", "DSH_HOME", "CNKI_BROWSER_PATH", "XDG_CONFIG_HOME")


def fake_exe(path: Path, body: str = 'echo "Chromium 123.0.6312.58"') -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n", "utf-8")
    path.chmod(0o755)
    return path


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user with no client configs and one fake Chromium on PATH."""
    user = tmp_path / "home"
    user.mkdir()
    monkeypatch.setenv("HOME", str(user))
    monkeypatch.setenv("USERPROFILE", str(user))
    for name in OVERRIDES:
        monkeypatch.delenv(name, raising=False)
    fake_exe(tmp_path / "bin" / "chromium")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    monkeypatch.setattr(discovery, "FLATPAK_SYSTEM_EXPORTS", tmp_path / "no-flatpak")
    return user


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Skip the real headless launch in flow tests; record which browser would have been checked."""
    calls: list[Path] = []
    monkeypatch.setattr(setup, "check_browser", calls.append)
    return calls


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    links: list[str] = []
    monkeypatch.setattr(setup, "open_link", links.append)
    return links


def run(args: list[str], stdin: str | None = None) -> Result:
    return CliRunner().invoke(setup.setup_command, args, input=stdin)


def read_config(root: Path) -> dict:
    return json.loads((root / "config.json").read_text("utf-8"))


# --- help and config ---------------------------------------------------------------------------------


def test_help_lists_every_client_in_registry_order() -> None:
    lines = setup.help_text().splitlines()
    assert "setup" in lines[0] and "config <客户端>" in lines[0] and "doctor [--protocol]" in lines[0]
    assert lines[1] == "" and "--browser" in lines[2] and "--install-client" in lines[2]
    client_lines = lines[5:]
    assert [line.split()[0] for line in client_lines] == [c.id for c in clients.CLIENTS]
    assert client_lines[0] == "  claude-desktop   Claude Desktop"
    assert client_lines[-1] == "  generic          其他 stdio 客户端（通用 JSON）"


def test_config_prints_the_snippet(isolated_data_dir: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(setup.config_command, [])
    assert result.exit_code == 0 and result.stdout == clients.snippet("generic", isolated_data_dir)
    result = runner.invoke(setup.config_command, ["codex", "ignored", "--extra"])
    assert result.exit_code == 0 and result.stdout == clients.snippet("codex", isolated_data_dir)
    entry = json.loads(runner.invoke(setup.config_command, ["cursor"]).stdout)["mcpServers"]["cnki"]
    assert [entry["command"], *entry["args"]] == clients.server_command()
    assert entry["env"] == {"CNKI_DATA_DIR": str(isolated_data_dir)}


def test_config_unknown_client_fails_with_one_line() -> None:
    result = CliRunner().invoke(setup.config_command, ["notepad"])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("UNKNOWN_CLIENT: ") and result.stderr.count("\n") == 1


# --- non-interactive setup -------------------------------------------------------------------------


@posix_only
def test_setup_writes_config_snippet_and_client(
    home: Path, isolated_data_dir: Path, tmp_path: Path, checked: list[Path]
) -> None:
    browser = fake_exe(tmp_path / "opt" / "chrome")
    existing = home / ".cursor" / "mcp.json"
    existing.parent.mkdir()
    existing.write_text('{\n  // mine\n  "mcpServers": {"other": {"command": "x"}}\n}\n', "utf-8")
    result = run(["--browser", str(browser), "--client", "cursor", "--install-client", "--skip-check"])
    assert result.exit_code == 0, result.output
    assert checked == [browser]
    assert read_config(isolated_data_dir) == {"browser_path": str(browser)}
    snippet_file = isolated_data_dir / "cnki-cursor.json"
    assert snippet_file.read_text("utf-8") == clients.snippet("cursor", isolated_data_dir)
    assert stat.S_IMODE(snippet_file.stat().st_mode) == 0o600
    merged = clients.parse_jsonc(existing.read_text("utf-8"))["mcpServers"]
    assert merged["other"] == {"command": "x"} and merged["cnki"] == clients.entry("cursor", isolated_data_dir)
    assert "// mine" in existing.read_text("utf-8")
    assert len(list(existing.parent.glob("mcp.json.cnki-backup-*"))) == 1
    assert f"已更新客户端配置：{existing}" in result.stdout
    assert "Chromium 123.0.6312.58" in result.stdout


@posix_only
@pytest.mark.parametrize(("client_id", "name"), [("codex", "cnki-codex.toml"), ("dsh-web", "cnki-dsh-web.yaml")])
def test_snippet_file_extension(client_id: str, name: str, home: Path, isolated_data_dir: Path, checked: list[Path]) -> None:
    result = run(["--client", client_id, "--skip-check"])
    assert result.exit_code == 0, result.output
    assert (isolated_data_dir / name).read_text("utf-8") == clients.snippet(client_id, isolated_data_dir)
    assert not (home / ".codex").exists()  # nothing written without --install-client
    # Without --browser the first browser found is taken.
    assert read_config(isolated_data_dir) == {"browser_path": str(home.parent / "bin" / "chromium")}


@posix_only
def test_link_client_opens_only_when_asked(home: Path, checked: list[Path], opened: list[str]) -> None:
    result = run(["--client", "trae", "--skip-check"])
    assert result.exit_code == 0 and opened == []
    assert "trae://trae.ai-ide/mcp-import?" in result.stdout and "Trae 设置 → MCP" in result.stdout
    result = run(["--client", "trae", "--install-client", "--skip-check"])
    assert result.exit_code == 0, result.output
    assert len(opened) == 1 and opened[0].startswith("trae://")


@posix_only
@pytest.mark.parametrize("args", [["--client", "vscode", "--install-client"], ["--install-client"]])
def test_paste_client_cannot_be_installed(
    args: list[str], home: Path, isolated_data_dir: Path, checked: list[Path]
) -> None:
    result = run([*args, "--skip-check"])
    assert result.exit_code == 1
    assert result.stderr.startswith("CLIENT_IMPORT_REQUIRED: ") and result.stderr.count("\n") == 1
    # What was done before the failure stays done.
    assert (isolated_data_dir / "config.json").exists()
    assert len(list(isolated_data_dir.glob("cnki-*.json"))) == 1
    assert "也可以把上面的配置粘贴到：" in result.stdout


@posix_only
def test_dsh_needs_its_profile_folder(home: Path, checked: list[Path]) -> None:
    result = run(["--client", "dsh-desktop", "--install-client", "--skip-check"])
    assert result.exit_code == 1
    assert result.stderr.startswith("CLIENT_NOT_INITIALIZED: ") and "先运行一次 DeepSeek Harness 桌面版" in result.stderr
    profile = home / ".dsh" / "profiles" / "desktop"
    assert not profile.exists()
    profile.mkdir(parents=True)
    (profile / "cordis.patch.yml").write_text("[]\n", "utf-8")
    result = run(["--client", "dsh-desktop", "--install-client", "--skip-check"])
    assert result.exit_code == 0, result.output
    assert "id: mcp-cnki" in (profile / "cordis.patch.yml").read_text("utf-8")


@posix_only
def test_unknown_client_after_browser_saved(home: Path, isolated_data_dir: Path, checked: list[Path]) -> None:
    result = run(["--client", "notepad", "--skip-check"])
    assert result.exit_code == 1 and result.stderr.startswith("UNKNOWN_CLIENT: ")
    assert (isolated_data_dir / "config.json").exists()


@posix_only
def test_browser_problems(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, checked: list[Path]) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    result = run(["--client", "generic", "--skip-check"])
    assert result.exit_code == 1 and result.stderr.startswith("BROWSER_NOT_FOUND: ") and "--browser" in result.stderr
    result = run(["--browser", str(tmp_path), "--skip-check"])
    assert result.exit_code == 1 and "是文件夹" in result.stderr
    assert checked == []


# --- interactive setup -----------------------------------------------------------------------------


@posix_only
def test_interactive_defaults_and_write(home: Path, isolated_data_dir: Path, checked: list[Path]) -> None:
    result = run(["--skip-check"], stdin="\n4\n\n")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "  1. " + str(home.parent / "bin" / "chromium") in out
    assert " 4. Cursor" in out and "27. 其他 stdio 客户端（通用 JSON）" in out
    assert "14. Qoder IDE" in out and "一键导入链接" in out
    assert f"写入 {home / '.cursor' / 'mcp.json'} 并备份原文件？[Y/n]" in out
    assert json.loads((home / ".cursor" / "mcp.json").read_text("utf-8"))["mcpServers"]["cnki"]["type"] == "stdio"


@posix_only
def test_interactive_end_of_input_takes_every_default(home: Path, isolated_data_dir: Path, checked: list[Path]) -> None:
    result = run(["--skip-check"], stdin="")
    assert result.exit_code == 0, result.output
    assert (isolated_data_dir / "cnki-generic.json").exists()
    assert "也可以把上面的配置粘贴到：客户端的 MCP 设置" in result.stdout


@posix_only
def test_interactive_retries_bad_answers(
    home: Path, tmp_path: Path, isolated_data_dir: Path, checked: list[Path], opened: list[str]
) -> None:
    custom = fake_exe(tmp_path / "custom" / "edge", 'echo "Microsoft Edge 131.0.2903.70"')
    answers = [f"{tmp_path / 'missing'}", f'"{custom}"', "99", "nonsense", "codex", "n"]
    result = run(["--skip-check"], stdin="\n".join(answers) + "\n")
    assert result.exit_code == 0, result.output
    assert "不存在" in result.stdout and "没有这个选项：99" in result.stdout and "没有这个选项：nonsense" in result.stdout
    assert checked == [custom] and read_config(isolated_data_dir) == {"browser_path": str(custom)}
    assert (isolated_data_dir / "cnki-codex.toml").exists() and not (home / ".codex").exists()


@posix_only
def test_interactive_link_client_asks_before_opening(home: Path, checked: list[Path], opened: list[str]) -> None:
    result = run(["--skip-check"], stdin="1\n21\nn\n")
    assert result.exit_code == 0, result.output
    assert "cherrystudio://mcp/install?servers=" in result.stdout and "现在打开这个链接吗？" in result.stdout
    assert opened == []
    result = run(["--skip-check"], stdin="1\ncherry-studio\n\n")
    assert len(opened) == 1


# --- the headless browser check ---------------------------------------------------------------------


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@posix_only
def test_check_reports_a_browser_that_exits(tmp_path: Path, private_tmp: Path) -> None:
    exe = fake_exe(tmp_path / "crashy", 'echo "cannot open display" >&2; exit 7')
    with pytest.raises(CnkiError) as caught:
        setup.check_browser(exe, timeout=10)
    assert caught.value.code == "BROWSER_CHECK_FAILED"
    assert "退出码 7" in caught.value.message and "cannot open display" in caught.value.message
    assert list(private_tmp.iterdir()) == []


@posix_only
def test_check_times_out_and_stops_the_process_tree(tmp_path: Path, private_tmp: Path) -> None:
    pid_file = tmp_path / "pids"
    exe = fake_exe(tmp_path / "hangs", f'sleep 30 & echo $! > {pid_file}; wait')
    started = time.monotonic()
    with pytest.raises(CnkiError) as caught:
        setup.check_browser(exe, timeout=1)
    assert time.monotonic() - started < 10
    assert "1 秒内没有打开空白页" in caught.value.message
    child = int(pid_file.read_text().strip())
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE
    assert list(private_tmp.iterdir()) == []


@pytest.mark.browser
def test_check_real_chromium_leaves_nothing_behind(chromium: str, private_tmp: Path) -> None:
    before = {p.pid for p in psutil.process_iter()}
    setup.check_browser(Path(chromium))
    assert list(private_tmp.iterdir()) == []
    leftovers = [
        p for p in psutil.process_iter(["pid", "cmdline"])
        if p.pid not in before and any("cnki-browser-check-" in part for part in (p.info["cmdline"] or []))
    ]
    assert leftovers == []


@pytest.mark.browser
def test_setup_end_to_end_with_real_chromium_and_protocol_check(
    chromium: str, home: Path, isolated_data_dir: Path
) -> None:
    result = run(["--browser", chromium, "--client", "codex", "--install-client"])
    assert result.exit_code == 0, result.output
    assert "浏览器检查通过" in result.stdout and "安装检查通过" in result.stdout
    written = (home / ".codex" / "config.toml").read_text("utf-8")
    assert written == clients.snippet("codex", isolated_data_dir)
    assert read_config(isolated_data_dir) == {"browser_path": chromium}
