"""Moving the library in and out of research.db: research.json read (as far as it can be) and carried over on
first start, the readable rows of a damaged database carried into a fresh one, the whole library written out
as one JSON file (``cnki-mcp store --dump``) and the integrity check (``--check``).

research.json is the format of versions before the database (StoreData). A file that cannot be read whole
is set aside or its readable entries kept, as before; a dump has the same format, so it can be read back.
"""

from __future__ import annotations

import codecs
import contextlib
import logging
import os
import sqlite3
import time
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, get_args, get_origin

import msgspec

from cnki_mcp.core.clock import utc_now_iso
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.files import fsync_dir, refuse_existing, write_new_file
from cnki_mcp.core.model import STORE_VERSION, DroppedEntry, StoreData, StoreRecovery
from cnki_mcp.store import db
from cnki_mcp.store.db import TABLES, Put, body_json
from cnki_mcp.store.tables import SECTION_TYPES, make_row

log = logging.getLogger(__name__)

RESEARCH_FILE = "research.json"
MIGRATED_SUFFIX = ".migrated"
# How many unreadable entries diagnostics lists.
DROPPED_LISTED = 100

_DECODER = msgspec.json.Decoder(StoreData)


def without_bom(raw: bytes) -> bytes:
    """JSON bytes without the UTF-8 byte-order mark Windows editors (Notepad) put at the start."""
    return raw[len(codecs.BOM_UTF8):] if raw.startswith(codecs.BOM_UTF8) else raw


