"""save_to_zotero without a browser: records as Zotero items, collections, and the save against a fake
of Zotero's connector (tests/zotero_fake.py) on loopback."""

from __future__ import annotations

import asyncio
import hashlib
import json
import resource
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Artifact, Paper, Quality
from cnki_mcp.references.zotero import ANSWER_MAX, ZoteroSaves, resolve_target
from cnki_mcp.references.zotero_items import ascii_json, clean_tags, zotero_item
from cnki_mcp.store.library import Store
from tests import pdfs
from tests.zotero_fake import FakeZotero

JOURNAL = Paper(
    record_ref="rec_000000000000000000000001", title="数字经济背景下违约金调整规则研究", authors=["王芳", "WANG Fang", "John Smith"],
    source="法学研究", year=2024, publication_date="2024-05-10", document_type="期刊", doi="10.1234/abc", volume="46",
    issue="3", pages="45-60", abstract="本文讨论违约金。", keywords=["违约金", "司法调整"], clc_codes=["D923.6"],
    url="https://kns.cnki.net/kcms2/article/abstract?v=1",
)
PHD = Paper(record_ref="rec_000000000000000000000002", title="违约金制度研究", authors=["李明"], source="中国人民大学",
            year=2022, document_type="博士", doi="10.27/x")
MASTER = Paper(record_ref="rec_000000000000000000000003", title="A Study of Penalties", authors=["Li Ming"],
               source="华东政法大学", year=2023, document_type="硕士")
MEETING = Paper(record_ref="rec_000000000000000000000004", title="会议论文", authors=["张三"], source="第十届民法论坛论文集",
                year=2021, document_type="会议", pages="1-9", doi="10.1/conf")
NEWS = Paper(record_ref="rec_000000000000000000000005", title="报纸文章", authors=["本报记者"], source="人民日报",
             year=2024, publication_date="2024-03-01", document_type="报纸", pages="5")
PAPERS = [JOURNAL, PHD, MASTER, MEETING, NEWS]


def test_items_have_their_type_and_every_field() -> None:
    item = zotero_item(JOURNAL)
    assert item["itemType"] == "journalArticle" and item["id"] == f"cnki-{JOURNAL.record_ref}"
    assert item["creators"] == [
        {"creatorType": "author", "lastName": "王芳", "fieldMode": 1},
        {"creatorType": "author", "lastName": "Wang", "firstName": "Fang"},
        {"creatorType": "author", "lastName": "Smith", "firstName": "John"},
    ]
    assert (item["date"], item["publicationTitle"], item["volume"], item["issue"], item["pages"], item["DOI"]) == (
        "2024-05-10", "法学研究", "46", "3", "45-60", "10.1234/abc")
    assert item["abstractNote"] == "本文讨论违约金。" and item["language"] == "zh-CN" and item["url"] == JOURNAL.url
    assert item["tags"] == [{"tag": "违约金"}, {"tag": "司法调整"}]
    assert "CLC: D923.6" in item["extra"]
    phd, master = zotero_item(PHD), zotero_item(MASTER)
    assert (phd["itemType"], phd["university"], phd["thesisType"]) == ("thesis", "中国人民大学", "博士学位论文")
    assert "DOI: 10.27/x" in phd["extra"] and "DOI" not in phd
    assert master["thesisType"] == "Master\u2019s thesis" and master["language"] == "en"
    assert "硕士" in zotero_item(Paper(record_ref="r", title="硕士论文", document_type="硕士")).get("thesisType", "")
    meeting, news = zotero_item(MEETING), zotero_item(NEWS)
    assert (meeting["itemType"], meeting["proceedingsTitle"], meeting["DOI"]) == ("conferencePaper", "第十届民法论坛论文集", "10.1/conf")
    assert (news["itemType"], news["publicationTitle"], news["date"], news["pages"]) == (
        "newspaperArticle", "人民日报", "2024-03-01", "5")


