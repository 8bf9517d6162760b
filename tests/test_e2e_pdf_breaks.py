"""End to end: read_online_html(source=download) through the real MCP client and ``python -m cnki_mcp
serve`` on downloaded files whose paragraphs run across page and column breaks — a PDF and the same
file as a CAJ that is a PDF inside (KDH) — put in the download ledger before the server starts. The
local read needs no browser: the server is given none (it would fail to start one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cnki_mcp.store.library import Store
from tests import pdfs
from tests.harness import McpSession, offline_params
from tests.test_local_read import REF, ledger

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]


@pytest.mark.parametrize(("fmt", "name", "data"), [
    ("pdf", "breaks.pdf", pdfs.zh_breaks_pdf()),
    ("caj", "breaks.caj", pdfs.kdh(pdfs.zh_breaks_pdf())),
])
async def test_a_paragraph_across_a_page_break_is_one_through_the_client(
    fmt: str, name: str, data: bytes, isolated_data_dir: Path
) -> None:
    store = Store.open(isolated_data_dir)
    try:
        ledger(store, data, fmt=fmt, name=name)
        store.mark_dirty()  # the ledger entry is written into the store's data directly
        store.flush()
    finally:
        store.close_sync()
    async with McpSession.serving(offline_params(isolated_data_dir)) as session:
        whole = await session.call("read_online_html", {"record_ref": REF, "source": "download", "max_characters": 200_000})
        assert whole["status"] == "completed", whole
        assert whole["source"] == "download" and whole["requests"] == 0
        result = whole["result"]
        assert result["text"].split("\n\n") == pdfs.ZH_BLOCKS
        assert result["coverage"]["generation"] == ("pdf" if fmt == "pdf" else "caj_pdf")
        assert result["coverage"]["pages"] == 7 and result["coverage"]["pages_covered"] == [1, 2, 3, 4, 5, 6, 7]
        # The paragraph cut at page 4's foot (a footnote and a figure between) is read from page 4 on.
        at = result["text"].index(pdfs.ZH_P5)
        part = await session.call(
            "read_online_html", {"record_ref": REF, "source": "download", "offset": at, "max_characters": len(pdfs.ZH_P5)}
        )
        assert part["result"]["text"] == pdfs.ZH_P5
        assert part["result"]["coverage"]["pages_covered"] == [4, 5]
        second = await session.call(
            "read_online_html", {"record_ref": REF, "source": "download", "section": "二、违约金调整的规范基础"}
        )
        assert second["result"]["text"].split("\n\n") == pdfs.ZH_BLOCKS[11:]
        assert second["result"]["coverage"]["pages_covered"] == [6, 7]
