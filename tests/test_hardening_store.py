"""Round 4 of the hardening (issue 42) on the store: a value that cannot be encoded, a writer thread that is
gone, a hostile research.db (triggers, views, zlib bombs, huge rows) and a WAL held open by another reader."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
import tracemalloc
from pathlib import Path
from typing import Any

import msgspec
import pytest

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.text import loads_site_json, without_lone_surrogates
from cnki_mcp.store import db as db_module
from cnki_mcp.store import migrate
from cnki_mcp.store.library import Store, peek_store
from tests.fake_site import sim_paper
from tests.store_faults import ENDLESS_VIEW, WIPING_TRIGGER, plant, stored_keys, zlib_bomb


def codes(problems: list[Any]) -> list[str]:
    return [problem.code for problem in problems]


# --- item 2: one lone surrogate ------------------------------------------------------------------------


def test_json_from_the_site_keeps_no_lone_surrogate() -> None:
    value = loads_site_json('{"abstract": "a\\ud83d b \\ud83d\\ude00 c\\udc00", "k\\ud800": ["\\udfff"]}')
    assert value == {"abstract": "a\ufffd b \U0001f600 c\ufffd", "k\ufffd": ["\ufffd"]}
    msgspec.json.encode(value)  # encodable: nothing left to fail a save
    assert without_lone_surrogates("plain 中文") == "plain 中文"


def test_a_value_that_cannot_be_encoded_is_dropped_alone_and_later_writes_commit(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    try:
        good, bad = sim_paper(1), sim_paper(2)
        bad.abstract = "摘要\ud83d"
        store.put_paper(good)
        store.put_paper(bad)
        assert store.flush()
        warnings = store.warnings()
        assert codes(warnings) == ["STORE_NOT_SAVED"]
        assert warnings[0].details["cause"] == "rejected"
        assert stored_keys(tmp_path, "papers") == {good.record_ref}
        for n in range(3, 6):  # the next writes commit, and the warning goes with the next commit
            store.put_paper(sim_paper(n))
            assert store.flush()
        assert store.warnings() == []
        assert stored_keys(tmp_path, "papers") == {good.record_ref, *(sim_paper(n).record_ref for n in range(3, 6))}
    finally:
        store.close_sync()


class _Gone(BaseException):
    """Not an Exception: nothing in the writer's loop may catch it, so the thread ends."""


def test_a_writer_that_is_gone_is_told_in_every_answer_never_a_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store.open(tmp_path)
    real = db_module.apply

    def apply(conn: sqlite3.Connection, puts: Any) -> None:
        if any(put.table == "papers" for put in puts):
            raise _Gone("the thread ends here")
        real(conn, puts)

    monkeypatch.setattr(db_module, "apply", apply)
    try:
        store.put_paper(sim_paper(1))

        async def answers() -> list[float]:
            took = []
            for n in range(3):
                began = time.monotonic()
                store.put_paper(sim_paper(10 + n))
                await store.settle()
                took.append(time.monotonic() - began)
            return took

        took = asyncio.run(answers())
        assert max(took) < 5.0, took  # before: 10 s each (SETTLE_SECONDS)
        began = time.monotonic()
        assert not store.flush()
        assert time.monotonic() - began < 5.0
        warnings = store.warnings()
        assert codes(warnings) == ["STORE_NOT_SAVED"]
        assert warnings[0].details["cause"] == "writer_stopped"
    finally:
        store.close_sync()


# --- item 6: a hostile research.db ----------------------------------------------------------------------


def _library(root: Path, papers: int = 50) -> None:
    store = Store.open(root)
    for n in range(papers):
        store.put_paper(sim_paper(n))
    store.close_sync()


def test_a_trigger_planted_in_the_file_never_runs_and_the_library_is_kept(tmp_path: Path) -> None:
    _library(tmp_path)
    plant(tmp_path, WIPING_TRIGGER)
    store = Store.open(tmp_path)
    try:
        warnings = store.warnings()
        assert codes(warnings) == ["STORE_CORRUPT"]
        assert "trigger wipe" in warnings[0].message
        store.put_paper(sim_paper(99))
        assert store.flush()
        assert len(stored_keys(tmp_path, "papers")) == 51  # before: 0 (the trigger emptied the table)
        assert list(tmp_path.glob("research.db.unreadable-*"))  # the file as it was is kept
    finally:
        store.close_sync()
    assert db_module.foreign_schema(sqlite3.connect(tmp_path / "research.db")) == []


def test_an_endless_view_in_place_of_a_table_is_refused_at_once(tmp_path: Path) -> None:
    _library(tmp_path)
    plant(tmp_path, *ENDLESS_VIEW)
    began = time.monotonic()
    store = Store.open(tmp_path)
    try:
        assert store.data.papers.get(sim_paper(7).record_ref) is None  # the view was never read
        assert time.monotonic() - began < 5.0  # before: still running after 40 s
        assert codes(store.warnings()) == ["STORE_CORRUPT"]
    finally:
        store.close_sync()


