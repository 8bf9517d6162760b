"""Whether this machine can show the browser window that login and captchas need, in Chinese.

A Linux session without DISPLAY or WAYLAND_DISPLAY (a server, an SSH login, a container) cannot open
a window: Chrome exits at once with "Missing X server or $DISPLAY". setup and doctor say so before the
first search, and the browser's own English last words are turned into the same Chinese cause.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping

_ADVICE = (
    "可以：在有桌面的会话里运行客户端；或在客户端配置的 env 中设置 CNKI_HEADLESS=1（无界面浏览器，"
    "能检索和读取，但不能登录和处理验证码）；或在有桌面的电脑上运行 cnki-mcp serve --http，"
    "这台电脑用 cnki-mcp config <客户端> --http 连接它。"
)
_NO_DISPLAY_MARKERS = ("Missing X server or $DISPLAY", "cannot open display", "Unable to open X display")


def display_problem(env: Mapping[str, str] | None = None, platform: str | None = None) -> str | None:
    """A Chinese sentence when this session has no screen for the browser window, else ``None``."""
    env = os.environ if env is None else env
    system = platform or sys.platform
    if system.startswith(("win", "darwin", "cygwin")):
        return None  # both always have a window server in a user session
    if env.get("DISPLAY", "").strip() or env.get("WAYLAND_DISPLAY", "").strip():
        return None
    over_ssh = bool(env.get("SSH_CONNECTION", "").strip() or env.get("SSH_TTY", "").strip())
    where = "这是一个 SSH 会话，没有图形界面" if over_ssh else "这台电脑当前没有图形界面（没有 DISPLAY 或 WAYLAND_DISPLAY）"
    return f"{where}：登录和验证码需要的浏览器窗口打不开。{_ADVICE}"


def browser_output_cause(lines: Iterable[str]) -> str | None:
    """The Chinese cause of a browser that exited at once, read from its last output lines."""
    text = "\n".join(lines)
    if any(marker in text for marker in _NO_DISPLAY_MARKERS):
        return f"没有图形界面（浏览器报告缺少 X 服务器或 $DISPLAY）。{_ADVICE}"
    return None
