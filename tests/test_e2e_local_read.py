"""End to end: search → download → read_online_html(source=download) reads the downloaded PDF →
save_to_zotero stores the record and its PDF in a fake Zotero connector.

The real MCP client over stdio, ``python -m cnki_mcp serve``, a real headless Chromium on the simulator
(tests/kns), whose PDF downloads carry a text layer with the paper's sections as their outline
(tests/pdfs.py). Reading the file makes no CNKI request. Zotero is tests/zotero_fake.py on loopback,
reached with a dead system proxy set in the server's environment (it must be ignored).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness import chromium_path
from tests.kns.server import KnsSimulator
from tests.test_e2e_documents import answer, error_code, journal_papers, serve
from tests.zotero_fake import FakeZotero

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(chromium_path() is None, reason="没有可用的 Chromium"),
]


async def test_search_download_then_read_the_pdf(kns: KnsSimulator, isolated_data_dir: Path) -> None:
    (paper,) = journal_papers(kns, 1)
    kns.configure(download="ok", login="institution")
    async with serve(isolated_data_dir, kns) as session:
        found = await session.wait(await session.call(
            "structured_search", {"expression": {"field": "title", "value": paper.title, "match": "exact"}, "limit": 5}
        ))
        assert found["status"] == "completed", found
        row = next(r for r in found["result"]["results"] if r["title"] == paper.title)
        ref = row["record_ref"]

        # Before the download: source=download says so; auto reads online (not tested here).
        no = await session.result("read_online_html", {"record_ref": ref, "source": "download"})
        assert no.is_error
        assert answer(no)["errors"][0]["code"] == "NOT_DOWNLOADED"

        got = await session.wait(await session.call("download_paper", {"record_ref": ref}))
        assert got["status"] == "completed", got
        assert got["result"]["content_format"] == "pdf"
        requests = len(kns.requests)

        whole = await session.call("read_online_html", {"record_ref": ref, "source": "download", "max_characters": 200_000})
        assert whole["status"] == "completed", whole
        assert whole["source"] == "download" and whole["requests"] == 0
        result = whole["result"]
        text = result["text"]
        assert [(s["level"], s["title"]) for s in result["sections"]] == [(s.level, s.title) for s in paper.sections]
        for section in result["sections"]:
            assert text[section["offset"] :].startswith(section["title"])
        for section in paper.sections:
            assert all(paragraph in text for paragraph in section.paragraphs)
        assert "China Academic Journal" not in text
        assert paper.source not in text  # the running head
        coverage = result["coverage"]
        assert coverage["scope"] == "download" and coverage["generation"] == "pdf"
        assert coverage["file"] == got["result"]["path"]
        assert coverage["pages_covered"] == list(range(1, coverage["pages"] + 1))
        assert result["complete_article"] is True and result["next_offset"] is None

        # The same paging and sections as the online reader; auto takes the file too.
        pieces, offset = [], 0
        while offset is not None:
            page = await session.call("read_online_html", {"record_ref": ref, "source": "auto", "offset": offset, "max_characters": 700})
            assert page["source"] == "download"
            pieces.append(page["result"]["text"])
            offset = page["result"]["next_offset"]
        assert "".join(pieces) == text
        last = paper.sections[-1]
        part = await session.call("read_online_html", {"record_ref": ref, "source": "download", "section": last.title})
        chosen = part["result"]["section"]
        assert part["result"]["text"] == text[chosen["offset"] : chosen["offset"] + chosen["length"]]
        assert part["result"]["text"].startswith(last.title)
        assert part["result"]["coverage"]["pages_covered"][-1] == coverage["pages"]
        assert len(kns.requests) == requests  # no CNKI request for a local read
        bad = await session.result("read_online_html", {"record_ref": ref, "source": "disk"})
        assert bad.is_error and error_code(answer(bad)) == "INVALID_SOURCE"

        # To Zotero (a server of its own: a dead system proxy in its environment must not matter).
    zotero = FakeZotero().start()
    dead_proxy = "http://127.0.0.1:9"
    proxies = {name: dead_proxy for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy")}
    try:
        async with serve(isolated_data_dir, kns, CNKI_ZOTERO_URL=zotero.url, **proxies) as session:
            saved = await session.call(
                "save_to_zotero", {"record_refs": [ref], "collection": "法学/2024", "tags": ["精读"]}
            )
            assert saved["status"] == "completed", saved
            (row,) = saved["items"]
            assert row["status"] == "saved" and row["item_type"] == "journalArticle"
            assert row["attachment"]["status"] == "attached"
            (item,) = zotero.by_title(paper.title)
            assert item.target == "C2" and item.tags == ["精读"]
            fields = item.item
            assert fields["itemType"] == "journalArticle" and fields["publicationTitle"] == paper.source
            assert [c.get("lastName") for c in fields["creators"]] == list(paper.authors)
            assert all(c.get("fieldMode") == 1 for c in fields["creators"])
            assert fields["language"] == "zh-CN"
            (attachment,) = item.attachments
            assert attachment["content_type"] == "application/pdf"
            assert attachment["bytes"] == Path(got["result"]["path"]).read_bytes()
            again = await session.call("save_to_zotero", {"record_refs": [ref], "collection": "法学/2024"})
            assert again["items"][0]["status"] == "already_saved"
            searched = await session.call(
                "save_to_zotero", {"search_id": found["result"]["search_id"], "collection": "经济学", "attach": False}
            )
            assert searched["status"] == "completed", searched
            assert ref in [row["record_ref"] for row in searched["items"] if row["status"] == "saved"]
            assert [s.target for s in zotero.items if s.item["id"] == f"cnki-{ref}"] == ["C2", "C3"]
            zotero.stop()  # Zotero quits
            down = await session.result("save_to_zotero", {"record_refs": [ref]})
            assert down.is_error and error_code(answer(down)) == "ZOTERO_UNAVAILABLE"
    finally:
        zotero.stop()
    assert len([s for s in zotero.items if s.item["id"] == f"cnki-{ref}"]) == 2
