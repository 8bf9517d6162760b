"""The library's sections as mappings over research.db (``store.data``).

A :class:`Table` reads like a dict — ``get``, ``[key]``, ``in``, ``pop``, ``len``, iteration — and each
write (``[key] = value``, ``del``, ``pop``) is submitted to the writer at once. A value read is a fresh
copy decoded from its row: changing it changes nothing stored until it is put again. What is submitted
but not yet committed is read from the writer's pending view, so a write is seen at once.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any, Generic, TypeVar

import msgspec

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import (
    STORE_VERSION,
    Artifact,
    CacheEntry,
    ErrorEvent,
    FacetRecord,
    Operation,
    Paper,
    Quality,
    RelationList,
    SearchRecord,
    SiteCheck,
    StoreData,
)
from cnki_mcp.core.watch_model import Watch
from cnki_mcp.store.db import Put, Reader, Writer, body_json, paper_row

V = TypeVar("V")
_MISSING: Any = object()
_JSON = msgspec.json.Encoder()

# The value type of each map section, and the stamp retention orders it by (none: kept however old).
SECTION_TYPES: dict[str, Any] = {
    "papers": Paper, "sources": Quality, "searches": SearchRecord, "search_cache": CacheEntry,
    "operations": Operation, "artifacts": Artifact, "relations": RelationList, "facets": FacetRecord,
    "watches": Watch,
}
STAMPS: dict[str, Callable[[Any], str]] = {
    "searches": lambda record: record.created_at,
    "search_cache": lambda entry: entry.at,
    "operations": lambda op: op.created_at,
    "relations": lambda relations: relations.observed_at,
    "facets": lambda record: record.observed_at,
}


def make_row(table: str, key: str, value: Any) -> Put:
    """The row of ``value`` stored under ``key`` in section ``table`` (with its index columns)."""
    if table == "papers":
        title, keys = paper_row(value)
        return Put(table, key, value, title_key=title, paper_keys=keys)
    stamp = STAMPS.get(table)
    return Put(table, key, value, stamp(value) if stamp else "")


class Table(MutableMapping[str, V], Generic[V]):
    """One section: ``key → value`` rows of table ``name``. With ``stamp`` (retention by age) the keys and
    their stamps are also kept in memory, in the order they were first stored."""

    def __init__(self, name: str, reader: Reader, writer: Writer) -> None:
        self.name = name
        self._decoder = msgspec.json.Decoder(SECTION_TYPES[name])
        self._reader = reader
        self._writer = writer
        self.stamps: dict[str, str] | None = None
        if name in STAMPS:
            self.stamps = {key: value for key, value in reader.all(f"SELECT key, stamp FROM {name} ORDER BY rowid")}

    def decode(self, blob: bytes) -> V:
        """A stored value; STORE_CORRUPT for a body that is not one we wrote (too large once inflated, not
        zlib, not the section's JSON), so one bad row fails the call that reads it and nothing else."""
        try:
            return self._decoder.decode(body_json(blob))
        except (ValueError, zlib.error) as exc:
            raise CnkiError(
                "STORE_CORRUPT", f"本地数据库 research.db 中 {self.name} 的一条记录无法读取（{exc}）。",
                details={"section": self.name, "reason": str(exc)},
            ) from exc

    def row(self, key: str, value: V) -> Put:
        return make_row(self.name, key, value)

    # -- reads --

    def get(self, key: str, default: Any = None) -> Any:
        found, value = self._writer.lookup(self.name, key)
        if found:
            # Not committed yet: a copy of the value handed to the writer, as a read from the row would be.
            return default if value is None else self._decoder.decode(_JSON.encode(value))
        row = self._reader.one(f"SELECT body FROM {self.name} WHERE key = ?", (key,))
        return default if row is None else self.decode(row[0])

    def __getitem__(self, key: str) -> V:
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        if self.stamps is not None:
            return key in self.stamps
        found, body = self._writer.lookup(self.name, key)
        if found:
            return body is not None
        return self._reader.one(f"SELECT 1 FROM {self.name} WHERE key = ?", (key,)) is not None

    def keys_list(self) -> list[str]:
        """Every key, in the order first stored (a scan: for exports, tests and small sections)."""
        if self.stamps is not None:
            return list(self.stamps)
        keys = dict.fromkeys(row[0] for row in self._reader.all(f"SELECT key FROM {self.name} ORDER BY rowid"))
        for put in self._writer.pending_of(self.name):
            if put.body is None:
                keys.pop(put.key, None)
            else:
                keys.setdefault(put.key)
        return list(keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys_list())

    def __len__(self) -> int:
        if self.stamps is not None:
            return len(self.stamps)
        count = int(self._reader.one(f"SELECT COUNT(*) FROM {self.name}")[0])
        for put in self._writer.pending_of(self.name):
            stored = self._reader.one(f"SELECT 1 FROM {self.name} WHERE key = ?", (put.key,)) is not None
            count += (put.body is not None) - stored
        return count

    def __eq__(self, other: object) -> bool:
        if isinstance(other, dict | Table):
            return dict(self.items()) == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<Table {self.name}: {len(self)} rows>"

    # -- writes --

    def put(self, key: str, value: V) -> int:
        row = self.row(key, value)
        if self.stamps is not None:
            self.stamps[key] = row.stamp
        return self._writer.submit([row])

    def delete(self, key: str) -> int:
        if self.stamps is not None:
            self.stamps.pop(key, None)
        return self._writer.submit([Put(self.name, key, None)])

    def __setitem__(self, key: str, value: V) -> None:
        self.put(key, value)

    def __delitem__(self, key: str) -> None:
        if key not in self:
            raise KeyError(key)
        self.delete(key)

    def pop(self, key: str, default: Any = _MISSING) -> Any:
        value = self.get(key, _MISSING)
        if value is _MISSING:
            if default is _MISSING:
                raise KeyError(key)
            return default
        self.delete(key)
        return value


class PaperTable(Table[Paper]):
    """The records, with the catalogue's index columns written beside each one."""

    def refs_with_keys(self, keys: list[str]) -> set[str]:
        """Refs stored under any of the identity ``keys`` (the writer's pending papers included)."""
        if not keys:
            return set()
        marks = ", ".join("?" * len(keys))
        found = {row[0] for row in self._reader.all(f"SELECT ref FROM paper_keys WHERE key IN ({marks})", keys)}
        wanted = set(keys)
        for put in self._writer.pending_of(self.name):
            if put.body is not None and wanted.intersection(put.paper_keys):
                found.add(put.key)
        return found

    def refs_with_title(self, key: str) -> set[str]:
        """Refs whose title has this title key (the writer's pending papers included)."""
        found = {row[0] for row in self._reader.all("SELECT key FROM papers WHERE title_key = ?", (key,))}
        for put in self._writer.pending_of(self.name):
            if put.body is None or put.title_key != key:
                found.discard(put.key)
            else:
                found.add(put.key)
        return found


class Library:
    """``store.data``: the map sections as tables over research.db; the singletons of StoreData in memory,
    written to the ``meta`` table whenever they change (``Store.sync_meta``)."""

    version = STORE_VERSION

    def __init__(self, reader: Reader, writer: Writer, meta: dict[str, bytes]) -> None:
        self.papers = PaperTable("papers", reader, writer)
        self.sources: Table[Quality] = Table("sources", reader, writer)
        self.searches: Table[SearchRecord] = Table("searches", reader, writer)
        self.search_cache: Table[CacheEntry] = Table("search_cache", reader, writer)
        self.operations: Table[Operation] = Table("operations", reader, writer)
        self.artifacts: Table[Artifact] = Table("artifacts", reader, writer)
        self.relations: Table[RelationList] = Table("relations", reader, writer)
        self.facets: Table[FacetRecord] = Table("facets", reader, writer)
        self.watches: Table[Watch] = Table("watches", reader, writer)
        self.retired_searches: list[str] = _meta(meta, "retired_searches", list[str], [])
        self.retired_operations: list[str] = _meta(meta, "retired_operations", list[str], [])
        self.recent_errors: list[ErrorEvent] = _meta(meta, "recent_errors", list[ErrorEvent], [])
        self.last_site_check: SiteCheck | None = _meta(meta, "last_site_check", SiteCheck | None, None)
        self.known_names: list[str] = _meta(meta, "known_names", list[str], [])
        self.downloads_by_day: dict[str, int] = _meta(meta, "downloads_by_day", dict[str, int], {})

    def __eq__(self, other: object) -> bool:
        """Equal to a StoreData holding the same entries (a scan of every section: for tests)."""
        if not isinstance(other, StoreData):
            return NotImplemented
        return all(getattr(self, field) == getattr(other, field) for field in StoreData.__struct_fields__)

    __hash__ = None  # type: ignore[assignment]

    def tables(self) -> list[Table[Any]]:
        return [self.papers, self.sources, self.searches, self.search_cache, self.operations, self.artifacts, self.relations, self.facets, self.watches]


def _meta(meta: dict[str, bytes], key: str, kind: Any, default: Any) -> Any:
    blob = meta.get(key)
    if blob is None:
        return default
    try:
        return msgspec.json.decode(body_json(blob), type=kind)
    except (ValueError, zlib.error):  # msgspec's errors and BodyTooLarge are ValueErrors
        return default
