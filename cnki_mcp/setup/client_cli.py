"""Adding the ``cnki`` entry through a client's own command line, where that is the client's documented way.

Claude Code (``claude mcp add-json --scope user``) and Codex (``codex mcp add``) keep their config files
themselves and rewrite them while they run, so when their program is on PATH and the file has no
``cnki`` entry yet, setup lets the program add it. The file merge stays the way for everything else:
no program, the program failed, or an entry that is already there (the merge changes only our fields
and keeps what the user tuned).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from pathlib import Path

from cnki_mcp.core.files import write_backup
from cnki_mcp.setup.clients import UNREADABLE, ConfigWrite, entry, existing_entry, get_client
from cnki_mcp.setup.config_edit import SERVER_KEY

log = logging.getLogger(__name__)

CLI_SECONDS = 60.0


def cli_argv(
    client_id: str, data_root: Path | str, command: list[str] | None = None, *, headless: bool = False
) -> list[str] | None:
    """The client's own "add a server" command line with its program found on PATH, or ``None``; ``headless``
    passes CNKI_HEADLESS=1 the way that command takes an env variable (in the JSON, or ``--env KEY=VALUE``)."""
    client = get_client(client_id)
    if client.cli is None:
        return None
    argv = client.cli(entry(client.id, data_root, command, headless=headless))
    program = shutil.which(argv[0], path=os.environ.get("PATH", os.defpath))
    return None if program is None else [program, *argv[1:]]


def _subcommand(args: list[str]) -> list[str]:
    """The words of the command up to the server's name or its environment: ``mcp add-json --scope user``."""
    words = []
    for word in args:
        if word == SERVER_KEY or word.startswith("--env"):
            break
        words.append(word)
    return words


def install_with_cli(
    client_id: str, data_root: Path | str, target: Path, command: list[str] | None = None, *, headless: bool = False
) -> ConfigWrite | None:
    """Add the entry with the client's own program; ``None`` when that was not possible (merge the file)."""
    argv = cli_argv(client_id, data_root, command, headless=headless)
    if argv is None:
        return None
    try:
        if existing_entry(client_id, target) is not None:
            return None
        before = target.read_bytes() if target.is_file() else b""
    except UNREADABLE:
        return None  # the merge reports an unreadable file with its own message
    try:
        backup = write_backup(target, before) if before.strip() else None
    except OSError:
        return None
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=CLI_SECONDS, check=False)
        added = done.returncode == 0 and existing_entry(client_id, target) is not None
    except (subprocess.TimeoutExpired, *UNREADABLE) as exc:
        log.warning("%s failed: %s", argv[0], exc)
        added = False
    else:
        if not added:
            log.warning("%s exited %s: %s", argv[0], done.returncode, done.stderr.decode("utf-8", "replace")[-500:])
    if added:
        return ConfigWrite(target, backup, True, via=" ".join([Path(argv[0]).name, *_subcommand(argv[1:])]))
    if backup is not None and target.is_file() and target.read_bytes() == before:
        backup.unlink(missing_ok=True)  # nothing changed: the merge makes its own backup
    return None
