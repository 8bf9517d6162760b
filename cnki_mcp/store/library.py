"""The data directory: config.json, research.json, the directory lock, retention and flushing.

Layout under the root (see :func:`cnki_mcp.core.settings.data_root`)::

    config.json            {"browser_path": ...}        load_config / save_config
    research.json          the whole store (StoreData)  0600, replaced atomically
    research.json.tmp      transient flush target (removed when a write fails)
    research.json.unreadable-YYYYMMDD-HHMMSS            an unreadable or older-format store, set aside
    research.json.damaged-YYYYMMDD-HHMMSS               a copy of a store some entries of which were dropped
    cnki.lock              held for the life of the store (one process per data directory)
    owner.lock owner.json  held and written by the process other servers join (owner.py)
    http-token             the bearer token of the HTTP endpoint (endpoint.py), 0600
    browser/               the browser profile: 0700, tightened when found looser
    downloads/ exports/ diagnostics/ incoming/<op_id>/

Everything lives in memory; network work never waits for the disk. Mutations mark the store dirty
and a loop writes it out every 2 s (temp file, fsync, rename, directory fsync), so research.json on
disk is always one complete version and a crash loses at most the last 2 s; a finished search is written
at once. A failed write keeps
the store dirty and is retried with back-off; until one succeeds every tool result carries a
STORE_NOT_SAVED warning (``Store.warnings``), as it carries what opening the store had to leave out.
A store written by a newer format version is refused, never set aside.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import logging
import os
import re
import stat
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, get_args, get_origin

import msgspec

from cnki_mcp.core.clock import age_seconds, local_day, parse_utc, utc_now, utc_now_iso
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.files import atomic_replace, fsync_dir, make_private_dir, write_new_file
from cnki_mcp.core.model import (
    PARSER_VERSION,
    STORE_VERSION,
    Artifact,
    CacheEntry,
    Config,
    DroppedEntry,
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

log = logging.getLogger(__name__)

RESEARCH_FILE = "research.json"
TEMP_FILE = RESEARCH_FILE + ".tmp"
CONFIG_FILE = "config.json"
LOCK_FILE = "cnki.lock"
TOKEN_FILE = "http-token"  # the HTTP endpoint's bearer token: never packed, never shown
SUBFOLDERS = ("downloads", "exports", "diagnostics")
# The browser profile holds the person's cookies and logins: no one else may even list it.
PRIVATE_FOLDER = "browser"

FLUSH_INTERVAL_SECONDS = 2.0
# After failed writes the next try waits 4, 8, 16 … s, at most this long.
FLUSH_RETRY_MAX_SECONDS = 30.0
KEEP_SEARCHES = 300
KEEP_OPERATIONS = 200
KEEP_RETIRED_IDS = 2000
KEEP_ERROR_EVENTS = 500
KEEP_KNOWN_NAMES = 20
# Lists of the citation graph (one paper's references, citing or similar papers), newest kept.
KEEP_RELATIONS = 1000
KEEP_FACETS = 200  # facet answers (search_facets), newest kept
KEEP_DOWNLOAD_DAYS = 7  # days of the daily download count kept (only today's is used)
# How many unreadable entries diagnostics lists, and how many a warning names.
DROPPED_LISTED = 100
DROPPED_NAMED = 3
SEARCH_CACHE_TTL_SECONDS = 10 * 60
DETAIL_TTL_SECONDS = 30 * 86400
JOURNAL_PRESENT_TTL_SECONDS = 7 * 86400
JOURNAL_OTHER_TTL_SECONDS = 86400
# A reference list does not change; citing and similar papers grow.
RELATION_TTL_SECONDS = {"references": 30 * 86400, "citing": 7 * 86400, "similar": 7 * 86400}
RELATION_PAGE_TTL_SECONDS = 86400

_OP_ID = re.compile(r"[A-Za-z0-9_-]{1,80}")
_DECODER = msgspec.json.Decoder(StoreData)
_ENCODER = msgspec.json.Encoder()
_EPOCH = datetime.min.replace(tzinfo=UTC)


def without_bom(raw: bytes) -> bytes:
    """JSON bytes without the UTF-8 byte-order mark Windows editors (Notepad) put at the start."""
    return raw[len(codecs.BOM_UTF8):] if raw.startswith(codecs.BOM_UTF8) else raw


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
    """research.json read as it is, without the lock and without setting anything aside (a running
    server may hold the directory); None when it is missing or cannot be read whole."""
    try:
        return _DECODER.decode(without_bom((Path(root) / RESEARCH_FILE).read_bytes()))
    except (OSError, msgspec.DecodeError):
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


class Store:
    """The in-memory research store bound to one locked data directory.

    Open with :meth:`Store.open`; in async code call :meth:`start` to run the 2-second flush loop
    and :meth:`close` at shutdown. All mutation happens on the event loop thread; only the disk
    write runs in a worker thread.
    """

    def __init__(self, root: Path, data: StoreData, lock: DirectoryLock) -> None:
        self.root = root
        self.data = data
        self._lock = lock
        self._closed = False
        self._write_lock = threading.Lock()
        # Snapshot numbers: a write never replaces a newer snapshot with an older one, even if a
        # cancelled flush's thread reaches the disk after the next flush's thread.
        self._snapshot = 0
        self._written = 0
        self._flush_lock = asyncio.Lock()
        self._stop = asyncio.Event()
        self._soon = asyncio.Event()  # flush now rather than at the next tick (set by close too)
        self._task: asyncio.Task[None] | None = None
        self.save = SaveState()
        # What opening research.json had to leave out; told in every tool result of this process.
        self.recovered: list[StoreRecovery] = []

    @classmethod
    def open(cls, root: Path) -> Store:
        """Create the layout, take the directory lock and read research.json (blocking, fast)."""
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
            data, recovery = _read_store(root / RESEARCH_FILE)
        except BaseException:
            lock.release()
            raise
        store = cls(root, data, lock)
        if recovery is not None:
            store.recovered.append(recovery)
            if recovery.kind == "entries_dropped":
                store.mark_dirty()  # the readable entries replace the file, whose copy is kept
        return store

    # -- layout --

    research_path = _InRoot(RESEARCH_FILE)
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

    # -- mutation --

    @property
    def dirty(self) -> bool:
        return self.save.dirty

    @property
    def closed(self) -> bool:
        return self._closed

    def mark_dirty(self) -> None:
        save = self.save
        save.dirty = True
        if not save.unsaved_since:
            save.unsaved_since = utc_now_iso()

    def put_paper(self, paper: Paper) -> None:
        self.data.papers[paper.record_ref] = paper
        self.mark_dirty()

    def put_operation(self, op: Operation) -> None:
        self.data.operations[op.operation_id] = op
        self.mark_dirty()

    def put_search(self, record: SearchRecord, cache_key: str | None = None) -> None:
        """Store a search; with ``cache_key`` (completed searches only) it also answers prefer_cache."""
        self.data.searches[record.search_id] = record
        if cache_key:
            self.data.search_cache[cache_key] = CacheEntry(search_id=record.search_id, at=utc_now_iso())
        self.mark_dirty()
        # A finished search is written at once: a crash in the next 2 s must not lose the search_id just
        # handed to the client. Not while writes fail: their back-off stands.
        if self.save.failed_writes == 0:
            self._soon.set()

    def put_facets(self, record: FacetRecord) -> None:
        self.data.facets[record.key] = record
        self.mark_dirty()

    def cached_facets(self, key: str, max_age: float = SEARCH_CACHE_TTL_SECONDS, now: datetime | None = None) -> FacetRecord | None:
        """A facet answer for the listing ``key`` at most ``max_age`` seconds old (listings' cache by default)."""
        record = self.data.facets.get(key)
        if record is None:
            return None
        age = age_seconds(record.observed_at, now)
        return record if age is not None and age <= max_age else None

    def put_artifact(self, key: str, artifact: Artifact) -> None:
        self.data.artifacts[key] = artifact
        self.mark_dirty()

    def count_download(self, day: str | None = None) -> None:
        """One more successful download (any tool) on the local ``day`` (today)."""
        counts = self.data.downloads_by_day
        day = day or local_day()
        counts[day] = counts.get(day, 0) + 1
        for old in sorted(counts)[:-KEEP_DOWNLOAD_DAYS]:
            del counts[old]
        self.mark_dirty()

    def downloads_on(self, day: str | None = None) -> int:
        """Successful downloads counted on the local ``day`` (today)."""
        return self.data.downloads_by_day.get(day or local_day(), 0)

    def put_source(self, key: str, quality: Quality) -> None:
        self.data.sources[key] = quality
        self.mark_dirty()

    def note_error(self, code: str, kind: str = "") -> None:
        """Count an error code an operation met (the newest 500 are kept, for ``doctor --report``)."""
        events = self.data.recent_errors
        events.append(ErrorEvent(code=code, at=utc_now_iso(), kind=kind))
        del events[:-KEEP_ERROR_EVENTS]
        self.mark_dirty()

    def put_site_check(self, check: SiteCheck, names: list[str]) -> None:
        """Keep the last field check, and the names its page header showed (to keep them out of reports)."""
        self.data.last_site_check = check
        self.remember_names(names)
        self.mark_dirty()

    def remember_names(self, names: list[str]) -> None:
        """Names a page header showed for the person or the institution: only ever used to keep them out
        of a report (the newest 20, never shown anywhere)."""
        if not names or all(name in self.data.known_names for name in names):
            return
        known = [name for name in self.data.known_names if name not in names]
        self.data.known_names = [*known, *names][-KEEP_KNOWN_NAMES:]
        self.mark_dirty()
    def put_relation(self, relations: RelationList) -> None:
        self.data.relations[relation_key(relations.source_ref, relations.relation)] = relations
        self.mark_dirty()

    def drop_relation(self, key: str) -> None:
        if self.data.relations.pop(key, None) is not None:
            self.mark_dirty()

    def cached_search(self, cache_key: str, now: datetime | None = None) -> SearchRecord | None:
        """The search a prefer_cache call may reuse: entry at most 10 minutes old, record still stored."""
        entry = self.data.search_cache.get(cache_key)
        if entry is None:
            return None
        age = age_seconds(entry.at, now)
        if age is None or age > SEARCH_CACHE_TTL_SECONDS:
            return None
        return self.data.searches.get(entry.search_id)

    # -- retention and flushing --

    def trim(self, now: datetime | None = None) -> None:
        """Apply retention: 300 newest searches, 200 newest operations, 1000 newest citation lists, live cache entries."""
        now = now or utc_now()
        data = self.data
        _retire(data.retired_searches, _keep_newest(data.searches, KEEP_SEARCHES, lambda record: record.created_at))
        _retire(data.retired_operations, _keep_newest(data.operations, KEEP_OPERATIONS, lambda op: op.created_at))
        _keep_newest(data.relations, KEEP_RELATIONS, lambda relations: relations.observed_at)
        _keep_newest(data.facets, KEEP_FACETS, lambda record: record.observed_at)
        for key, entry in list(data.search_cache.items()):
            age = age_seconds(entry.at, now)
            if entry.search_id not in data.searches or age is None or age > SEARCH_CACHE_TTL_SECONDS:
                del data.search_cache[key]

    def _prepare(self) -> tuple[int, bytes, str]:
        self.trim()
        save = self.save
        since, save.unsaved_since = save.unsaved_since, ""
        save.dirty = False
        try:
            payload = _ENCODER.encode(self.data)
        except BaseException:
            self._unsaved(since)
            raise
        self._snapshot += 1
        return self._snapshot, payload, since

    def _unsaved(self, since: str) -> None:
        """A snapshot did not reach the disk: dirty again, since the oldest change it held."""
        save = self.save
        save.dirty = True
        save.unsaved_since = min(filter(None, (since, save.unsaved_since)), default=utc_now_iso())

    def _write(self, snapshot: tuple[int, bytes, str]) -> bool:
        """Replace research.json with the snapshot atomically; on failure stay dirty and log."""
        number, payload, since = snapshot
        path = self.research_path
        temp = self.root / TEMP_FILE
        save = self.save
        with self._write_lock:
            if number < self._written:
                return False
            try:
                _replace(temp, path, payload)
            except OSError as exc:
                # A full disk leaves an empty or partial temp file: it must not stay behind.
                with contextlib.suppress(OSError):
                    os.unlink(temp)
                self._unsaved(since)
                save.error = f"{type(exc).__name__}: {exc}"
                save.failing_since = save.failing_since or utc_now_iso()
                save.failed_writes += 1
                log.error("could not write %s (attempt %d, will retry): %s", path, save.failed_writes, exc)
                return False
            self._written = number
            save.saved_at = utc_now_iso()
            save.error = save.failing_since = ""
            save.failed_writes = 0
            return True

    def flush(self) -> bool:
        """Write research.json now if anything changed (blocking). Returns whether it wrote."""
        if self._closed or not self.dirty:
            return False
        return self._write(self._prepare())

    async def flush_async(self) -> bool:
        """Like :meth:`flush`, but the disk write runs in a thread; never two flushes at once."""
        async with self._flush_lock:
            if self._closed or not self.dirty:
                return False
            snapshot = self._prepare()
            return await asyncio.to_thread(self._write, snapshot)

    async def start(self) -> None:
        """Start the background flush loop (every 2 s while the store is open)."""
        if self._task is None and not self._closed:
            self._stop.clear()
            self._task = asyncio.create_task(self._flush_loop(), name="store-flush")

    def next_flush_delay(self) -> float:
        """2 s; after failed writes twice as long per failure, at most 30 s, so a full disk is not hammered."""
        return min(FLUSH_INTERVAL_SECONDS * 2 ** min(self.save.failed_writes, 16), FLUSH_RETRY_MAX_SECONDS)

    async def _flush_loop(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.next_flush_delay()):
                    await self._soon.wait()
            self._soon.clear()
            if self._stop.is_set():
                return  # close() writes the last time
            try:
                await self.flush_async()
            except Exception:
                log.exception("store flush failed")

    async def close(self) -> None:
        """Stop the loop, flush a last time and release the directory lock."""
        if self._closed:
            return
        task, self._task = self._task, None
        if task is not None:
            self._stop.set()
            self._soon.set()
            # wait() rather than await: a loop task cancelled at shutdown must not skip the final flush.
            await asyncio.wait([task])
            if not task.cancelled() and task.exception() is not None:
                log.error("store flush loop ended with an error", exc_info=task.exception())
        try:
            await self.flush_async()
        finally:
            self._release()

    def close_sync(self) -> None:
        """Close without an event loop (CLI commands, tests): final flush, then unlock."""
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._release()

    def _release(self) -> None:
        if self.dirty:
            log.error("closing %s with unsaved changes: %s", self.research_path, self.save.error)
        self._closed = True
        self._lock.release()

    # -- what clients are told --

    def warnings(self) -> list[Problem]:
        """What every tool result carries while this store is open: entries left out, changes not saved."""
        problems = [_recovery_problem(self.research_path, recovery) for recovery in self.recovered]
        save = self.save
        if save.failing_since:
            message = (
                f"自 {save.failing_since} 起 {self.research_path} 写入失败（{save.error}，已失败 {save.failed_writes} 次），"
                f"{save.unsaved_since} 以来的更改只在内存中；服务会自动重试。请释放磁盘空间或检查数据目录的写权限，"
                "保存成功之前不要关闭服务，否则这些更改会丢失。"
            )
            details = {"path": str(self.research_path), **msgspec.to_builtins(save)}
            problems.append(CnkiError("STORE_NOT_SAVED", message, details=details).problem())
        return problems

    def was_retired(self, kind: str, key: str) -> bool:
        """Whether retention removed the search or operation ``key`` (``kind``: searches | operations)."""
        retired = self.data.retired_searches if kind == "searches" else self.data.retired_operations
        return key in retired

    def stats(self) -> dict[str, Any]:
        """Counts, save state and what opening left out, for diagnostics."""
        data = self.data
        return {
            "papers": len(data.papers),
            "journals": len(data.sources),
            "searches": len(data.searches),
            "operations": len(data.operations),
            "artifacts": len(data.artifacts),
            "relations": len(data.relations),
            "save": self.save,
            "recovered": self.recovered,
        }


def _keep_newest(mapping: dict[str, Any], keep: int, stamp: Callable[[Any], str]) -> list[str]:
    """Delete all but the ``keep`` newest entries; return the deleted keys, oldest last."""
    if len(mapping) <= keep:
        return []
    # Later insertion breaks ties, so equal timestamps keep the most recently stored entries.
    order = sorted(
        enumerate(mapping.items()),
        key=lambda item: (parse_utc(stamp(item[1][1])) or _EPOCH, item[0]),
        reverse=True,
    )
    removed = [key for _, (key, _value) in order[keep:]]
    for key in removed:
        del mapping[key]
    return removed


def _retire(retired: list[str], removed: list[str]) -> None:
    retired.extend(removed)
    del retired[:-KEEP_RETIRED_IDS]


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
    """Create and remove the flush's temp file, so a read-only directory is told now, not at the first save."""
    temp = root / TEMP_FILE
    try:
        os.close(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0), 0o600))
        os.unlink(temp)
    except OSError as exc:
        raise _not_writable(root, exc) from exc


