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


def read_only_error() -> sqlite3.OperationalError:
    """The error SQLite raises when the file or its folder became read-only (SQLITE_READONLY)."""
    error = sqlite3.OperationalError("attempt to write a readonly database")
    error.sqlite_errorcode = sqlite3.SQLITE_READONLY  # type: ignore[attr-defined]
    return error


def failing_apply(
    full: Callable[[], bool], on_failure: Callable[[], None] = lambda: None, error: Callable[[], Exception] = full_disk_error
) -> Callable[..., None]:
    """``db.apply`` that raises ``error()`` (SQLITE_FULL) while ``full()`` says so (after ``on_failure``), else writes."""
    real = db_module.apply

    def apply(conn: sqlite3.Connection, puts: Sequence[Any]) -> None:
        if full():
            on_failure()
            raise error()
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


def copy_committed(source: Path, target: Path) -> None:
    """research.db of ``source`` as it is committed now, copied into ``target`` (what a SIGKILL leaves)."""
    target.mkdir(parents=True, exist_ok=True)
    src = sqlite3.connect(f"{(source / 'research.db').resolve().as_uri()}?mode=ro", uri=True)
    dst = sqlite3.connect(target / "research.db")
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()


def persisted_raw(root: Path) -> dict[str, Any]:
    """The library research.db of ``root`` holds (committed), as research.json's JSON object, read through
    ``cnki-mcp store --dump``'s function (no lock needed: a killed or running server may hold it)."""
    import tempfile

    import msgspec

    from cnki_mcp.store import migrate

    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "dump.json"
        migrate.dump(root / "research.db", target)
        return msgspec.json.decode(target.read_bytes())  # type: ignore[no-any-return]


def persisted(root: Path) -> Any:
    """Like :func:`persisted_raw`, decoded as StoreData (fails if any entry does not decode)."""
    import msgspec

    from cnki_mcp.core.model import StoreData

    return msgspec.convert(persisted_raw(root), StoreData)


# --- a hostile research.db (issue 42): what another program could leave in the file ---------------------------

# Every insert into papers empties it.
WIPING_TRIGGER = "CREATE TRIGGER wipe AFTER INSERT ON papers BEGIN DELETE FROM papers; END"
# papers replaced by a view that never ends and sorts (its temporary file grows while it runs).
ENDLESS_VIEW = (
    "ALTER TABLE papers RENAME TO papers_kept",
    "CREATE VIEW papers AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
    "SELECT CAST(n AS TEXT) AS key, '' AS stamp, '' AS title_key, randomblob(2000) AS body FROM r ORDER BY body LIMIT 1000000000000",
)


def plant(root: Path, *statements: str, args: Sequence[Any] = ()) -> None:
    """Run ``statements`` on research.db of ``root`` through a connection of its own (the last one with ``args``)."""
    conn = sqlite3.connect(root / "research.db", isolation_level=None)
    try:
        for n, statement in enumerate(statements):
            conn.execute(statement, args if n == len(statements) - 1 else ())
    finally:
        conn.close()


def zlib_bomb(inflated: int) -> bytes:
    """A zlib stream of ``inflated`` spaces: about a thousandth of that on disk."""
    import zlib

    deflate = zlib.compressobj(9)
    chunk = b" " * (1 << 20)
    parts = [deflate.compress(chunk) for _ in range(inflated >> 20)]
    return b"".join(parts) + deflate.flush()