@pytest.mark.parametrize(
    ("written", "year", "iso"),
    [
        ("2024-03-05", 2024, "2024-03-05"),
        ("2024/3/5", 2024, "2024-03-05"),
        ("2024-03", 2024, "2024-03"),
        ("2024", 2024, "2024"),
        ("2024年3月5日", 2024, "2024-03-05"),
        ("2024年3月", 2024, "2024-03"),
        ("2024-03-05 10:12", 2024, "2024-03-05"),  # online first: the time is dropped
        (" 2024.3.5 ", 2024, "2024-03-05"),
        ("2024-02-30", 2024, "2024-02"),  # no such day
        ("2024-13-01", 2024, "2024"),  # no such month
        ("", 2024, "2024"),
        ("2023-12-30", 2024, "2024"),  # another year than the record's: the year alone
        ("2024-03-05", 0, "2024-03-05"),
        ("不详", 0, None),
        ("", 0, None),
    ],
)
def test_dates_are_iso(written: str, year: int, iso: str | None) -> None:
    item = zotero_item(Paper(record_ref="r", title="t", document_type="期刊", publication_date=written, year=year))
    assert item.get("date") == iso


def test_tags_are_trimmed_never_empty_and_once() -> None:
    raw = ["  违约金 ", "\u3000司法\u3000调整\u3000", "", " ", "\u3000", "违约金", "司法 调整", "Smart  Contract", "\t合同法\n"]
    assert clean_tags(raw) == ["违约金", "司法 调整", "Smart Contract", "合同法"]
    item = zotero_item(Paper(record_ref="r", title="t", keywords=raw))
    assert item["tags"] == [{"tag": "违约金"}, {"tag": "司法 调整"}, {"tag": "Smart Contract"}, {"tag": "合同法"}]
    assert zotero_item(Paper(record_ref="r", title="t", keywords=["", "\u3000"]))["tags"] == []


def test_issn_goes_to_journal_articles_only() -> None:
    evidence = Quality(canonical_title="法学研究", issn="1000-0933", cn="11-2031/Q")
    journal = msgspec.structs.replace(JOURNAL, quality=evidence)
    assert zotero_item(journal)["ISSN"] == "1000-0933"
    assert "ISSN" not in zotero_item(JOURNAL)  # no journal evidence
    assert "ISSN" not in zotero_item(msgspec.structs.replace(MEETING, quality=evidence))
    assert "1000-0933" not in json.dumps(zotero_item(msgspec.structs.replace(NEWS, quality=evidence)))


def test_x_metadata_is_ascii() -> None:
    text = ascii_json({"title": "全文 PDF", "url": "https://kns.cnki.net/a?v=违约"})
    assert text.isascii() and json.loads(text)["title"] == "全文 PDF"


SELECTED = {
    "libraryID": 1, "libraryName": "我的文库", "id": None, "name": "我的文库",
    "targets": [{"id": "L1", "name": "我的文库", "level": 0}, {"id": "C1", "name": "法学", "level": 1},
                {"id": "C2", "name": "2024", "level": 2}, {"id": "C3", "name": "经济学", "level": 1},
                {"id": "C4", "name": "2024", "level": 2}, {"id": "C5", "name": "合同", "level": 3}],
}


def test_collections_by_unique_name_or_path() -> None:
    assert resolve_target(SELECTED, "") == ("L1", "我的文库")
    assert resolve_target({**SELECTED, "id": 3, "name": "经济学"}, "") == ("C3", "经济学")
    assert resolve_target(SELECTED, "法学") == ("C1", "法学")
    assert resolve_target(SELECTED, "法学/2024") == ("C2", "法学/2024")
    assert resolve_target(SELECTED, " /经济学 / 2024/ ") == ("C4", "经济学/2024")
    assert resolve_target(SELECTED, "合同") == ("C5", "经济学/2024/合同")
    with pytest.raises(CnkiError) as caught:
        resolve_target(SELECTED, "2024")
    assert caught.value.code == "ZOTERO_COLLECTION_AMBIGUOUS"
    assert caught.value.details["candidates"] == ["法学/2024", "经济学/2024"]
    with pytest.raises(CnkiError) as caught:
        resolve_target(SELECTED, "历史/2024")
    assert caught.value.code == "ZOTERO_COLLECTION_NOT_FOUND"