def _replace(temp: Path, path: Path, payload: bytes) -> None:
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0), 0o600)
    try:
        if sys.platform != "win32":
            os.fchmod(fd, 0o600)
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, path)
    fsync_dir(path.parent)


# --- reading research.json -------------------------------------------------------------------------


class _Header(msgspec.Struct):
    version: int = STORE_VERSION


_HEADER = msgspec.json.Decoder(_Header)
_SECTIONS = msgspec.json.Decoder(dict[str, msgspec.Raw])
# One decoder per map of StoreData, for reading its entries one by one.
_ENTRY_DECODERS = {
    field.name: msgspec.json.Decoder(get_args(field.type)[1])
    for field in msgspec.structs.fields(StoreData)
    if get_origin(field.type) is dict
}


def _read_store(path: Path) -> tuple[StoreData, StoreRecovery | None]:
    """research.json as far as it can be read, and what had to be left out (None: nothing).

    A newer format version is refused (STORE_UNAVAILABLE) and the file left as it is; a file that is
    not a JSON object, or of an older version, is set aside whole; otherwise an entry that does not
    decode is dropped alone, after a copy of the file is kept.
    """
    try:
        original = path.read_bytes()
    except FileNotFoundError:
        return StoreData(), None
    except OSError as exc:
        raise _unavailable(path, f"无法读取 {path}：{exc.strerror or exc}。") from exc
    raw = without_bom(original)
    data: StoreData | None = None
    try:
        data = _DECODER.decode(raw)
        version = data.version
    except msgspec.DecodeError:
        try:
            version = _HEADER.decode(raw).version
        except msgspec.DecodeError as exc:
            return StoreData(), _set_aside(path, str(exc))
    if version > STORE_VERSION:
        raise CnkiError(
            "STORE_UNAVAILABLE",
            f"{path} 是较新版本的 cnki-mcp 写入的（数据格式版本 {version}），这个版本只能读取格式版本 {STORE_VERSION}。"
            "请把 cnki-mcp 升级到最新版本后再使用；文件没有改动。",
            details={"path": str(path), "version": version, "supported_version": STORE_VERSION},
        )
    if version < STORE_VERSION:
        return StoreData(), _set_aside(path, f"数据格式版本 {version}，本程序使用版本 {STORE_VERSION}")
    if data is not None:
        return data, None
    # Some entries do not decode: keep all the others.
    data, dropped = _readable_entries(raw)
    return data, _keep_copy(path, original, dropped)


