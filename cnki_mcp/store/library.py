"""The data directory: config.json, research.db, the directory lock, retention.

Layout under the root (see :func:`cnki_mcp.core.settings.data_root`)::

    config.json            {"browser_path": ...}        load_config / save_config
    research.db            the library (SQLite, WAL: research.db-wal, research.db-shm beside it), 0600
    research.db.unreadable-YYYYMMDD-HHMMSS              a damaged database set aside (its readable rows carried over)
    research.json.migrated the JSON store of earlier versions, kept once carried into research.db
    research.json.unreadable-… / .damaged-…             an unreadable JSON store set aside / a copy of one with dropped entries
    cnki.lock              held for the life of the store (one process per data directory)
    owner.lock owner.json  held and written by the process other servers join (owner.py)
    http-token             the bearer token of the HTTP endpoint (endpoint.py), 0600
    browser/               the browser profile: 0700, tightened when found looser
    downloads/ exports/ diagnostics/ incoming/<op_id>/

Every change is submitted to the writer thread when it is made and committed in a short transaction;
``App.call`` waits (off the event loop) for the commit before a tool answers, so what a client was told
survives a SIGKILL. A failed commit (a full disk, a read-only directory) stays queued and is retried with
back-off; until one succeeds every tool result carries STORE_NOT_SAVED (``Store.warnings``), as it carries
what opening the store had to leave out. A database of a newer schema is refused, never set aside.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import sqlite3
import stat
import sys
import threading
import zlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from cnki_mcp.core.clock import age_seconds, china_day, parse_utc, utc_now, utc_now_iso
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.files import atomic_replace, make_private_dir
from cnki_mcp.core.model import (
    PARSER_VERSION,
    Artifact,
    CacheEntry,
    Config,
    ErrorEvent,
    FacetRecord,
    Operation,
    Paper,
    Problem,
    Quality,
    RelationList,
    SaveState,
    SearchRecord,
    SiteCheck,
    StoreData,
    StoreRecovery,
)
from cnki_mcp.store import db, migrate
from cnki_mcp.store.db import DB_FILE, META_KEYS, Put, Reader, SaveFailure, Writer
from cnki_mcp.store.migrate import RESEARCH_FILE, Migration, peek_json, without_bom
from cnki_mcp.store.tables import Library, Table

log = logging.getLogger(__name__)

PROBE_FILE = DB_FILE + ".probe"
# Written when a start's check finds research.db damaged: the next start sets it aside before using it.
DAMAGED_MARKER = DB_FILE + ".damaged"
CONFIG_FILE = "config.json"
LOCK_FILE = "cnki.lock"
TOKEN_FILE = "http-token"  # the HTTP endpoint's bearer token: never packed, never shown
SUBFOLDERS = ("downloads", "exports", "diagnostics")
# The browser profile holds the person's cookies and logins: no one else may even list it.
PRIVATE_FOLDER = "browser"

# How long a tool's answer waits for the commit of its changes before it goes with a warning.
SETTLE_SECONDS = 10.0
KEEP_SEARCHES = 300
KEEP_OPERATIONS = 200
KEEP_RETIRED_IDS = 2000
KEEP_ERROR_EVENTS = 500
KEEP_KNOWN_NAMES = 20
# Lists of the citation graph (one paper's references, citing or similar papers), newest kept.
KEEP_RELATIONS = 1000
KEEP_FACETS = 200  # facet answers (search_facets), newest kept
KEEP_DOWNLOAD_DAYS = 7  # days of the daily download count kept (only today's is used)
# How many unreadable entries a warning names.
DROPPED_NAMED = 3
SEARCH_CACHE_TTL_SECONDS = 10 * 60
DETAIL_TTL_SECONDS = 30 * 86400
JOURNAL_PRESENT_TTL_SECONDS = 7 * 86400
JOURNAL_OTHER_TTL_SECONDS = 86400
# A reference list does not change; citing and similar papers grow.
RELATION_TTL_SECONDS = {"references": 30 * 86400, "citing": 7 * 86400, "similar": 7 * 86400}
RELATION_PAGE_TTL_SECONDS = 86400

_OP_ID = re.compile(r"[A-Za-z0-9_-]{1,80}")
_EPOCH = datetime.min.replace(tzinfo=UTC)


# --- config.json ----------------------------------------------------------------------------


def load_config(root: Path) -> Config:
    """Read ``<root>/config.json``; missing means defaults, unknown keys are ignored.

    Raises CONFIG_INVALID (with the path) when the file exists but cannot be read or parsed.
    """
    path = Path(root) / CONFIG_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Config()
    except OSError as exc:
        raise _config_invalid(path, exc.strerror or str(exc)) from exc
    try:
        return msgspec.json.decode(without_bom(raw), type=Config)
    except msgspec.DecodeError as exc:
        raise _config_invalid(path, str(exc)) from exc


def _config_invalid(path: Path, reason: str) -> CnkiError:
    return CnkiError(
        "CONFIG_INVALID",
        f"配置文件 {path} 无法解析（{reason}）。请修正或删除这个文件后重试。",
        details={"path": str(path), "reason": reason},
    )


def save_config(root: Path, config: Config) -> None:
    """Write config.json atomically (0600, 2-space JSON), keeping keys that newer versions added."""
    root = Path(root)
    make_private_dir(root)
    path = root / CONFIG_FILE
    merged: dict[str, Any] = {}
    try:
        existing = msgspec.json.decode(path.read_bytes())
        if isinstance(existing, dict):
            merged = existing
    except (OSError, msgspec.DecodeError):
        pass
    for name in Config.__struct_fields__:
        merged.pop(name, None)
    merged.update(msgspec.to_builtins(config))
    text = msgspec.json.format(msgspec.json.encode(merged), indent=2) + b"\n"
    try:
        atomic_replace(path, text, 0o600)
    except OSError as exc:
        raise CnkiError("DISK_WRITE_FAILED", f"无法写入 {path}：{exc.strerror or exc}。", details={"path": str(path)}) from exc


# --- freshness ------------------------------------------------------------------------


def detail_is_fresh(paper: Paper, now: datetime | None = None) -> bool:
    """A parsed detail page is reused, with no request, for 30 days by the same parser version."""
    if paper.detail_parser != PARSER_VERSION:
        return False
    age = age_seconds(paper.detail_observed_at, now)
    return age is not None and age < DETAIL_TTL_SECONDS


def journal_is_fresh(quality: Quality, now: datetime | None = None) -> bool:
    """Journal evidence is reused for 7 days when present, 1 day otherwise (same parser version)."""
    if quality.parser != PARSER_VERSION:
        return False
    age = age_seconds(quality.observed_at, now)
    if age is None:
        return False
    if quality.state == "present" and age < JOURNAL_PRESENT_TTL_SECONDS:
        return True
    return age < JOURNAL_OTHER_TTL_SECONDS


def error_counts(events: list[ErrorEvent]) -> list[dict[str, Any]]:
    """Error codes with how often they were met and when last, most frequent first."""
    counts: dict[str, dict[str, Any]] = {}
    for event in events:
        entry = counts.setdefault(event.code, {"code": event.code, "count": 0, "last_at": ""})
        entry["count"] += 1
        entry["last_at"] = max(entry["last_at"], event.at)
    return sorted(counts.values(), key=lambda entry: (-entry["count"], entry["code"]))


def peek_store(root: Path) -> StoreData | None:
    """What a report needs of the library (recent error codes, the last field check, known names), read
    without the lock and without setting anything aside (a running server may hold the directory): the
    singletons of research.db (its sections left empty), or research.json not yet migrated; None when
    neither can be read."""
    path = Path(root) / DB_FILE
    if not path.exists():
        return peek_json(Path(root) / RESEARCH_FILE)
    try:
        conn = db.connect(path, read_only=True)
        try:
            if db.foreign_schema(conn):
                return None  # not read: the next start sets it aside
            meta = dict(conn.execute("SELECT key, body FROM meta").fetchall())
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    try:
        fields = {name: msgspec.json.decode(db.body_json(meta[name]))
                  for name in ("recent_errors", "last_site_check", "known_names") if name in meta}
        return msgspec.convert(fields, StoreData)
    except (ValueError, zlib.error):  # msgspec's errors and BodyTooLarge are ValueErrors
        return None


def relation_is_fresh(relations: RelationList, now: datetime | None = None) -> bool:
    """A stored list answers without a request for 30 days (references) or 7 days (citing, similar); a list
    read from the detail page (the API gave nothing usable, and the page shows only the first items) for 1 day."""
    age = age_seconds(relations.observed_at, now)
    if relations.origin == "page":
        return age is not None and age < RELATION_PAGE_TTL_SECONDS
    return age is not None and age < RELATION_TTL_SECONDS.get(relations.relation, 0)


def relation_key(record_ref: str, relation: str) -> str:
    return f"{record_ref}|{relation}"


# --- directory lock -------------------------------------------------------------------


class DirectoryLock:
    """An exclusive lock on ``<root>/cnki.lock``, per open file so it also conflicts in-process.

    Unix uses ``flock`` (not ``lockf``: POSIX record locks belong to the process and would let a
    second open in the same process succeed). Windows locks byte 0 with ``msvcrt.locking``.
    """

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, root: Path, name: str = LOCK_FILE) -> DirectoryLock:
        path = Path(root) / name
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o600)
        except OSError as exc:
            raise _not_writable(root, exc) from exc
        try:
            _lock_fd(fd)
        except OSError as exc:
            os.close(fd)
            raise _in_use(root) from exc
        return cls(path, fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            _unlock_fd(fd)
        except OSError as exc:
            log.warning("could not unlock %s: %s", self.path, exc)
        finally:
            os.close(fd)


def _in_use(root: Path) -> CnkiError:
    message = f"另一个 MCP 服务进程正在使用数据目录 {root}。同一个数据目录同一时间只能由一个服务进程使用；请关闭另一个进程，或用 CNKI_DATA_DIR 指定其他目录。"
    return CnkiError("DATA_DIRECTORY_IN_USE", message, details={"path": str(root)})


def _not_writable(root: Path, exc: OSError) -> CnkiError:
    return CnkiError(
        "STORE_UNAVAILABLE",
        f"数据目录 {root} 不能写入（{exc.strerror or exc}）。请检查这个目录的权限、磁盘是否只读或已满，"
        "或用 CNKI_DATA_DIR 指定一个可以写入的目录。",
        details={"path": str(root), "errno": exc.errno},
    )


if sys.platform == "win32":
    import msvcrt

    def _lock_fd(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)

    def _unlock_fd(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _lock_fd(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def _unlock_fd(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


# --- the store ---------------------------------------------------------------------------------


class _InRoot:
    """A path of the data directory's layout, read as ``store.<name>``: ``root / name``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, store: Store, owner: type | None = None) -> Path:
        return store.root / self.name