@pytest.fixture
def zotero(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeZotero]:
    fake = FakeZotero().start()
    monkeypatch.setenv("CNKI_ZOTERO_URL", fake.url)
    # A system proxy that would swallow every request: the connector must never go through it.
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    yield fake
    fake.stop()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(tmp_path / "data")
    for paper in PAPERS:
        opened.data.papers[paper.record_ref] = paper
    yield opened
    opened.close_sync()


def downloaded(store: Store, paper: Paper, data: bytes, fmt: str = "pdf") -> Path:
    path = store.downloads_dir / f"{paper.record_ref}.{fmt}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    store.data.artifacts[f"{paper.record_ref}:{fmt}"] = Artifact(
        state="completed", record_ref=paper.record_ref, format=fmt, path=str(path), bytes=len(data),
        sha256=hashlib.sha256(data).hexdigest(), content_format=fmt,
    )
    return path


async def test_items_attachments_collection_and_tags(zotero: FakeZotero, store: Store) -> None:
    pdf = pdfs.article_pdf()
    downloaded(store, JOURNAL, pdf)
    downloaded(store, PHD, b"HN" + b"\x00" * 300, "caj")
    saves = ZoteroSaves()
    refs = [p.record_ref for p in PAPERS]
    reply = msgspec.to_builtins(await saves.save(store, refs, collection="法学/2024", attach=True, tags=["精读", "课题A"]))
    assert reply["status"] == "completed", reply
    assert reply["target"] == {"id": "C2", "name": "法学/2024"}
    rows = {row["record_ref"]: row for row in reply["items"]}
    assert [rows[ref]["status"] for ref in refs] == ["saved"] * 5
    assert rows[JOURNAL.record_ref]["attachment"]["status"] == "attached"
    assert rows[PHD.record_ref]["attachment"] == {"status": "attached", "format": "caj",
                                                   "path": rows[PHD.record_ref]["attachment"]["path"], "bytes": 302}
    assert rows[MASTER.record_ref]["attachment"] == {"status": "not_downloaded"}
    assert len(zotero.items) == 5
    (journal,) = zotero.by_title(JOURNAL.title)
    assert journal.target == "C2" and journal.tags == ["精读", "课题A"]
    (attachment,) = journal.attachments
    assert attachment["bytes"] == pdf and attachment["content_type"] == "application/pdf"
    assert attachment["metadata"]["parentItemID"] == f"cnki-{JOURNAL.record_ref}"
    assert attachment["metadata"]["title"] == "全文 PDF"
    assert zotero.by_title(PHD.title)[0].attachments[0]["content_type"] == "application/octet-stream"
    assert len(zotero.sessions) == 1  # one batch
    assert ("GET", "/connector/ping") in zotero.requests

    # Again into the same collection: nothing sent twice; into another: saved there.
    again = msgspec.to_builtins(await saves.save(store, refs[:2], collection="法学/2024", attach=True, tags=[]))
    assert [row["status"] for row in again["items"]] == ["already_saved", "already_saved"]
    assert len(zotero.items) == 5
    other = msgspec.to_builtins(await saves.save(store, refs[:1], collection="经济学", attach=False, tags=[]))
    assert other["items"][0]["status"] == "saved" and "attachment" not in other["items"][0]
    assert [s.target for s in zotero.by_title(JOURNAL.title)] == ["C2", "C3"]


