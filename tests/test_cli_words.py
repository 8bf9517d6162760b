"""Pure rules behind issue 30: the CLI's language, its usage-error words, the display check, ignored settings."""

from __future__ import annotations

import pytest

from cnki_mcp.core import settings
from cnki_mcp.core.display import browser_output_cause, display_problem
from cnki_mcp.setup import cli_words


@pytest.mark.parametrize(("env", "expected"), [
    ({}, "zh"),
    ({"LANG": "zh_CN.UTF-8"}, "zh"),
    ({"LANG": "C.UTF-8"}, "zh"),
    ({"LANG": "en_US.UTF-8"}, "en"),
    ({"LANG": "zh_CN.UTF-8", "LC_ALL": "en_GB.UTF-8"}, "en"),
    ({"LC_MESSAGES": "en_US", "LANG": "zh_CN"}, "en"),
    ({"LANG": "en_US.UTF-8", "CNKI_LANG": "zh"}, "zh"),
    ({"CNKI_LANG": "EN"}, "en"),
])
def test_language(env: dict[str, str], expected: str) -> None:
    assert cli_words.language(env) == expected


def test_unknown_command_names_the_nearest_and_every_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CNKI_LANG", "zh")
    assert cli_words.unknown_command("doctr", ["doctor", "serve"]) == "没有 doctr 这个命令。是不是 doctor？全部命令：doctor、serve。"
    assert cli_words.unknown_command("xyz", ["doctor", "serve"]) == "没有 xyz 这个命令。全部命令：doctor、serve。"


@pytest.mark.parametrize(("english", "chinese"), [
    ("No such option: --hos Did you mean --host?", "没有 --hos 这个选项。是不是 --host？"),
    ("No such option '--zz'.", "没有 --zz 这个选项。"),
    ("Option '--client' requires an argument.", "选项 --client 需要一个值。"),
    ("Got unexpected extra argument (x)", "多余的参数：x。"),
    ("Invalid value for '--port': 'a' is not a valid integer.", "--port 的值无效：a 不是整数。"),
    ("Invalid value for '--port': 99999 is not in the range 0<=x<=65535.", "--port 的值无效：99999 不在范围 0<=x<=65535 内。"),
])
def test_usage_error_words(english: str, chinese: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CNKI_LANG", "zh")
    assert cli_words.error_text(english) == chinese
    monkeypatch.setenv("CNKI_LANG", "en")
    assert cli_words.error_text(english) == english


@pytest.mark.parametrize(("env", "platform"), [
    ({"DISPLAY": ":0"}, "linux"),
    ({"WAYLAND_DISPLAY": "wayland-0"}, "linux"),
    ({}, "darwin"),
    ({}, "win32"),
])
def test_a_screen_is_no_problem(env: dict[str, str], platform: str) -> None:
    assert display_problem(env, platform) is None


def test_no_screen_on_linux_and_over_ssh() -> None:
    local = display_problem({"DISPLAY": " "}, "linux")
    remote = display_problem({"SSH_TTY": "/dev/pts/1"}, "linux")
    assert local is not None and local.startswith("这台电脑当前没有图形界面（没有 DISPLAY 或 WAYLAND_DISPLAY）：")
    assert remote is not None and remote.startswith("这是一个 SSH 会话，没有图形界面：")
    for text in (local, remote):
        assert "CNKI_HEADLESS=1" in text and "cnki-mcp serve --http" in text and "cnki-mcp config <客户端> --http" in text


def test_the_browser_s_own_words_become_the_chinese_cause() -> None:
    output = ["[123:123:ERROR:ozone_platform_x11.cc(240)] Missing X server or $DISPLAY",
              "[123:123:ERROR:env.cc(257)] The platform failed to initialize.  Exiting."]
    cause = browser_output_cause(output)
    assert cause is not None and cause.startswith("没有图形界面（浏览器报告缺少 X 服务器或 $DISPLAY）。")
    assert browser_output_cause(["Trace/breakpoint trap"]) is None


def test_ignored_settings_are_named_with_the_default_used(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in settings.POSITIVE_INT_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CNKI_REQUEST_INTERVAL_MS", "fast")
    monkeypatch.setenv("CNKI_MAX_INFLIGHT", "0")
    monkeypatch.setenv("CNKI_WORKERS", "4")
    monkeypatch.setenv("CNKI_INLINE_WAIT_SECONDS", "${user_config.wait}")  # an unfilled placeholder is "not set"
    assert settings.ignored_settings() == [("CNKI_REQUEST_INTERVAL_MS", "fast", 500), ("CNKI_MAX_INFLIGHT", "0", 6)]
    assert settings.request_interval_ms() == 500 and settings.workers() == 4
