"""research.db: the SQLite database of a data directory — schema, forward migrations, the connections and the
one writer thread.

Every section of the library is a table of ``key → body`` (the value's msgspec JSON, zlib-compressed), with
the columns its queries need beside it (``stamp`` for retention, ``title_key`` and ``paper_keys`` for the
catalogue), so a lookup is by key and never a scan. Small singletons (retired ids, recent error codes, the
last field check, known names, the daily download count) are rows of ``meta``.

Writes go through :class:`Writer`: one thread with its own connection applies what was submitted, in one
short transaction per batch (the later of two writes of a key wins), commits, and then drops those keys
from the readers' pending view. Reads use a second connection (WAL: a reader never waits for the writer).
A batch that fails (disk full, a read-only directory) stays queued and is tried again with back-off. A
write that fails by itself (a value that cannot be encoded) is dropped alone and reported; the rest commit.
Should the thread ever end on its own, every wait returns at once and every answer says so (STORE_NOT_SAVED).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec

from cnki_mcp.core.clock import utc_now_iso
from cnki_mcp.core.errors import CnkiError, ErrorCode
from cnki_mcp.core.identity import identity_keys
from cnki_mcp.core.model import Paper
from cnki_mcp.core.text import title_key

log = logging.getLogger(__name__)

DB_FILE = "research.db"
SCHEMA_VERSION = 4
# The map sections of the library, in the order of StoreData; each is a table (key, stamp, body).
TABLES = ("papers", "sources", "searches", "search_cache", "operations", "artifacts", "relations", "facets", "watches")
META_KEYS = ("retired_searches", "retired_operations", "recent_errors", "last_site_check", "known_names", "downloads_by_day")
# After failed writes the next try waits 4, 8, 16 … s, at most this long.
RETRY_MAX_SECONDS = 30.0
RETRY_FIRST_SECONDS = 2.0
# Pages of the readers' cache (negative: KiB), so a large library does not fill the memory.
READ_CACHE_KIB = 16384
# The largest value a row may hold (SQLite's length limit on every connection: a bigger one is not read) and
# the most a body may decompress to (a 2 MB zlib bomb would otherwise become gigabytes in memory).
ROW_BYTES = 32 * 1024 * 1024
BODY_BYTES = 64 * 1024 * 1024
# The longest one statement of the readers' connection may run (an endless view, a runaway sort's temp file).
STATEMENT_SECONDS = 20.0
# The WAL is cut back to this size whenever it is reset (SQLite keeps it at its largest otherwise), and a
# commit that finds it larger asks for a checkpoint that does not wait for readers.
WAL_KEEP_BYTES = 4 * 1024 * 1024

_BODY = msgspec.json.Encoder()


def encode_body(value: Any) -> bytes:
    return zlib.compress(_BODY.encode(value), 1)


class BodyTooLarge(ValueError):
    """A body that decompresses past BODY_BYTES (not one we wrote)."""


def body_json(blob: bytes) -> bytes:
    """A stored body as the JSON text of its value; BodyTooLarge past BODY_BYTES, zlib.error when not zlib."""
    inflate = zlib.decompressobj()
    parts, size, rest = [], 0, blob
    while not inflate.eof:
        part = inflate.decompress(rest, 1 << 20)  # a megabyte at a time: a bomb stops at the limit
        rest = inflate.unconsumed_tail
        if not part and not rest:
            break  # the stream ends early
        size += len(part)
        if size > BODY_BYTES:
            raise BodyTooLarge(f"a stored value decompresses to more than {BODY_BYTES} bytes")
        parts.append(part)
    if not inflate.eof:
        raise zlib.error("incomplete or truncated stream")
    return b"".join(parts)


# --- schema and migrations ---------------------------------------------------------------------------


def _schema_1(conn: sqlite3.Connection) -> None:
    """The library's tables: one per section of that version (a later section is a later step), and the singletons."""
    for table in ("papers", "sources", "searches", "search_cache", "operations", "artifacts", "relations"):
        extra = ", title_key TEXT NOT NULL DEFAULT ''" if table == "papers" else ""
        conn.execute(f"CREATE TABLE {table} (key TEXT PRIMARY KEY, stamp TEXT NOT NULL DEFAULT ''{extra}, body BLOB NOT NULL)")
    conn.execute("CREATE INDEX papers_by_title ON papers (title_key)")
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, body BLOB NOT NULL)")