async def test_one_failed_item_does_not_lose_the_others(zotero: FakeZotero, store: Store) -> None:
    zotero.fail_titles = {PHD.title}
    reply = msgspec.to_builtins(await ZoteroSaves().save(store, [p.record_ref for p in PAPERS] + ["rec_unknown"], collection="", attach=True, tags=[]))
    assert reply["status"] == "partial"
    rows = {row["record_ref"]: row for row in reply["items"]}
    assert rows[PHD.record_ref]["status"] == "failed"
    assert rows[PHD.record_ref]["error"]["code"] == "ZOTERO_SAVE_FAILED"
    assert rows["rec_unknown"]["error"]["code"] == "RECORD_NOT_FOUND"
    assert sorted(row["record_ref"] for row in reply["items"] if row["status"] == "saved") == sorted(
        p.record_ref for p in PAPERS if p is not PHD)
    assert {e["details"]["record_ref"] for e in reply["errors"]} == {PHD.record_ref, "rec_unknown"}
    assert len(zotero.items) == 4 and all(saved.target == "L1" for saved in zotero.items)


async def test_read_only_library_and_files_not_editable(zotero: FakeZotero, store: Store) -> None:
    downloaded(store, JOURNAL, pdfs.article_pdf())
    zotero.files_editable = False
    reply = msgspec.to_builtins(await ZoteroSaves().save(store, [JOURNAL.record_ref], collection="", attach=True, tags=[]))
    assert reply["items"][0]["status"] == "saved"
    assert reply["items"][0]["attachment"]["status"] == "not_stored"
    zotero.editable = False
    with pytest.raises(CnkiError) as caught:
        await ZoteroSaves().save(store, [PHD.record_ref], collection="", attach=True, tags=[])
    assert caught.value.code == "ZOTERO_READ_ONLY"