class _Damaged(Exception):
    """research.db failed SQLite's check (or is not a database at all)."""


class _Foreign(_Damaged):
    """research.db holds what we did not create (a trigger, a view, a changed table) or a row too large to read."""


class Store:
    """The library of one locked data directory: ``data`` (its sections over research.db), the writer thread
    that commits every change, retention, and what every tool result is told of the store.

    Open with :meth:`Store.open`; :meth:`settle` (async) or :meth:`flush` waits for the commits; :meth:`close`
    (or :meth:`close_sync`) commits what is left and releases the directory lock.
    """

    def __init__(self, root: Path, writer_conn: sqlite3.Connection, reader_conn: sqlite3.Connection, lock: DirectoryLock) -> None:
        self.root = root
        self._lock = lock
        self._closed = False
        self._save = SaveState()
        self._writer_conn = writer_conn
        self._writer = Writer(writer_conn, self._saved)
        self._reader = Reader(reader_conn)
        meta: dict[str, bytes] = dict(self._reader.all("SELECT key, body FROM meta"))
        self.data = Library(self._reader, self._writer, meta)
        self._meta_json = {name: msgspec.json.encode(getattr(self.data, name)) for name in META_KEYS}
        self.migration: Migration | None = None
        if "migration" in meta:
            with contextlib.suppress(ValueError, zlib.error):  # a record of the past: never worth failing the open
                self.migration = msgspec.json.decode(db.body_json(meta["migration"]), type=Migration)
        # What opening had to leave out or set aside; told in every tool result of this process.
        self.recovered: list[StoreRecovery] = []
        # What this start's integrity check found (it runs in a thread: check_done).
        self.damage: list[str] = []
        self._checked = threading.Event()

    @classmethod
    def open(cls, root: Path) -> Store:
        """Create the layout, take the directory lock, carry research.json over on first start and open
        research.db. A file that is not a database, or that the previous start's check found damaged, is set
        aside with its readable rows carried into a new one; SQLite's check of this start runs in a thread
        (:meth:`check_done`), so opening does not read the whole file."""
        root = Path(os.path.abspath(root))
        try:
            make_private_dir(root)
            for name in SUBFOLDERS:
                (root / name).mkdir(mode=0o700, exist_ok=True)
            _private_folder(root / PRIVATE_FOLDER)
        except OSError as exc:
            raise _not_writable(root, exc) from exc
        lock = DirectoryLock.acquire(root)
        try:
            _probe_writable(root)
            path = root / DB_FILE
            migration, recovery = migrate.from_json(root, path) if not path.exists() else (None, None)
            marker = root / DAMAGED_MARKER
            try:
                if marker.exists():
                    raise _Damaged(marker.read_text(encoding="utf-8", errors="replace").strip() or "damaged")
                conns = _connect(path)
            except _Damaged as damaged:
                recovery = migrate.salvage(path, str(damaged))
                if isinstance(damaged, _Foreign):
                    lost = [entry for entry in recovery.dropped if entry.section != "database"]  # not the placeholder
                    recovery = msgspec.structs.replace(recovery, kind="foreign", reason=str(damaged), dropped=lost,
                                                       dropped_count=recovery.dropped_count if lost else 0)
                marker.unlink(missing_ok=True)
                conns = _connect(path)
            store = cls(root, *conns, lock)
        except BaseException:
            lock.release()
            raise
        if recovery is not None:
            store.recovered.append(recovery)
        if migration is not None:
            store.migration = migration
            store._writer.submit([Put("meta", "migration", migration)])
        store.trim()
        store._start_check()
        return store

    # -- SQLite's check at start --

    def _start_check(self) -> None:
        threading.Thread(target=self._check, name="store-check", daemon=True).start()

    def _check(self) -> None:
        """SQLite's quick check of the whole file on a connection of its own; what it finds is told in every
        result (STORE_CORRUPT), and the next start sets the file aside and carries its readable rows over."""
        try:
            conn = db.connect(self.db_path, read_only=True)
            try:
                problems = db.quick_check(conn)
            finally:
                conn.close()
        except sqlite3.Error as exc:
            problems = [str(exc)]
        if problems:
            log.error("research.db failed SQLite's check: %s", "; ".join(problems[:5]))
            with contextlib.suppress(OSError):
                (self.root / DAMAGED_MARKER).write_text("; ".join(problems[:3]), encoding="utf-8")
            self.damage = problems
        self._checked.set()

    def check_done(self, timeout: float = 60.0) -> bool:
        """Wait for this start's integrity check; whether it ended (``damage`` then says what it found)."""
        return self._checked.wait(timeout)

    # -- layout --

    db_path = _InRoot(DB_FILE)
    research_path = _InRoot(RESEARCH_FILE)  # the JSON store of earlier versions, read once
    browser_dir = _InRoot(PRIVATE_FOLDER)
    downloads_dir = _InRoot("downloads")
    exports_dir = _InRoot("exports")
    diagnostics_dir = _InRoot("diagnostics")

    def incoming_dir(self, op_id: str) -> Path:
        """``<root>/incoming/<op_id>/`` (0700), where the browser saves an operation's downloads."""
        if not _OP_ID.fullmatch(op_id):
            raise ValueError(f"unsafe operation id for a folder name: {op_id!r}")
        path = self.root / "incoming" / op_id
        path.parent.mkdir(mode=0o700, exist_ok=True)
        path.mkdir(mode=0o700, exist_ok=True)
        return path

    # -- the writer's state --

    @property
    def dirty(self) -> bool:
        """Whether a change is not committed yet (queued, or its commit failed)."""
        return self._writer.committed < self._writer.submitted

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def save(self) -> SaveState:
        """The save state as diagnostics shows it."""
        save = self._save
        save.dirty = self.dirty
        save.unsaved_since = self._writer.pending_since if save.dirty else ""
        return save

    def _saved(self, failure: SaveFailure | None) -> None:
        """The writer's report of one commit (runs in its thread)."""
        save = self._save
        if failure is None:
            save.saved_at = utc_now_iso()
            save.error = save.failing_since = save.cause = ""
            save.failed_writes = 0
            return
        save.error = failure.error
        save.cause = failure.kind
        save.failing_since = save.failing_since or utc_now_iso()
        save.failed_writes += 1

    def mark_dirty(self) -> None:
        """Kept for callers that changed a singleton of ``data`` in place: it is written now. (A section's
        value is written by putting it again; every put is submitted when it is made.)"""
        self.sync_meta()

    def sync_meta(self) -> None:
        """Write the singletons of ``data`` (retired ids, recent errors, …) that changed since last written."""
        if self._closed:
            return
        puts = []
        for name in META_KEYS:
            raw = msgspec.json.encode(getattr(self.data, name))
            if raw != self._meta_json[name]:
                self._meta_json[name] = raw
                puts.append(Put("meta", name, msgspec.json.decode(raw)))  # a copy: later in-place changes are seen by the next sync
        if puts:
            self._writer.submit(puts)

    def flush(self) -> bool:
        """Wait (blocking) until every change is committed, trying at once even while backing off.
        Whether something was written."""
        if self._closed:
            return False
        self.sync_meta()
        if not self.dirty:
            return False
        return self._writer.wait(timeout=SETTLE_SECONDS, force=True)

    async def flush_async(self) -> bool:
        """Like :meth:`flush`, the wait in a worker thread."""
        if self._closed:
            return False
        self.sync_meta()
        if not self.dirty:
            return False
        return await asyncio.to_thread(self._writer.wait, None, SETTLE_SECONDS, force=True)

    async def settle(self, timeout: float = SETTLE_SECONDS) -> None:
        """Before a tool answers: wait (off the event loop) until every change made so far is committed,
        or the writer has said it cannot (the answer then carries STORE_NOT_SAVED)."""
        if self._closed:
            return
        self.sync_meta()
        await self._writer.settle(self._writer.submitted, timeout)

    def next_flush_delay(self) -> float:
        """How long the writer waits before trying a failed commit again: 4, 8, 16 … s, at most 30 s."""
        return self._writer.delay()

    async def start(self) -> None:
        """Nothing to start: the writer thread runs from open to close (kept for callers)."""

    async def close(self) -> None:
        """Commit what is left, stop the writer and release the directory lock."""
        if self._closed:
            return
        self.sync_meta()
        try:
            await asyncio.to_thread(self._shut)
        finally:
            self._release()

    def close_sync(self) -> None:
        """Close without an event loop (CLI commands, tests)."""
        if self._closed:
            return
        self.sync_meta()
        try:
            self._shut()
        finally:
            self._release()

    def _shut(self) -> None:
        self._writer.stop(SETTLE_SECONDS)
        if self.dirty:
            log.error("closing %s with unsaved changes: %s", self.db_path, self._save.error)
        self._reader.close()
        self._writer_conn.close()

    def _release(self) -> None:
        self._closed = True
        self._lock.release()

    # -- mutation --

    def put_paper(self, paper: Paper) -> None:
        self.data.papers.put(paper.record_ref, paper)

    def put_operation(self, op: Operation) -> None:
        self.data.operations.put(op.operation_id, op)
        self._retain(self.data.operations, KEEP_OPERATIONS, self.data.retired_operations)

    def put_search(self, record: SearchRecord, cache_key: str | None = None) -> None:
        """Store a search; with ``cache_key`` (completed searches only) it also answers prefer_cache."""
        self.data.searches.put(record.search_id, record)
        self._retain(self.data.searches, KEEP_SEARCHES, self.data.retired_searches)
        if cache_key:
            self.data.search_cache.put(cache_key, CacheEntry(search_id=record.search_id, at=utc_now_iso()))
        self._trim_cache()

    def put_facets(self, record: FacetRecord) -> None:
        self.data.facets.put(record.key, record)
        self._retain(self.data.facets, KEEP_FACETS, None)

    def cached_facets(self, key: str, max_age: float = SEARCH_CACHE_TTL_SECONDS, now: datetime | None = None) -> FacetRecord | None:
        """A facet answer for the listing ``key`` at most ``max_age`` seconds old (listings' cache by default)."""
        record = self.data.facets.get(key)
        if record is None:
            return None
        age = age_seconds(record.observed_at, now)
        return record if age is not None and age <= max_age else None

    def put_artifact(self, key: str, artifact: Artifact) -> None:
        self.data.artifacts.put(key, artifact)

    def count_download(self, day: str | None = None) -> None:
        """One more successful download (any tool) on ``day`` (today in China, UTC+8: CNKI's day)."""
        counts = self.data.downloads_by_day
        day = day or china_day()
        counts[day] = counts.get(day, 0) + 1
        for old in sorted(counts)[:-KEEP_DOWNLOAD_DAYS]:
            del counts[old]
        self.sync_meta()

    def downloads_on(self, day: str | None = None) -> int:
        """Successful downloads counted on ``day`` (today in China)."""
        return self.data.downloads_by_day.get(day or china_day(), 0)

    def put_source(self, key: str, quality: Quality) -> None:
        self.data.sources.put(key, quality)

    def note_error(self, code: str, kind: str = "") -> None:
        """Count an error code an operation met (the newest 500 are kept, for ``doctor --report``)."""
        events = self.data.recent_errors
        events.append(ErrorEvent(code=code, at=utc_now_iso(), kind=kind))
        del events[:-KEEP_ERROR_EVENTS]
        self.sync_meta()

    def put_site_check(self, check: SiteCheck, names: list[str]) -> None:
        """Keep the last field check, and the names its page header showed (to keep them out of reports)."""
        self.data.last_site_check = check
        self.remember_names(names)
        self.sync_meta()

    def remember_names(self, names: list[str]) -> None:
        """Names a page header showed for the person or the institution: only ever used to keep them out
        of a report (the newest 20, never shown anywhere)."""
        if not names or all(name in self.data.known_names for name in names):
            return
        known = [name for name in self.data.known_names if name not in names]
        self.data.known_names = [*known, *names][-KEEP_KNOWN_NAMES:]
        self.sync_meta()

    def put_relation(self, relations: RelationList) -> None:
        self.data.relations.put(relation_key(relations.source_ref, relations.relation), relations)
        self._retain(self.data.relations, KEEP_RELATIONS, None)

    def drop_relation(self, key: str) -> None:
        if key in self.data.relations:
            self.data.relations.delete(key)

    def cached_search(self, cache_key: str, now: datetime | None = None) -> SearchRecord | None:
        """The search a prefer_cache call may reuse: entry at most 10 minutes old, record still stored."""
        entry = self.data.search_cache.get(cache_key)
        if entry is None:
            return None
        age = age_seconds(entry.at, now)
        if age is None or age > SEARCH_CACHE_TTL_SECONDS:
            return None
        return self.data.searches.get(entry.search_id)

    # -- retention --

    def trim(self, now: datetime | None = None) -> None:
        """Apply retention: 300 newest searches, 200 newest operations, 1000 newest citation lists, 200 newest
        facet answers, live cache entries."""
        data = self.data
        self._retain(data.searches, KEEP_SEARCHES, data.retired_searches)
        self._retain(data.operations, KEEP_OPERATIONS, data.retired_operations)
        self._retain(data.relations, KEEP_RELATIONS, None)
        self._retain(data.facets, KEEP_FACETS, None)
        self._trim_cache(now)

    def _retain(self, table: Table[Any], keep: int, retired: list[str] | None) -> None:
        """Delete all but the ``keep`` newest rows of ``table``; remember the ids removed in ``retired``."""
        stamps = table.stamps
        if stamps is None or len(stamps) <= keep:
            return
        removed = _oldest(stamps, keep)
        for key in removed:
            table.delete(key)
        if retired is not None:
            retired.extend(removed)
            del retired[:-KEEP_RETIRED_IDS]
            self.sync_meta()

    def _trim_cache(self, now: datetime | None = None) -> None:
        now = now or utc_now()
        cache = self.data.search_cache
        for key, at in list((cache.stamps or {}).items()):
            age = age_seconds(at, now)
            if age is None or age > SEARCH_CACHE_TTL_SECONDS:
                cache.delete(key)
                continue
            entry = cache.get(key)
            if entry is None or entry.search_id not in self.data.searches:
                cache.delete(key)

    # -- what clients are told --

    def warnings(self) -> list[Problem]:
        """What every tool result carries while this store is open: entries left out, changes not saved."""
        problems = [_recovery_problem(self.db_path, recovery) for recovery in self.recovered]
        if self.damage:
            message = (
                f"{self.db_path} 没有通过 SQLite 的完整性检查（{'；'.join(self.damage[:3])}）。服务照常运行，能读写的记录照常读写；"
                "请先用 cnki-mcp store --dump 备份，再重新启动服务：启动时会把这个文件改名保留，把能读出的记录搬到新数据库。"
            )
            problems.append(CnkiError("STORE_CORRUPT", message, details={"path": str(self.db_path), "problems": self.damage[:20]}).problem())
        save = self.save
        if save.failing_since:
            problems.append(_not_saved(self.db_path, save))
        return problems

    def was_retired(self, kind: str, key: str) -> bool:
        """Whether retention removed the search or operation ``key`` (``kind``: searches | operations)."""
        retired = self.data.retired_searches if kind == "searches" else self.data.retired_operations
        return key in retired

    def stats(self) -> dict[str, Any]:
        """Counts, the database's size, save state and what opening left out or carried over, for diagnostics."""
        data = self.data
        papers = len(data.papers)
        return {
            "records": papers,
            "papers": papers,
            "journals": len(data.sources),
            "searches": len(data.searches),
            "operations": len(data.operations),
            "artifacts": len(data.artifacts),
            "relations": len(data.relations),
            "database": {"path": str(self.db_path), "size_bytes": migrate.db_size(self.db_path), "schema_version": db.SCHEMA_VERSION},
            "save": self.save,
            "recovered": self.recovered,
            **({"migration": self.migration} if self.migration is not None else {}),
        }

    def export(self) -> StoreData:
        """The whole library in memory, in research.json's format (tests and small stores: the dump streams)."""
        data = self.data
        out = StoreData(**{name: getattr(data, name) for name in META_KEYS})
        for table in data.tables():
            setattr(out, table.name, dict(table.items()))
        return out


