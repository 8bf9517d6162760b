"""What setup created that was not there before (a client's config file, the folders above it), for uninstall.

A config file or folder that appears makes its client look installed, to our own detection
(clients.installed_clients) and to the client itself. ``created.json`` in the data directory lists
those paths, rewritten atomically each time one is added. Uninstall deletes a listed file once the
``cnki`` entry is out of it and nothing else is left in it, together with the backups setup made of
it, then each listed folder above it that is empty. A file or folder that existed before setup is
never listed, so nothing the person had is deleted.
"""

from __future__ import annotations

import contextlib
import glob
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from cnki_mcp.core.files import BACKUP_MARK, atomic_replace

MANIFEST = "created.json"

W = TypeVar("W")


class Created(msgspec.Struct):
    files: list[str] = msgspec.field(default_factory=list)
    folders: list[str] = msgspec.field(default_factory=list)


def load(root: Path) -> Created:
    """The manifest, empty when there is none (or it cannot be read: then nothing is deleted)."""
    try:
        return msgspec.json.decode((root / MANIFEST).read_bytes(), type=Created)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return Created()


def _save(root: Path, created: Created) -> None:
    root.mkdir(parents=True, exist_ok=True)
    atomic_replace(root / MANIFEST, msgspec.json.format(msgspec.json.encode(created)) + b"\n", 0o600)


def _first_missing(path: Path) -> Path | None:
    """The highest folder above ``path`` that does not exist yet: the one creating ``path`` would create."""
    missing = None
    for folder in path.parents:
        if folder.exists():
            break
        missing = folder
    return missing


def recorded(root: Path, target: Path, write: Callable[[], W]) -> W:
    """Run ``write`` (which may create ``target``) and list in the manifest what it created."""
    existed = target.exists() or target.is_symlink()
    folder = _first_missing(target)
    try:
        return write()
    finally:
        files = [str(target)] if not existed and target.is_file() else []
        folders = [str(folder)] if folder is not None and folder.is_dir() else []
        if files or folders:
            created = load(root)
            _save(root, Created(
                files=[*created.files, *(f for f in files if f not in created.files)],
                folders=[*created.folders, *(f for f in folders if f not in created.folders)],
            ))


def bare(document: Any) -> bool:
    """Nothing left but empty tables: ``{}`` or ``{"mcpServers": {}}`` once the cnki entry is out."""
    return isinstance(document, dict) and all(bare(value) for value in document.values())


def tidy(root: Path, path: Path) -> None:
    """After the listed file ``path`` was deleted: delete setup's backups of it, then each listed folder
    above it that is now empty, and take both out of the manifest."""
    for backup in glob.glob(glob.escape(str(path)) + glob.escape(BACKUP_MARK) + "*"):
        with contextlib.suppress(OSError):
            os.unlink(backup)
    created = load(root)
    removed = {str(path)}
    for listed in created.folders:
        folder = Path(listed)
        if folder not in path.parents:
            continue
        for step in (path.parent, *path.parent.parents):
            try:
                step.rmdir()  # only an empty folder goes
            except OSError:
                break
            if step == folder:
                removed.add(listed)
                break
    _save(root, Created(
        files=[f for f in created.files if f not in removed],
        folders=[f for f in created.folders if f not in removed],
    ))
