"""save_to_zotero's notes and its look for duplicates in the whole library, against the fake Zotero 7 and 8
(tests/zotero_fake.py): notes go with their items in saveItems on both; the local API, when enabled, finds an
item by DOI or by title and year anywhere in the library; without it the reply says the library was not checked."""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
import pytest

from cnki_mcp.references.zotero import ZoteroSaves
from cnki_mcp.references.zotero_items import note_html
from cnki_mcp.store.library import Store
from tests.test_zotero import JOURNAL, MASTER, PHD, store  # noqa: F401 - the store fixture
from tests.zotero_fake import FakeZotero


@pytest.fixture(params=[7, 8], ids=["zotero7", "zotero8"])
def zotero(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeZotero]:
    fake = FakeZotero(major=request.param, local_api=True).start()
    monkeypatch.setenv("CNKI_ZOTERO_URL", fake.url)
    yield fake
    fake.stop()


def test_notes_are_html_simple_html_kept_anything_else_escaped() -> None:
    assert note_html("要点：\n方法 <新>\n\n第二段") == "<p>要点：<br/>方法 &lt;新&gt;</p><p>第二段</p>"
    assert note_html("<p>读过，<b>重点</b>见第 3 节</p>") == "<p>读过，<b>重点</b>见第 3 节</p>"
    assert note_html('<p onclick="x()">hi</p>') == "<p>&lt;p onclick=&quot;x()&quot;&gt;hi&lt;/p&gt;</p>"
    assert note_html('<a href="https://kns.cnki.net/x">原文</a>') == '<a href="https://kns.cnki.net/x">原文</a>'


async def test_notes_are_child_notes_on_7_and_8(zotero: FakeZotero, store: Store) -> None:  # noqa: F811
    refs = [JOURNAL.record_ref, PHD.record_ref]
    notes = {JOURNAL.record_ref: "精读：第 2 节的模型", "rec_not_in_this_save": "x"}
    reply = msgspec.to_builtins(await ZoteroSaves().save(
        store, refs, collection="法学/2024", attach=False, tags=["精读"], notes=notes))
    assert reply["status"] == "completed" and reply["library_checked"] is True, reply
    rows = {row["record_ref"]: row for row in reply["items"]}
    assert rows[JOURNAL.record_ref]["note"] == {"status": "stored"} and "note" not in rows[PHD.record_ref]
    (item,) = zotero.by_title(JOURNAL.title)
    assert item.notes == ["<p>精读：第 2 节的模型</p>"] and item.tags == ["精读"] and item.target == "C2"
    assert zotero.by_title(PHD.title)[0].notes == []
    assert reply["warnings"] == ["笔记对应的 rec_not_in_this_save 不在这次要保存的文献中，未存入。"]
    # tags always go as one comma-separated string, which Zotero 7 needs (an array makes it fail)
    assert isinstance(zotero.updates[0]["tags"], str) and "note" not in zotero.updates[0]


async def test_already_in_library_by_doi_or_title_and_year(zotero: FakeZotero, store: Store) -> None:  # noqa: F811
    by_doi = zotero.add_existing({"itemType": "journalArticle", "title": "另一个题名", "DOI": JOURNAL.doi.upper(), "date": "2024"})
    by_title = zotero.add_existing({"itemType": "thesis", "title": " 违约金制度研究 ", "date": "2022-06-01"})
    zotero.add_existing({"itemType": "thesis", "title": MASTER.title, "date": "2019"})  # same title, another year
    zotero.add_existing({"itemType": "note", "title": MASTER.title, "date": "2023"})  # a note is not the item
    refs = [JOURNAL.record_ref, PHD.record_ref, MASTER.record_ref]
    saves = ZoteroSaves()
    reply = msgspec.to_builtins(await saves.save(
        store, refs, collection="", attach=False, tags=[], notes={JOURNAL.record_ref: "看过"}))
    rows = {row["record_ref"]: row for row in reply["items"]}
    assert (rows[JOURNAL.record_ref]["status"], rows[JOURNAL.record_ref]["zotero_keys"]) == ("already_in_library", [by_doi])
    assert (rows[PHD.record_ref]["status"], rows[PHD.record_ref]["zotero_keys"]) == ("already_in_library", [by_title])
    assert rows[MASTER.record_ref]["status"] == "saved"
    assert rows[JOURNAL.record_ref]["note"]["status"] == "not_stored"
    assert reply["status"] == "completed" and reply["summary"] == {"already_in_library": 2, "saved": 1}
    assert {"q": JOURNAL.doi, "qmode": "everything"} in zotero.searches
    assert [s.item.get("title") for s in zotero.items if s.session] == [MASTER.title]
    # Asked for: saved again all the same, without asking the library.
    asked = len(zotero.searches)
    again = msgspec.to_builtins(await saves.save(
        store, refs[:1], collection="", attach=False, tags=[], duplicates=True))
    assert again["items"][0]["status"] == "saved" and len(zotero.searches) == asked
    assert "library_checked" not in again and "warnings" not in again


async def test_without_the_local_api_the_reply_says_the_library_was_not_checked(zotero: FakeZotero, store: Store) -> None:  # noqa: F811
    zotero.local_api = False
    zotero.add_existing({"itemType": "journalArticle", "title": JOURNAL.title, "DOI": JOURNAL.doi, "date": "2024"})
    reply = msgspec.to_builtins(await ZoteroSaves().save(store, [JOURNAL.record_ref], collection="", attach=False, tags=[]))
    assert reply["items"][0]["status"] == "saved" and "library_checked" not in reply
    (warning,) = reply["warnings"]
    assert "没有检查整个 Zotero 文库" in warning and "本地 API 没有启用" in warning


async def test_zotero_7_refuses_an_array_of_tags_and_8_takes_it_with_a_note(zotero: FakeZotero, store: Store) -> None:  # noqa: F811
    """The fake follows the two versions' updateSession: what the client never relies on is still told apart."""
    await ZoteroSaves().save(store, [JOURNAL.record_ref], collection="", attach=False, tags=[])
    session = zotero.items[-1].session
    status, _ = zotero.update_session({"sessionID": session, "target": "L1", "tags": ["a", "b"], "note": "<p>n</p>"})
    assert status == (500 if zotero.major == 7 else 200)
    assert zotero.items[-1].notes == ([] if zotero.major == 7 else ["<p>n</p>"])