def _connect(path: Path) -> tuple[sqlite3.Connection, sqlite3.Connection]:
    """The writer's and the readers' connections to a sound research.db of the current schema (created if
    missing). _Damaged for a file SQLite finds broken; STORE_UNAVAILABLE for a newer schema or an unwritable one."""
    conn: sqlite3.Connection | None = None
    try:
        conn = db.connect(path)
        # Before anything of the file is used: a schema that is not ours, or a row too large, sets it aside.
        foreign = db.foreign_schema(conn) or db.oversized_rows(conn, db.present_tables(conn))
        if foreign:
            conn.close()
            raise _Foreign("；".join(foreign[:5]))
        db.migrate(conn)
        reader = db.connect(path)
        reader.execute("PRAGMA query_only = 1")
    except db.NewerSchema as exc:
        assert conn is not None
        conn.close()
        raise CnkiError(
            "STORE_UNAVAILABLE",
            f"{path} 是较新版本的 cnki-mcp 写入的（数据库结构版本 {exc.version}），这个版本只能读取结构版本 {db.SCHEMA_VERSION}。"
            "请把 cnki-mcp 升级到最新版本后再使用；文件没有改动。",
            details={"path": str(path), "version": exc.version, "supported_version": db.SCHEMA_VERSION},
        ) from exc
    except sqlite3.Error as exc:
        if conn is not None:
            conn.close()
        if db.failure_kind(exc) == "corrupt":
            raise _Damaged(str(exc)) from exc
        raise _not_writable(path.parent, OSError(0, str(exc))) from exc
    except BaseException:
        if conn is not None:
            conn.close()
        raise
    if sys.platform != "win32":
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                os.chmod(f"{path}{suffix}", 0o600)
    return conn, reader


