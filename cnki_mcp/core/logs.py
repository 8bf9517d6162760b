"""Where the server's log goes: stderr (stdout is the MCP protocol) and a file the user can send.

The file is ``CNKI_LOG_FILE`` when set, else ``<data>/logs/cnki-mcp.log``, rotated at 1 MB with three
old files kept, because some clients hide a server's stderr. ``CNKI_LOG_LEVEL`` picks the level; a
value that is not a level name falls back to WARNING with a warning, it never stops the server.
Records go through a queue to a writer thread, so logging never blocks the event loop on a disk.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import queue
import sys
from pathlib import Path

from cnki_mcp.core.files import make_private_dir
from cnki_mcp.core.redact import LogRedaction

DEFAULT_LEVEL = "WARNING"
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOG_BYTES = 1_000_000
LOG_BACKUPS = 3
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_listener: logging.handlers.QueueListener | None = None


def level_setting(*, english: bool = False) -> tuple[str, str | None]:
    """The level name to use and, when CNKI_LOG_LEVEL is not a level, a Chinese (or, for the CLI, English)
    warning saying so."""
    raw = os.environ.get("CNKI_LOG_LEVEL", "").strip()
    if not raw:
        return DEFAULT_LEVEL, None
    if raw.upper() in LEVELS:
        return raw.upper(), None
    if english:
        return DEFAULT_LEVEL, f"CNKI_LOG_LEVEL={raw!r} is not a log level ({', '.join(LEVELS)}), so {DEFAULT_LEVEL} is used."
    return DEFAULT_LEVEL, f"CNKI_LOG_LEVEL={raw!r} 不是日志级别（可选 {'、'.join(LEVELS)}），已使用 {DEFAULT_LEVEL}。"


def log_file(data_root: Path) -> Path:
    """CNKI_LOG_FILE when set (made absolute), else the rotating log in the data directory."""
    configured = os.environ.get("CNKI_LOG_FILE", "").strip()
    if configured:
        return Path(os.path.abspath(os.path.expanduser(configured)))
    return data_root / "logs" / "cnki-mcp.log"


def configure(data_root: Path) -> None:
    """Send the process's log to stderr and the log file, from a writer thread."""
    global _listener
    level, warning = level_setting()
    formatter = logging.Formatter(FORMAT)
    outputs: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    path = log_file(data_root)
    problem: str | None = None
    try:
        make_private_dir(path.parent)
        outputs.append(
            logging.handlers.RotatingFileHandler(path, maxBytes=LOG_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8")
        )
    except OSError as exc:
        problem = f"无法写日志文件 {path}（{exc.strerror or exc}），日志只写到标准错误输出。"
    for handler in outputs:
        handler.setFormatter(formatter)
    records: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    root = logging.getLogger()
    queued = logging.handlers.QueueHandler(records)
    queued.addFilter(LogRedaction())  # before the queue: no URL, cookie or token reaches either output
    root.handlers[:] = [queued]
    root.setLevel(level)
    _listener = logging.handlers.QueueListener(records, *outputs, respect_handler_level=False)
    _listener.start()
    for message in (warning, problem):
        if message:
            logging.getLogger(__name__).warning(message)


def shutdown() -> None:
    """Write out what is queued and close the outputs (before a hard exit, too)."""
    global _listener
    if _listener is not None:
        _listener.stop()
        _listener = None
    logging.shutdown()