def _readable_entries(raw: bytes) -> tuple[StoreData, list[DroppedEntry]]:
    """Decode a store object section by section and map entry by map entry, leaving out what fails."""
    sections = _SECTIONS.decode(raw)
    data = StoreData()
    dropped: list[DroppedEntry] = []
    for field in msgspec.structs.fields(StoreData):
        value = sections.get(field.name)
        if value is None or field.name == "version":
            continue
        decoder = _ENTRY_DECODERS.get(field.name)
        try:
            if decoder is None:
                setattr(data, field.name, msgspec.json.decode(value, type=field.type))
                continue
            entries = _SECTIONS.decode(value)
        except msgspec.DecodeError as exc:
            dropped.append(DroppedEntry(section=field.name, reason=str(exc)))
            continue
        section = getattr(data, field.name)
        for key, entry in entries.items():
            try:
                section[key] = decoder.decode(entry)
            except msgspec.DecodeError as exc:
                dropped.append(DroppedEntry(section=field.name, key=key, reason=str(exc)))
    return data, dropped


def _unavailable(path: Path, message: str) -> CnkiError:
    return CnkiError("STORE_UNAVAILABLE", message, details={"path": str(path)})


def _aside_path(path: Path, label: str) -> Path:
    """A free name beside ``path`` for keeping its bytes: ``<name>.<label>-YYYYMMDD-HHMMSS[-n]``."""
    stem = f"{path.name}.{label}-{time.strftime('%Y%m%d-%H%M%S')}"
    target = path.with_name(stem)
    counter = 1
    while os.path.lexists(target):
        counter += 1
        target = path.with_name(f"{stem}-{counter}")
    return target


