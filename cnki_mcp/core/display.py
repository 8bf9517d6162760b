"""Whether this machine can show the browser window that login and captchas need, in Chinese (English for the CLI).

A Linux session without DISPLAY or WAYLAND_DISPLAY (a server, an SSH login, a container) cannot open
a window: Chrome exits at once with "Missing X server or $DISPLAY". setup and doctor say so before the
first search, and the browser's own English last words are turned into the same Chinese cause. Each
sentence is a (Chinese, English) pair: tools always say the Chinese one, the CLI the one of its language.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping

_ADVICE = (
    "可以：在有桌面的会话里运行客户端；或在客户端配置的 env 中设置 CNKI_HEADLESS=1（无界面浏览器，"
    "能检索和读取，但不能登录和处理验证码）；或在有桌面的电脑上运行 cnki-mcp serve --http，"
    "这台电脑用 cnki-mcp config <客户端> --http 连接它。",
    "You can: run the client in a desktop session; or set CNKI_HEADLESS=1 in the env of the client's config "
    "(a headless browser: searching and reading work, login and captchas do not); or run cnki-mcp serve --http "
    "on a computer with a desktop and connect this one with cnki-mcp config <client> --http.",
)
_SSH = ("这是一个 SSH 会话，没有图形界面", "This is an SSH session, without a screen")
_LOCAL = ("这台电脑当前没有图形界面（没有 DISPLAY 或 WAYLAND_DISPLAY）", "This computer has no screen now (no DISPLAY or WAYLAND_DISPLAY)")
_NO_WINDOW = ("{where}：登录和验证码需要的浏览器窗口打不开。{advice}",
              "{where}: the browser window that login and captchas need cannot open. {advice}")
_CAUSE = ("没有图形界面（浏览器报告缺少 X 服务器或 $DISPLAY）。{advice}",
          "No screen (the browser reports a missing X server or $DISPLAY). {advice}")
_NO_DISPLAY_MARKERS = ("Missing X server or $DISPLAY", "cannot open display", "Unable to open X display")


def display_problem(
    env: Mapping[str, str] | None = None, platform: str | None = None, *, english: bool = False
) -> str | None:
    """A Chinese (or English) sentence when this session has no screen for the browser window, else ``None``."""
    env = os.environ if env is None else env
    system = platform or sys.platform
    if system.startswith(("win", "darwin", "cygwin")):
        return None  # both always have a window server in a user session
    if env.get("DISPLAY", "").strip() or env.get("WAYLAND_DISPLAY", "").strip():
        return None
    over_ssh = bool(env.get("SSH_CONNECTION", "").strip() or env.get("SSH_TTY", "").strip())
    side = int(english)
    where = (_SSH if over_ssh else _LOCAL)[side]
    return _NO_WINDOW[side].format(where=where, advice=_ADVICE[side])


def browser_output_cause(lines: Iterable[str], *, english: bool = False) -> str | None:
    """The Chinese (or English) cause of a browser that exited at once, read from its last output lines."""
    text = "\n".join(lines)
    if any(marker in text for marker in _NO_DISPLAY_MARKERS):
        side = int(english)
        return _CAUSE[side].format(advice=_ADVICE[side])
    return None