def _schema_2(conn: sqlite3.Connection) -> None:
    """The identity index of the catalogue (CNKI file name, DOI, bibliography → record), filled from the
    papers already stored, so matching an observation is a lookup instead of an index built in memory."""
    conn.execute("CREATE TABLE paper_keys (key TEXT NOT NULL, ref TEXT NOT NULL, PRIMARY KEY (key, ref)) WITHOUT ROWID")
    conn.execute("CREATE INDEX paper_keys_by_ref ON paper_keys (ref)")
    decoder = msgspec.json.Decoder(Paper)
    rows = conn.execute("SELECT key, body FROM papers").fetchall()
    for ref, blob in rows:
        paper = decoder.decode(body_json(blob))
        conn.executemany("INSERT OR IGNORE INTO paper_keys VALUES (?, ?)", [(key, ref) for key in identity_keys(paper)])


def _schema_3(conn: sqlite3.Connection) -> None:
    """The facet answers of search_facets (issue 32), kept newest first like the citation lists."""
    conn.execute("CREATE TABLE facets (key TEXT PRIMARY KEY, stamp TEXT NOT NULL DEFAULT '', body BLOB NOT NULL)")


def _schema_4(conn: sqlite3.Connection) -> None:
    """The topic watches (issue 43), kept however old: a person removes them."""
    conn.execute("CREATE TABLE watches (key TEXT PRIMARY KEY, stamp TEXT NOT NULL DEFAULT '', body BLOB NOT NULL)")


# Migration n takes a database of schema version n-1 to version n; a new version appends one here (and a test).
MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (_schema_1, _schema_2, _schema_3, _schema_4)


class NewerSchema(Exception):
    def __init__(self, version: int) -> None:
        super().__init__(f"schema version {version}")
        self.version = version


def present_tables(conn: sqlite3.Connection) -> tuple[str, ...]:
    """The sections ``conn``'s file has tables for: a database of an older schema (not yet migrated, read
    by ``store --dump`` or set aside damaged) lacks the later ones, which are then empty, not lost."""
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return tuple(table for table in TABLES if table in names)


def schema_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, target: int = SCHEMA_VERSION) -> list[int]:
    """Bring the database forward to ``target``, one transaction per step; the versions applied."""
    version = schema_version(conn)
    if version > SCHEMA_VERSION:
        raise NewerSchema(version)
    applied = []
    while version < target:
        step = MIGRATIONS[version]
        conn.execute("BEGIN IMMEDIATE")
        try:
            step(conn)
            conn.execute(f"PRAGMA user_version = {version + 1}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        version += 1
        applied.append(version)
    return applied


def connect(path: Path, *, read_only: bool = False, wal: bool = True) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit); WAL, full sync, a bounded cache. The
    file may be anyone's: no function the schema names runs unless SQLite deems it harmless (``trusted_schema``
    off), and no value longer than ROW_BYTES is read."""
    if read_only:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None, check_same_thread=False)
    else:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, ROW_BYTES)
    conn.execute("PRAGMA trusted_schema = OFF")
    conn.execute("PRAGMA busy_timeout = 5000")
    conn.execute(f"PRAGMA cache_size = -{READ_CACHE_KIB}")
    if not read_only:
        if wal:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA journal_size_limit = {WAL_KEEP_BYTES}")
        conn.execute("PRAGMA synchronous = FULL")
    return conn


def _schema_of(conn: sqlite3.Connection) -> set[tuple[str, str, str, str]]:
    return {(str(kind), str(name), str(table), str(sql)) for kind, name, table, sql in
            conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master")}


def expected_schema(version: int) -> set[tuple[str, str, str, str]]:
    """Every table, index, view and trigger our migrations create up to ``version``, as sqlite_master lists them."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        migrate(conn, version)
        return _schema_of(conn)
    finally:
        conn.close()


