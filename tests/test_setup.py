"""`setup`, `config` and `help`, driven through click as a user would run them, in a temp HOME."""

from __future__ import annotations

import json
import stat
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import psutil
import pytest
from click.testing import CliRunner, Result

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.setup import clients, launcher
from cnki_mcp.setup import wizard as setup
from cnki_mcp.site import discovery
from tests.terminal import typed

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="fake browsers are shell scripts")
OVERRIDES = ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "KIMI_CODE_HOME", "DSH_HOME", "CNKI_BROWSER_PATH", "XDG_CONFIG_HOME")


def fake_exe(path: Path, body: str = 'echo "Chromium 123.0.6312.58"') -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n", "utf-8")
    path.chmod(0o755)
    return path


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user at a desktop (a screen, so setup does not ask about CNKI_HEADLESS) with no client configs and one
    fake Chromium on PATH."""
    user = tmp_path / "home"
    user.mkdir()
    monkeypatch.setenv("DISPLAY", ":0")
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
    """Setup as a user runs it; ``stdin``: answers typed on a terminal (setup asks only on one)."""
    if stdin is None:
        return CliRunner().invoke(setup.setup_command, args)
    with typed(stdin) as terminal:
        return CliRunner().invoke(setup.setup_command, args, input=terminal)


def read_config(root: Path) -> dict:
    return json.loads((root / "config.json").read_text("utf-8"))


# --- help and config ---------------------------------------------------------------------------------


def test_help_lists_every_client_in_registry_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    lines = setup.help_text().splitlines()
    assert lines[:11] == [
        "用法：",
        "  cnki-mcp serve [--http [--host <地址>] [--port <端口>]]",
        "  cnki-mcp setup [--browser <浏览器路径>] [--client <客户端>]... [--install-client] [--headless | --no-headless]",
        "        [--http [--host <地址>] [--port <端口>]] [--remote-access <网址>] [--site auto|mainland|oversea]",
        "  cnki-mcp config [<客户端>] [--http [--host <地址>] [--port <端口>]] [--link] [--rotate-token]",
        "  cnki-mcp doctor [--protocol] [--json] [--site] [--report]",
        "  cnki-mcp store --dump <文件.json> | --check",
        "  cnki-mcp uninstall [--data] [--yes]",
        "  cnki-mcp watch run [<名称>...]",
        "  cnki-mcp schema | version | --version | help | <命令> --help",
        "",
    ]
    assert lines[11] == "可选客户端："
    client_lines = lines[12:]
    assert [line.split()[0] for line in client_lines] == [c.id for c in clients.CLIENTS]
    assert client_lines[0] == "  claude-desktop   Claude Desktop（这台电脑的系统上没有）"
    assert client_lines[1] == "  claude-code      Claude Code"
    assert client_lines[-1] == "  generic          其他 stdio 客户端（通用 JSON）"


def test_config_prints_the_snippet(isolated_data_dir: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(setup.config_command, [])
    assert result.exit_code == 0 and result.stdout == clients.snippet("generic", isolated_data_dir)
    result = runner.invoke(setup.config_command, ["codex"])
    assert result.exit_code == 0 and result.stdout == clients.snippet("codex", isolated_data_dir)
    entry = json.loads(runner.invoke(setup.config_command, ["cursor"]).stdout)["mcpServers"]["cnki"]
    assert [entry["command"], *entry["args"]] == launcher.server_command()
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
def test_paste_client_cannot_be_installed(home: Path, isolated_data_dir: Path, checked: list[Path]) -> None:
    result = run(["--client", "lobehub", "--install-client", "--skip-check"])
    assert result.exit_code == 1
    assert result.stderr.startswith("CLIENT_IMPORT_REQUIRED: ")
    assert result.stderr.count("\n") == 1
    assert "LobeHub 插件设置" in result.stderr
    # What was done before the failure stays done, and the last line says so.
    assert (isolated_data_dir / "config.json").exists()
    assert len(list(isolated_data_dir.glob("cnki-*.json"))) == 1
    assert result.stdout.splitlines()[-1].startswith("本次改动：写入了 浏览器设置 ")
    assert result.stdout.splitlines()[-1].endswith("没有改动任何客户端的配置文件。")


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
    result = run(["--skip-check"], stdin="\n3\n\n")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "  1. " + str(home.parent / "bin" / "chromium") in out
    # Claude Desktop has no Linux build: the Linux menu has the other 26.
    assert " 1. Claude Code" in out and "Claude Desktop" not in out
    assert " 3. Cursor" in out and "26. 其他 stdio 客户端（通用 JSON）" in out
    assert "13. Qoder IDE" in out and "一键导入链接" in out
    assert f"写入 {home / '.cursor' / 'mcp.json'} 并备份原文件？[Y/n]" in out
    assert json.loads((home / ".cursor" / "mcp.json").read_text("utf-8"))["mcpServers"]["cnki"]["type"] == "stdio"


@posix_only
def test_interactive_end_of_input_takes_every_default(home: Path, isolated_data_dir: Path, checked: list[Path]) -> None:
    result = run(["--skip-check"], stdin="")
    assert result.exit_code == 0, result.output
    assert (isolated_data_dir / "cnki-generic.json").exists()
    assert "未写入 其他 stdio 客户端（通用 JSON） 的配置（它需要手动粘贴）：请把上面的配置片段粘贴到：客户端的 MCP 设置" in (
        result.stdout
    )


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
    result = run(["--skip-check"], stdin="1\n20\nn\n")
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


# --- checked before anything happens ------------------------------------------------------------------


def _nothing_under(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


@posix_only
def test_unknown_client_is_refused_before_anything_starts(
    home: Path, isolated_data_dir: Path, tmp_path: Path, checked: list[Path]
) -> None:
    browser = fake_exe(tmp_path / "opt" / "chrome")
    result = run(["--browser", str(browser), "--client", "gemni", "--install-client"])
    assert result.exit_code == 1
    assert result.stderr.startswith("UNKNOWN_CLIENT: ")
    assert "是不是 gemini？" in result.stderr
    assert "claude-desktop、claude-code" in result.stderr
    assert checked == []
    assert not isolated_data_dir.exists()
    assert _nothing_under(home) == []
    assert result.stdout.splitlines()[-1] == "本次没有改动任何文件。"


@posix_only
def test_install_client_alone_asks_for_a_client(home: Path, isolated_data_dir: Path, checked: list[Path]) -> None:
    result = run(["--install-client", "--skip-check"])
    assert result.exit_code == 1
    assert result.stderr.startswith("CLIENT_REQUIRED: ")
    assert "--client" in result.stderr
    assert checked == []
    assert not isolated_data_dir.exists()


@posix_only
def test_aliases_are_accepted(home: Path, isolated_data_dir: Path, checked: list[Path]) -> None:
    result = run(["--client", "gemini-cli", "--install-client", "--skip-check"])
    assert result.exit_code == 0, result.output
    written = json.loads((home / ".gemini" / "settings.json").read_text("utf-8"))
    assert written["mcpServers"]["cnki"] == clients.entry("gemini", isolated_data_dir)


def test_config_rejects_unknown_options() -> None:
    result = CliRunner().invoke(setup.config_command, ["codex", "--extra"])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith("INVALID_ARGUMENT: ")
    assert "--extra" in result.stderr


@posix_only
def test_config_says_where_the_snippet_belongs(home: Path, isolated_data_dir: Path) -> None:
    result = CliRunner().invoke(setup.config_command, ["cursor"])
    assert result.stdout == clients.snippet("cursor", isolated_data_dir)
    assert f"合并到 {home / '.cursor' / 'mcp.json'}" in result.stderr
    assert "--client cursor --install-client" in result.stderr


def test_config_for_a_paste_client_says_where_to_paste() -> None:
    result = CliRunner().invoke(setup.config_command, ["lobehub"])
    assert "粘贴到：LobeHub 插件设置" in result.stderr


# --- no false success ---------------------------------------------------------------------------------


@pytest.fixture
def probed(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """A protocol check that passes without starting a server child."""
    from cnki_mcp.surface import server

    calls: list[list[str]] = []

    async def fake_probe(command: list[str]) -> dict[str, object]:
        calls.append(command)
        return {"passed": True, "tools": 13}

    monkeypatch.setattr(server, "protocol_probe", fake_probe)
    return calls


@posix_only
def test_setup_without_install_client_writes_nothing_and_says_so(
    home: Path, isolated_data_dir: Path, checked: list[Path], probed: list[list[str]]
) -> None:
    result = run(["--client", "cursor"])
    lines = result.stdout.splitlines()
    assert result.exit_code == 0, result.output
    assert not (home / ".cursor").exists()
    assert "安装检查通过" not in result.stdout
    assert "请重启" not in result.stdout
    assert f"未写入 Cursor 的配置：请把上面的配置片段合并到 {home / '.cursor' / 'mcp.json'}" in result.stdout
    assert "MCP 通信检查通过：共 13 个 MCP 工具；Cursor 还没有接入" in result.stdout
    assert lines[-1].endswith("没有改动任何客户端的配置文件。")
    assert str(isolated_data_dir / "config.json") in lines[-1]


@posix_only
def test_answering_no_writes_nothing_and_says_so(
    home: Path, isolated_data_dir: Path, checked: list[Path], probed: list[list[str]]
) -> None:
    result = run([], stdin="\n3\nn\n")
    assert result.exit_code == 0, result.output
    assert not (home / ".cursor" / "mcp.json").exists()
    assert "安装检查通过" not in result.stdout
    assert "未写入 Cursor 的配置" in result.stdout
    assert result.stdout.splitlines()[-1].endswith("没有改动任何客户端的配置文件。")


@posix_only
def test_written_client_gets_the_success_line_and_the_summary_names_the_backup(
    home: Path, isolated_data_dir: Path, checked: list[Path], probed: list[list[str]]
) -> None:
    target = home / ".cursor" / "mcp.json"
    target.parent.mkdir()
    target.write_text('{"mcpServers": {}}\n', "utf-8")
    result = run(["--client", "cursor", "--install-client"])
    (backup,) = target.parent.glob("mcp.json.cnki-backup-*")
    last = result.stdout.splitlines()[-1]
    assert result.exit_code == 0, result.output
    assert "安装检查通过：共 13 个 MCP 工具。请重启或重新连接 Cursor。" in result.stdout
    assert f"Cursor 的配置 {target}（原文件备份为 {backup}）" in last
    assert "没有改动任何客户端" not in last


@posix_only
def test_link_client_not_opened_is_not_a_success(
    home: Path, checked: list[Path], opened: list[str], probed: list[list[str]]
) -> None:
    result = run(["--client", "trae"])
    assert result.exit_code == 0, result.output
    assert opened == []
    assert "未打开导入链接，Trae 的配置未写入" in result.stdout
    assert "安装检查通过" not in result.stdout


def test_banner_names_the_product_and_what_a_source_install_needs() -> None:
    assert setup.banner() == "cnki-mcp 安装设置（从源码或 pip 安装运行：需要 Python 3.11 或更新版本）"


def test_banner_of_the_frozen_program(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert "不需要安装 Python" in setup.banner()


# --- clients written directly now ---------------------------------------------------------------------


@posix_only
def test_vscode_user_mcp_json_is_written(home: Path, isolated_data_dir: Path, checked: list[Path]) -> None:
    user = home / ".config" / "Code" / "User"
    user.mkdir(parents=True)
    result = run(["--client", "vs-code", "--install-client", "--skip-check"])
    assert result.exit_code == 0, result.output
    assert json.loads((user / "mcp.json").read_text("utf-8"))["servers"]["cnki"]["type"] == "stdio"


@posix_only
def test_vscode_never_opened_is_explained(home: Path, isolated_data_dir: Path, checked: list[Path]) -> None:
    result = run(["--client", "vscode", "--install-client", "--skip-check"])
    assert result.exit_code == 1
    assert result.stderr.startswith("CLIENT_NOT_INITIALIZED: ")
    assert "先打开一次 VS Code" in result.stderr
    assert not (home / ".config").exists()


@posix_only
def test_windsurf_config_is_written(home: Path, isolated_data_dir: Path, checked: list[Path]) -> None:
    result = run(["--client", "windsurf", "--install-client", "--skip-check"])
    written = json.loads((home / ".codeium" / "windsurf" / "mcp_config.json").read_text("utf-8"))
    assert result.exit_code == 0, result.output
    assert written["mcpServers"]["cnki"] == clients.entry("windsurf", isolated_data_dir)


# --- the clients' own command lines -------------------------------------------------------------------


@pytest.fixture
def fake_claude(tmp_path: Path) -> Path:
    """A `claude` that records its arguments and adds the JSON it is given to ~/.claude.json."""
    log = tmp_path / "claude-args"
    fake_exe(tmp_path / "bin" / "claude", (
        f'for a in "$@"; do printf "%s\\n" "$a"; done > {log}\n'
        '[ "$1 $2 $3 $4 $5" = "mcp add-json --scope user cnki" ] || exit 2\n'
        'printf \'{"numStartups": 3, "mcpServers": {"cnki": %s}}\' "$6" > "$HOME/.claude.json"'
    ))
    return log


def _install_claude_code(home: Path, before: str, name: str = "claude-code") -> tuple[Result, dict]:
    """Setup for Claude Code over a ~/.claude.json holding ``before``; its output and the file after."""
    (home / ".claude.json").write_text(before, "utf-8")
    result = run(["--client", name, "--install-client", "--skip-check"])
    return result, json.loads((home / ".claude.json").read_text("utf-8"))


@posix_only
def test_claude_code_is_added_with_its_own_command(
    home: Path, isolated_data_dir: Path, checked: list[Path], fake_claude: Path
) -> None:
    result, written = _install_claude_code(home, '{"numStartups": 3}', "claude")
    args = fake_claude.read_text("utf-8").splitlines()
    assert result.exit_code == 0, result.output
    assert args[:5] == ["mcp", "add-json", "--scope", "user", "cnki"]
    assert json.loads(args[5]) == clients.entry("claude-code", isolated_data_dir)
    assert written["mcpServers"]["cnki"] == clients.entry("claude-code", isolated_data_dir)
    assert "（通过 claude mcp add-json --scope user）" in result.stdout
    assert len(list(home.glob(".claude.json.cnki-backup-*"))) == 1


@posix_only
def test_a_failing_client_command_falls_back_to_the_file_merge(
    home: Path, isolated_data_dir: Path, tmp_path: Path, checked: list[Path]
) -> None:
    fake_exe(tmp_path / "bin" / "claude", "echo broken >&2; exit 1")
    result, written = _install_claude_code(home, '{"numStartups": 3}')
    assert result.exit_code == 0, result.output
    assert written["mcpServers"]["cnki"] == clients.entry("claude-code", isolated_data_dir)
    assert written["numStartups"] == 3
    assert "通过" not in result.stdout.split("已更新客户端配置")[1].split("\n")[0]
    assert len(list(home.glob(".claude.json.cnki-backup-*"))) == 1


@posix_only
def test_an_existing_entry_is_merged_not_re_added(
    home: Path, isolated_data_dir: Path, checked: list[Path], fake_claude: Path
) -> None:
    result, written = _install_claude_code(home, '{"mcpServers": {"cnki": {"command": "/old", "args": []}}}')
    assert result.exit_code == 0, result.output
    assert not fake_claude.exists()
    assert written["mcpServers"]["cnki"]["command"] != "/old"


@posix_only
def test_codex_is_added_with_its_own_command_then_completed(
    home: Path, isolated_data_dir: Path, tmp_path: Path, checked: list[Path]
) -> None:
    log = tmp_path / "codex-args"
    fake_exe(tmp_path / "bin" / "codex", (
        f'for a in "$@"; do printf "%s\\n" "$a"; done > {log}\n'
        'mkdir -p "$HOME/.codex"\n'
        'printf \'[mcp_servers.cnki]\\ncommand = "%s"\\nargs = ["%s"]\\n\\n[mcp_servers.cnki.env]\\n%s\\n\' '
        '"$8" "$9" "$(echo "$4" | sed \'s/=\\(.*\\)/ = "\\1"/\')" > "$HOME/.codex/config.toml"'
    ))
    result = run(["--client", "codex", "--install-client", "--skip-check"])
    command = launcher.server_command()
    written = tomllib.loads((home / ".codex" / "config.toml").read_text("utf-8"))["mcp_servers"]["cnki"]
    assert result.exit_code == 0, result.output
    assert log.read_text("utf-8").splitlines() == [
        "mcp", "add", "--env", f"CNKI_DATA_DIR={isolated_data_dir}", "cnki", "--", *command,
    ]
    assert written["env"] == {"CNKI_DATA_DIR": str(isolated_data_dir)}
    assert written["tool_timeout_sec"] == 900
    assert "（通过 codex mcp add）" in result.stdout


# --- disabled entries and installed clients ------------------------------------------------------------


def _disabled_codex(home: Path, root: Path) -> Path:
    path = home / ".codex" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text(
        clients.snippet("codex", root).replace("[mcp_servers.cnki]\n", "[mcp_servers.cnki]\nenabled = false\n"), "utf-8"
    )
    return path


@posix_only
def test_disabled_entry_is_enabled_by_install_client(home: Path, isolated_data_dir: Path, checked: list[Path]) -> None:
    path = _disabled_codex(home, isolated_data_dir)
    result = run(["--client", "codex", "--install-client", "--skip-check"])
    assert result.exit_code == 0, result.output
    assert tomllib.loads(path.read_text("utf-8"))["mcp_servers"]["cnki"]["enabled"] is True
    assert "将重新启用 cnki 条目。" in result.stdout


@posix_only
def test_disabled_entry_stays_off_when_the_user_says_no(
    home: Path, isolated_data_dir: Path, checked: list[Path]
) -> None:
    path = _disabled_codex(home, isolated_data_dir)
    result = run(["--skip-check"], stdin="\ncodex\n\nn\n")
    assert result.exit_code == 0, result.output
    assert "已有的 cnki 条目被停用了，要重新启用吗？" in result.stdout
    assert tomllib.loads(path.read_text("utf-8"))["mcp_servers"]["cnki"]["enabled"] is False


@posix_only
def test_installed_clients_are_offered_first(home: Path, isolated_data_dir: Path, checked: list[Path]) -> None:
    (home / ".codex").mkdir()
    result = run(["--skip-check"], stdin="\n\n\n")
    assert result.exit_code == 0, result.output
    assert "   1. Codex（已安装）" in result.stdout
    assert "回车 = 1，Codex" in result.stdout
    assert (home / ".codex" / "config.toml").exists()


@posix_only
def test_several_installs_of_a_client_are_chosen_from(
    home: Path, isolated_data_dir: Path, tmp_path: Path, checked: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "one" / "mcp.json", tmp_path / "two" / "mcp.json"
    monkeypatch.setattr(clients, "config_paths", lambda client_id, *a, **k: [first, second])
    result = run(["--skip-check"], stdin="\ncursor\n2\n\n")
    assert result.exit_code == 0, result.output
    assert f"  2. {second}" in result.stdout
    assert not first.exists()
    assert json.loads(second.read_text("utf-8"))["mcpServers"]["cnki"]["type"] == "stdio"


# --- issue 30: the machine setup runs on, HTTP entries, install links --------------------------------


@posix_only
def test_setup_without_a_screen_says_so_before_and_after(
    home: Path, isolated_data_dir: Path, checked: list[Path], probed: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "SSH_CONNECTION", "SSH_TTY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    result = run(["--client", "generic"])
    lines = result.stdout.splitlines()
    assert result.exit_code == 0, result.output
    assert lines[1].startswith("⚠ 这台电脑当前没有图形界面（没有 DISPLAY 或 WAYLAND_DISPLAY）：登录和验证码需要的浏览器窗口打不开。")
    assert "CNKI_HEADLESS=1" in lines[1] and "cnki-mcp serve --http" in lines[1]
    assert lines[-2] == "⚠ 这台电脑没有图形界面：第一次检索前请按上面 ⚠ 的提示处理（有桌面的会话、CNKI_HEADLESS=1 或 serve --http）。"


@posix_only
def test_setup_with_a_screen_has_no_warning(
    home: Path, isolated_data_dir: Path, checked: list[Path], probed: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISPLAY", ":0")
    result = run(["--client", "generic"])
    assert result.exit_code == 0, result.output
    assert "⚠" not in result.stdout


def test_claude_desktop_is_refused_on_linux_before_anything_starts(
    home: Path, isolated_data_dir: Path, checked: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    result = run(["--client", "claude-desktop", "--install-client"])
    assert result.exit_code == 1
    assert result.stderr == ("CLIENT_UNAVAILABLE: Claude Desktop 只有 macOS、Windows 版，这台电脑上没有；"
                             "请在装有它的电脑上运行 cnki-mcp setup，或选择其他客户端。\n")
    assert checked == [] and not isolated_data_dir.exists()


def test_config_for_claude_desktop_on_linux_never_says_paste_to_nowhere(
    isolated_data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    result = CliRunner().invoke(setup.config_command, ["claude-desktop"])
    assert result.exit_code == 0
    assert "粘贴到：。" not in result.stderr
    assert result.stderr == ("这段配置属于 Claude Desktop：Claude Desktop 只有 macOS、Windows 版，这台电脑上没有；"
                             "请在装有它的电脑上运行 cnki-mcp setup，或选择其他客户端。\n")


@posix_only
def test_config_http_points_to_the_command_that_writes_it(home: Path, isolated_data_dir: Path) -> None:
    result = CliRunner().invoke(setup.config_command, ["cursor", "--http", "--host", "10.0.0.5", "--port", "9000"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["mcpServers"]["cnki"]["url"] == "http://10.0.0.5:9000/mcp"
    assert result.stderr == (
        "这段连接 HTTP 服务（cnki-mcp serve --http）的配置属于 Cursor：合并到 "
        f"{home / '.cursor' / 'mcp.json'}（或运行 cnki-mcp setup --client cursor --http --host 10.0.0.5 --port 9000 自动写入）。\n"
    )
    assert "stdio" not in result.stderr


@posix_only
def test_setup_http_writes_the_http_entry_over_the_stdio_one_and_keeps_the_rest(home: Path, isolated_data_dir: Path) -> None:
    from cnki_mcp.serving.endpoint import token

    target = home / ".cursor" / "mcp.json"
    target.parent.mkdir()
    stdio = clients.entry("cursor", isolated_data_dir)
    target.write_text(json.dumps({"mcpServers": {"cnki": stdio, "other": {"command": "x"}}, "theme": "dark"}), "utf-8")
    result = run(["--client", "cursor", "--http", "--port", "9001"])
    written = json.loads(target.read_text("utf-8"))
    (backup,) = target.parent.glob("mcp.json.cnki-backup-*")
    assert result.exit_code == 0, result.output
    assert written == {
        "mcpServers": {
            "cnki": {"headers": {"Authorization": f"Bearer {token(isolated_data_dir)}"}, "type": "http",
                     "url": "http://127.0.0.1:9001/mcp"},
            "other": {"command": "x"},
        },
        "theme": "dark",
    }
    assert json.loads(backup.read_text("utf-8"))["mcpServers"]["cnki"] == stdio
    assert result.stdout.splitlines()[0] == f"已写入 Cursor 连接 http://127.0.0.1:9001/mcp 的配置：{target}"
    again = run(["--client", "cursor", "--http", "--port", "9001"])
    assert again.stdout.splitlines()[0] == f"Cursor 的 HTTP 配置已是最新，未改动：{target}"


def test_setup_http_needs_a_client(isolated_data_dir: Path) -> None:
    result = run(["--http"])
    assert result.exit_code == 1
    assert result.stderr.startswith("CLIENT_REQUIRED: --http 需要同时用 --client 指定要接入的客户端")


@posix_only
def test_setup_http_for_a_yaml_client_says_how_instead(home: Path, isolated_data_dir: Path) -> None:
    (home / ".dsh" / "profiles" / "desktop").mkdir(parents=True)
    result = run(["--client", "dsh-desktop", "--http"])
    assert result.exit_code == 1
    assert result.stderr.startswith("CLIENT_HTTP_UNSUPPORTED: setup 不会为 DeepSeek Harness 桌面版 写入 HTTP 配置；")


@pytest.mark.parametrize(("client_id", "prefix"), [
    ("cursor", "cursor://anysphere.cursor-deeplink/mcp/install?name=cnki&config="),
    ("vscode", "vscode:mcp/install?"),
    ("trae", "trae://trae.ai-ide/mcp-import?"),
])
def test_config_link_prints_the_install_link(client_id: str, prefix: str, isolated_data_dir: Path) -> None:
    result = CliRunner().invoke(setup.config_command, [client_id, "--link"])
    assert result.exit_code == 0, result.output
    assert result.stdout == clients.client_install_link(client_id, isolated_data_dir) + "\n"
    assert result.stdout.startswith(prefix)


def test_cursor_and_vscode_links_carry_the_stdio_entry(isolated_data_dir: Path) -> None:
    import base64
    from urllib.parse import parse_qs, unquote, urlsplit

    cursor = parse_qs(urlsplit(clients.client_install_link("cursor", isolated_data_dir)).query)
    vscode = unquote(clients.client_install_link("vscode", isolated_data_dir).split("?", 1)[1])
    assert cursor["name"] == ["cnki"]
    assert json.loads(base64.b64decode(cursor["config"][0])) == clients.entry("cursor", isolated_data_dir)
    assert json.loads(vscode) == {"name": "cnki", **clients.entry("vscode", isolated_data_dir)}


def test_config_link_for_a_client_without_one_says_what_to_do(isolated_data_dir: Path) -> None:
    result = CliRunner().invoke(setup.config_command, ["lobehub", "--link"])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("CLIENT_LINK_UNSUPPORTED: LobeHub / LobeChat 没有一键安装链接；请用 cnki-mcp config lobehub 输出配置片段")


@posix_only
def test_gemini_gets_its_folder_trust_step(
    home: Path, isolated_data_dir: Path, checked: list[Path], probed: list[list[str]]
) -> None:
    result = run(["--client", "gemini", "--install-client"])
    assert result.exit_code == 0, result.output
    assert "还差一步：Gemini CLI 只在受信任的文件夹里连接 MCP 服务：在要使用的文件夹里启动 gemini，询问时选择信任" in result.stdout
    snippet = CliRunner().invoke(setup.config_command, ["gemini"])
    assert "另外：Gemini CLI 只在受信任的文件夹里连接 MCP 服务" in snippet.stderr


@posix_only
def test_setup_remote_access_keeps_the_route_and_a_later_setup_keeps_it_too(
    home: Path, isolated_data_dir: Path, checked: list[Path]
) -> None:
    webvpn = "https://webvpn.example.edu.cn/https/77726476706e69737468656265737421fbf952d2243e635930068cb8/kns8s/AdvSearch?ticket=x"
    result = run(["--client", "codex", "--skip-check", "--remote-access", webvpn])
    assert result.exit_code == 0, result.output
    assert read_config(isolated_data_dir)["route"] == {"kind": "wrdvpn", "gateway": "webvpn.example.edu.cn", "segment": "https"}
    assert "访问方式：WebVPN（webvpn.example.edu.cn）" in result.stdout
    again = run(["--client", "codex", "--skip-check"])
    assert again.exit_code == 0, again.output
    assert read_config(isolated_data_dir)["route"]["kind"] == "wrdvpn"
    direct = run(["--client", "codex", "--skip-check", "--remote-access", "https://kns.cnki.net/kns8s/AdvSearch"])
    assert direct.exit_code == 0, direct.output
    assert "route" not in read_config(isolated_data_dir)


@posix_only
def test_setup_drops_a_stored_route_the_gateway_rules_refuse_and_says_so(
    home: Path, isolated_data_dir: Path, checked: list[Path]
) -> None:
    isolated_data_dir.mkdir(parents=True)
    stored = {"kind": "wrdvpn", "gateway": "127.0.0.1", "segment": "https"}
    (isolated_data_dir / "config.json").write_text(json.dumps({"route": stored}), encoding="utf-8")
    result = run(["--client", "codex", "--skip-check"])
    assert result.exit_code == 0, result.output
    assert "⚠ config.json 里保存的学校 VPN（远程访问）入口 127.0.0.1 没有使用" in result.stdout
    assert "访问方式：直接访问知网" in result.stdout
    assert "route" not in read_config(isolated_data_dir)


def test_doctor_warns_of_a_stored_route_the_gateway_rules_refuse() -> None:
    from cnki_mcp.core.model import Config, Route
    from cnki_mcp.setup.doctor import _route_check
    from cnki_mcp.site.route import stored_route_problem

    refused = stored_route_problem(Route(kind="prefix", gateway="2130706433", prefix="/-----"))
    check = _route_check(Config(), refused)
    assert check.ok and check.warning
    assert check.message.startswith("访问方式：直接访问知网；CONFIG_ROUTE_REFUSED：config.json 里保存的学校 VPN（远程访问）入口 2130706433 没有使用")
    assert not _route_check(Config(route=Route(kind="wrdvpn", gateway="webvpn.example.edu.cn", segment="https"))).warning


@posix_only
def test_setup_site_keeps_the_choice_and_a_later_setup_keeps_it_too(
    home: Path, isolated_data_dir: Path, checked: list[Path]
) -> None:
    result = run(["--client", "codex", "--skip-check", "--site", "oversea"])
    assert result.exit_code == 0, result.output
    assert read_config(isolated_data_dir)["site"] == "oversea"
    assert "知网站点：海外站点（oversea.cnki.net）" in result.stdout
    again = run(["--client", "codex", "--skip-check"])
    assert again.exit_code == 0, again.output
    assert read_config(isolated_data_dir)["site"] == "oversea"
    auto = run(["--client", "codex", "--skip-check", "--site", "auto"])
    assert auto.exit_code == 0, auto.output
    assert "site" not in read_config(isolated_data_dir)
    assert run(["--client", "codex", "--skip-check", "--site", "moon"]).exit_code == 2


@posix_only
def test_setup_remote_access_refuses_what_it_cannot_read_before_any_change(
    home: Path, isolated_data_dir: Path, checked: list[Path]
) -> None:
    portal = run(["--client", "codex", "--skip-check", "--remote-access", "https://vpn.example.edu.cn/portal"])
    assert portal.exit_code == 1 and portal.stderr.startswith("REMOTE_ACCESS_UNSUPPORTED: "), portal.output
    assert "remote_access_url" in portal.stderr
    invalid = run(["--client", "codex", "--skip-check", "--remote-access", "http://vpn.example.edu.cn/"])
    assert invalid.exit_code == 1 and invalid.stderr.startswith("INVALID_LOGIN_URL: "), invalid.output
    assert checked == [] and not (isolated_data_dir / "config.json").exists()


# --- issue 41: several clients at once, no terminal, no screen, what setup created ---------------------


def test_setup_without_a_terminal_refuses_to_take_the_defaults_unseen(isolated_data_dir: Path, checked: list[Path]) -> None:
    result = run([])
    site_only = run(["--site", "oversea", "--skip-check"])
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == (
        "SETUP_NEEDS_TERMINAL: 标准输入不是终端，setup 无法逐项询问，也不会擅自采用默认选择。请用参数说明要做什么："
        "--client <客户端>（可多次给出）加 --install-client 写入客户端配置；--browser <浏览器路径> 指定浏览器"
        "（不写时用找到的第一个）；--headless 或 --no-headless 决定是否在客户端配置中写入 CNKI_HEADLESS=1。"
        "例如 cnki-mcp setup --client claude-code --client codex --install-client；客户端名称见 cnki-mcp help。"
    )
    assert result.stdout == "本次没有改动任何文件。\n"
    assert site_only.exit_code == 2
    assert checked == []
    assert not isolated_data_dir.exists()


@posix_only
def test_enter_takes_every_installed_client_and_each_is_written(
    home: Path, isolated_data_dir: Path, checked: list[Path], probed: list[list[str]]
) -> None:
    (home / ".codex").mkdir()
    (home / ".cursor").mkdir()
    result = run([], stdin="\n\n\n\n")
    said = result.stdout.splitlines()
    assert result.exit_code == 0, result.output
    assert "请输入客户端编号或选项名（回车 = 1,2，Codex、Cursor；可多选，如 1,3 或 1 3；all 或 全部 = 上面列出的全部）：" in result.stdout
    assert tomllib.loads((home / ".codex" / "config.toml").read_text("utf-8"))["mcp_servers"]["cnki"]["args"]
    assert json.loads((home / ".cursor" / "mcp.json").read_text("utf-8"))["mcpServers"]["cnki"]["type"] == "stdio"
    assert len(probed) == 1
    assert said[-1] == (
        f"本次改动：写入了 浏览器设置 {isolated_data_dir / 'config.json'}；配置片段 {isolated_data_dir / 'cnki-codex.toml'}；"
        f"Codex 的配置 {home / '.codex' / 'config.toml'}；配置片段 {isolated_data_dir / 'cnki-cursor.json'}；"
        f"Cursor 的配置 {home / '.cursor' / 'mcp.json'}。"
    )
    assert said[-2] == "安装检查通过：共 13 个 MCP 工具。请重启或重新连接 Codex、Cursor。"


@pytest.mark.parametrize(("answer", "expected"), [
    ("1,3", ["claude-code", "cursor"]),
    ("1 3", ["claude-code", "cursor"]),
    ("3，1、3", ["cursor", "claude-code"]),
    ("codex cursor", ["codex", "cursor"]),
    ("claude code", ["claude-code"]),
])
def test_one_answer_names_several_clients(answer: str, expected: list[str]) -> None:
    order = ["claude-code", "codex", "cursor", "generic"]
    assert setup._read_choices(answer, order) == expected


@pytest.mark.parametrize("answer", ["all", "ALL", "全部"])
def test_all_takes_every_client_listed(answer: str) -> None:
    order = ["claude-code", "codex", "cursor", "generic"]
    assert setup._read_choices(answer, order) == order


def test_one_bad_part_of_an_answer_is_named_and_nothing_is_taken(capsys: pytest.CaptureFixture[str]) -> None:
    order = ["claude-code", "codex", "cursor"]
    assert setup._read_choices("1,9", order) == []
    assert setup._read_choices("1 cursr", order) == []
    said = capsys.readouterr().out.splitlines()
    assert said[0] == "没有这个选项：9"
    assert said[1] == "没有这个选项：cursr；是不是 cursor？"


@posix_only
def test_a_second_answer_is_asked_for_after_a_bad_one(home: Path, isolated_data_dir: Path, checked: list[Path]) -> None:
    result = run(["--skip-check"], stdin="\n1,99\n2 3\nn\nn\n")
    assert result.exit_code == 0, result.output
    assert "没有这个选项：99" in result.stdout
    assert (isolated_data_dir / "cnki-codex.toml").exists()
    assert (isolated_data_dir / "cnki-cursor.json").exists()
    assert not (isolated_data_dir / "cnki-claude-code.json").exists()


@posix_only
def test_client_given_several_times_configures_each_with_one_protocol_check(
    home: Path, isolated_data_dir: Path, checked: list[Path], probed: list[list[str]]
) -> None:
    result = run(["--client", "cursor", "--client", "codex", "--client", "cursor-ide", "--install-client"])
    assert result.exit_code == 0, result.output
    assert len(checked) == 1
    assert len(probed) == 1
    assert (home / ".cursor" / "mcp.json").exists()
    assert (home / ".codex" / "config.toml").exists()
    assert result.stdout.count("配置片段已保存：") == 2
    assert result.stdout.splitlines()[-1] == (
        f"本次改动：写入了 浏览器设置 {isolated_data_dir / 'config.json'}；配置片段 {isolated_data_dir / 'cnki-cursor.json'}；"
        f"Cursor 的配置 {home / '.cursor' / 'mcp.json'}；配置片段 {isolated_data_dir / 'cnki-codex.toml'}；"
        f"Codex 的配置 {home / '.codex' / 'config.toml'}。"
    )


@posix_only
def test_a_client_that_is_not_connected_is_named_after_the_check(
    home: Path, isolated_data_dir: Path, checked: list[Path], probed: list[list[str]]
) -> None:
    result = run(["--client", "cursor", "--client", "lingma", "--install-client"])
    assert result.exit_code == 1
    assert result.stderr.startswith("CLIENT_IMPORT_REQUIRED: ")
    both = run(["--client", "cursor", "--client", "lingma"])
    said = both.stdout.splitlines()
    assert both.exit_code == 0, both.output
    assert said[-2] == "MCP 通信检查通过：共 13 个 MCP 工具；Cursor、通义灵码 还没有接入（见上文）。"


def _setup_without_a_screen(home: Path, monkeypatch: pytest.MonkeyPatch, headless_answer: str) -> tuple[Result, dict]:
    """Setup asked on a Linux machine without a screen, choosing Cursor; its output and Cursor's cnki env."""
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "SSH_CONNECTION", "SSH_TTY", "CNKI_HEADLESS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    result = run([], stdin=f"{headless_answer}\n\ncursor\n\n")
    assert result.exit_code == 0, result.output
    return result, json.loads((home / ".cursor" / "mcp.json").read_text("utf-8"))["mcpServers"]["cnki"]["env"]