def _oldest(stamps: dict[str, str], keep: int) -> list[str]:
    """The keys beyond the ``keep`` newest stamps; later insertion breaks ties (the newest stored stays)."""
    order = sorted(enumerate(stamps.items()), key=lambda item: (parse_utc(item[1][1]) or _EPOCH, item[0]), reverse=True)
    return [key for _, (key, _stamp) in order[keep:]]


def _not_saved(path: Path, save: SaveState) -> Problem:
    details = {"path": str(path), **msgspec.to_builtins(save)}
    if save.cause == db.REJECTED:
        message = f"{save.failing_since} 有更改无法写入 {path}（{save.error}）；其余更改照常保存。这类更改来自无法保存的数据，请把这条提示告诉开发者。"
        return CnkiError("STORE_NOT_SAVED", message, details=details).problem()
    if save.cause == db.WRITER_STOPPED:
        message = (
            f"{path} 的写入线程自 {save.failing_since} 起已停止（{save.error}），之后的更改都只在内存中，不会再保存。"
            "请重新启动服务；重启前的这些更改会丢失。"
        )
        return CnkiError("STORE_NOT_SAVED", message, details=details).problem()
    what = {
        "disk_full": "磁盘已满",
        "read_only": "数据目录或数据库文件只读",
        "corrupt": "数据库文件已损坏",
    }.get(save.cause, "写入出错")
    advice = {
        "disk_full": "请释放磁盘空间",
        "read_only": "请恢复数据目录的写权限",
        "corrupt": "请先用 cnki-mcp store --dump 备份，再重新启动服务（启动时会把损坏的数据库改名保留，把能读出的记录搬到新数据库）",
    }.get(save.cause, "请检查磁盘与数据目录的写权限")
    message = (
        f"{what}：自 {save.failing_since} 起 {path} 写入失败（{save.error}，已失败 {save.failed_writes} 次），"
        f"{save.unsaved_since or save.failing_since} 以来的更改只在内存中；服务会自动重试。{advice}，保存成功之前不要关闭服务，否则这些更改会丢失。"
    )
    return CnkiError("STORE_NOT_SAVED", message, details=details).problem()


