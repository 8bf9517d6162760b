"""The data directory: research.db round trip, commits, set-aside, retention, lock, config, crash safety.

Also the small shared helpers the store relies on: settings from the environment and timestamps.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sqlite3
import stat
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec
import pytest

from cnki_mcp.core import settings
from cnki_mcp.core.clock import age_seconds, format_utc, parse_utc, utc_now_iso
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import (
    PARSER_VERSION,
    Artifact,
    Config,
    Operation,
    Paper,
    Quality,
    SearchEntry,
    SearchRecord,
    StoreData,
)
from cnki_mcp.store import db as db_module
from cnki_mcp.store import library as store_module
from cnki_mcp.store.catalog import Catalog
from cnki_mcp.store.library import Store, detail_is_fresh, journal_is_fresh, load_config, save_config
from tests.store_faults import failing_apply, persisted, stored_keys, wait_until

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
REPO = Path(__file__).resolve().parents[1]


def iso(moment: datetime) -> str:
    return format_utc(moment)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def sample_paper(n: int) -> Paper:
    return Paper(
        record_ref=f"rec_{n:024x}",
        title=f"基于深度学习的中文文本分类研究（{n}）",
        authors=["张三", "李四"],
        source="计算机学报",
        year=2024,
        document_type="期刊",
        abstract="本文提出一种方法。" * 5,
        keywords=["深度学习", "文本分类"],
        cited=n,
        listed_at=utc_now_iso(),
    )


# --- open, flush, reopen ------------------------------------------------------------------------


def test_open_creates_layout(tmp_path: Path) -> None:
    root = tmp_path / "data"
    store = Store.open(root)
    try:
        assert store.root == root
        for name in ("downloads", "exports", "diagnostics", "browser"):
            assert (root / name).is_dir()
        assert not (root / "browser" / "profile").exists()  # only a started browser makes its profile
        assert store.downloads_dir == root / "downloads"
        assert store.exports_dir == root / "exports"
        assert store.browser_dir == root / "browser"
        assert store.diagnostics_dir == root / "diagnostics"
        assert (root / "cnki.lock").exists()
        assert store.data == StoreData()
        if os.name == "posix":
            assert mode_of(root) == 0o700
            assert mode_of(root / "browser") == 0o700
            assert mode_of(root / "cnki.lock") == 0o600
        # Nothing changed yet, so nothing is written.
        assert store.flush() is False
        assert not (root / "research.json").exists()
    finally:
        store.close_sync()


def test_round_trip(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    paper = sample_paper(1)
    store.put_paper(paper)
    store.put_source("计算机学报", Quality(canonical_title="计算机学报", tiers=["北大核心"], state="present", parser=PARSER_VERSION))
    record = SearchRecord(
        search_id="s_1", status="completed", query="文本分类", entries=[SearchEntry(record_ref=paper.record_ref, score=0.8)],
        created_at=utc_now_iso(),
    )
    store.put_search(record, "cachekey")
    store.put_operation(Operation(operation_id="op_1", kind="search", status="completed", checkpoint={"round": 2}, created_at=utc_now_iso()))
    store.put_artifact(f"{paper.record_ref}:pdf", Artifact(state="clicked", record_ref=paper.record_ref, format="pdf"))
    assert store.flush() is True
    assert not store.dirty
    assert store.flush() is False
    path = tmp_path / "research.db"
    if os.name == "posix":
        assert mode_of(path) == 0o600
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == db_module.SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    assert not (tmp_path / "research.json").exists()
    saved = store.export()
    assert len(saved.papers) == 1 and list(saved.artifacts) == [f"{paper.record_ref}:pdf"]
    store.close_sync()

    again = Store.open(tmp_path)
    try:
        assert again.data == saved
        assert again.data.operations["op_1"].checkpoint == {"round": 2}
        assert again.data.search_cache["cachekey"].search_id == "s_1"
        assert again.cached_search("cachekey") == record
    finally:
        again.close_sync()


def test_close_flushes_pending_changes(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    store.put_paper(sample_paper(7))
    store.close_sync()
    assert store.closed
    # After close nothing more is written (the lock is gone, another process may own the folder).
    store.put_paper(sample_paper(8))
    assert store.flush() is False
    reopened = Store.open(tmp_path)
    assert list(reopened.data.papers) == [sample_paper(7).record_ref]
    reopened.close_sync()


async def test_each_change_is_committed_when_made_without_a_flush(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    store.put_paper(sample_paper(1))
    await asyncio.to_thread(wait_until, lambda: stored_keys(tmp_path, "papers") == {sample_paper(1).record_ref})
    assert store.save.saved_at and not store.dirty
    store.put_paper(sample_paper(2))
    await store.close()
    assert len(stored_keys(tmp_path, "papers")) == 2
    Store.open(tmp_path).close_sync()  # close released the lock


async def test_settle_waits_for_the_commit_off_the_event_loop(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    for n in range(300):
        store.put_paper(sample_paper(n))
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await store.settle()
    task.cancel()
    assert not store.dirty and len(stored_keys(tmp_path, "papers")) == 300
    assert ticks > 0  # the loop ran while the writer committed
    await store.close()


def test_close_commits_what_is_queued(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    for n in range(500):
        store.put_paper(sample_paper(n))
    store.close_sync()
    assert len(stored_keys(tmp_path, "papers")) == 500


def test_the_later_of_two_writes_of_a_key_wins(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    first = sample_paper(1)
    store.put_paper(first)
    store.put_paper(msgspec.structs.replace(first, title="改过的题名"))
    assert store.data.papers[first.record_ref].title == "改过的题名"  # seen before it is committed
    store.data.papers.pop(sample_paper(1).record_ref)
    store.put_paper(msgspec.structs.replace(first, title="第三次"))
    store.close_sync()
    again = Store.open(tmp_path)
    assert again.data.papers[first.record_ref].title == "第三次"
    catalog = Catalog(again)
    assert (catalog.by_title("第三次"), catalog.by_title(first.title)) == ([first.record_ref], [])  # the index follows
    again.close_sync()


async def test_concurrent_async_flushes_do_not_collide(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    for n in range(200):
        store.put_paper(sample_paper(n))
    results = await asyncio.gather(*(store.flush_async() for _ in range(5)))
    assert results.count(False) == len(results) - sum(results) and not store.dirty
    assert len(stored_keys(tmp_path, "papers")) == 200
    await store.close()


def test_failed_flush_stays_dirty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store.open(tmp_path)
    full = [True]
    monkeypatch.setattr(db_module, "apply", failing_apply(lambda: full[0]))
    store.put_paper(sample_paper(1))
    assert store.flush() is False
    assert store.dirty
    assert store.save.error == "OperationalError: database or disk is full" and store.save.cause == "disk_full"
    assert stored_keys(tmp_path, "papers") == set()
    assert store.data.papers[sample_paper(1).record_ref].cited == 1  # still read from memory
    full[0] = False
    assert store.flush() is True
    assert not store.dirty
    assert store.save.error == ""
    assert stored_keys(tmp_path, "papers") == {sample_paper(1).record_ref}
    store.close_sync()


# --- unreadable stores are set aside, never lost -------------------------------------------------


def unreadable_files(root: Path) -> list[Path]:
    return sorted(root.glob("research.json.unreadable-*"))


@pytest.mark.parametrize(
    "content",
    [
        b'{"version": 5, "papers": {"rec_1": {"title": "trunc',
        b"",
        b"\x00\x01garbage",
        b"[]",
        b'{"version": "5"}',
        b'{"version": 4, "papers": {}}',
    ],
)
def test_unreadable_store_is_set_aside(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "research.json").write_bytes(content)
    store = Store.open(tmp_path)
    try:
        assert store.data == StoreData()
        aside = unreadable_files(tmp_path)
        assert len(aside) == 1
        assert aside[0].read_bytes() == content
        stamp = aside[0].name.removeprefix("research.json.unreadable-")
        datetime.strptime(stamp, "%Y%m%d-%H%M%S")
        assert not (tmp_path / "research.json").exists()
    finally:
        store.close_sync()


def test_set_aside_never_replaces_an_earlier_one(tmp_path: Path) -> None:
    for content in (b"first broken", b"second broken", b"third broken"):
        (tmp_path / "research.json").write_bytes(content)
        Store.open(tmp_path).close_sync()
        (tmp_path / "research.db").unlink()  # research.json is read only while there is no database
    kept = sorted(path.read_bytes() for path in unreadable_files(tmp_path))
    assert kept == [b"first broken", b"second broken", b"third broken"]


def test_valid_store_with_unknown_fields_is_kept(tmp_path: Path) -> None:
    content = b'{"version": 5, "papers": {"rec_1": {"record_ref": "rec_1", "title": "T", "future": 1}}, "later_map": {}}'
    (tmp_path / "research.json").write_bytes(content)
    store = Store.open(tmp_path)
    assert store.data.papers["rec_1"].title == "T"
    assert unreadable_files(tmp_path) == []
    store.close_sync()


def test_journal_evidence_of_an_older_store_loads_without_issn_and_keeps_it_once_read(tmp_path: Path) -> None:
    older = {"canonical_title": "法学评论", "tiers": ["CSSCI"], "state": "present", "parser": PARSER_VERSION}
    content = msgspec.json.encode({
        "version": 5, "sources": {"法学评论": older},
        "papers": {"rec_1": {"record_ref": "rec_1", "title": "T", "source": "法学评论", "quality": older}},
    })
    (tmp_path / "research.json").write_bytes(content)
    store = Store.open(tmp_path)
    try:
        assert (store.data.sources["法学评论"].issn, store.data.papers["rec_1"].quality.issn) == ("", "")
        assert store.data.sources["法学评论"].tiers == ["CSSCI"]
        read = msgspec.structs.replace(store.data.sources["法学评论"], issn="1004-1303", cn="42-1090/D")
        store.put_source("法学评论", read)
        store.put_paper(msgspec.structs.replace(store.data.papers["rec_1"], quality=read))
        store.flush()
    finally:
        store.close_sync()
    again = Store.open(tmp_path)
    try:
        assert (again.data.papers["rec_1"].quality.issn, again.data.sources["法学评论"].cn) == ("1004-1303", "42-1090/D")
    finally:
        again.close_sync()
    assert unreadable_files(tmp_path) == []


# --- retention ---------------------------------------------------------------------------------


def test_retention_trims_searches_operations_and_cache(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    base = datetime.now(UTC) - timedelta(days=1)
    for n in range(305):
        store.put_search(SearchRecord(search_id=f"s_{n:03d}", status="completed", created_at=iso(base + timedelta(seconds=n))))
    # Operations arrive out of order; one has no usable timestamp and counts as oldest.
    for n in random.Random(3).sample(range(204), 204):
        store.put_operation(Operation(operation_id=f"op_{n:03d}", kind="search", status="completed", created_at=iso(base + timedelta(seconds=n))))
    store.put_operation(Operation(operation_id="op_bad", kind="search", status="completed", created_at="not a time"))
    now = datetime.now(UTC)
    cache = store.data.search_cache
    store.put_search(store.data.searches["s_304"], "fresh")
    cache["old"] = store_module.CacheEntry(search_id="s_304", at=iso(now - timedelta(minutes=11)))
    cache["trimmed"] = store_module.CacheEntry(search_id="s_000", at=iso(now))
    cache["missing"] = store_module.CacheEntry(search_id="s_gone", at=iso(now))
    cache["garbled"] = store_module.CacheEntry(search_id="s_304", at="yesterday")
    for n in range(3):
        store.put_paper(sample_paper(n))
    store.trim()
    assert store.flush() is True
    store.close_sync()
    store = Store.open(tmp_path)
    saved = store.export()
    assert sorted(saved.searches) == [f"s_{n:03d}" for n in range(5, 305)]
    assert sorted(saved.operations) == [f"op_{n:03d}" for n in range(4, 204)]
    assert list(saved.search_cache) == ["fresh"]
    assert len(saved.papers) == 3  # papers are never trimmed
    assert store.cached_search("fresh") is not None
    store.close_sync()


def test_equal_timestamps_keep_the_latest_stored(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    stamp = utc_now_iso()
    for n in range(203):
        store.put_operation(Operation(operation_id=f"op_{n:03d}", kind="read", status="completed", created_at=stamp))
    assert sorted(store.data.operations) == [f"op_{n:03d}" for n in range(3, 203)]  # retention runs as they are stored
    store.close_sync()


def test_cached_search_expires(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    store.put_search(SearchRecord(search_id="s_1", status="completed"), "key")
    at = parse_utc(store.data.search_cache["key"].at)
    assert at is not None
    assert store.cached_search("key", at + timedelta(minutes=9, seconds=59)) is not None
    assert store.cached_search("key", at + timedelta(minutes=10, seconds=1)) is None
    assert store.cached_search("other") is None
    del store.data.searches["s_1"]
    assert store.cached_search("key", at) is None
    store.close_sync()


# --- freshness ---------------------------------------------------------------------------------


def test_detail_freshness() -> None:
    def paper(age: timedelta, parser: str = PARSER_VERSION) -> Paper:
        return Paper(detail_observed_at=iso(NOW - age), detail_parser=parser)

    assert detail_is_fresh(paper(timedelta(days=29, hours=23)), NOW)
    assert not detail_is_fresh(paper(timedelta(days=30, seconds=1)), NOW)
    assert not detail_is_fresh(paper(timedelta(days=1), parser="4"), NOW)
    assert not detail_is_fresh(Paper(detail_parser=PARSER_VERSION), NOW)
    assert not detail_is_fresh(Paper(detail_parser=PARSER_VERSION, detail_observed_at="garbage"), NOW)


def test_journal_freshness() -> None:
    def quality(age: timedelta, state: str, parser: str = PARSER_VERSION) -> Quality:
        return Quality(observed_at=iso(NOW - age), state=state, parser=parser)

    assert journal_is_fresh(quality(timedelta(days=6, hours=23), "present"), NOW)
    assert not journal_is_fresh(quality(timedelta(days=7, seconds=1), "present"), NOW)
    assert journal_is_fresh(quality(timedelta(hours=23), "unknown"), NOW)
    assert not journal_is_fresh(quality(timedelta(days=1, seconds=1), "unknown"), NOW)
    assert not journal_is_fresh(quality(timedelta(hours=1), "present", parser="4"), NOW)
    assert not journal_is_fresh(Quality(state="present", parser=PARSER_VERSION), NOW)


# --- directory lock ------------------------------------------------------------------------------


def test_lock_conflicts_within_one_process(tmp_path: Path) -> None:
    first = Store.open(tmp_path)
    with pytest.raises(CnkiError) as info:
        Store.open(tmp_path)
    assert info.value.code == "DATA_DIRECTORY_IN_USE"
    assert str(tmp_path) in info.value.message
    first.close_sync()
    second = Store.open(tmp_path)
    second.close_sync()
    assert (tmp_path / "cnki.lock").exists()  # the lock file itself is never deleted


def test_failed_open_releases_the_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "research.json").write_bytes(b"broken")

    def refuse(src: object, dst: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(store_module.os, "rename", refuse)
    with pytest.raises(CnkiError) as info:
        Store.open(tmp_path)
    assert info.value.code == "STORE_UNAVAILABLE"
    assert (tmp_path / "research.json").read_bytes() == b"broken"
    monkeypatch.undo()
    store = Store.open(tmp_path)  # the lock was given back
    store.close_sync()


CHILD_OPEN = textwrap.dedent(
    """
    import sys
    from cnki_mcp.core.errors import CnkiError
    from cnki_mcp.store.library import Store
    try:
        Store.open(sys.argv[1]).close_sync()
    except CnkiError as exc:
        print(exc.code)
    else:
        print("OPENED")
    """
)


def test_lock_conflicts_with_another_process(tmp_path: Path) -> None:
    def child() -> str:
        done = subprocess.run(
            [sys.executable, "-c", CHILD_OPEN, str(tmp_path)],
            capture_output=True, text=True, timeout=60, cwd=REPO,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    store = Store.open(tmp_path)
    try:
        assert child() == "DATA_DIRECTORY_IN_USE"
    finally:
        store.close_sync()
    assert child() == "OPENED"


def test_incoming_dir(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    path = store.incoming_dir("op_0123456789abcdef01234567")
    assert path == tmp_path / "incoming" / "op_0123456789abcdef01234567"
    assert path.is_dir()
    for bad in ("../x", "a/b", "", ".."):
        with pytest.raises(ValueError):
            store.incoming_dir(bad)
    store.close_sync()


# --- crash safety ----------------------------------------------------------------------------------


_WRITER = """
import sys
from pathlib import Path
from cnki_mcp.core.model import Paper
from cnki_mcp.store.library import Store
store = Store.open(Path(sys.argv[1]))
counter = len(store.data.papers)
print("ready", flush=True)
while True:
    for _ in range(int(sys.argv[2])):
        store.put_paper(Paper(record_ref=f"rec_{counter:06d}", title=f"题名{counter}", abstract="摘要内容" * 60))
        counter += 1
    store.flush()
    print(counter, flush=True)  # acknowledged: every paper below counter is committed
