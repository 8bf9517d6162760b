"""End to end (issue 43): a 40-paper search exported as CNKI's RefWorks (what CiteSpace's CNKI converter reads)
and read back record by record; records saved to Zotero with notes while one is already in the library, against
the fake Zotero 7 and 8 (connector and local API).

The real MCP client over stdio, ``python -m cnki_mcp serve``, a real headless Chromium on the simulator
(tests/kns); Zotero is tests/zotero_fake.py on loopback.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.harness import chromium_path
from tests.kns.server import KnsSimulator
from tests.test_citations_cnki import read_refworks
from tests.test_e2e_documents import serve
from tests.zotero_fake import FakeZotero

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.timeout(420),
    pytest.mark.skipif(chromium_path() is None, reason="没有可用的 Chromium"),
]

WIDE = {"op": "and", "items": [
    {"field": "title", "value": "的"},
    {"op": "or", "items": [{"field": "authors", "value": name} for name in ["王", "张", "李", "刘", "陈", "杨", "赵", "黄", "周", "吴"]]},
]}


async def test_a_40_paper_search_as_cnki_refworks_read_back_record_by_record(kns: KnsSimulator, isolated_data_dir: Path) -> None:
    async with serve(isolated_data_dir, kns) as session:
        titles = [p.title for p in kns.corpus.papers]
        plain = [p for p in kns.corpus.papers if p.is_journal and titles.count(p.title) == 1 and re.fullmatch(r"\w+", p.title)]
        forty = [p for p in plain if not any(p.title != q.title and p.title in q.title for q in kns.corpus.papers)][:40]
        expression = "TI=(" + "+".join(f"'{p.title}'" for p in forty) + ")"
        found = await session.wait(await session.call("expert_search", {
            "expression": expression, "limit": 40, "options": {"freshness": "live", "metadata": "basic"}}))
        assert found["status"] == "completed", found
        search_id = found["result"]["search_id"]
        listed = await session.call("search_results", {
            "search_id": search_id, "scope": "candidates", "view": "records", "limit": 100})
        records = [row["record"] for row in listed["results"]]
        assert len(records) == found["result"]["candidate_count"] == 40, found["result"]
        assert {r["title"] for r in records} == {p.title for p in forty}
        # Three of them read in full: their keywords and affiliations come with the detail page.
        detailed = await session.wait(await session.call("get_metadata", {"record_refs": [r["record_ref"] for r in records[:3]]}))
        assert detailed["status"] == "completed", detailed
        full = {r["record_ref"]: r for r in detailed["result"]["records"]}
        records = [full.get(r["record_ref"], r) for r in records]
        assert all(len(r["keywords"]) > 1 for r in records[:3])

        # No scope given: CNKI's formats take every candidate (not only the selected), all in one file.
        exported = await session.call("export_citations", {
            "search_id": search_id, "format": "refworks", "filename": "download_cnki.txt"})
        data = exported["data"]
        assert data["count"] == data["search_total"] == len(records) and "next_offset" not in data, data
        raw = Path(data["path"]).read_bytes()
        assert raw.endswith(b"\r\n") and not raw.startswith(b"\xef\xbb\xbf")
        read = read_refworks(raw.decode("utf-8"))
        assert len(read) == len(records)
        for record, block in zip(records, read):
            assert block["RT"] == ["Journal Article" if "期刊" in record["document_type"] else block["RT"][0]]
            assert block["T1"] == [" ".join(record["title"].split())]
            assert block["A1"] == [" ".join(a.split()) for a in record["authors"] if a.strip()]
            assert block.get("K1", []) == [k for k in record.get("keywords", []) if k.strip()]
            assert block["YR"] == [str(record["year"])] and block["DS"] == ["CNKI"]
            assert block["JF" if "PB" not in block else "PB"] == [record["source"]]

        # The selected ones only, when asked; and NoteExpress likewise, one block per record.
        # A name CiteSpace's conversion would pass over is told so.
        elsewhere = await session.call("export_citations", {"search_id": search_id, "format": "refworks", "filename": "cnki.txt"})
        assert any("download" in w for w in elsewhere["data"]["warnings"]), elsewhere

        chosen = found["result"]["selected_count"]
        selected = await session.call("export_citations", {"search_id": search_id, "format": "noteexpress", "scope": "selected"})
        assert selected["data"]["count"] == chosen
        assert selected["data"]["text"].count("{Reference Type}: ") == chosen


@pytest.mark.parametrize("major", [7, 8])
async def test_notes_and_a_duplicate_against_zotero_7_and_8(kns: KnsSimulator, isolated_data_dir: Path, major: int) -> None:
    zotero = FakeZotero(major=major, local_api=True).start()
    try:
        async with serve(isolated_data_dir, kns, CNKI_ZOTERO_URL=zotero.url) as session:
            found = await session.wait(await session.call("structured_search", {
                "expression": WIDE, "limit": 3, "options": {"candidate_target": 20, "freshness": "live", "metadata": "basic"}}))
            listed = await session.call("search_results", {"search_id": found["result"]["search_id"], "view": "records", "limit": 3})
            rows = [row["record"] for row in listed["results"]]
            refs = [row["record_ref"] for row in rows]
            had = rows[1]  # the person saved it long ago, into another collection
            key = zotero.add_existing({"itemType": "journalArticle", "title": had["title"], "date": f"{had['year']}-01-01"})
            notes = [{"record_ref": refs[0], "text": "精读：\n模型见第 2 节"}, {"record_ref": refs[1], "text": "<p>已读</p>"}]
            saved = await session.call("save_to_zotero", {
                "record_refs": refs, "collection": "法学/2024", "attach": False, "tags": ["课题"], "notes": notes})
            assert saved["status"] == "completed" and saved["library_checked"] is True, saved
            by_ref = {row["record_ref"]: row for row in saved["items"]}
            assert (by_ref[refs[1]]["status"], by_ref[refs[1]]["zotero_keys"]) == ("already_in_library", [key])
            assert by_ref[refs[1]]["note"]["status"] == "not_stored"
            assert by_ref[refs[0]]["status"] == by_ref[refs[2]]["status"] == "saved"
            assert by_ref[refs[0]]["note"] == {"status": "stored"} and "note" not in by_ref[refs[2]]
            (first,) = [s for s in zotero.by_title(rows[0]["title"]) if s.session]
            assert first.notes == ["<p>精读：<br/>模型见第 2 节</p>"] and first.tags == ["课题"] and first.target == "C2"
            assert [s.key for s in zotero.by_title(had["title"])] == [key]  # not saved again
            (update,) = zotero.updates
            assert update["tags"] == "课题" and "note" not in update  # a string: what Zotero 7 needs too

            # Asked to save the duplicate anyway; then the local API turned off: the reply says what was not checked.
            again = await session.call("save_to_zotero", {"record_refs": [refs[1]], "attach": False, "allow_duplicates": True})
            assert again["items"][0]["status"] == "saved" and len(zotero.by_title(had["title"])) == 2
            zotero.local_api = False
            blind = await session.call("save_to_zotero", {"record_refs": [refs[2]], "collection": "经济学", "attach": False})
            assert blind["items"][0]["status"] == "saved" and "library_checked" not in blind
            assert "没有检查整个 Zotero 文库" in blind["warnings"][0]
    finally:
        zotero.stop()