def _set_aside(path: Path, reason: str) -> StoreRecovery:
    """Rename an unreadable store out of the way, never over another file, so nothing is lost."""
    target = _aside_path(path, "unreadable")
    try:
        os.rename(path, target)
    except OSError as exc:
        message = f"{path} 无法读取，且无法改名保存（{exc.strerror or exc}）；为避免丢失数据，未继续。"
        raise _unavailable(path, message) from exc
    log.warning("set aside unreadable %s as %s (%s)", path, target.name, reason)
    return StoreRecovery(kind="set_aside", path=str(target), reason=reason, at=utc_now_iso())


def _keep_copy(path: Path, original: bytes, dropped: list[DroppedEntry]) -> StoreRecovery:
    """Keep the file's bytes beside it before a flush replaces it with the entries that could be read."""
    target = _aside_path(path, "damaged")
    try:
        write_new_file(path.parent, target.name, original)
    except CnkiError as exc:
        message = f"{path} 中有条目无法读取，且无法另存原文件（{exc.message}）；为避免丢失数据，未继续。"
        raise _unavailable(path, message) from exc
    log.warning("dropped %d unreadable entries of %s; the original is kept as %s", len(dropped), path, target.name)
    return StoreRecovery(
        kind="entries_dropped", path=str(target), dropped_count=len(dropped), dropped=dropped[:DROPPED_LISTED], at=utc_now_iso()
    )


def _recovery_problem(research: Path, recovery: StoreRecovery) -> Problem:
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