def _private_folder(path: Path) -> None:
    """``path`` as a folder only its owner may enter (0700): created so, or tightened if found looser."""
    path.mkdir(mode=0o700, exist_ok=True)
    if sys.platform == "win32":
        return
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        os.chmod(path, mode & 0o700)
        log.warning("tightened %s from %o to %o", path, mode, mode & 0o700)


def _probe_writable(root: Path) -> None:
    """Create and remove a file, so a read-only directory is told now, not at the first save."""
    temp = root / PROBE_FILE
    try:
        os.close(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0), 0o600))
        os.unlink(temp)
    except OSError as exc:
        raise _not_writable(root, exc) from exc


def _recovery_problem(db_path: Path, recovery: StoreRecovery) -> Problem:
    # The file that was read: research.db, or the research.json of an earlier version on first start.
    research = re.sub(r"\.(unreadable|damaged)-[0-9-]+$", "", recovery.path) or str(db_path)
    if recovery.kind == "foreign":
        message = (
            f"{research} 含有不是 cnki-mcp 建立的内容或无法读取的超大条目（{recovery.reason}），为安全起见没有使用：已改名保留为 "
            f"{recovery.path}，其中能读出的记录已搬到新的数据库（跳过 {recovery.dropped_count} 个条目）。这个文件可能被其他程序改动过；"
            "需要找回其中的记录时，请保留它并联系开发者。"
        )
        return CnkiError("STORE_CORRUPT", message, details={"path": recovery.path, "reason": recovery.reason,
                                                            "dropped_count": recovery.dropped_count}).problem()
    if recovery.kind == "set_aside":
        message = (
            f"{research} 无法读取（{recovery.reason}），已改名保留为 {recovery.path}，本次从空的本地数据开始。"
            "原文件没有删除；需要找回其中的记录时，请保留这个文件并联系开发者。"
        )
        return CnkiError("STORE_SET_ASIDE", message, details={"path": recovery.path, "reason": recovery.reason}).problem()
    named = "；".join(
        f"{entry.section}/{entry.key}：{entry.reason}" if entry.key else f"{entry.section}：{entry.reason}"
        for entry in recovery.dropped[:DROPPED_NAMED]
    )
    message = (
        f"{research} 中有 {recovery.dropped_count} 个条目无法读取，已跳过（{named}），其余记录照常载入。"
        f"读取前的原文件另存为 {recovery.path}；完整清单见 diagnostics。"
    )
    details = {"path": recovery.path, "dropped_count": recovery.dropped_count, "dropped": recovery.dropped[:DROPPED_NAMED]}
    return CnkiError("STORE_ENTRIES_DROPPED", message, details=details).problem()