def foreign_schema(conn: sqlite3.Connection) -> list[str]:
    """What the file's schema has that our migrations did not create (a trigger, a view, a table changed or
    added) or lacks, read from sqlite_master only (nothing of the file runs); [] when it is ours."""
    version = schema_version(conn)
    if version > SCHEMA_VERSION:
        return []  # refused as newer, untouched
    found, ours = _schema_of(conn), expected_schema(version)
    problems = [f"{kind} {name} 不是 cnki-mcp 建立的" for kind, name, _table, _sql in sorted(found - ours)]
    problems += [f"缺少 {kind} {name}" for kind, name, _table, _sql in sorted(ours - found)
                 if (kind, name) not in {(k, n) for k, n, _t, _s in found}]
    return problems


def oversized_rows(conn: sqlite3.Connection, tables: Sequence[str]) -> list[str]:
    """Rows of ``tables`` (and meta) with a value longer than ROW_BYTES, which no connection of ours reads."""
    found = []
    for table in (*tables, "meta"):
        columns = [row[0] for row in conn.execute("SELECT name FROM pragma_table_info(?)", (table,))]
        if not columns:
            continue  # not there yet (a new file, one of an older schema)
        total = " + ".join(f"length(CAST({column} AS BLOB))" for column in columns)
        try:
            rows = conn.execute(f"SELECT rowid FROM {table} WHERE {total} > ? LIMIT 3", (ROW_BYTES,)).fetchall()
        except sqlite3.Error as exc:
            if not _disk_error(exc):  # a value past the limit may be refused even to length()
                found.append(f"{table}：{exc}")
            continue  # damaged pages: the start's check tells them
        found += [f"{table} 第 {rowid} 行超过 {ROW_BYTES // (1024 * 1024)} MB" for (rowid,) in rows]
    return found


def sound_tables(conn: sqlite3.Connection) -> tuple[str, ...]:
    """The sections whose table is exactly ours (the rows a hostile file's other tables hold are not read)."""
    ours = {name: sql for kind, name, _table, sql in expected_schema(SCHEMA_VERSION) if kind == "table"}
    found = {name: sql for kind, name, _table, sql in _schema_of(conn) if kind == "table"}
    return tuple(table for table in (*TABLES, "meta") if table in found and found[table] == ours.get(table))


def quick_check(conn: sqlite3.Connection) -> list[str]:
    """SQLite's own check of the file's structure; [] when sound."""
    rows = [str(row[0]) for row in conn.execute("PRAGMA quick_check(20)").fetchall()]
    return [] if rows == ["ok"] else rows


def integrity_check(conn: sqlite3.Connection) -> list[str]:
    """The full check (indexes against their tables too); [] when sound."""
    rows = [str(row[0]) for row in conn.execute("PRAGMA integrity_check(100)").fetchall()]
    return [] if rows == ["ok"] else rows


def failure_kind(exc: BaseException) -> str:
    """What an error of the database says about the disk: disk_full, read_only, corrupt or io_error."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary == sqlite3.SQLITE_FULL:
        return "disk_full"
    if primary in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_CANTOPEN):
        return "read_only"
    if primary in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_TOOBIG):  # TOOBIG: a row we never wrote
        return "corrupt"
    return "io_error"


# --- writes ----------------------------------------------------------------------------------------------


class Put(msgspec.Struct, frozen=True):
    """A row written whole: ``table`` (or "meta") ``key`` → ``body``, the value itself (None: the row is
    deleted), encoded by the writer thread when it writes the row — so the event loop only hands it over,
    and of several writes of a key queued together only the last is encoded. Papers carry their index keys."""

    table: str
    key: str
    body: Any
    stamp: str = ""
    title_key: str = ""
    paper_keys: tuple[str, ...] = ()


def paper_row(paper: Paper) -> tuple[str, tuple[str, ...]]:
    """The catalogue columns of a paper: its title key and identity keys."""
    return (title_key(paper.title) if paper.title else ""), tuple(identity_keys(paper))


def _stored(value: Any) -> bytes:
    """``value``'s body, refused (ValueError: that write alone is dropped) past what a reader would read back."""
    body = encode_body(value)
    if len(body) > ROW_BYTES:
        raise ValueError(f"a value of {len(body)} bytes, over the {ROW_BYTES} a row may hold")
    return body