@posix_only
def test_without_a_screen_setup_asks_and_enter_writes_cnki_headless(
    home: Path, isolated_data_dir: Path, checked: list[Path], probed: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    result, env = _setup_without_a_screen(home, monkeypatch, "")
    said = result.stdout.splitlines()
    assert said[2].startswith(
        "要在客户端配置的 env 中写入 CNKI_HEADLESS=1 吗？写入后能检索和阅读，但遇到验证码或登录时需要图形界面"
        "（或在有桌面的电脑上运行 cnki-mcp serve --http，让这个客户端连接它）。[Y/n] "
    )
    assert env == {"CNKI_DATA_DIR": str(isolated_data_dir), "CNKI_HEADLESS": "1"}
    assert said[-2] == ("⚠ 这台电脑没有图形界面，客户端配置已设 CNKI_HEADLESS=1：检索和阅读可用；遇到验证码或登录时需要图形界面"
                        "（或在有桌面的电脑上运行 cnki-mcp serve --http，让客户端连接它）。")
    assert said[-1].endswith("；客户端配置的 env 含 CNKI_HEADLESS=1（无界面浏览器）。")


@posix_only
def test_without_a_screen_the_headless_flag_is_the_advice_taken_not_repeated(
    home: Path, isolated_data_dir: Path, checked: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "SSH_CONNECTION", "SSH_TTY", "CNKI_HEADLESS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    result = run(["--client", "cursor", "--skip-check", "--headless"])
    said = result.stdout.splitlines()
    assert result.exit_code == 0, result.output
    assert [line for line in said if "登录和验证码需要的浏览器窗口打不开" in line] == []
    assert said[-2] == ("⚠ 这台电脑没有图形界面，客户端配置已设 CNKI_HEADLESS=1：检索和阅读可用；遇到验证码或登录时需要图形界面"
                        "（或在有桌面的电脑上运行 cnki-mcp serve --http，让客户端连接它）。")
    no = run(["--client", "cursor", "--skip-check", "--no-headless"])
    assert no.exit_code == 0, no.output
    assert no.stdout.splitlines()[1].startswith("⚠ 这台电脑当前没有图形界面（没有 DISPLAY 或 WAYLAND_DISPLAY）：")


@posix_only
def test_without_a_screen_answering_no_writes_no_cnki_headless(
    home: Path, isolated_data_dir: Path, checked: list[Path], probed: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    result, env = _setup_without_a_screen(home, monkeypatch, "n")
    assert env == {"CNKI_DATA_DIR": str(isolated_data_dir)}
    assert result.stdout.splitlines()[-1].endswith("；客户端配置的 env 不含 CNKI_HEADLESS。")


@posix_only
def test_with_a_screen_setup_does_not_ask_about_headless(home: Path, isolated_data_dir: Path, checked: list[Path]) -> None:
    result = run(["--skip-check"], stdin="\ncursor\n\n")
    assert result.exit_code == 0, result.output
    assert "CNKI_HEADLESS" not in result.stdout


@posix_only
def test_headless_flag_writes_it_everywhere_and_no_headless_takes_it_out(
    home: Path, isolated_data_dir: Path, checked: list[Path], probed: list[list[str]]
) -> None:
    chosen = ["--client", "cursor", "--client", "codex", "--client", "dsh-web", "--install-client"]
    (home / ".dsh" / "profiles" / "web").mkdir(parents=True)
    on = run([*chosen, "--headless"])
    cursor = home / ".cursor" / "mcp.json"
    codex = home / ".codex" / "config.toml"
    dsh = home / ".dsh" / "profiles" / "web" / "cordis.patch.yml"
    assert on.exit_code == 0, on.output
    assert json.loads(cursor.read_text("utf-8"))["mcpServers"]["cnki"]["env"]["CNKI_HEADLESS"] == "1"
    assert tomllib.loads(codex.read_text("utf-8"))["mcp_servers"]["cnki"]["env"]["CNKI_HEADLESS"] == "1"
    assert clients.existing_entry("dsh-web", dsh)["env"]["CNKI_HEADLESS"] == "1"
    assert json.loads((isolated_data_dir / "cnki-cursor.json").read_text("utf-8"))["mcpServers"]["cnki"]["env"]["CNKI_HEADLESS"] == "1"
    assert on.stdout.splitlines()[-1].endswith("；客户端配置的 env 含 CNKI_HEADLESS=1（无界面浏览器）。")
    document = json.loads(cursor.read_text("utf-8"))
    document["mcpServers"]["cnki"]["env"]["MY_SETTING"] = "kept"
    cursor.write_text(json.dumps(document), "utf-8")
    unchanged = run([*chosen])
    assert unchanged.exit_code == 0, unchanged.output
    assert json.loads(cursor.read_text("utf-8"))["mcpServers"]["cnki"]["env"]["CNKI_HEADLESS"] == "1"
    off = run([*chosen, "--no-headless"])
    assert off.exit_code == 0, off.output
    assert json.loads(cursor.read_text("utf-8"))["mcpServers"]["cnki"]["env"] == {
        "CNKI_DATA_DIR": str(isolated_data_dir), "MY_SETTING": "kept"}
    assert tomllib.loads(codex.read_text("utf-8"))["mcp_servers"]["cnki"]["env"] == {"CNKI_DATA_DIR": str(isolated_data_dir)}
    assert clients.existing_entry("dsh-web", dsh)["env"] == {"CNKI_DATA_DIR": str(isolated_data_dir)}


@posix_only
def test_headless_goes_through_the_clients_own_commands(
    home: Path, isolated_data_dir: Path, tmp_path: Path, checked: list[Path], fake_claude: Path
) -> None:
    result, written = _install_claude_code(home, '{"numStartups": 3}')
    again = run(["--client", "claude-code", "--install-client", "--skip-check", "--headless"])
    assert result.exit_code == 0, result.output
    assert again.exit_code == 0, again.output
    (home / ".claude.json").write_text("{}", "utf-8")
    fresh = run(["--client", "claude-code", "--install-client", "--skip-check", "--headless"])
    args = fake_claude.read_text("utf-8").splitlines()
    assert fresh.exit_code == 0, fresh.output
    assert json.loads(args[5])["env"] == {"CNKI_DATA_DIR": str(isolated_data_dir), "CNKI_HEADLESS": "1"}


def test_codex_command_line_carries_cnki_headless(isolated_data_dir: Path) -> None:
    entry = clients.entry("codex", isolated_data_dir, ["/bin/cnki-mcp", "serve"], headless=True)
    argv = clients.get_client("codex").cli(entry)  # type: ignore[misc]
    assert argv == ["codex", "mcp", "add", "--env", f"CNKI_DATA_DIR={isolated_data_dir}", "--env", "CNKI_HEADLESS=1",
                    "cnki", "--", "/bin/cnki-mcp", "serve"]


@posix_only
def test_an_import_link_carries_cnki_headless(home: Path, isolated_data_dir: Path, checked: list[Path]) -> None:
    import base64
    from urllib.parse import unquote_plus

    result = run(["--client", "cherry-studio", "--headless", "--skip-check"])
    link = next(line for line in result.stdout.splitlines() if line.startswith("cherrystudio://"))
    servers = json.loads(base64.b64decode(unquote_plus(link.split("servers=")[1])))
    assert result.exit_code == 0, result.output
    assert servers["mcpServers"]["cnki"]["env"]["CNKI_HEADLESS"] == "1"


def test_headless_flags_do_not_go_with_http(isolated_data_dir: Path) -> None:
    result = run(["--client", "cursor", "--http", "--headless"])
    assert result.exit_code == 1
    assert result.stderr.splitlines()[0] == (
        "INVALID_ARGUMENT: --headless 和 --no-headless 不能与 --http 一起使用：HTTP 配置连接的服务在另一台电脑上运行浏览器，"
        "是否无界面由那台电脑决定。"
    )


@posix_only
def test_http_entries_for_several_clients(home: Path, isolated_data_dir: Path) -> None:
    result = run(["--client", "cursor", "--client", "windsurf", "--http", "--port", "9000"])
    assert result.exit_code == 0, result.output
    assert json.loads((home / ".cursor" / "mcp.json").read_text("utf-8"))["mcpServers"]["cnki"]["url"] == "http://127.0.0.1:9000/mcp"
    windsurf = home / ".codeium" / "windsurf" / "mcp_config.json"
    assert json.loads(windsurf.read_text("utf-8"))["mcpServers"]["cnki"]["serverUrl"] == "http://127.0.0.1:9000/mcp"
    assert result.stdout.count("请在服务所在的电脑上运行 cnki-mcp serve --http（地址 http://127.0.0.1:9000/mcp）") == 2


# --- uninstall takes away what setup created --------------------------------------------------------


def uninstall(*args: str) -> Result:
    from cnki_mcp.setup.uninstall import uninstall_command

    return CliRunner().invoke(uninstall_command, list(args))


@posix_only
def test_uninstall_deletes_the_config_file_and_folder_setup_created(
    home: Path, isolated_data_dir: Path, checked: list[Path]
) -> None:
    result = run(["--client", "cursor", "--client", "windsurf", "--install-client", "--skip-check"])
    assert result.exit_code == 0, result.output
    assert clients.installed_clients() == ["cursor", "windsurf"]
    removed = uninstall("--yes")
    assert removed.exit_code == 0, removed.output
    assert clients.installed_clients() == []
    assert not (home / ".cursor").exists()
    assert not (home / ".codeium").exists()
    assert f"已删除 {home / '.cursor' / 'mcp.json'}：它由 setup 创建，删除 cnki 条目后没有别的内容（setup 创建的空文件夹也一并删除）" in (
        removed.stdout.splitlines())
    assert sorted(p.name for p in home.iterdir()) == []


@posix_only
def test_uninstall_keeps_a_file_that_was_there_before_setup(
    home: Path, isolated_data_dir: Path, checked: list[Path]
) -> None:
    codex = home / ".codex" / "config.toml"
    codex.parent.mkdir()
    codex.write_text('model = "o3"\n', "utf-8")
    (home / ".cursor").mkdir()
    result = run(["--client", "codex", "--client", "cursor", "--install-client", "--skip-check"])
    assert result.exit_code == 0, result.output
    removed = uninstall("--yes")
    assert removed.exit_code == 0, removed.output
    assert tomllib.loads(codex.read_text("utf-8")) == {"model": "o3"}
    assert not (home / ".cursor" / "mcp.json").exists()
    assert (home / ".cursor").is_dir()


@posix_only
def test_uninstall_keeps_a_created_file_the_person_added_to(
    home: Path, isolated_data_dir: Path, checked: list[Path]
) -> None:
    result = run(["--client", "cursor", "--install-client", "--skip-check"])
    cursor = home / ".cursor" / "mcp.json"
    document = json.loads(cursor.read_text("utf-8"))
    document["mcpServers"]["mine"] = {"command": "mine"}
    cursor.write_text(json.dumps(document), "utf-8")
    removed = uninstall("--yes")
    assert result.exit_code == 0, result.output
    assert removed.exit_code == 0, removed.output
    assert json.loads(cursor.read_text("utf-8")) == {"mcpServers": {"mine": {"command": "mine"}}}
    assert clients.installed_clients() == ["cursor"]
