"""The store when the disk or the file is not what it should be: failed saves and their back-off,
unreadable entries, a newer format, a byte-order mark, a read-only data directory, retention that
remembers what it removed, and the private browser folder."""

from __future__ import annotations

import asyncio
import codecs
import errno
import os
import stat
import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest

from cnki_mcp.core.clock import utc_now_iso
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Artifact, Config, Operation, Paper, Quality, SearchRecord, StoreData
from cnki_mcp.store import db as db_module
from cnki_mcp.store import library as store_module
from cnki_mcp.store import migrate as migrate_module
from cnki_mcp.store.library import Store, load_config
from tests.store_faults import failing_apply, stored_keys

GOOD_PAPER = {"record_ref": "rec_good", "title": "可以读取的论文", "year": 2020}


def enospc(*_args: Any, **_kwargs: Any) -> int:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def codes(problems: list[Any]) -> list[str]:
    return [problem.code for problem in problems]


def write_store(root: Path, document: dict[str, Any], prefix: bytes = b"") -> bytes:
    root.mkdir(parents=True, exist_ok=True)
    raw = prefix + msgspec.json.encode(document)
    (root / "research.json").write_bytes(raw)
    return raw


def side_files(root: Path) -> list[str]:
    """Files kept beside the store: set aside, damaged copies, migrated JSON (not the database's own WAL)."""
    own = {"research.json", "research.db", "research.db-wal", "research.db-shm"}
    return sorted(path.name for path in root.iterdir() if path.name.startswith("research.") and path.name not in own)


# --- failed saves --------------------------------------------------------------------------------


def test_a_failed_commit_leaves_nothing_half_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store.open(tmp_path)
    store.put_paper(Paper(record_ref="rec_0", title="先存下的"))
    assert store.flush()
    monkeypatch.setattr(db_module, "apply", failing_apply(lambda: True))
    store.put_paper(Paper(record_ref="rec_1", title="题名"))
    wrote = store.flush()
    monkeypatch.undo()
    assert wrote is False
    assert stored_keys(tmp_path, "papers") == {"rec_0"}  # the failed transaction was rolled back whole
    assert side_files(tmp_path) == []
    store.close_sync()
    assert stored_keys(tmp_path, "papers") == {"rec_0", "rec_1"}  # close tried again, and the disk had room


def test_a_real_sqlite_full_database_is_told_as_a_full_disk(tmp_path: Path) -> None:
    """SQLite's own SQLITE_FULL (the file may not grow: max_page_count), not a simulated one."""
    store = Store.open(tmp_path)
    store.put_paper(Paper(record_ref="rec_0", title="先存下的"))
    assert store.flush()
    pages = store._writer_conn.execute("PRAGMA page_count").fetchone()[0]
    store._writer_conn.execute(f"PRAGMA max_page_count = {pages}")
    for n in range(50):
        store.put_paper(Paper(record_ref=f"rec_{n + 1}", title="题名", abstract="很长的摘要" * 400))
    assert store.flush() is False
    assert (store.save.cause, codes(store.warnings())) == ("disk_full", ["STORE_NOT_SAVED"])
    assert "磁盘已满" in store.warnings()[0].message
    store._writer_conn.execute("PRAGMA max_page_count = 1073741823")
    assert store.flush() is True
    assert len(stored_keys(tmp_path, "papers")) == 51
    store.close_sync()