class Migration(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What the first start carried over from research.json (diagnostics shows it)."""

    source: str
    kept_as: str = ""
    at: str
    counts: dict[str, int] = {}
    seconds: float = 0.0


# --- research.json ----------------------------------------------------------------------------------------


class _Header(msgspec.Struct):
    version: int = STORE_VERSION


_HEADER = msgspec.json.Decoder(_Header)
_SECTIONS = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ENTRY_DECODERS = {
    field.name: msgspec.json.Decoder(get_args(field.type)[1])
    for field in msgspec.structs.fields(StoreData)
    if get_origin(field.type) is dict
}


def read_json_store(path: Path) -> tuple[StoreData, StoreRecovery | None]:
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
            return StoreData(), set_aside(path, str(exc))
    if version > STORE_VERSION:
        raise CnkiError(
            "STORE_UNAVAILABLE",
            f"{path} 是较新版本的 cnki-mcp 写入的（数据格式版本 {version}），这个版本只能读取格式版本 {STORE_VERSION}。"
            "请把 cnki-mcp 升级到最新版本后再使用；文件没有改动。",
            details={"path": str(path), "version": version, "supported_version": STORE_VERSION},
        )
    if version < STORE_VERSION:
        return StoreData(), set_aside(path, f"数据格式版本 {version}，本程序使用版本 {STORE_VERSION}")
    if data is not None:
        return data, None
    data, dropped = _readable_entries(raw)
    return data, _keep_copy(path, original, dropped)


def peek_json(path: Path) -> StoreData | None:
    """research.json read as it is, without setting anything aside; None when missing or unreadable."""
    try:
        return _DECODER.decode(without_bom(path.read_bytes()))
    except (OSError, msgspec.DecodeError):
        return None


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


def aside_path(path: Path, label: str) -> Path:
    """A free name beside ``path`` for keeping its bytes: ``<name>.<label>-YYYYMMDD-HHMMSS[-n]``."""
    stem = f"{path.name}.{label}-{time.strftime('%Y%m%d-%H%M%S')}"
    target = path.with_name(stem)
    counter = 1
    while os.path.lexists(target):
        counter += 1
        target = path.with_name(f"{stem}-{counter}")
    return target


def set_aside(path: Path, reason: str) -> StoreRecovery:
    """Rename an unreadable store out of the way, never over another file, so nothing is lost."""
    target = aside_path(path, "unreadable")
    try:
        os.rename(path, target)
    except OSError as exc:
        message = f"{path} 无法读取，且无法改名保存（{exc.strerror or exc}）；为避免丢失数据，未继续。"
        raise _unavailable(path, message) from exc
    log.warning("set aside unreadable %s as %s (%s)", path, target.name, reason)
    return StoreRecovery(kind="set_aside", path=str(target), reason=reason, at=utc_now_iso())


def _keep_copy(path: Path, original: bytes, dropped: list[DroppedEntry]) -> StoreRecovery:
    """Keep the file's bytes beside it before the entries that could be read replace it."""
    target = aside_path(path, "damaged")
    try:
        write_new_file(path.parent, target.name, original)
    except CnkiError as exc:
        message = f"{path} 中有条目无法读取，且无法另存原文件（{exc.message}）；为避免丢失数据，未继续。"
        raise _unavailable(path, message) from exc
    log.warning("dropped %d unreadable entries of %s; the original is kept as %s", len(dropped), path, target.name)
    return dropped_recovery(target, dropped)


def dropped_recovery(kept: Path, dropped: list[DroppedEntry]) -> StoreRecovery:
    return StoreRecovery(kind="entries_dropped", path=str(kept), dropped_count=len(dropped), dropped=dropped[:DROPPED_LISTED], at=utc_now_iso())


def rows_of(data: StoreData) -> Iterator[Put]:
    """Every entry of a StoreData as the rows of research.db."""
    for table in TABLES:
        for key, value in getattr(data, table).items():
            yield make_row(table, key, value)
    for name in db.META_KEYS:
        yield Put("meta", name, getattr(data, name))


# --- building a database ------------------------------------------------------------------------------------


def build(path: Path, rows: Iterable[Put]) -> dict[str, int]:
    """A new database at ``path`` holding ``rows``, written whole in one transaction (a failure leaves no file)."""
    db.remove_db(path)
    counts = dict.fromkeys(TABLES, 0)
    conn = db.connect(path, wal=False)
    try:
        db.migrate(conn)
        conn.execute("BEGIN IMMEDIATE")
        chunk: list[Put] = []
        for row in rows:
            chunk.append(row)
            if row.table in counts:
                counts[row.table] += 1
            if len(chunk) >= 1000:
                db.apply(conn, chunk)
                chunk.clear()
        db.apply(conn, chunk)
        conn.execute("COMMIT")
    except BaseException:
        conn.close()
        db.remove_db(path)
        raise
    conn.close()
    return counts


def from_json(root: Path, target: Path) -> tuple[Migration | None, StoreRecovery | None]:
    """research.db built from research.json on first start; the JSON is kept as research.json.migrated.

    Without research.json: (None, None) and no database yet. A failed write (a full disk) removes the
    half-built database and leaves research.json as it is (STORE_UNAVAILABLE).
    """
    source = root / RESEARCH_FILE
    if not os.path.lexists(source):
        return None, None
    began = time.perf_counter()
    data, recovery = read_json_store(source)
    building = target.with_name(target.name + ".migrating")
    try:
        counts = build(building, rows_of(data))
        os.replace(building, target)
        fsync_dir(root)
    except (OSError, sqlite3.Error) as exc:
        db.remove_db(building)
        raise CnkiError(
            "STORE_UNAVAILABLE",
            f"无法把 {source} 迁移到数据库 {target}（{exc}）。research.json 没有改动；请释放磁盘空间或检查数据目录的写权限后重新启动服务。",
            details={"path": str(source), "reason": str(exc), "kind": db.failure_kind(exc)},
        ) from exc
    kept = ""
    if source.exists():
        kept_path = source.with_name(source.name + MIGRATED_SUFFIX)
        if os.path.lexists(kept_path):
            kept_path = aside_path(source, "migrated")
        with contextlib.suppress(OSError):
            os.rename(source, kept_path)
            kept = str(kept_path)
    migration = Migration(source=str(source), kept_as=kept, at=utc_now_iso(), counts=counts, seconds=round(time.perf_counter() - began, 3))
    log.warning("migrated %s into %s: %s", source, target, counts)
    return migration, recovery


def salvage(path: Path, reason: str) -> StoreRecovery:
    """A damaged database renamed aside (with its WAL) and its readable rows carried into a new one at ``path``."""
    target = aside_path(path, "unreadable")
    try:
        os.rename(path, target)
    except OSError as exc:
        raise _unavailable(path, f"{path} 已损坏，且无法改名保存（{exc.strerror or exc}）；为避免丢失数据，未继续。") from exc
    for suffix in ("-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.rename(f"{path}{suffix}", f"{target}{suffix}")
    log.warning("set aside damaged %s as %s (%s)", path, target.name, reason)
    dropped: list[DroppedEntry] = []
    rows: list[Put] = []
    try:
        source = db.connect(target, read_only=True)
    except sqlite3.Error as exc:
        return StoreRecovery(kind="set_aside", path=str(target), reason=f"{reason}; {exc}", at=utc_now_iso())
    try:
        try:
            present = db.sound_tables(source)  # only tables exactly ours: a view or a changed table is not read
        except sqlite3.Error:
            present = (*TABLES, "meta")  # the schema itself unreadable: each table is tried (and its loss listed)
        for table in present:
            found, lost = _readable_rows(source, table)
            dropped.extend(lost)
            kind = SECTION_TYPES.get(table)
            for key, blob in found:
                try:
                    value = msgspec.json.decode(body_json(blob), type=kind) if kind else msgspec.json.decode(body_json(blob))
                    rows.append(make_row(table, key, value) if kind else Put("meta", key, value))
                except (ValueError, TypeError, zlib.error) as exc:  # BodyTooLarge and msgspec's errors are ValueErrors
                    dropped.append(DroppedEntry(section=table, key=str(key), reason=str(exc)))
    finally:
        source.close()
    try:
        build(path, rows)
    except (OSError, sqlite3.Error) as exc:
        raise _unavailable(path, f"{path} 已损坏并已改名保留为 {target}，但无法新建数据库（{exc}）；请释放磁盘空间后重试。") from exc
    if not rows:
        return StoreRecovery(kind="set_aside", path=str(target), reason=reason, at=utc_now_iso())
    return dropped_recovery(target, dropped or [DroppedEntry(section="database", reason=reason)])


# --- dump and check ---------------------------------------------------------------------------------------------


_SALVAGE_CHUNK = 64


def _readable_rows(conn: sqlite3.Connection, table: str) -> tuple[list[tuple[str, bytes]], list[DroppedEntry]]:
    """The rows of ``table`` a damaged file still gives, read by rowid range so one bad page loses only its rows."""
    try:
        last = conn.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0] or 0
    except sqlite3.Error as exc:
        return [], [DroppedEntry(section=table, reason=str(exc))]
    found: list[tuple[str, bytes]] = []
    lost: list[DroppedEntry] = []
    for start in range(1, last + 1, _SALVAGE_CHUNK):
        end = start + _SALVAGE_CHUNK - 1
        try:
            found.extend(conn.execute(f"SELECT key, body FROM {table} WHERE rowid BETWEEN ? AND ?", (start, end)).fetchall())
            continue
        except sqlite3.Error:
            pass
        for rowid in range(start, end + 1):
            try:
                found.extend(conn.execute(f"SELECT key, body FROM {table} WHERE rowid = ?", (rowid,)).fetchall())
            except sqlite3.Error as exc:
                lost.append(DroppedEntry(section=table, key=f"rowid {rowid}", reason=str(exc)))
    return found, lost


def _open_existing(path: Path) -> sqlite3.Connection:
    if not path.exists():
        raise _unavailable(path, f"数据库 {path} 不存在：服务还没有在这个数据目录启动过（或用 CNKI_DATA_DIR 指定了别的目录）。")
    try:
        return db.connect(path, read_only=True)
    except sqlite3.Error as exc:
        raise _unavailable(path, f"无法打开数据库 {path}：{exc}。") from exc


def dump(path: Path, target: Path) -> dict[str, int]:
    """The whole library written to ``target`` as one JSON file in research.json's format (a new file, never
    over another); read from the database without its lock, so a running server may keep it open."""
    refuse_existing(target, "请换一个文件名")
    conn = _open_existing(path)
    temp = target.with_name(f".{target.name}.part")
    counts: dict[str, int] = {}
    try:
        conn.execute("BEGIN")  # one snapshot of the whole library
        present = db.present_tables(conn)
        with open(temp, "xb") as out:
            out.write(b'{"version":%d' % STORE_VERSION)
            for table in TABLES:
                out.write(b',"%s":{' % table.encode())
                count = 0
                rows = conn.execute(f"SELECT key, body FROM {table} ORDER BY rowid") if table in present else ()
                for key, blob in rows:
                    out.write((b"," if count else b"") + msgspec.json.encode(key) + b":" + body_json(blob))
                    count += 1
                out.write(b"}")
                counts[table] = count
            meta = dict(conn.execute("SELECT key, body FROM meta").fetchall())
            for name in db.META_KEYS:
                if name in meta:
                    out.write(b',"%s":' % name.encode() + body_json(meta[name]))
            out.write(b"}\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, target)
    except (OSError, sqlite3.Error, ValueError, zlib.error) as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        if isinstance(exc, ValueError | zlib.error):  # a row we never wrote (a zlib bomb, garbage)
            raise CnkiError("STORE_CORRUPT", f"research.db 中有无法读取的记录（{exc}），未写出 {target}。", details={"path": str(path)}) from exc
        raise CnkiError("DISK_WRITE_FAILED", f"无法写出 {target}：{exc}。", details={"path": str(target)}) from exc
    finally:
        conn.close()
    return counts


def check(path: Path) -> dict[str, Any]:
    """SQLite's full integrity check of the database, its schema version and its counts."""
    conn = _open_existing(path)
    try:
        try:
            problems = db.integrity_check(conn)
            present = db.present_tables(conn)
            counts = {table: int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]) if table in present else 0
                      for table in TABLES}
            version = db.schema_version(conn)
        except sqlite3.Error as exc:
            problems, counts, version = [str(exc)], {}, 0
    finally:
        conn.close()
    return {"path": str(path), "size_bytes": db_size(path), "schema_version": version, "problems": problems, "counts": counts}


def db_size(path: Path) -> int:
    """The database's bytes on disk, its WAL included."""
    total = 0
    for suffix in ("", "-wal"):
        with contextlib.suppress(OSError):
            total += os.stat(f"{path}{suffix}").st_size
    return total
