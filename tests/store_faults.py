"""Faults of research.db for tests: a full disk as SQLite reports it, and reading what a database holds from
outside the store (a second connection, as another process would)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cnki_mcp.store import db as db_module


def full_disk_error() -> sqlite3.OperationalError:
    """The error SQLite raises when the disk is full (SQLITE_FULL), as the writer meets it."""
    error = sqlite3.OperationalError("database or disk is full")
    error.sqlite_errorcode = sqlite3.SQLITE_FULL  # type: ignore[attr-defined]
    error.sqlite_errorname = "SQLITE_FULL"  # type: ignore[attr-defined]
    return error


def failing_apply(full: Callable[[], bool], on_failure: Callable[[], None] = lambda: None) -> Callable[..., None]:
    """``db.apply`` that raises SQLITE_FULL while ``full()`` says so (after ``on_failure``), else writes."""
    real = db_module.apply

    def apply(conn: sqlite3.Connection, puts: Sequence[Any]) -> None:
        if full():
            on_failure()
            raise full_disk_error()
        real(conn, puts)

    return apply


def stored_keys(root: Path, table: str) -> set[str]:
    """The keys research.db holds in ``table``, read through a connection of its own."""
    conn = sqlite3.connect(f"{(root / 'research.db').resolve().as_uri()}?mode=ro", uri=True)
    try:
        return {row[0] for row in conn.execute(f"SELECT key FROM {table}")}
    finally:
        conn.close()


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> float:
    """Seconds until ``predicate()`` held (fails after ``timeout``)."""
    began = time.monotonic()
    while not predicate():
        assert time.monotonic() - began < timeout, "timed out"
        time.sleep(0.005)
    return time.monotonic() - began