def test_a_statement_of_the_readers_is_cut_at_its_time_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "x.db"
    conn = db_module.connect(path)
    conn.execute(ENDLESS_VIEW[1].replace("papers", "endless", 1))
    monkeypatch.setattr(db_module, "STATEMENT_SECONDS", 0.5)
    reader = db_module.Reader(conn)
    began = time.monotonic()
    with pytest.raises(CnkiError) as cut:
        reader.one("SELECT key FROM endless")
    assert cut.value.code == "STORE_UNAVAILABLE" and "interrupted" in cut.value.message
    assert time.monotonic() - began < 5.0
    assert conn.execute("PRAGMA trusted_schema").fetchone()[0] == 0
    reader.close()


def test_a_zlib_bomb_is_one_unreadable_record_not_gigabytes(tmp_path: Path) -> None:
    _library(tmp_path)
    bomb = zlib_bomb(db_module.BODY_BYTES * 4)  # 256 MB inflated, 250 KB stored
    plant(tmp_path, "UPDATE papers SET body = ? WHERE key = ?", args=(bomb, sim_paper(7).record_ref))
    store = Store.open(tmp_path)
    try:
        tracemalloc.start()
        with pytest.raises(CnkiError) as bad:
            store.data.papers.get(sim_paper(7).record_ref)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert bad.value.code == "STORE_CORRUPT"
        assert peak < db_module.BODY_BYTES * 1.5  # before: the whole 256 MB (2.4 GB for a 2.4 MB bomb)
        assert store.data.papers.get(sim_paper(8).record_ref) is not None
    finally:
        store.close_sync()


def test_a_row_too_large_to_read_is_set_aside_and_every_call_works(tmp_path: Path) -> None:
    _library(tmp_path)
    plant(tmp_path, "INSERT OR REPLACE INTO meta (key, body) VALUES ('recent_errors', ?)", args=(b"\0" * (db_module.ROW_BYTES + 1),))
    store = Store.open(tmp_path)  # before: every open failed (the row was read, then not zlib)
    try:
        assert codes(store.warnings()) == ["STORE_CORRUPT"]
        assert len(store.data.papers) == 50
        store.note_error("RATE_LIMITED")
        assert store.flush()
    finally:
        store.close_sync()


def test_a_value_too_large_to_be_read_back_is_never_written(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    try:
        huge = sim_paper(1)
        huge.abstract = os.urandom(db_module.ROW_BYTES).hex()  # incompressible: twice the limit
        store.put_paper(huge)
        store.put_paper(sim_paper(2))
        assert store.flush()
        assert store.warnings()[0].details["cause"] == "rejected"
        assert stored_keys(tmp_path, "papers") == {sim_paper(2).record_ref}
    finally:
        store.close_sync()


# --- item 7: the WAL with another reader holding a transaction ------------------------------------------------


def test_the_wal_is_cut_back_once_a_reader_that_held_it_lets_go(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    wal = tmp_path / "research.db-wal"
    other = sqlite3.connect(tmp_path / "research.db", isolation_level=None)
    try:
        other.execute("BEGIN")
        other.execute("SELECT count(*) FROM papers").fetchone()  # a snapshot held: no checkpoint may pass it
        n = 0
        while wal.stat().st_size < 2 * db_module.WAL_KEEP_BYTES:
            paper = sim_paper(1000 + n)
            paper.abstract = "摘" * 6000
            store.put_paper(paper)
            assert store.flush()
            n += 1
        held = wal.stat().st_size
        other.execute("COMMIT")
        for m in range(30):
            store.put_paper(sim_paper(5000 + m))
            assert store.flush()
        assert wal.stat().st_size <= db_module.WAL_KEEP_BYTES < held  # before: stayed at its largest
    finally:
        other.close()
        store.close_sync()


def test_the_lockless_readers_neither_run_nor_inflate_what_the_file_holds(tmp_path: Path) -> None:
    """``doctor --report`` (peek_store) and ``store --dump`` read the file without the store: a view in place of
    a table is not read, and a zlib bomb is STORE_CORRUPT, not gigabytes."""
    _library(tmp_path)
    plant(tmp_path, "UPDATE papers SET body = ? WHERE key = ?", args=(zlib_bomb(db_module.BODY_BYTES * 2), sim_paper(7).record_ref))
    with pytest.raises(CnkiError) as bad:
        migrate.dump(tmp_path / "research.db", tmp_path / "dump.json")
    assert bad.value.code == "STORE_CORRUPT" and not (tmp_path / "dump.json").exists()
    plant(tmp_path, "DROP TABLE meta", "CREATE VIEW meta AS " + ENDLESS_VIEW[1].split(" AS ", 1)[1].replace("CAST(n AS TEXT) AS key, '' AS stamp, '' AS title_key", "CAST(n AS TEXT) AS key"))
    began = time.monotonic()
    assert peek_store(tmp_path) is None
    assert time.monotonic() - began < 10.0  # an endless view is never run (it would hang)
