"""Snapshots of pages the product could not handle, kept under ``<data>/diagnostics/`` for a report.

A snapshot is the page as the product saw it (HTML, or the JSON a page was fed with), redacted by
``redact.redact_page`` (HTML: its scripts removed too) or ``redact.redact_markup`` (JSON), with a
one-line header naming its kind, redacted URL, time and parser version, plus a PNG screenshot when
a tab was rendered. Files are private to the user (0600), the folder keeps the newest 200.

Blocking file I/O: call ``save_snapshot`` through ``asyncio.to_thread`` from async code.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
from datetime import UTC, datetime
from pathlib import Path

from cnki_mcp.core.clock import utc_now_iso
from cnki_mcp.core.model import PARSER_VERSION
from cnki_mcp.core.redact import redact_markup, redact_page, redact_url

log = logging.getLogger(__name__)

SNAPSHOT_KEEP = 200
_EXTENSIONS = frozenset({"html", "json"})


def save_snapshot(
    diagnostics_dir: Path,
    kind: str,
    body: str,
    url: str = "",
    screenshot: bytes | None = None,
    *,
    extension: str = "html",
) -> Path:
    """Store ``body`` (HTML or JSON text) redacted, with an optional screenshot beside it."""
    if extension not in _EXTENSIONS:
        raise ValueError(f"snapshot extension must be one of {sorted(_EXTENSIONS)}")
    diagnostics_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    label = re.sub(r"[^a-z0-9_-]+", "-", kind.lower()).strip("-") or "page"
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = diagnostics_dir / f"{label}-{stamp}-{secrets.token_hex(3)}.{extension}"
    where = redact_url(url).replace("--", "%2D%2D")
    fields = f"cnki-mcp snapshot kind={label} url={where} saved_at={utc_now_iso()} parser={PARSER_VERSION}"
    if extension == "html":
        text = f"<!-- {fields} -->\n" + redact_page(body)
    else:
        text = f"// {fields}\n" + redact_markup(body)
    _write_private(path, text.encode("utf-8", "replace"))
    if screenshot:
        _write_private(path.with_suffix(".png"), screenshot)
    _prune(diagnostics_dir)
    log.warning("saved page snapshot %s", path)
    return path


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _prune(folder: Path) -> None:
    saved = [p for p in folder.iterdir() if p.suffix in (".html", ".json")]
    saved.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    for old in saved[SNAPSHOT_KEEP:]:
        old.unlink(missing_ok=True)
        old.with_suffix(".png").unlink(missing_ok=True)