"""


@pytest.mark.slow
def test_sigkill_never_loses_an_acknowledged_write(tmp_path: Path) -> None:
    """SIGKILL a process that writes and acknowledges in a tight loop, 20 times at random moments: every
    paper it acknowledged before the kill is there after it, the database is sound, nothing is set aside."""
    rng = random.Random(2024)
    acknowledged = 0
    for round_ in range(20):
        proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(tmp_path), str(rng.choice((1, 7, 40)))],
            cwd=REPO, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        time.sleep(rng.uniform(0.02, 0.15))
        proc.send_signal(signal.SIGKILL)
        told = proc.stdout.read().split()
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
        acknowledged = int(told[-1]) if told else acknowledged
        conn = sqlite3.connect(tmp_path / "research.db")
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok", round_
        stored = sorted(row[0] for row in conn.execute("SELECT key FROM papers"))
        conn.close()
        assert stored[:acknowledged] == [f"rec_{n:06d}" for n in range(acknowledged)], round_
        acknowledged = len(stored)  # the next child continues from what is there
    assert acknowledged > 100
    assert not list(tmp_path.glob("research.db.unreadable-*"))
    store = Store.open(tmp_path)
    assert len(store.data.papers) == acknowledged
    store.close_sync()


# --- config.json ---------------------------------------------------------------------------------


def test_config_missing_is_default(tmp_path: Path) -> None:
    assert load_config(tmp_path) == Config()
    assert load_config(tmp_path / "does-not-exist") == Config()


def test_config_reads_value_and_ignores_unknown_keys(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"browser_path": "/usr/bin/chromium", "theme": "dark"}', encoding="utf-8")
    assert load_config(tmp_path) == Config(browser_path="/usr/bin/chromium")


@pytest.mark.parametrize("content", ['{"browser_path": ', "not json", '{"browser_path": 3}', "[1, 2]", ""])
def test_config_invalid(tmp_path: Path, content: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(CnkiError) as info:
        load_config(tmp_path)
    assert info.value.code == "CONFIG_INVALID"
    assert info.value.details["path"] == str(path)
    assert str(path) in info.value.message


def test_config_unreadable(tmp_path: Path) -> None:
    (tmp_path / "config.json").mkdir()
    with pytest.raises(CnkiError) as info:
        load_config(tmp_path)
    assert info.value.code == "CONFIG_INVALID"


def test_save_config(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    save_config(root, Config(browser_path="C:\\Program Files\\Google\\Chrome\\Application\\chrome.exe"))
    path = root / "config.json"
    text = path.read_text(encoding="utf-8")
    assert text == '{\n  "browser_path": "C:\\\\Program Files\\\\Google\\\\Chrome\\\\Application\\\\chrome.exe"\n}\n'
    if os.name == "posix":
        assert mode_of(path) == 0o600
        assert mode_of(root) == 0o700
    assert load_config(root).browser_path.endswith("chrome.exe")


def test_save_config_keeps_keys_of_newer_versions(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"browser_path": "/old", "future_option": {"a": 1}}', encoding="utf-8")
    save_config(tmp_path, Config(browser_path="/new"))
    assert msgspec.json.decode((tmp_path / "config.json").read_bytes()) == {"browser_path": "/new", "future_option": {"a": 1}}
    save_config(tmp_path, Config())
    assert msgspec.json.decode((tmp_path / "config.json").read_bytes()) == {"future_option": {"a": 1}}


# --- settings and clock ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(None, 500), ("", 500), ("1200", 1200), (" 800 ", 800), ("0", 500), ("-5", 500), ("1.5", 500), ("abc", 500)],
)
def test_env_positive_int(monkeypatch: pytest.MonkeyPatch, raw: str | None, expected: int) -> None:
    if raw is None:
        monkeypatch.delenv("CNKI_REQUEST_INTERVAL_MS", raising=False)
    else:
        monkeypatch.setenv("CNKI_REQUEST_INTERVAL_MS", raw)
    assert settings.request_interval_ms() == expected


def test_setting_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CNKI_REQUEST_INTERVAL_MS", "CNKI_MAX_INFLIGHT", "CNKI_WORKERS", "CNKI_INLINE_WAIT_SECONDS"):
        monkeypatch.delenv(name, raising=False)
    assert (settings.request_interval_ms(), settings.max_inflight(), settings.workers(), settings.inline_wait_seconds()) == (500, 6, 8, 40)


def test_data_root_choices(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CNKI_DATA_DIR", "relative/data")
    assert settings.data_root() == tmp_path / "relative" / "data"
    monkeypatch.setenv("CNKI_DATA_DIR", str(tmp_path / "abs"))
    assert settings.data_root() == tmp_path / "abs"

    monkeypatch.delenv("CNKI_DATA_DIR")
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "release" / "cnki-mcp"))
    assert settings.data_root() == tmp_path / "release" / "data"

    monkeypatch.setattr(sys, "frozen", False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    if sys.platform.startswith("linux"):
        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
        assert settings.data_root() == tmp_path / "xdg" / "cnki-mcp"
        monkeypatch.setenv("XDG_DATA_HOME", "relative-is-ignored")
        assert settings.data_root() == tmp_path / "home" / ".local" / "share" / "cnki-mcp"
        monkeypatch.delenv("XDG_DATA_HOME")
        assert settings.data_root() == tmp_path / "home" / ".local" / "share" / "cnki-mcp"
    monkeypatch.setattr(sys, "platform", "darwin")
    assert settings.data_root() == tmp_path / "home" / "Library" / "Application Support" / "cnki-mcp"
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setenv("LOCALAPPDATA", str(tmp_path / "local"))
    assert settings.data_root() == tmp_path / "local" / "cnki-mcp"


def test_timestamps() -> None:
    text = utc_now_iso()
    assert text.endswith("Z") and len(text) == len("2026-11-30T01:34:16.123Z")
    assert format_utc(NOW) == "2026-05-01T12:00:00.000Z"
    assert parse_utc("2026-05-01T12:00:00Z") == NOW
    assert parse_utc("2026-05-01T20:00:00+08:00") == NOW
    assert parse_utc("2026-05-01T12:00:00.123456789Z") == NOW + timedelta(microseconds=123456)
    assert parse_utc("2026-05-01T12:00:00") == NOW  # naive is taken as UTC
    for bad in ("", None, "yesterday", "2026-13-01T00:00:00Z"):
        assert parse_utc(bad) is None
    assert age_seconds("2026-05-01T11:59:00Z", NOW) == 60
    assert age_seconds("garbage", NOW) is None
    # Fixed width keeps string order equal to time order.
    assert format_utc(NOW) < format_utc(NOW + timedelta(milliseconds=1))


async def test_a_finished_search_is_committed_once_settled(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    await store.start()
    store.put_search(SearchRecord(search_id="s_crash", status="completed", query="法治"))
    await store.settle()  # what a tool's answer waits for
    assert "s_crash" in persisted(tmp_path).searches  # committed: what a SIGKILL now leaves holds it
    await store.close()


def test_the_data_directory_and_the_parents_it_creates_are_private(tmp_path: Path) -> None:
    root = tmp_path / "made" / "by" / "us"
    tmp_path.chmod(0o755)
    store = Store.open(root)
    store.close_sync()
    for folder in (tmp_path / "made", tmp_path / "made" / "by", root):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o755  # what existed is left as it was
