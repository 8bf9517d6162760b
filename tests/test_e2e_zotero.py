"""End to end: a journal page's ISSN kept with the record, exported, and sent to Zotero with an ISO date
and clean tags; updateSession only when there is something to change, always after the target is known.

The real MCP client over stdio, ``python -m cnki_mcp serve``, a real headless Chromium on the simulator
(tests/kns) with the 2024+ journal page markup (``journal_issn="host_unit"``, and ``missing`` for a page
without ISSN). Zotero is tests/zotero_fake.py on loopback.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import chromium_path
from tests.kns.corpus import Paper as SimPaper
from tests.kns.server import KnsSimulator
from tests.test_e2e_documents import serve
from tests.zotero_fake import FakeZotero

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(chromium_path() is None, reason="没有可用的 Chromium"),
]


@pytest.fixture
def zotero() -> Iterator[FakeZotero]:
    fake = FakeZotero().start()
    try:
        yield fake
    finally:
        fake.stop()


def two_journals(sim: KnsSimulator) -> tuple[SimPaper, SimPaper]:
    """An online-first article (its date carries a time) and an article of another journal, each the only
    record of its title."""
    titles = [p.title for p in sim.corpus.papers]
    unique = [p for p in sim.corpus.papers if p.is_journal and titles.count(p.title) == 1]
    first = next(p for p in unique if p.online_first and p.keywords and " " in p.date)
    other = next(p for p in unique if not p.online_first and p.source_key != first.source_key)
    return first, other


async def test_issn_kept_exported_and_saved_with_iso_date_and_clean_tags(
    kns: KnsSimulator, zotero: FakeZotero, isolated_data_dir: Path
) -> None:
    online, plain = two_journals(kns)
    journal = kns.corpus.journal(online.source_key)
    assert journal is not None and journal.issn
    kns.configure(journal_issn="host_unit")
    async with serve(isolated_data_dir, kns, CNKI_ZOTERO_URL=zotero.url) as session:
        found = await session.wait(await session.call("structured_search", {"expression": {"op": "or", "items": [
            {"field": "title", "value": online.title, "match": "exact"},
            {"field": "title", "value": plain.title, "match": "exact"}]}, "limit": 10}))
        assert found["status"] == "completed", found
        refs = {row["title"]: row["record_ref"] for row in found["result"]["results"]}
        ref, other_ref = refs[online.title], refs[plain.title]

        # Straight from the listing, whose date carries the online-first time, into Zotero's current
        # collection without tags: an ISO date, and no updateSession (nothing to change).
        listed = await session.call("search_results", {"search_id": found["result"]["search_id"], "view": "records"})
        dates = {row["record"]["title"]: row["record"]["publication_date"] for row in listed["results"]}
        assert dates[online.title] == online.date and " " in online.date  # "YYYY-MM-DD HH:MM"
        zotero.selected = 3  # Zotero shows 经济学
        first = await session.call("save_to_zotero", {"record_refs": [ref], "attach": False})
        assert first["status"] == "completed" and first["target"] == {"id": "C3", "name": "经济学"}, first
        (early,) = zotero.by_title(online.title)
        assert early.item["date"] == online.date.split(" ")[0] and "ISSN" not in early.item
        assert early.target == "C3" and zotero.updates == []

        # get_metadata with quality visits the journal page: the ISSN and CN are kept with the record.
        meta = await session.wait(await session.call("get_metadata", {"record_refs": [ref], "quality": True}))
        assert meta["status"] == "completed", meta
        (record,) = meta["result"]["records"]
        assert (record["quality"]["issn"], record["quality"]["cn"]) == (journal.issn, journal.cn)
        kns.configure(journal_issn="missing")  # the other journal's page has no ISSN
        meta = await session.wait(await session.call("get_metadata", {"record_refs": [other_ref], "quality": True}))
        (bare,) = meta["result"]["records"]
        assert bare["quality"]["canonical_title"] == plain.source and "issn" not in bare["quality"]

        # The exports carry it.
        bibtex = await session.call("export_citations", {"record_refs": [ref], "format": "bibtex"})
        assert f"  issn = {{{journal.issn}}}," in bibtex["data"]["text"].splitlines()
        ris = await session.call("export_citations", {"record_refs": [ref, other_ref], "format": "ris"})
        assert [line for line in ris["data"]["text"].splitlines() if line.startswith("SN  - ")] == [f"SN  - {journal.issn}"]
        csl = await session.call("export_citations", {"record_refs": [ref, other_ref], "format": "csl_json"})
        assert [item.get("ISSN") for item in json.loads(csl["data"]["text"])] == [journal.issn, None]

        # Into another collection, with tags written carelessly.
        saved = await session.call("save_to_zotero", {
            "record_refs": [ref, other_ref], "collection": "法学/2024", "attach": False,
            "tags": [" 精读 ", "课题\u3000A", "精读", "\u3000综述"]})
        assert saved["status"] == "completed", saved
        (_, item) = zotero.by_title(online.title)
        fields = item.item
        assert fields["itemType"] == "journalArticle"
        assert fields["date"] == online.date.split(" ")[0]
        assert fields["ISSN"] == journal.issn
        assert fields["tags"] == [{"tag": keyword} for keyword in online.keywords]
        assert (item.target, item.tags) == ("C2", ["精读", "课题 A", "综述"])
        (other_item,) = zotero.by_title(plain.title)
        # The detail page's "2026(11)" did not replace the listing's day.
        assert "ISSN" not in other_item.item and other_item.item["date"] == plain.date
        (update,) = zotero.updates  # one batch, one session, one update
        assert update == {"sessionID": item.session, "target": "C2", "tags": "精读, 课题 A, 综述"}

        # The other record into Zotero's current collection, named, without tags: again no updateSession.
        again = await session.call("save_to_zotero", {"record_refs": [other_ref], "collection": "经济学", "attach": False})
        assert again["items"][0]["status"] == "saved"
        assert [s.target for s in zotero.by_title(plain.title)] == ["C2", "C3"]
        assert len(zotero.updates) == 1
        order = [path for _, path in zotero.requests if path in ("/connector/saveItems", "/connector/updateSession")]
        assert order == ["/connector/saveItems", "/connector/saveItems", "/connector/updateSession", "/connector/saveItems"]
