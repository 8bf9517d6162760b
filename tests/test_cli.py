"""The command line as a user runs it: real subprocesses of `python -m cnki_mcp`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from cnki_mcp import __version__
from cnki_mcp.surface.tools import REGISTRY
from tests.harness import serve_params

# What decides the doctor's ⚠ lines and the CLI's language: each test sets the ones it means.
_MACHINE = ("DISPLAY", "WAYLAND_DISPLAY", "SSH_CONNECTION", "SSH_TTY", "CNKI_HEADLESS", "CNKI_LANG", "LC_ALL",
            "LC_MESSAGES", "LANG", "CNKI_REQUEST_INTERVAL_MS", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "KIMI_CODE_HOME",
            "DSH_HOME", "XDG_CONFIG_HOME", "CNKI_BROWSER_PATH")


def run(*args: str, data_dir: Path, timeout: float = 60, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    base = {key: value for key, value in os.environ.items() if key not in _MACHINE}
    base["HOME"] = str(data_dir.parent / "home")  # no real client config leaks in
    base["LANG"] = "zh_CN.UTF-8"
    return subprocess.run(
        [sys.executable, "-m", "cnki_mcp", *args], input=stdin,
        capture_output=True, text=True, env={**base, "CNKI_DATA_DIR": str(data_dir), **env}, timeout=timeout,
    )


def set_up(data_dir: Path, home: Path) -> None:
    """What setup leaves behind: config.json with the browser, and Claude Code's entry pointing here."""
    from cnki_mcp.setup import clients

    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "config.json").write_text(json.dumps({"browser_path": sys.executable}), "utf-8")
    home.mkdir(parents=True, exist_ok=True)
    document = {"numStartups": 1, "mcpServers": {"cnki": clients.entry("claude-code", data_dir), "other": {"command": "x"}}}
    (home / ".claude.json").write_text(json.dumps(document), "utf-8")


@pytest.mark.parametrize("spelling", ["version", "--version", "-V"])
def test_version_and_the_flag_print_the_same_line(spelling: str, isolated_data_dir: Path) -> None:
    done = run(spelling, data_dir=isolated_data_dir)
    assert (done.returncode, done.stdout) == (0, f"{__version__}\n")


def test_schema_is_the_served_tool_list(isolated_data_dir: Path) -> None:
    done = run("schema", data_dir=isolated_data_dir)
    assert done.returncode == 0, done.stderr
    tools = json.loads(done.stdout)["tools"]
    assert [t["name"] for t in tools] == sorted(t["name"] for t in tools)
    assert len(tools) == len(REGISTRY)
    assert all(t["inputSchema"]["type"] == "object" for t in tools)


def test_doctor_json_reports_without_locking_or_starting_anything(isolated_data_dir: Path, tmp_path: Path) -> None:
    set_up(isolated_data_dir, tmp_path / "home")
    done = run("doctor", "--json", data_dir=isolated_data_dir, HOME=str(tmp_path / "home"), DISPLAY=":0")
    report = json.loads(done.stdout)
    assert done.returncode == 0, done.stdout
    assert report["version"] == __version__
    assert report["data_dir"] == str(isolated_data_dir)
    assert report["browser_executable"] == {"found": True, "path": sys.executable, "source": "config.json"}
    assert [(c["client"], c["status"]) for c in report["clients"]] == [("claude-code", "current")]
    assert [check["name"] for check in report["checks"]] == ["config", "route", "browser", "display", "clients", "log"]
    assert report["verdict"] == {"ok": True, "problems": 0, "warnings": 0, "message": "结论：一切正常。"}
    assert not (isolated_data_dir / "cnki.lock").exists()
    assert not (isolated_data_dir / "browser").exists()


def test_doctor_prints_a_line_per_check_and_a_verdict(isolated_data_dir: Path, tmp_path: Path) -> None:
    set_up(isolated_data_dir, tmp_path / "home")
    done = run("doctor", data_dir=isolated_data_dir, HOME=str(tmp_path / "home"), WAYLAND_DISPLAY="wayland-0")
    lines = done.stdout.splitlines()
    assert lines[0] == f"cnki-mcp {__version__} 本地检查（数据目录：{isolated_data_dir}）"
    assert [line[:2] for line in lines[1:-1]] == ["✓ ", "✓ ", "✓ ", "✓ ", "✓ ", "✓ "]
    assert lines[-1] == "结论：一切正常。"