def apply(conn: sqlite3.Connection, puts: Sequence[Put]) -> None:
    """Write ``puts`` in the open transaction of ``conn``."""
    for put in puts:
        if put.table == "meta":
            if put.body is None:
                conn.execute("DELETE FROM meta WHERE key = ?", (put.key,))
            else:
                conn.execute(
                    "INSERT INTO meta (key, body) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET body = excluded.body", (put.key, _stored(put.body))
                )
            continue
        if put.table == "papers":
            conn.execute("DELETE FROM paper_keys WHERE ref = ?", (put.key,))
        if put.body is None:
            conn.execute(f"DELETE FROM {put.table} WHERE key = ?", (put.key,))
            continue
        if put.table == "papers":
            conn.execute(
                "INSERT INTO papers (key, stamp, title_key, body) VALUES (?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
                "stamp = excluded.stamp, title_key = excluded.title_key, body = excluded.body",
                (put.key, put.stamp, put.title_key, _stored(put.body)),
            )
            conn.executemany("INSERT OR IGNORE INTO paper_keys VALUES (?, ?)", [(key, put.key) for key in put.paper_keys])
        else:
            conn.execute(
                f"INSERT INTO {put.table} (key, stamp, body) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
                "stamp = excluded.stamp, body = excluded.body",
                (put.key, put.stamp, _stored(put.body)),
            )