async def test_zotero_not_running_is_said_within_seconds(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("CNKI_ZOTERO_URL", f"http://127.0.0.1:{port}")
    started = time.monotonic()
    with pytest.raises(CnkiError) as caught:
        await ZoteroSaves().save(store, [JOURNAL.record_ref], collection="", attach=True, tags=[])
    assert caught.value.code == "ZOTERO_UNAVAILABLE"
    assert "Zotero" in caught.value.message
    assert time.monotonic() - started < 5


@pytest.mark.slow  # ~3 s: the whole ping wait
async def test_a_listener_that_never_answers_is_unavailable_after_the_ping_wait(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        monkeypatch.setenv("CNKI_ZOTERO_URL", f"http://127.0.0.1:{silent.getsockname()[1]}")
        started = time.monotonic()
        with pytest.raises(CnkiError) as caught:
            await ZoteroSaves().save(store, [JOURNAL.record_ref], collection="", attach=True, tags=[])
        assert caught.value.code == "ZOTERO_UNAVAILABLE"
        assert time.monotonic() - started < 6


async def test_too_many_records(zotero: FakeZotero, store: Store) -> None:
    with pytest.raises(CnkiError) as caught:
        await ZoteroSaves().save(store, [f"rec_{i}" for i in range(101)], collection="", attach=True, tags=[])
    assert caught.value.code == "BATCH_TOO_LARGE"


async def test_update_session_only_with_a_known_target_and_never_with_empty_tags(zotero: FakeZotero, store: Store) -> None:
    zotero.selected = 3  # Zotero shows 经济学
    saves = ZoteroSaves()
    # Into the current collection without tags: nothing to change, no updateSession.
    here = msgspec.to_builtins(await saves.save(store, [JOURNAL.record_ref], collection="", attach=False, tags=[]))
    assert here["status"] == "completed" and here["target"] == {"id": "C3", "name": "经济学"}
    assert zotero.updates == []
    assert zotero.by_title(JOURNAL.title)[0].target == "C3"
    # Blank tags are no tags: still nothing to change.
    await saves.save(store, [PHD.record_ref], collection="经济学", attach=False, tags=[" ", "\u3000"])
    assert zotero.updates == []
    # Another collection, no tags: the target alone.
    await saves.save(store, [MASTER.record_ref], collection="法学/2024", attach=False, tags=[])
    (moved,) = zotero.updates
    assert set(moved) == {"sessionID", "target"} and moved["target"] == "C2"
    assert zotero.by_title(MASTER.title)[0].target == "C2"
    # Tags (trimmed, once) in the current collection: the target is named too.
    await saves.save(store, [MEETING.record_ref], collection="", attach=False, tags=[" 精读 ", "课题\u3000A", "精读"])
    tagged = zotero.updates[-1]
    assert (tagged["target"], tagged["tags"]) == ("C3", "精读, 课题 A")
    assert zotero.by_title(MEETING.title)[0].tags == ["精读", "课题 A"]
    # Every updateSession came after its saveItems, for a session Zotero had, with a target.
    saves_then_updates = [path for _, path in zotero.requests if path in ("/connector/saveItems", "/connector/updateSession")]
    assert saves_then_updates == ["/connector/saveItems"] * 2 + ["/connector/saveItems", "/connector/updateSession"] * 2
    assert all(update["sessionID"] in zotero.sessions and update["target"] for update in zotero.updates)
    assert all(update.get("tags", "x").strip() for update in zotero.updates)


# --- a hostile program on the connector's port ---------------------------------------------------------


async def test_an_endless_body_is_cut_at_the_answer_cap_and_nothing_keeps_reading(zotero: FakeZotero, store: Store) -> None:
    zotero.hostile = "endless"
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    with pytest.raises(CnkiError) as caught:
        await ZoteroSaves().save(store, [JOURNAL.record_ref], collection="", attach=False, tags=[])
    took = time.monotonic() - started
    assert caught.value.code == "ZOTERO_UNAVAILABLE"
    assert "MB" in caught.value.message
    assert took < 3.5  # stopped at the cap, not at a timeout
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 64, grown_mb
    sent = zotero.sent_bytes
    await asyncio.sleep(0.5)
    # The connection is closed with the call: the fake cannot write any more (its buffers aside).
    assert zotero.sent_bytes - sent < 8 * 1024 * 1024
    assert sent < ANSWER_MAX + 16 * 1024 * 1024


async def test_a_program_that_is_not_zotero_is_unavailable(zotero: FakeZotero, store: Store) -> None:
    zotero.hostile = "not_zotero"
    with pytest.raises(CnkiError) as caught:
        await ZoteroSaves().save(store, [JOURNAL.record_ref], collection="", attach=False, tags=[])
    assert caught.value.code == "ZOTERO_UNAVAILABLE"
    assert "不是 Zotero" in caught.value.message
    assert ("POST", "/connector/saveItems") not in zotero.requests


async def test_a_201_with_a_garbage_body_is_never_saved_or_attached(zotero: FakeZotero, store: Store) -> None:
    downloaded(store, JOURNAL, pdfs.article_pdf())
    zotero.hostile = "garbage_201"
    reply = msgspec.to_builtins(await ZoteroSaves().save(store, [JOURNAL.record_ref, PHD.record_ref], collection="", attach=True, tags=[]))
    assert reply["status"] == "failed", reply
    assert [row["status"] for row in reply["items"]] == ["failed", "failed"]
    assert {row["error"]["code"] for row in reply["items"]} == {"ZOTERO_SAVE_FAILED"}
    assert all("attachment" not in row for row in reply["items"])
    assert "无法确认" in reply["items"][0]["error"]["message"]


async def test_non_object_targets_are_a_clear_error(zotero: FakeZotero, store: Store) -> None:
    zotero.hostile = "int_targets"
    with pytest.raises(CnkiError) as caught:
        await ZoteroSaves().save(store, [JOURNAL.record_ref], collection="法学", attach=False, tags=[])
    assert caught.value.code == "ZOTERO_UNAVAILABLE"
    assert "targets" in caught.value.message