def test_a_failed_write_is_shown_with_its_time_and_cleared_by_the_next_success(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store.open(tmp_path)
    with monkeypatch.context() as patch:
        patch.setattr(db_module, "apply", failing_apply(lambda: True))
        store.put_paper(Paper(record_ref="rec_1", title="题名"))
        changed_at = store.save.unsaved_since
        store.flush()
        store.put_paper(Paper(record_ref="rec_2", title="题名二"))
        store.flush()
    failing = msgspec.structs.replace(store.save)
    warned = store.warnings()
    assert failing.dirty is True
    assert failing.unsaved_since == changed_at
    assert failing.failing_since >= changed_at
    assert failing.failed_writes == 2
    assert failing.error == "OperationalError: database or disk is full"
    assert codes(warned) == ["STORE_NOT_SAVED"]
    assert failing.failing_since in warned[0].message
    assert str(store.db_path) in warned[0].message
    assert store.flush() is True
    assert store.warnings() == []
    assert store.save.failing_since == ""
    assert store.save.unsaved_since == ""
    assert stored_keys(tmp_path, "papers") == {"rec_1", "rec_2"}
    store.close_sync()


def test_a_store_waiting_for_its_commit_warns_of_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store.open(tmp_path)
    release = threading.Event()
    real = db_module.apply
    monkeypatch.setattr(db_module, "apply", lambda conn, puts: (release.wait(5), real(conn, puts)))
    store.put_paper(Paper(record_ref="rec_1"))
    assert store.dirty
    assert store.warnings() == []
    release.set()
    store.close_sync()


@pytest.mark.parametrize(("failures", "delay"), [(0, 2.0), (1, 4.0), (2, 8.0), (3, 16.0), (4, 30.0), (5000, 30.0)])
def test_retries_back_off_to_thirty_seconds(failures: int, delay: float) -> None:
    assert db_module.retry_delay(failures) == delay


async def test_the_writer_backs_off_while_commits_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(db_module, "RETRY_FIRST_SECONDS", 0.05)
    store = Store.open(tmp_path)
    with monkeypatch.context() as patch:
        patch.setattr(db_module, "apply", failing_apply(lambda: True))
        store.put_paper(Paper(record_ref="rec_1"))
        await asyncio.sleep(1.2)  # without back-off: hundreds of attempts; with it: 0, 0.1, 0.3, 0.7 s
        attempts = store.save.failed_writes
    await store.close()
    assert 2 <= attempts <= 5
    assert stored_keys(tmp_path, "papers") == {"rec_1"}


# --- reading research.json -------------------------------------------------------------------------


def test_a_newer_format_version_is_refused_and_left_alone(tmp_path: Path) -> None:
    raw = write_store(tmp_path, {"version": 6, "papers": {"rec_1": {"title": "新格式", "new_field": [1]}}})
    with pytest.raises(CnkiError) as refused:
        Store.open(tmp_path)
    assert refused.value.code == "STORE_UNAVAILABLE"
    assert "格式版本 6" in refused.value.message
    assert "格式版本 5" in refused.value.message
    assert "升级" in refused.value.message
    assert refused.value.details["version"] == 6
    assert (tmp_path / "research.json").read_bytes() == raw
    assert side_files(tmp_path) == []
    (tmp_path / "research.json").unlink()
    Store.open(tmp_path).close_sync()  # the lock was given back


def test_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    write_store(tmp_path, {"version": 5, "papers": {"rec_good": GOOD_PAPER}}, prefix=codecs.BOM_UTF8)
    store = Store.open(tmp_path)
    assert store.data.papers["rec_good"].year == 2020
    assert store.recovered == []
    assert side_files(tmp_path) == ["research.json.migrated"]
    store.close_sync()


def test_a_config_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_bytes(codecs.BOM_UTF8 + b'{"browser_path": "/usr/bin/chromium"}')
    assert load_config(tmp_path) == Config(browser_path="/usr/bin/chromium")


BAD_ENTRIES = {
    "papers": {"record_ref": "rec_bad", "year": "2020"},
    "operations": {"operation_id": "op_bad", "kind": "search"},  # no status
    "searches": {"search_id": "s_bad", "status": "completed", "entries": [{"score": 1}]},
    "artifacts": {"state": "completed", "record_ref": "rec_good", "bytes": "many"},
    "sources": {"canonical_title": "计算机学报", "tiers": "北大核心"},
    "search_cache": {"search_id": "s_good"},  # no time
}


def good_store() -> dict[str, Any]:
    """A store of one good entry per section, its cache entry stamped now (opening drops expired ones: a stamp
    taken when the module was imported may be stale by the time a long suite reaches the test)."""
    return {
        "version": 5,
        "papers": {"rec_good": GOOD_PAPER},
        "operations": {"op_good": {"operation_id": "op_good", "kind": "search", "status": "completed"}},
        "searches": {"s_good": {"search_id": "s_good", "status": "completed"}},
        "artifacts": {"rec_good:pdf": {"state": "clicked", "record_ref": "rec_good"}},
        "sources": {"法学研究": {"canonical_title": "法学研究"}},
        "search_cache": {"k_good": {"search_id": "s_good", "at": utc_now_iso()}},
    }


@pytest.mark.parametrize("section", sorted(BAD_ENTRIES))
def test_one_bad_entry_is_dropped_alone_and_listed(tmp_path: Path, section: str) -> None:
    good = good_store()
    document = {**good, section: {**good[section], "bad_key": BAD_ENTRIES[section]}}
    raw = write_store(tmp_path, document)
    store = Store.open(tmp_path)
    (recovery,) = store.recovered
    kept = getattr(store.data, section)
    assert sorted(kept) == sorted(good[section])
    assert recovery.kind == "entries_dropped"
    assert recovery.dropped_count == 1
    assert [(entry.section, entry.key) for entry in recovery.dropped] == [(section, "bad_key")]
    assert Path(recovery.path).read_bytes() == raw
    assert Path(recovery.path).name.startswith("research.json.damaged-")
    assert codes(store.warnings()) == ["STORE_ENTRIES_DROPPED"]
    assert recovery.path in store.warnings()[0].message
    assert "bad_key" in store.warnings()[0].message
    store.close_sync()
    assert (tmp_path / "research.json.migrated").read_bytes() == raw  # the file itself is kept too
    again = Store.open(tmp_path)
    assert "bad_key" not in getattr(again.data, section)
    assert again.data.papers["rec_good"].title == GOOD_PAPER["title"]
    assert again.recovered == []  # told once, by the start that carried the file over
    again.close_sync()


def test_a_section_of_the_wrong_shape_is_dropped_and_the_rest_kept(tmp_path: Path) -> None:
    write_store(tmp_path, {**good_store(), "operations": ["not", "a", "map"], "retired_searches": "s_old"})
    store = Store.open(tmp_path)
    (recovery,) = store.recovered
    assert [(entry.section, entry.key) for entry in recovery.dropped] == [("operations", ""), ("retired_searches", "")]
    assert sorted(store.data.papers) == ["rec_good"]
    assert sorted(store.data.searches) == ["s_good"]
    assert store.data.operations == {}
    store.close_sync()


def test_the_list_of_dropped_entries_is_bounded(tmp_path: Path) -> None:
    papers = {f"rec_{n}": {"year": "2020"} for n in range(250)}
    write_store(tmp_path, {"version": 5, "papers": {**papers, "rec_good": GOOD_PAPER}})
    store = Store.open(tmp_path)
    (recovery,) = store.recovered
    assert recovery.dropped_count == 250
    assert len(recovery.dropped) == migrate_module.DROPPED_LISTED
    assert len(store.warnings()[0].details["dropped"]) == store_module.DROPPED_NAMED
    assert list(store.data.papers) == ["rec_good"]
    store.close_sync()


def test_an_unreadable_file_set_aside_is_reported(tmp_path: Path) -> None:
    (tmp_path / "research.json").write_bytes(b'{"version": 5, "papers": {"rec_1": {"title": "trunc')
    store = Store.open(tmp_path)
    (recovery,) = store.recovered
    (warning,) = store.warnings()
    assert recovery.kind == "set_aside"
    assert Path(recovery.path).name.startswith("research.json.unreadable-")
    assert warning.code == "STORE_SET_ASIDE"
    assert recovery.path in warning.message
    assert store.data == StoreData()
    store.close_sync()


def test_a_copy_that_cannot_be_kept_stops_the_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    raw = write_store(tmp_path, {**good_store(), "papers": {"rec_bad": {"year": "2020"}}})

    def refuse(folder: Path, name: str, data: bytes) -> None:
        raise CnkiError("DISK_WRITE_FAILED", "磁盘已满。")

    monkeypatch.setattr(migrate_module, "write_new_file", refuse)
    with pytest.raises(CnkiError) as refused:
        Store.open(tmp_path)
    assert refused.value.code == "STORE_UNAVAILABLE"
    assert (tmp_path / "research.json").read_bytes() == raw
    assert not (tmp_path / "research.db").exists()  # nothing was migrated: the next start tries again


# --- a data directory that cannot be written -------------------------------------------------------


def refuse_opening(name: str, error: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``os.open`` fails for files called ``name``, as on a read-only or foreign-owned directory."""
    real = os.open

    def opener(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if Path(path).name == name:
            raise OSError(error, os.strerror(error), str(path))
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(store_module.os, "open", opener)


@pytest.mark.parametrize("name", ["cnki.lock", "research.db.probe"])
@pytest.mark.parametrize("error", [errno.EACCES, errno.EROFS])
def test_a_read_only_data_directory_is_store_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, error: int
) -> None:
    Store.open(tmp_path).close_sync()  # an existing directory with its lock file
    refuse_opening(name, error, monkeypatch)
    with pytest.raises(CnkiError) as refused:
        Store.open(tmp_path)
    monkeypatch.undo()
    assert refused.value.code == "STORE_UNAVAILABLE"
    assert "不能写入" in refused.value.message
    assert "另一个" not in refused.value.message
    Store.open(tmp_path).close_sync()  # nothing was left locked


def test_a_data_directory_that_cannot_be_created_is_store_unavailable(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder", encoding="utf-8")
    with pytest.raises(CnkiError) as refused:
        Store.open(tmp_path / "file" / "data")
    assert refused.value.code == "STORE_UNAVAILABLE"
    assert "不能写入" in refused.value.message


def test_a_stale_probe_file_is_removed_at_open(tmp_path: Path) -> None:
    (tmp_path / "research.db.probe").write_bytes(b"")
    Store.open(tmp_path).close_sync()
    assert side_files(tmp_path) == []


# --- the browser folder --------------------------------------------------------------------------


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_a_loose_browser_folder_is_tightened(tmp_path: Path) -> None:
    profile = tmp_path / "browser" / "profile"
    profile.mkdir(parents=True)
    os.chmod(tmp_path / "browser", 0o755)
    Store.open(tmp_path).close_sync()
    assert stat.S_IMODE((tmp_path / "browser").stat().st_mode) == 0o700
    assert profile.is_dir()


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_the_browser_folder_is_private_whatever_the_umask(tmp_path: Path) -> None:
    previous = os.umask(0)
    try:
        Store.open(tmp_path).close_sync()
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "browser").stat().st_mode) == 0o700


# --- retention remembers what it removed ------------------------------------------------------------


def test_retention_remembers_removed_searches_and_operations(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    for n in range(store_module.KEEP_SEARCHES + 2):
        stamp = f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}.000Z"
        store.put_search(SearchRecord(search_id=f"s_{n:03d}", status="completed", created_at=stamp))
        store.put_operation(Operation(operation_id=f"op_{n:03d}", kind="search", status="completed", created_at=stamp))
    store.close_sync()
    again = Store.open(tmp_path)
    assert again.was_retired("searches", "s_000")
    assert again.was_retired("searches", "s_001")
    assert not again.was_retired("searches", "s_002")
    assert not again.was_retired("searches", "s_never")
    assert again.was_retired("operations", "op_101")
    assert not again.was_retired("operations", "op_102")
    again.close_sync()


def test_the_memory_of_removed_ids_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "KEEP_RETIRED_IDS", 3)
    monkeypatch.setattr(store_module, "KEEP_SEARCHES", 1)
    store = Store.open(tmp_path)
    for n in range(6):
        store.put_search(SearchRecord(search_id=f"s_{n}", status="completed", created_at=utc_now_iso()))
        store.trim()
    assert store.data.retired_searches == ["s_2", "s_3", "s_4"]
    store.close_sync()


def test_entries_of_every_kind_survive_a_round_trip_with_retired_ids(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    store.put_paper(Paper(record_ref="rec_1"))
    store.put_source("法学研究", Quality(canonical_title="法学研究"))
    store.put_artifact("rec_1:pdf", Artifact(state="clicked", record_ref="rec_1"))
    store.data.retired_searches.append("s_old")
    store.close_sync()
    again = Store.open(tmp_path)
    assert again.data.retired_searches == ["s_old"]
    assert again.recovered == []
    again.close_sync()