def _disk_error(exc: BaseException) -> bool:
    """An error of the disk or the database (retried), not of one value (SQLITE_TOOBIG, an encoding error)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(exc, sqlite3.Error | OSError) and not (isinstance(code, int) and code & 0xFF == sqlite3.SQLITE_TOOBIG)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def retry_delay(failures: int) -> float:
    """The wait before the next try after ``failures`` failed commits: 4, 8, 16 … s, at most 30 s, so a full
    disk is not hammered."""
    return min(RETRY_FIRST_SECONDS * 2 ** min(failures, 16), RETRY_MAX_SECONDS)


class SaveFailure(msgspec.Struct):
    kind: str  # disk_full | read_only | corrupt | io_error; rejected (one write dropped) | writer_stopped
    error: str


# The kinds of failure that are not the disk's: nothing to retry.
REJECTED = "rejected"
WRITER_STOPPED = "writer_stopped"


class Writer:
    """The one thread that writes research.db. ``submit`` never waits for the disk; ``wait`` does.

    ``pending`` is what readers see before it is committed: ``(table, key) → (sequence, Put)``; the writer
    drops an entry once a commit holds it (unless a later write of the key is still queued).
    """

    def __init__(self, conn: sqlite3.Connection, on_result: Callable[[SaveFailure | None], None]) -> None:
        self._conn = conn
        self._on_result = on_result
        self._cond = threading.Condition()
        self._queue: list[tuple[int, Put]] = []
        self.pending: dict[tuple[str, str], tuple[int, Put]] = {}
        self._submitted = 0
        self._committed = 0
        self._attempted = 0  # the newest sequence a finished attempt covered (committed or not)
        self._attempts = 0  # attempts finished
        self._failures = 0
        self._force = False
        self._stop = False
        self.failure: SaveFailure | None = None
        self._gone = False  # the thread ended on its own: nothing will be committed any more
        self._next_try = 0.0
        self.pending_since = ""  # when the oldest change not committed yet was submitted
        self._waiters: list[tuple[int, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        # Milliseconds of each commit (its transaction and fsync), newest last: the benchmark's p99.
        self.commit_ms: list[float] = []
        self._thread = threading.Thread(target=self._run, name="store-writer", daemon=True)
        self._thread.start()

    # -- called from any thread --

    def submit(self, puts: Sequence[Put]) -> int:
        with self._cond:
            if not self._queue:
                self.pending_since = utc_now_iso()
            for put in puts:
                self._submitted += 1
                entry = (self._submitted, put)
                self._queue.append(entry)
                self.pending[(put.table, put.key)] = entry
            self._cond.notify_all()
            return self._submitted

    def lookup(self, table: str, key: str) -> tuple[bool, Any]:
        """(True, value) when a write of the key is not committed yet (value None: deleted)."""
        with self._cond:
            entry = self.pending.get((table, key))
        return (False, None) if entry is None else (True, entry[1].body)

    def pending_of(self, table: str) -> list[Put]:
        with self._cond:
            return [put for (name, _key), (_seq, put) in self.pending.items() if name == table]

    @property
    def submitted(self) -> int:
        return self._submitted

    @property
    def committed(self) -> int:
        return self._committed

    def settled(self, target: int) -> bool:
        """Whether every write up to ``target`` is committed, or the writer is failing or gone (the caller is told)."""
        return self._committed >= target or self.failure is not None or self._gone

    def wait(self, target: int | None = None, timeout: float = 10.0, *, force: bool = False) -> bool:
        """Block until the writes up to ``target`` (all so far) are committed or the writer is failing; with
        ``force`` a failing writer tries them at once instead of after its back-off, and the wait lasts until
        that try has ended. Whether they are committed."""
        deadline = time.monotonic() + timeout
        with self._cond:
            target = self._submitted if target is None else target
            tried = self._attempts
            if force and self._committed < target:
                self._force = True
                self._cond.notify_all()
            while self._committed < target:
                if self.failure is not None and (not force or (self._attempts > tried and self._attempted >= target)):
                    break
                left = deadline - time.monotonic()
                if left <= 0 or not self._thread.is_alive():
                    break
                self._cond.wait(left)
            return self._committed >= target

    async def settle(self, target: int, timeout: float) -> None:
        """Wait on the event loop, without a thread, until :meth:`settled` holds for ``target`` (or ``timeout``)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._cond:
            if self.settled(target):
                return
            self._waiters.append((target, loop, future))
        try:
            async with asyncio.timeout(timeout):
                await future
        except TimeoutError:
            log.warning("a tool answered before its changes were committed (waited %.0f s)", timeout)
        finally:
            with self._cond:
                self._waiters = [waiter for waiter in self._waiters if waiter[2] is not future]

    def _wake(self) -> None:
        """Resolve the loop waiters whose writes are now settled (called with the lock held)."""
        keep = []
        for target, loop, future in self._waiters:
            if self.settled(target):
                with contextlib.suppress(RuntimeError):  # a loop already closed has no one waiting
                    loop.call_soon_threadsafe(_resolve, future)
            else:
                keep.append((target, loop, future))
        self._waiters = keep

    def stop(self, timeout: float = 10.0) -> None:
        """A last attempt at what is queued, then the thread ends."""
        with self._cond:
            self._stop = True
            self._force = True
            self._cond.notify_all()
        self._thread.join(timeout)

    # -- the thread --

    def delay(self) -> float:
        return retry_delay(self._failures)

    def _delay(self) -> float:
        return retry_delay(self._failures)

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # noqa: BLE001 - whatever ended it, no one may wait for it any more
            log.exception("the writer of research.db stopped")
            failure = SaveFailure(kind=WRITER_STOPPED, error=f"{type(exc).__name__}: {exc}")
            with self._cond:
                self._gone = True
                self.failure = failure
                self._cond.notify_all()
                self._wake()
            with contextlib.suppress(Exception):
                self._on_result(failure)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._queue:
                        if self.failure is None or self._force or self._stop:
                            break
                        left = self._next_try - time.monotonic()
                        if left <= 0:
                            break
                        self._cond.wait(left)  # back off: new writes wait with the failed ones
                    elif self._stop:
                        return
                    else:
                        self._cond.wait()
                self._force = False
                batch = list(self._queue)
                last = batch[-1][0]
            result, rejected = self._commit([put for _seq, put in batch])
            with self._cond:
                self._attempts += 1
                self._attempted = max(self._attempted, last)
                if result is None:
                    del self._queue[: len(batch)]
                    self._committed = last
                    if self._queue:
                        self.pending_since = utc_now_iso()
                    self._failures = 0
                    for _seq, put in batch:
                        slot = (put.table, put.key)
                        entry = self.pending.get(slot)
                        if entry is not None and entry[0] <= last:
                            del self.pending[slot]
                else:
                    self._failures += 1
                    self._next_try = time.monotonic() + self._delay()
                self.failure = result
                stopping = self._stop
                self._cond.notify_all()
                self._wake()
            self._on_result(result or rejected)
            if stopping and result is not None:
                return  # the last attempt failed: close() says what is lost

    def _commit(self, puts: list[Put]) -> tuple[SaveFailure | None, SaveFailure | None]:
        """One transaction of ``puts``: (the disk's failure, which leaves them queued; the writes dropped
        alone because they failed by themselves — each then tried in a savepoint of its own)."""
        latest: dict[tuple[str, str], Put] = {}
        for put in puts:
            latest.pop((put.table, put.key), None)
            latest[(put.table, put.key)] = put
        rows = list(latest.values())
        began = time.perf_counter()
        try:
            try:
                self._transaction(lambda: apply(self._conn, rows))
                rejected = None
            except Exception as exc:
                if _disk_error(exc):
                    raise
                rejected = self._transaction(lambda: self._apply_each(rows))  # a value of the batch: find it
        except (sqlite3.Error, OSError) as exc:
            log.error("could not write research.db (will retry): %s", exc)
            return SaveFailure(kind=failure_kind(exc), error=f"{type(exc).__name__}: {exc}"), None
        self.commit_ms.append((time.perf_counter() - began) * 1000)
        del self.commit_ms[:-10000]
        return None, rejected

    def _transaction(self, body: Callable[[], SaveFailure | None]) -> SaveFailure | None:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            result = body()
            self._conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
            raise
        return result

    def _apply_each(self, rows: list[Put]) -> SaveFailure | None:
        """Each row in a savepoint of its own; those that fail by themselves are dropped (logged, and told
        as one failure of kind ``rejected``)."""
        dropped: list[str] = []
        for put in rows:
            self._conn.execute("SAVEPOINT one")
            try:
                apply(self._conn, [put])
            except Exception as exc:
                if _disk_error(exc):
                    raise
                self._conn.execute("ROLLBACK TO one")  # this value cannot be stored; the others can
                log.error("dropped a write of %s/%r that cannot be stored: %s", put.table, put.key, exc)
                dropped.append(f"{put.table}/{put.key!a}: {type(exc).__name__}: {exc}")
            self._conn.execute("RELEASE one")
        if not dropped:
            return None
        return SaveFailure(kind=REJECTED, error=f"{len(dropped)} 条更改无法保存，已丢弃（{'；'.join(dropped[:3])}）")


