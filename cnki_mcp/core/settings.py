"""Process settings read from the environment, and where the data directory lives.

Numeric settings follow the reference: a value must be a positive integer, anything else (unset,
empty, zero, negative, not a number) silently falls back to the default, so a typo in a client's
``env`` block never stops the server from starting.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from cnki_mcp.core.errors import CnkiError

APP_DIR_NAME = "cnki-mcp"


# The hidden command (cli.py) a server starts to end its browser when the server itself ends (site/reaper.py).
GUARD_COMMAND = "browser-guard"


def is_placeholder(value: str) -> bool:
    """A ``${...}`` left in a value by a host that had nothing to put there (an MCP Bundle's optional
    ``${user_config.browser_path}``, say): it means "not set"."""
    text = value.strip()
    return text.startswith("${") and text.endswith("}")


def env_text(name: str) -> str:
    """An environment setting, stripped; unset, blank and unfilled placeholders are all ``""``."""
    value = os.environ.get(name, "").strip()
    return "" if is_placeholder(value) else value


def env_positive_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    try:
        value = int(raw)
    except ValueError:
        return default
    return value if value > 0 else default


# Every numeric setting and its default (doctor names a value that falls back).
POSITIVE_INT_SETTINGS = {
    "CNKI_REQUEST_INTERVAL_MS": 500,
    "CNKI_MAX_INFLIGHT": 6,
    "CNKI_WORKERS": 8,
    "CNKI_INLINE_WAIT_SECONDS": 40,
    "CNKI_VERIFICATION_WAIT_SECONDS": 20 * 60,
}


def ignored_settings() -> list[tuple[str, str, int]]:
    """(name, value, default used) for each numeric setting that is set but not a positive integer."""
    found = []
    for name, default in POSITIVE_INT_SETTINGS.items():
        raw = os.environ.get(name, "").strip()
        if raw and not is_placeholder(raw) and env_positive_int(name, -1) == -1:
            found.append((name, raw, default))
    return found


def request_interval_ms() -> int:
    """CNKI_REQUEST_INTERVAL_MS: spacing between request starts."""
    return env_positive_int("CNKI_REQUEST_INTERVAL_MS", 500)


def max_inflight() -> int:
    """CNKI_MAX_INFLIGHT: site requests in flight at once."""
    return env_positive_int("CNKI_MAX_INFLIGHT", 6)


def workers() -> int:
    """CNKI_WORKERS: concurrent detail-page workers (concurrency only; the limiter sets the rate)."""
    return env_positive_int("CNKI_WORKERS", 8)


def inline_wait_seconds() -> int:
    """CNKI_INLINE_WAIT_SECONDS: how long a tool call waits inline before returning an operation_id."""
    return env_positive_int("CNKI_INLINE_WAIT_SECONDS", 40)


# Search planning asks the client's model first; it may take this share of the inline wait, at most
# SAMPLING_WAIT_MAX_SECONDS, so a client that never answers still gets the search's answer in time.
SAMPLING_WAIT_MAX_SECONDS = 15.0
SAMPLING_WAIT_SHARE = 0.4


def sampling_wait_seconds() -> float:
    """How long planning waits for a sampling reply (15 s with the default 40 s inline wait)."""
    return min(SAMPLING_WAIT_MAX_SECONDS, inline_wait_seconds() * SAMPLING_WAIT_SHARE)


def verification_wait_seconds() -> int:
    """CNKI_VERIFICATION_WAIT_SECONDS: how long a page handed to the person (captcha, login) is waited for."""
    return env_positive_int("CNKI_VERIFICATION_WAIT_SECONDS", 20 * 60)


def daily_download_limit(configured: int) -> int:
    """CNKI_DAILY_DOWNLOAD_LIMIT, else config.json's ``daily_download_limit``: successful downloads per day in
    China before downloads stop; 0 = no cap. Unlike the settings above, a bad value is an error naming the
    setting (INVALID_SETTING), never the default: a typo must not lift a cap that keeps the account safe."""
    raw = env_text("CNKI_DAILY_DOWNLOAD_LIMIT")
    if raw:
        if not raw.isascii() or not raw.isdigit():
            raise _bad_limit("环境变量 CNKI_DAILY_DOWNLOAD_LIMIT", "CNKI_DAILY_DOWNLOAD_LIMIT", raw)
        return int(raw)
    if configured < 0:
        raise _bad_limit("config.json 的 daily_download_limit", "daily_download_limit", str(configured))
    return configured


def _bad_limit(where: str, name: str, value: str) -> CnkiError:
    return CnkiError(
        "INVALID_SETTING",
        f"{where} 的值 {value[:40]!r} 无效：每日下载上限须为不小于 0 的整数（0 表示不限）。请改正后重试；未下载任何文件。",
        details={"setting": where, "name": name, "value": value[:40]},
    )


def data_root() -> Path:
    """The data directory: config.json, research.db, the browser profile, downloads, exports.

    Chosen in this order:

    1. ``CNKI_DATA_DIR`` when set (a relative value is made absolute against the current directory,
       so every later use agrees even if the process changes directory).
    2. A frozen executable (PyInstaller) keeps ``data/`` beside itself, as the reference does: the
       release is a self-contained folder the user unpacks and double-clicks, and its data — the
       login profile above all — should travel and be deleted together with it.
    3. Otherwise (installed with pip or run from source) the program lives in a site-packages or
       checkout directory that may be shared, read-only or replaced on upgrade, so the data goes to
       the platform's per-user data directory instead:
       Linux ``$XDG_DATA_HOME/cnki-mcp`` (default ``~/.local/share/cnki-mcp``),
       macOS ``~/Library/Application Support/cnki-mcp``, Windows ``%LOCALAPPDATA%\\cnki-mcp``.
    """
    configured = env_text("CNKI_DATA_DIR")
    if configured:
        return Path(os.path.abspath(os.path.expanduser(configured)))
    if getattr(sys, "frozen", False):
        return Path(os.path.abspath(sys.executable)).parent / "data"
    return user_data_dir()


def user_data_dir() -> Path:
    home = Path.home()
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA", "").strip()
        return (Path(base) if base else home / "AppData" / "Local") / APP_DIR_NAME
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / APP_DIR_NAME
    xdg = os.environ.get("XDG_DATA_HOME", "").strip()
    # The XDG spec says relative values are invalid and must be ignored.
    base_dir = Path(xdg) if xdg and os.path.isabs(xdg) else home / ".local" / "share"
    return base_dir / APP_DIR_NAME


def normalise_os(os_name: str | None = None) -> str:
    """The OS family (darwin, windows or linux) of ``os_name`` (its aliases), or of this machine."""
    name = (os_name or sys.platform).lower()
    if name in ("darwin", "macos", "mac", "osx"):
        return "darwin"
    if name in ("windows", "win32", "cygwin", "win"):
        return "windows"
    return "linux"
