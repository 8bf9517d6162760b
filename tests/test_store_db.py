"""research.db itself: each schema migration, research.json carried over on first start (a 20,000-record file
built by the benchmark among them), a damaged or newer database, reads the database refuses, the catalogue's
index in the database, ``cnki-mcp store --dump`` and ``--check``, and what diagnostics says of the database."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.identity import identity_keys
from cnki_mcp.core.model import ErrorEvent, FacetRecord, FacetValue, Operation, SearchEntry, SearchRecord, StoreData
from cnki_mcp.store import db as db_module
from cnki_mcp.store import migrate
from cnki_mcp.store.catalog import Catalog
from cnki_mcp.store.library import KEEP_FACETS, Store, peek_store
from tests.fake_site import sim_paper
from tests.store_faults import failing_apply, persisted, read_only_error, stored_keys

REPO = Path(__file__).resolve().parents[1]
HAN = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


def codes(problems: list[Any]) -> list[str]:
    return [problem.code for problem in problems]


def legacy_store(root: Path, papers: int) -> StoreData:
    """A research.json as versions before the database wrote it."""
    data = StoreData(
        papers={paper.record_ref: paper for paper in (sim_paper(n) for n in range(papers))},
        searches={"s_1": SearchRecord(search_id="s_1", status="completed", query="法", entries=[SearchEntry(record_ref=sim_paper(0).record_ref)],
                                      created_at="2026-11-01T00:00:00.000Z")},
        operations={"op_1": Operation(operation_id="op_1", kind="search", status="completed", checkpoint={"round": 2}, created_at="2026-11-01T00:00:00.000Z")},
        facets={"fk": FacetRecord(key="fk", observed_at="2026-11-01T00:00:00.000Z", total=3,
                                  facets={"year": [FacetValue(value="2025", code="2025", count=3)]})},
        retired_searches=["s_old"],
        recent_errors=[ErrorEvent(code="RATE_LIMITED", at="2026-11-01T00:00:00.000Z", kind="search")],
    )
    root.mkdir(parents=True, exist_ok=True)
    (root / "research.json").write_bytes(msgspec.json.encode(data))
    return data


# --- schema migrations ----------------------------------------------------------------------------------


def test_migration_1_creates_a_table_per_section_and_the_singletons(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    assert db_module.migrate(conn, target=1) == [1]
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    # The sections of schema 1; later ones (facets) come with later steps.
    assert tables == {"papers", "sources", "searches", "search_cache", "operations", "artifacts", "relations", "meta"}
    assert db_module.schema_version(conn) == 1
    conn.close()


def test_migration_2_builds_the_identity_index_from_the_papers_already_stored(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    db_module.migrate(conn, target=1)
    papers = [sim_paper(n) for n in range(3)]
    conn.executemany(
        "INSERT INTO papers (key, body) VALUES (?, ?)", [(paper.record_ref, db_module.encode_body(paper)) for paper in papers]
    )
    assert db_module.migrate(conn, target=2) == [2]
    found = sorted(conn.execute("SELECT key, ref FROM paper_keys"))
    assert found == sorted((key, paper.record_ref) for paper in papers for key in identity_keys(paper))
    assert len(found) >= 3
    assert db_module.schema_version(conn) == 2
    conn.close()


def test_migration_3_adds_the_facets_table_and_keeps_what_schema_2_held(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    db_module.migrate(conn, target=2)
    paper = sim_paper(0)
    conn.execute("INSERT INTO papers (key, body) VALUES (?, ?)", (paper.record_ref, db_module.encode_body(paper)))
    assert db_module.present_tables(conn) == tuple(table for table in db_module.TABLES if table not in ("facets", "watches"))
    assert db_module.migrate(conn, target=3) == [3]
    assert db_module.present_tables(conn) == tuple(table for table in db_module.TABLES if table != "watches")
    columns = [row[1] for row in conn.execute("PRAGMA table_info(facets)")]
    assert columns == ["key", "stamp", "body"]
    assert conn.execute("SELECT key FROM papers").fetchall() == [(paper.record_ref,)]
    assert db_module.schema_version(conn) == 3
    conn.close()


def test_migration_4_adds_the_watches_table_and_keeps_what_schema_3_held(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    db_module.migrate(conn, target=3)
    paper = sim_paper(0)
    conn.execute("INSERT INTO papers (key, body) VALUES (?, ?)", (paper.record_ref, db_module.encode_body(paper)))
    assert db_module.migrate(conn) == [4]
    assert db_module.present_tables(conn) == db_module.TABLES
    assert [row[1] for row in conn.execute("PRAGMA table_info(watches)")] == ["key", "stamp", "body"]
    assert conn.execute("SELECT key FROM papers").fetchall() == [(paper.record_ref,)]
    assert db_module.schema_version(conn) == db_module.SCHEMA_VERSION == 4
    conn.close()


def test_a_store_of_schema_2_is_migrated_on_open_and_keeps_facet_answers_across_restarts(tmp_path: Path) -> None:
    conn = db_module.connect(tmp_path / "research.db")
    db_module.migrate(conn, target=2)
    conn.close()
    store = Store.open(tmp_path)
    record = FacetRecord(key="k1", observed_at="2026-12-01T00:00:00.000Z", total=7,
                         facets={"year": [FacetValue(value="2025", code="2025", count=7)]})
    store.put_facets(record)
    store.close_sync()
    again = Store.open(tmp_path)
    assert again.data.facets.get("k1") == record
    assert again.stats()["database"]["schema_version"] == 4
    again.close_sync()


def test_facet_answers_past_the_newest_200_are_dropped_oldest_first(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    for n in range(KEEP_FACETS + 3):
        store.put_facets(FacetRecord(key=f"k{n:03d}", observed_at=f"2026-12-01T00:{n // 60:02d}:{n % 60:02d}.000Z"))
    store.close_sync()
    again = Store.open(tmp_path)
    assert len(again.data.facets) == KEEP_FACETS
    assert sorted(again.data.facets)[:2] == ["k003", "k004"]
    again.close_sync()


def test_a_dump_of_a_database_of_an_older_schema_gives_the_later_sections_empty(tmp_path: Path) -> None:
    conn = db_module.connect(tmp_path / "research.db")
    db_module.migrate(conn, target=2)
    paper = sim_paper(0)
    conn.execute("INSERT INTO papers (key, body) VALUES (?, ?)", (paper.record_ref, db_module.encode_body(paper)))
    conn.close()
    counts = migrate.dump(tmp_path / "research.db", tmp_path / "out.json")
    checked = migrate.check(tmp_path / "research.db")
    dumped = msgspec.json.decode((tmp_path / "out.json").read_bytes(), type=StoreData)
    assert counts["papers"] == 1 and counts["facets"] == 0
    assert dumped.papers == {paper.record_ref: paper} and dumped.facets == {}
    assert checked["problems"] == [] and checked["counts"]["facets"] == 0 and checked["schema_version"] == 2


def test_a_failed_migration_step_leaves_the_earlier_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conn = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    db_module.migrate(conn, target=1)

    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE half_done (x)")
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(db_module, "MIGRATIONS", (db_module.MIGRATIONS[0], broken))
    with pytest.raises(sqlite3.OperationalError):
        db_module.migrate(conn)
    assert db_module.schema_version(conn) == 1
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'half_done'").fetchone() is None
    conn.close()


def test_a_database_of_a_newer_schema_is_refused_and_left_alone(tmp_path: Path) -> None:
    Store.open(tmp_path).close_sync()
    conn = sqlite3.connect(tmp_path / "research.db")
    conn.execute("PRAGMA user_version = 9")
    conn.close()
    before = (tmp_path / "research.db").read_bytes()
    with pytest.raises(CnkiError) as refused:
        Store.open(tmp_path)
    assert refused.value.code == "STORE_UNAVAILABLE"
    assert "结构版本 9" in refused.value.message and "升级" in refused.value.message
    assert refused.value.details["version"] == 9
    assert (tmp_path / "research.db").read_bytes() == before
    assert not list(tmp_path.glob("research.db.unreadable-*"))


# --- research.json carried over --------------------------------------------------------------------------


def test_research_json_is_carried_over_once_counted_and_kept(tmp_path: Path) -> None:
    legacy = legacy_store(tmp_path, 30)
    raw = (tmp_path / "research.json").read_bytes()
    store = Store.open(tmp_path)
    try:
        migration = store.migration
        assert migration is not None
        assert migration.counts == {"papers": 30, "sources": 0, "searches": 1, "search_cache": 0, "operations": 1, "artifacts": 0, "relations": 0, "facets": 1, "watches": 0}
        assert migration.kept_as == str(tmp_path / "research.json.migrated")
        assert store.data == legacy
        assert store.warnings() == []
        assert Catalog(store).by_title(sim_paper(4).title) == [sim_paper(4).record_ref]  # the index was built too
        stats = store.stats()
        assert (stats["records"], stats["migration"].counts["papers"]) == (30, 30)
    finally:
        store.close_sync()
    assert not (tmp_path / "research.json").exists()
    assert (tmp_path / "research.json.migrated").read_bytes() == raw
    again = Store.open(tmp_path)  # the second start finds the database and reads no JSON
    assert again.migration is not None and again.migration.counts["papers"] == 30
    assert len(again.data.papers) == 30
    again.close_sync()


def test_a_migration_that_cannot_be_written_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    legacy_store(tmp_path, 5)
    raw = (tmp_path / "research.json").read_bytes()
    monkeypatch.setattr(db_module, "apply", failing_apply(lambda: True))
    with pytest.raises(CnkiError) as refused:
        Store.open(tmp_path)
    assert refused.value.code == "STORE_UNAVAILABLE"
    assert refused.value.details["kind"] == "disk_full"
    assert "research.json 没有改动" in refused.value.message
    assert (tmp_path / "research.json").read_bytes() == raw
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith("research")) == ["research.json"]
    monkeypatch.undo()
    store = Store.open(tmp_path)  # space is back: the next start migrates
    assert len(store.data.papers) == 5
    store.close_sync()


@pytest.mark.slow
def test_a_20000_record_file_built_by_the_benchmark_is_carried_over(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "bench/bench_store.py", "--build-json", str(tmp_path), "--records", "20000"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert built.returncode == 0, built.stderr
    source = msgspec.json.decode((tmp_path / "research.json").read_bytes(), type=StoreData)
    began = time.perf_counter()
    store = Store.open(tmp_path)
    seconds = time.perf_counter() - began
    try:
        assert store.migration is not None
        assert store.migration.counts == {table: len(getattr(source, table)) for table in db_module.TABLES}
        assert store.migration.counts["papers"] == 20000
        ref = next(iter(source.papers))
        assert store.data.papers[ref] == source.papers[ref]
        assert sorted(store.data.searches) == sorted(source.searches)
        assert store.data.operations == source.operations
    finally:
        store.close_sync()
    assert persisted(tmp_path) == source  # every entry, as it was
    print(f"\nmigrated 20,000 records in {seconds:.2f} s")


# --- a damaged database ----------------------------------------------------------------------------------


def test_a_file_that_is_not_a_database_is_set_aside(tmp_path: Path) -> None:
    (tmp_path / "research.db").write_bytes(b"not a database at all" * 100)
    store = Store.open(tmp_path)
    try:
        (recovery,) = store.recovered
        assert recovery.kind == "set_aside"
        assert Path(recovery.path).name.startswith("research.db.unreadable-")
        assert Path(recovery.path).read_bytes() == b"not a database at all" * 100
        assert codes(store.warnings()) == ["STORE_SET_ASIDE"]
        assert store.data == StoreData()
        store.put_paper(sim_paper(1))
    finally:
        store.close_sync()
    assert stored_keys(tmp_path, "papers") == {sim_paper(1).record_ref}


def _damage(path: Path) -> None:
    """Overwrite pages in the middle of the file (the papers' b-tree), as a failing disk would."""
    size = path.stat().st_size
    with open(path, "r+b") as handle:
        handle.seek(size // 2 // 4096 * 4096)
        handle.write(b"\xde\xad\xbe\xef" * 2048)


def test_a_damaged_database_is_told_then_set_aside_with_its_readable_rows_kept(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    for n in range(400):
        store.put_paper(msgspec.structs.replace(sim_paper(n), abstract="摘要" * 300))
    store.put_operation(Operation(operation_id="op_1", kind="search", status="completed", created_at="2026-11-01T00:00:00.000Z"))
    store.close_sync()
    _damage(tmp_path / "research.db")
    store = Store.open(tmp_path)  # opening does not read the whole file: the check runs beside it
    try:
        assert store.check_done(30)
        assert store.damage
        (warning,) = store.warnings()
        assert warning.code == "STORE_CORRUPT" and "cnki-mcp store --dump" in warning.message
        assert (tmp_path / "research.db.damaged").exists()
        store.put_operation(Operation(operation_id="op_2", kind="read", status="completed", created_at="2026-11-02T00:00:00.000Z"))
    finally:
        store.close_sync()
    store = Store.open(tmp_path)  # the next start sets it aside and carries the readable rows over
    try:
        (recovery,) = store.recovered
        assert recovery.kind == "entries_dropped"
        assert Path(recovery.path).name.startswith("research.db.unreadable-")
        assert store.check_done(30) and store.damage == []
        assert codes(store.warnings()) == ["STORE_ENTRIES_DROPPED"]
        assert "research.db" in store.warnings()[0].message
        kept = len(store.data.papers)
        assert 0 < kept < 400  # what the damaged pages held is gone; the rest was carried over
        assert {"op_1", "op_2"} <= set(store.data.operations)  # a change made after the check is kept too
    finally:
        store.close_sync()
    assert not (tmp_path / "research.db.damaged").exists()
    assert migrate.check(tmp_path / "research.db")["problems"] == []
    assert migrate.check(Path(recovery.path))["problems"] != []  # the original is kept as it was


def test_a_read_the_database_refuses_is_a_clear_code(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    store._reader._conn.close()  # as if the file went away under the server
    with pytest.raises(CnkiError) as failed:
        store.data.papers.get("rec_1")
    assert failed.value.code == "STORE_UNAVAILABLE"
    assert "research.db" in failed.value.message
    store._reader._conn = db_module.connect(tmp_path / "research.db")
    store.close_sync()


def test_a_directory_that_became_read_only_is_told_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store.open(tmp_path)
    monkeypatch.setattr(db_module, "apply", failing_apply(lambda: True, error=read_only_error))
    store.put_paper(sim_paper(1))
    assert store.flush() is False
    (warning,) = store.warnings()
    assert (store.save.cause, warning.code) == ("read_only", "STORE_NOT_SAVED")
    assert warning.message.startswith("数据目录或数据库文件只读") and "恢复数据目录的写权限" in warning.message
    monkeypatch.undo()
    store.close_sync()
    assert stored_keys(tmp_path, "papers") == {sim_paper(1).record_ref}


def test_a_read_only_database_file_is_told_as_read_only(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes read-only files")
    Store.open(tmp_path).close_sync()
    os.chmod(tmp_path / "research.db", 0o400)
    try:
        store = Store.open(tmp_path)
        store.put_paper(sim_paper(1))
        assert store.flush() is False
        assert store.save.cause == "read_only"
        assert "只读" in store.warnings()[0].message
        store.close_sync()
    finally:
        os.chmod(tmp_path / "research.db", 0o600)


# --- the catalogue in the database -----------------------------------------------------------------------


def test_the_identity_index_finds_papers_committed_and_pending(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    catalog = Catalog(store)
    first = catalog.upsert([sim_paper(n) for n in range(20)])
    store.flush()
    again = catalog.upsert([sim_paper(3), sim_paper(30)])  # one committed, one new
    pending = catalog.upsert([sim_paper(30)])  # matched while its first write may not be committed
    assert again[0].record_ref == first[3].record_ref
    assert pending[0].record_ref == again[1].record_ref
    assert len(store.data.papers) == 21
    renamed = msgspec.structs.replace(first[5], title="换过的题名")
    catalog.put(renamed)
    assert (catalog.by_title("换过的题名"), catalog.by_title(first[5].title)) == ([first[5].record_ref], [])
    store.close_sync()


# --- dump, check, diagnostics, the report's peek -------------------------------------------------------------


def test_a_dump_holds_the_whole_library_in_research_jsons_format(tmp_path: Path) -> None:
    legacy = legacy_store(tmp_path / "data", 12)
    store = Store.open(tmp_path / "data")  # carried over, then held open: the dump needs no lock
    store.note_error("SITE_UNAVAILABLE", "read")
    store.flush()
    target = tmp_path / "library.json"
    counts = migrate.dump(tmp_path / "data" / "research.db", target)
    dumped = msgspec.json.decode(target.read_bytes(), type=StoreData)
    assert counts["papers"] == 12 and counts["operations"] == 1
    assert dumped.papers == legacy.papers and dumped.retired_searches == ["s_old"]
    assert [event.code for event in dumped.recent_errors] == ["RATE_LIMITED", "SITE_UNAVAILABLE"]
    with pytest.raises(CnkiError) as exists:
        migrate.dump(tmp_path / "data" / "research.db", target)
    assert exists.value.code == "FILE_EXISTS"
    store.close_sync()
    # A dump is a research.json: a fresh data directory carries it over.
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "research.json").write_bytes(target.read_bytes())
    again = Store.open(fresh)
    assert again.export() == dumped
    again.close_sync()


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "import sys; from cnki_mcp.cli import main; sys.argv[0] = 'cnki-mcp'; main()", "store", *args],
        cwd=REPO, capture_output=True, text=True, timeout=60, env={**os.environ, "CNKI_DATA_DIR": str(root), "PYTHONPATH": str(REPO)},
    )


def test_the_store_command_dumps_and_checks(tmp_path: Path) -> None:
    legacy_store(tmp_path / "data", 7)
    Store.open(tmp_path / "data").close_sync()
    done = _cli(tmp_path / "data", "--check", "--dump", str(tmp_path / "out.json"))
    assert done.returncode == 0, done.stderr
    assert "完整性检查通过" in done.stdout and "文献记录 7" in done.stdout
    assert len(json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))["papers"]) == 7
    _damage(tmp_path / "data" / "research.db")
    damaged = _cli(tmp_path / "data", "--check")
    assert damaged.returncode == 1
    assert "未通过完整性检查" in damaged.stdout
    missing = _cli(tmp_path / "nowhere", "--check")
    assert missing.returncode == 1 and "STORE_UNAVAILABLE" in missing.stderr
    assert _cli(tmp_path / "data").returncode == 2  # neither flag: a usage error


def test_the_store_command_speaks_english_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    legacy_store(tmp_path / "data", 3)
    Store.open(tmp_path / "data").close_sync()
    monkeypatch.setenv("CNKI_LANG", "en")
    done = _cli(tmp_path / "data", "--check", "--dump", str(tmp_path / "out.json"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"Written to {tmp_path / 'out.json'} (") and "papers: 3, journals: 0" in lines[0]
    assert "passed the integrity check: papers: 3" in lines[1] and "schema version 4" in lines[1]
    assert HAN.findall(done.stdout) == []


def test_diagnostics_counts_report_the_records_and_the_database_size(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    for n in range(25):
        store.put_paper(sim_paper(n))
    store.flush()
    stats = store.stats()
    assert stats["records"] == 25
    assert stats["database"]["size_bytes"] == (tmp_path / "research.db").stat().st_size + (tmp_path / "research.db-wal").stat().st_size
    assert stats["database"]["schema_version"] == db_module.SCHEMA_VERSION
    store.close_sync()


def test_the_report_peeks_at_the_database_without_the_lock(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    store.note_error("RATE_LIMITED", "search")
    store.remember_names(["张三"])
    store.flush()
    peeked = peek_store(tmp_path)  # the server still holds the directory
    assert peeked is not None
    assert [event.code for event in peeked.recent_errors] == ["RATE_LIMITED"] and peeked.known_names == ["张三"]
    store.close_sync()