# --- reads -------------------------------------------------------------------------------------------------


class Reader:
    """The readers' connection, shared by the event loop and worker threads (one statement at a time).
    A read the database refuses is STORE_CORRUPT (a damaged file) or STORE_UNAVAILABLE, never a crash."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self._deadline = 0.0
        # Checked every 10,000 steps of SQLite's machine: a statement past STATEMENT_SECONDS is interrupted, so
        # nothing in the file (an endless view, a sort spilling gigabytes to a temporary file) holds a call.
        conn.set_progress_handler(lambda: time.monotonic() > self._deadline, 10000)

    def one(self, sql: str, args: Sequence[Any] = ()) -> Any:
        with self._lock, _read_errors():
            self._deadline = time.monotonic() + STATEMENT_SECONDS
            return self._conn.execute(sql, args).fetchone()

    def all(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        with self._lock, _read_errors():
            self._deadline = time.monotonic() + STATEMENT_SECONDS
            return self._conn.execute(sql, args).fetchall()

    def close(self) -> None:
        with self._lock:
            self._conn.close()


@contextlib.contextmanager
def _read_errors() -> Iterator[None]:
    try:
        yield
    except sqlite3.Error as exc:
        kind = failure_kind(exc)
        log.error("could not read research.db: %s", exc)
        code: ErrorCode = "STORE_CORRUPT" if kind == "corrupt" else "STORE_UNAVAILABLE"
        raise CnkiError(code, f"读取本地数据库 research.db 失败（{exc}）。", details={"reason": str(exc), "kind": kind}) from exc


def remove_db(path: Path) -> None:
    """A database file with its WAL and shared-memory files."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{path}{suffix}")
