"""The data directory: config.json, research.json, the directory lock, retention and flushing.

Layout under the root (see :func:`cnki_mcp.settings.data_root`)::

    config.json            {"browser_path": ...}        load_config / save_config
    research.json          the whole store (StoreData)  0600, replaced atomically
    research.json.tmp      transient flush target
    research.json.unreadable-YYYYMMDD-HHMMSS            a corrupt or foreign-version store, set aside
    cnki.lock              held for the life of the store (one process per data directory)
    browser/ downloads/ exports/ diagnostics/ incoming/<op_id>/

Everything lives in memory; network work never waits for the disk. Mutations mark the store dirty
and a loop writes it out every 2 s (temp file, fsync, rename, directory fsync), so research.json on
disk is always one complete version and a crash loses at most the last 2 s.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import msgspec

from cnki_mcp.clock import age_seconds, parse_utc, utc_now, utc_now_iso
from cnki_mcp.errors import CnkiError
from cnki_mcp.files import atomic_replace, fsync_dir
from cnki_mcp.model import (
    PARSER_VERSION,
    STORE_VERSION,
    Artifact,
    CacheEntry,
    Config,
    Operation,
    Paper,
    Quality,
    SearchRecord,
    StoreData,
)

log = logging.getLogger(__name__)

RESEARCH_FILE = "research.json"
CONFIG_FILE = "config.json"
LOCK_FILE = "cnki.lock"
# browser/ is made by the browser module when it first starts: its presence means a browser ran.
SUBFOLDERS = ("downloads", "exports", "diagnostics")

FLUSH_INTERVAL_SECONDS = 2.0
KEEP_SEARCHES = 300
KEEP_OPERATIONS = 200
SEARCH_CACHE_TTL_SECONDS = 10 * 60
DETAIL_TTL_SECONDS = 30 * 86400
JOURNAL_PRESENT_TTL_SECONDS = 7 * 86400
JOURNAL_OTHER_TTL_SECONDS = 86400

_IS_WINDOWS = sys.platform == "win32"
_OP_ID = re.compile(r"[A-Za-z0-9_-]{1,80}")
_DECODER = msgspec.json.Decoder(StoreData)
_ENCODER = msgspec.json.Encoder()
_EPOCH = datetime.min.replace(tzinfo=timezone.utc)


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
        return msgspec.json.decode(raw, type=Config)
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
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
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
    def acquire(cls, root: Path) -> DirectoryLock:
        path = Path(root) / LOCK_FILE
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o600)
        except OSError as exc:
            raise _in_use(root, f"无法打开锁文件：{exc.strerror or exc}") from exc
        try:
            _lock_fd(fd)
        except OSError as exc:
            os.close(fd)
            raise _in_use(root, None) from exc
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


def _in_use(root: Path, reason: str | None) -> CnkiError:
    message = f"另一个 MCP 服务进程正在使用数据目录 {root}。同一个数据目录同一时间只能由一个服务进程使用；请关闭另一个进程，或用 CNKI_DATA_DIR 指定其他目录。"
    if reason:
        message = f"无法锁定数据目录 {root}（{reason}）。同一个数据目录同一时间只能由一个服务进程使用。"
    return CnkiError("DATA_DIRECTORY_IN_USE", message, details={"path": str(root)})


if _IS_WINDOWS:
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
        self._dirty = False
        self._closed = False
        self._write_lock = threading.Lock()
        # Snapshot numbers: a write never replaces a newer snapshot with an older one, even if a
        # cancelled flush's thread reaches the disk after the next flush's thread.
        self._snapshot = 0
        self._written = 0
        self._flush_lock = asyncio.Lock()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.last_flush_at = ""
        self.last_flush_error = ""

    @classmethod
    def open(cls, root: Path) -> Store:
        """Create the layout, take the directory lock and read research.json (blocking, fast)."""
        root = Path(os.path.abspath(root))
        try:
            root.mkdir(mode=0o700, parents=True, exist_ok=True)
            for name in SUBFOLDERS:
                (root / name).mkdir(mode=0o700, exist_ok=True)
        except OSError as exc:
            raise _unavailable(root, f"无法创建数据目录 {root}：{exc.strerror or exc}。") from exc
        lock = DirectoryLock.acquire(root)
        try:
            data = _read_store(root / RESEARCH_FILE)
        except BaseException:
            lock.release()
            raise
        return cls(root, data, lock)

    # -- layout --

    research_path = _InRoot(RESEARCH_FILE)
    browser_dir = _InRoot("browser")
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
        return self._dirty

    @property
    def closed(self) -> bool:
        return self._closed

    def mark_dirty(self) -> None:
        self._dirty = True

    def put_paper(self, paper: Paper) -> None:
        self.data.papers[paper.record_ref] = paper
        self._dirty = True

    def put_operation(self, op: Operation) -> None:
        self.data.operations[op.operation_id] = op
        self._dirty = True

    def put_search(self, record: SearchRecord, cache_key: str | None = None) -> None:
        """Store a search; with ``cache_key`` (completed searches only) it also answers prefer_cache."""
        self.data.searches[record.search_id] = record
        if cache_key:
            self.data.search_cache[cache_key] = CacheEntry(search_id=record.search_id, at=utc_now_iso())
        self._dirty = True

    def put_artifact(self, key: str, artifact: Artifact) -> None:
        self.data.artifacts[key] = artifact
        self._dirty = True

    def put_source(self, key: str, quality: Quality) -> None:
        self.data.sources[key] = quality
        self._dirty = True

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
        """Apply retention: 300 newest searches, 200 newest operations, live cache entries."""
        now = now or utc_now()
        data = self.data
        _keep_newest(data.searches, KEEP_SEARCHES, lambda record: record.created_at)
        _keep_newest(data.operations, KEEP_OPERATIONS, lambda op: op.created_at)
        for key, entry in list(data.search_cache.items()):
            age = age_seconds(entry.at, now)
            if entry.search_id not in data.searches or age is None or age > SEARCH_CACHE_TTL_SECONDS:
                del data.search_cache[key]

    def _prepare(self) -> tuple[int, bytes]:
        self.trim()
        self._dirty = False
        try:
            payload = _ENCODER.encode(self.data)
        except BaseException:
            self._dirty = True
            raise
        self._snapshot += 1
        return self._snapshot, payload

    def _write(self, snapshot: tuple[int, bytes]) -> bool:
        """Replace research.json with the snapshot atomically; on failure stay dirty and log."""
        number, payload = snapshot
        path = self.research_path
        temp = path.with_name(RESEARCH_FILE + ".tmp")
        with self._write_lock:
            if number < self._written:
                return False
            try:
                fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0), 0o600)
                try:
                    if not _IS_WINDOWS:
                        os.fchmod(fd, 0o600)
                    view = memoryview(payload)
                    while view:
                        view = view[os.write(fd, view):]
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.replace(temp, path)
                fsync_dir(self.root)
            except OSError as exc:
                self._dirty = True
                self.last_flush_error = f"{type(exc).__name__}: {exc}"
                log.error("could not write %s (will retry): %s", path, exc)
                return False
            self._written = number
            self.last_flush_at = utc_now_iso()
            self.last_flush_error = ""
            return True

    def flush(self) -> bool:
        """Write research.json now if anything changed (blocking). Returns whether it wrote."""
        if self._closed or not self._dirty:
            return False
        return self._write(self._prepare())

    async def flush_async(self) -> bool:
        """Like :meth:`flush`, but the disk write runs in a thread; never two flushes at once."""
        async with self._flush_lock:
            if self._closed or not self._dirty:
                return False
            snapshot = self._prepare()
            return await asyncio.to_thread(self._write, snapshot)

    async def start(self) -> None:
        """Start the background flush loop (every 2 s while the store is open)."""
        if self._task is None and not self._closed:
            self._stop.clear()
            self._task = asyncio.create_task(self._flush_loop(), name="store-flush")

    async def _flush_loop(self) -> None:
        while not self._stop.is_set():
            try:
                async with asyncio.timeout(FLUSH_INTERVAL_SECONDS):
                    await self._stop.wait()
            except TimeoutError:
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
        if self._dirty:
            log.error("closing %s with unsaved changes: %s", self.research_path, self.last_flush_error)
        self._closed = True
        self._lock.release()

    def stats(self) -> dict[str, Any]:
        """Counts and flush state, for diagnostics."""
        data = self.data
        return {
            "root": str(self.root),
            "papers": len(data.papers),
            "sources": len(data.sources),
            "searches": len(data.searches),
            "operations": len(data.operations),
            "artifacts": len(data.artifacts),
            "dirty": self._dirty,
            "last_flush_at": self.last_flush_at,
            "last_flush_error": self.last_flush_error,
        }


def _keep_newest(mapping: dict[str, Any], keep: int, stamp: Callable[[Any], str]) -> None:
    if len(mapping) <= keep:
        return
    # Later insertion breaks ties, so equal timestamps keep the most recently stored entries.
    order = sorted(
        enumerate(mapping.items()),
        key=lambda item: (parse_utc(stamp(item[1][1])) or _EPOCH, item[0]),
        reverse=True,
    )
    for _, (key, _value) in order[keep:]:
        del mapping[key]


def _read_store(path: Path) -> StoreData:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return StoreData()
    except OSError as exc:
        raise _unavailable(path, f"无法读取 {path}：{exc.strerror or exc}。") from exc
    try:
        data = _DECODER.decode(raw)
    except msgspec.DecodeError as exc:
        reason = str(exc)
    else:
        if data.version == STORE_VERSION:
            return data
        reason = f"version {data.version}, expected {STORE_VERSION}"
    _set_aside(path, reason)
    return StoreData()


def _unavailable(path: Path, message: str) -> CnkiError:
    return CnkiError("STORE_UNAVAILABLE", message, details={"path": str(path)})


def _set_aside(path: Path, reason: str) -> Path:
    """Rename an unreadable store out of the way, never over another file, so nothing is lost."""
    stem = f"{path.name}.unreadable-{time.strftime('%Y%m%d-%H%M%S')}"
    target = path.with_name(stem)
    counter = 1
    while os.path.lexists(target):
        counter += 1
        target = path.with_name(f"{stem}-{counter}")
    try:
        os.rename(path, target)
    except OSError as exc:
        message = f"{path} 无法读取，且无法改名保存（{exc.strerror or exc}）；为避免丢失数据，未继续。"
        raise _unavailable(path, message) from exc
    log.warning("set aside unreadable %s as %s (%s)", path, target.name, reason)
    return target