def test_doctor_on_a_fresh_machine_without_a_screen_warns_at_each_step(isolated_data_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    done = run("doctor", data_dir=isolated_data_dir, CNKI_BROWSER_PATH=sys.executable, CNKI_REQUEST_INTERVAL_MS="fast",
               SSH_CONNECTION="10.0.0.2 5000 10.0.0.1 22")
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout
    assert lines[1] == (f"⚠ 这个数据目录还没有设置过（没有 {isolated_data_dir / 'config.json'}）：请运行 cnki-mcp setup，"
                        "它会选择并检查浏览器、接入客户端。")
    assert lines[4].startswith("⚠ 这是一个 SSH 会话，没有图形界面：登录和验证码需要的浏览器窗口打不开。")
    assert "CNKI_HEADLESS=1" in lines[4] and "cnki-mcp serve --http" in lines[4]
    assert lines[5].startswith("⚠ 还没有客户端接入：") and "cnki-mcp setup --client <客户端> --install-client" in lines[5]
    assert lines[7] == ("⚠ 环境变量 CNKI_REQUEST_INTERVAL_MS='fast' 不是正整数，已改用默认值 500；"
                        "请在客户端配置的 env 中改正或删除它。")
    assert lines[-1] == "结论：可以运行，但有 4 处需要注意，请按上面标 ⚠ 的提示处理。"


def test_doctor_names_a_configured_browser_that_is_gone_in_chinese_only(isolated_data_dir: Path, tmp_path: Path) -> None:
    set_up(isolated_data_dir, tmp_path / "home")
    gone = tmp_path / "removed" / "chrome"
    (isolated_data_dir / "config.json").write_text(json.dumps({"browser_path": str(gone)}), "utf-8")
    done = run("doctor", "--json", data_dir=isolated_data_dir, HOME=str(tmp_path / "home"), DISPLAY=":0",
               PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin")
    report = json.loads(done.stdout)
    (browser,) = [check for check in report["checks"] if check["name"] == "browser"]
    assert done.stderr == ""
    assert browser["warning"] is True
    assert browser["message"].startswith(f"浏览器：config.json 里的 {gone} 已不存在，现在改用自动找到的 ")
    assert report["verdict"]["warnings"] == 1 and report["verdict"]["message"] != "结论：一切正常。"


def test_doctor_with_headless_and_no_screen_says_what_headless_cannot_do(isolated_data_dir: Path, tmp_path: Path) -> None:
    set_up(isolated_data_dir, tmp_path / "home")
    done = run("doctor", "--json", data_dir=isolated_data_dir, HOME=str(tmp_path / "home"), CNKI_HEADLESS="1")
    (display,) = [check for check in json.loads(done.stdout)["checks"] if check["name"] == "display"]
    assert display == {"name": "display", "ok": True, "warning": True, "message":
                       "没有图形界面，CNKI_HEADLESS=1：浏览器以无界面方式运行，可以检索和读取，但遇到登录或验证码时无法处理"}


def test_doctor_reads_cnki_headless_from_each_connected_clients_entry(isolated_data_dir: Path, tmp_path: Path) -> None:
    from cnki_mcp.setup import clients

    home = tmp_path / "home"
    set_up(isolated_data_dir, home)
    cursor = home / ".cursor" / "mcp.json"
    cursor.parent.mkdir()
    cursor.write_text(json.dumps({"mcpServers": {"cnki": clients.entry("cursor", isolated_data_dir, headless=True)}}), "utf-8")
    claude = home / ".claude.json"
    done = run("doctor", "--json", data_dir=isolated_data_dir, HOME=str(home))
    report = json.loads(done.stdout)
    display = [check for check in report["checks"] if check["name"] == "display"]
    assert [(item["client"], item["headless"]) for item in report["clients"]] == [("claude-code", False), ("cursor", True)]
    assert display[0] == {"name": "display", "ok": True, "warning": True, "message": (
        f"没有图形界面，而 Claude Code 的配置没有设置 CNKI_HEADLESS（{claude}）：它启动的浏览器要打开窗口，会失败。"
        "运行 cnki-mcp setup --client claude-code --install-client --headless 写入 CNKI_HEADLESS=1（之后能检索和阅读，"
        "但验证码和登录仍需要图形界面）；或在有桌面的电脑上运行 cnki-mcp serve --http，"
        "再用 cnki-mcp setup --client claude-code --http --host <那台电脑的地址> 让这个客户端连接它。")}
    assert display[1] == {"name": "display", "ok": True, "warning": False, "message": (
        f"没有图形界面，Cursor 的配置设置了 CNKI_HEADLESS=1（{cursor}）：可以检索和阅读；遇到验证码或登录时需要图形界面"
        "（或在有桌面的电脑上运行 cnki-mcp serve --http，让这个客户端连接它）")}
    assert len(display) == 2
    assert report["verdict"]["warnings"] == 1


def test_doctor_with_a_screen_does_not_warn_about_cnki_headless(isolated_data_dir: Path, tmp_path: Path) -> None:
    set_up(isolated_data_dir, tmp_path / "home")
    done = run("doctor", "--json", data_dir=isolated_data_dir, HOME=str(tmp_path / "home"), DISPLAY=":0")
    display = [check for check in json.loads(done.stdout)["checks"] if check["name"] == "display"]
    assert display == [{"name": "display", "ok": True, "warning": False, "message": "有图形界面：登录和验证码的浏览器窗口可以显示"}]


def test_setup_with_piped_input_refuses_instead_of_taking_the_defaults(isolated_data_dir: Path, tmp_path: Path) -> None:
    done = run("setup", data_dir=isolated_data_dir, stdin="\n\n\n")
    assert done.returncode == 2
    assert done.stderr.startswith("SETUP_NEEDS_TERMINAL: 标准输入不是终端，setup 无法逐项询问，也不会擅自采用默认选择。")
    assert done.stdout == "本次没有改动任何文件。\n"
    assert not isolated_data_dir.exists()


@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal")
def test_setup_on_a_terminal_asks(isolated_data_dir: Path, tmp_path: Path) -> None:
    from tests.terminal import typed

    env = {key: value for key, value in os.environ.items() if key not in _MACHINE}
    env.update(HOME=str(tmp_path), LANG="zh_CN.UTF-8", CNKI_DATA_DIR=str(isolated_data_dir), DISPLAY=":0")
    missing = tmp_path / "no-browser-here"
    with typed(f"{missing}\n{missing}\n{missing}\n") as terminal:
        done = subprocess.run([sys.executable, "-m", "cnki_mcp", "setup"], stdin=terminal, capture_output=True, text=True,
                              env=env, timeout=60)
    assert done.returncode == 1
    assert done.stderr.startswith("BROWSER_NOT_FOUND: ")
    assert done.stdout.count(str(missing)) == 3


def test_doctor_report_writes_one_zip_without_locking_or_starting_anything(isolated_data_dir: Path) -> None:
    done = run("doctor", "--report", data_dir=isolated_data_dir)
    written = list((isolated_data_dir / "diagnostics").glob("report-*.zip"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"诊断报告已写入 {written[0]}\n"
    assert not (isolated_data_dir / "cnki.lock").exists()
    assert not (isolated_data_dir / "browser").exists()


@pytest.mark.slow
def test_doctor_protocol_round_trip(isolated_data_dir: Path) -> None:
    done = run("doctor", "--protocol", "--json", data_dir=isolated_data_dir, timeout=90, CNKI_BROWSER_PATH=sys.executable)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["protocol"] == {
        "passed": True, "transport": "stdio", "tools": len(REGISTRY), "version": __version__, "browser_started": False,
    }


def _corrupt_config(data_dir: Path) -> Path:
    data_dir.mkdir(parents=True)
    path = data_dir / "config.json"
    path.write_text("{not json", encoding="utf-8")
    return path


def test_corrupt_config_is_a_failed_check_not_a_crash(isolated_data_dir: Path) -> None:
    path = _corrupt_config(isolated_data_dir)
    done = run("doctor", data_dir=isolated_data_dir, CNKI_BROWSER_PATH=sys.executable)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert f"✗ config.json 有问题：配置文件 {path} 无法解析" in done.stdout
    assert done.stdout.splitlines()[-1].startswith("结论：发现 1 个问题，请按上面标 ✗ 的提示处理")


def test_corrupt_config_in_the_json_report(isolated_data_dir: Path) -> None:
    path = _corrupt_config(isolated_data_dir)
    done = run("doctor", "--json", data_dir=isolated_data_dir, CNKI_BROWSER_PATH=sys.executable)
    report = json.loads(done.stdout)
    (config,) = [check for check in report["checks"] if check["name"] == "config"]
    assert done.returncode == 1
    assert config["ok"] is False
    assert str(path) in config["message"]
    assert report["verdict"]["problems"] == 1
    assert report["browser_executable"]["found"] is True


def test_doctor_names_an_invalid_log_level(isolated_data_dir: Path) -> None:
    done = run("doctor", data_dir=isolated_data_dir, CNKI_BROWSER_PATH=sys.executable, CNKI_LOG_LEVEL="loud")
    assert done.returncode == 1
    assert "✗ CNKI_LOG_LEVEL='loud' 不是日志级别" in done.stdout


async def test_serve_with_a_corrupt_config_answers_config_invalid_and_diagnostics(isolated_data_dir: Path) -> None:
    isolated_data_dir.mkdir(parents=True)
    (isolated_data_dir / "config.json").write_text("{not json", encoding="utf-8")
    async with Client(serve_params(isolated_data_dir), read_timeout_seconds=30) as client:
        tool = await client.call_tool("search_results", {"search_id": "s_1"})
        report = await client.call_tool("diagnostics", {})
    assert tool.is_error
    assert tool.structured_content["errors"][0]["code"] == "CONFIG_INVALID"
    assert not report.is_error
    assert report.structured_content["config_error"]["code"] == "CONFIG_INVALID"
    assert str(isolated_data_dir / "config.json") in report.structured_content["config_error"]["message"]


async def test_serve_with_an_unknown_log_level_starts(isolated_data_dir: Path) -> None:
    async with Client(serve_params(isolated_data_dir, CNKI_LOG_LEVEL="verbose"), read_timeout_seconds=30) as client:
        report = await client.call_tool("diagnostics", {})
    assert report.structured_content["version"] == __version__


# --- the command line's own words: Chinese, English when asked --------------------------------------

# click's English vocabulary: none of it may reach a Chinese user.
_CLICK_ENGLISH = re.compile(r"Usage|Options|Commands|Show this message|default|Error|Try |No such|Did you mean|ARGS|COMMAND|OPTIONS|TEXT|INTEGER")


@pytest.mark.parametrize("command", [(), ("serve",), ("setup",), ("config",), ("doctor",), ("store",), ("uninstall",), ("watch", "run")])
def test_help_prints_no_english_under_a_chinese_locale(command: tuple[str, ...], isolated_data_dir: Path) -> None:
    done = run(*command, "--help", data_dir=isolated_data_dir)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"用法：cnki-mcp {' '.join(command)}".rstrip() + " [选项]")
    assert "选项：" in done.stdout and "-h, --help" in done.stdout and "显示本帮助并退出。" in done.stdout
    assert _CLICK_ENGLISH.findall(done.stdout) == []


def test_top_help_lists_the_commands_under_a_chinese_heading(isolated_data_dir: Path) -> None:
    done = run("--help", data_dir=isolated_data_dir)
    commands = done.stdout.split("命令：\n", 1)[1].splitlines()
    assert [line.split()[0] for line in commands] == ["config", "doctor", "help", "schema", "serve", "setup", "store", "uninstall", "version", "watch"]


def test_a_typo_command_gets_a_chinese_message_with_the_nearest_command(isolated_data_dir: Path) -> None:
    done = run("serch", data_dir=isolated_data_dir)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "用法：cnki-mcp [选项] [命令] [参数]...",
        "运行 cnki-mcp -h 查看帮助。",
        "错误：没有 serch 这个命令。是不是 serve？全部命令：config、doctor、help、schema、serve、setup、store、uninstall、version、watch。",
    ]


@pytest.mark.parametrize(("args", "said"), [
    (("serve", "--bogus"), "错误：没有 --bogus 这个选项。是不是 --host？"),
    (("serve", "--port", "x"), "错误：--port 的值无效：x 不是整数。"),
    (("serve", "--port", "70000"), "错误：--port 的值无效：70000 不在范围 0<=x<=65535 内。"),
    (("setup", "--client"), "错误：选项 --client 需要一个值。"),
])
def test_usage_errors_are_chinese(args: tuple[str, ...], said: str, isolated_data_dir: Path) -> None:
    done = run(*args, data_dir=isolated_data_dir)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == said
    assert _CLICK_ENGLISH.findall(done.stderr) == []


@pytest.mark.parametrize("env", [{"LANG": "en_US.UTF-8"}, {"LC_ALL": "en_GB.UTF-8"}, {"CNKI_LANG": "en"}])
def test_an_english_locale_or_cnki_lang_gets_english(env: dict[str, str], isolated_data_dir: Path) -> None:
    typo = run("serch", data_dir=isolated_data_dir, **env)
    helped = run("serve", "--help", data_dir=isolated_data_dir, **env)
    assert typo.stderr.splitlines() == [
        "Usage: cnki-mcp [OPTIONS] [COMMAND] [ARGS]...",
        "Try 'cnki-mcp -h' for help.",
        "Error: No such command 'serch'. Did you mean 'serve'? Commands: config, doctor, help, schema, serve, setup, store, uninstall, version, watch.",
    ]
    assert helped.stdout.startswith("Usage: cnki-mcp serve [OPTIONS]\n")
    assert "Options:" in helped.stdout and "Show this message and exit." in helped.stdout
    assert "[default: 127.0.0.1]" in helped.stdout
    assert re.findall(r"[\u4e00-\u9fff]", helped.stdout) == []


def test_cnki_lang_zh_wins_over_an_english_locale(isolated_data_dir: Path) -> None:
    done = run("serch", data_dir=isolated_data_dir, LANG="en_US.UTF-8", CNKI_LANG="zh")
    assert done.stderr.splitlines()[-1].startswith("错误：没有 serch 这个命令。")


def on_a_terminal(env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    """Bare ``cnki-mcp`` with a pseudo-terminal for its stdin and stdout, as a user would type it; stderr kept."""
    import pty  # not on Windows: imported only by the tests that skip there

    leader, follower = pty.openpty()
    try:
        return subprocess.run([sys.executable, "-m", "cnki_mcp"], stdin=follower, stdout=follower, stderr=subprocess.PIPE,
                              env=env, timeout=30)
    finally:
        os.close(leader)
        os.close(follower)


@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal")
def test_bare_command_on_a_terminal_says_what_it_is_instead_of_waiting(isolated_data_dir: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key not in _MACHINE}
    done = on_a_terminal({**env, "CNKI_DATA_DIR": str(isolated_data_dir), "LANG": "zh_CN.UTF-8"})
    lines = done.stderr.decode("utf-8").splitlines()
    assert done.returncode == 0
    assert lines[0] == "cnki-mcp 是一个 MCP 服务，由 AI 客户端（Claude Code、Cursor 等）启动，不在终端里直接使用。"
    assert lines[1] == "  接入客户端：cnki-mcp setup（逐步询问）"
    assert not (isolated_data_dir / "cnki.lock").exists()


# --- uninstall -------------------------------------------------------------------------------------


def test_uninstall_lists_then_does_nothing_without_a_yes(isolated_data_dir: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    set_up(isolated_data_dir, home)
    before = (home / ".claude.json").read_bytes()
    done = run("uninstall", data_dir=isolated_data_dir, stdin="\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:3] == [
        "cnki-mcp uninstall 将要删除：",
        f"  - Claude Code：{home / '.claude.json'}（删除 mcpServers.cnki 条目）",
        f"  数据目录 {isolated_data_dir} 保留（加 --data 才删除）。",
    ]
    assert "已取消，没有改动任何文件。" in done.stdout
    assert (home / ".claude.json").read_bytes() == before


def test_uninstall_removes_only_our_entry_with_a_backup_and_keeps_the_data(isolated_data_dir: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    set_up(isolated_data_dir, home)
    before = (home / ".claude.json").read_bytes()
    done = run("uninstall", data_dir=isolated_data_dir, stdin="y\n")
    (backup,) = home.glob(".claude.json.cnki-backup-*")
    assert done.returncode == 0, done.stderr
    assert json.loads((home / ".claude.json").read_text("utf-8")) == {"numStartups": 1, "mcpServers": {"other": {"command": "x"}}}
    assert backup.read_bytes() == before
    assert f"已从 {home / '.claude.json'} 删除 cnki 条目（原文件备份为 {backup}）" in done.stdout
    assert (isolated_data_dir / "config.json").is_file()
    assert "pipx uninstall cnki-browser-mcp" in done.stdout.splitlines()[-1]


def test_uninstall_with_data_deletes_the_data_directory_too(isolated_data_dir: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    set_up(isolated_data_dir, home)
    done = run("uninstall", "--data", "--yes", data_dir=isolated_data_dir)
    assert done.returncode == 0, done.stderr
    assert f"  - 数据目录 {isolated_data_dir}（登录状态、下载的文件、检索记录）" in done.stdout
    assert f"已删除数据目录 {isolated_data_dir}" in done.stdout
    assert not isolated_data_dir.exists()
    assert "cnki" not in json.loads((home / ".claude.json").read_text("utf-8"))["mcpServers"]


def test_uninstall_names_what_it_cannot_remove_safely(isolated_data_dir: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    set_up(isolated_data_dir, home)
    text = (home / ".claude.json").read_text("utf-8")
    (home / ".claude.json").write_text("// mine\n" + text, "utf-8")
    done = run("uninstall", data_dir=isolated_data_dir)
    assert done.stdout.splitlines()[1] == f"  ! Claude Code：{home / '.claude.json'}（文件含注释，请手动删除其中的 cnki 条目）"
    assert "没有可以自动删除的内容。" in done.stdout
    assert (home / ".claude.json").read_text("utf-8").startswith("// mine\n")
