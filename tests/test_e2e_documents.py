"""End to end: read_online_html and download_paper through the real MCP client over stdio.

``python -m cnki_mcp serve`` runs as a subprocess with a real headless Chromium pointed at the
local CNKI simulator (tests/kns). Records are seeded into the store (research.db) before the server starts,
with the detail links the simulator hands out. One server per test keeps the browser launches few.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp.types import CallToolResult

from cnki_mcp.core.model import Paper
from cnki_mcp.store.library import Store
from tests.harness import AWAITING, McpSession, chromium_path, payload, reply_text, serve_params
from tests.kns import pages
from tests.kns.corpus import Paper as SimPaper
from tests.kns.server import KnsSimulator, SimRequest, _Resp

pytestmark = [
    pytest.mark.browser,
    pytest.mark.timeout(240),
    pytest.mark.skipif(chromium_path() is None, reason="没有可用的 Chromium"),
]

_ENTRY_ITEMS = {
    "html": r'<li class="btn-html">.*?</li>',
    "pdf": r'<li class="btn-dlpdf">.*?</li>',
}


class EntrySimulator(KnsSimulator):
    """The simulator, with detail pages that can lack their HTML reader or PDF entry."""

    def __init__(self) -> None:
        super().__init__()
        self.missing: dict[str, set[str]] = {}

    def _detail(self, rec: SimRequest, sc: Any) -> _Resp:
        resp = super()._detail(rec, sc)
        paper, _ = self._paper_from_v(rec)
        if paper is not None and isinstance(resp.body, str):
            for entry in self.missing.get(paper.filename, set()):
                resp.body = re.sub(_ENTRY_ITEMS[entry], "", resp.body, flags=re.S)
        return resp


# Named apart from the fixture names so that test_e2e_downloads can import them without its ``sim``
# parameters shadowing the imports.
@pytest.fixture(scope="module", name="sim_server")
def entry_simulator() -> Iterator[EntrySimulator]:
    sim = EntrySimulator().start()
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture(name="sim")
def entry_sim(sim_server: EntrySimulator) -> Iterator[EntrySimulator]:
    """The module's simulator, reset for this test, every detail page with all its entries."""
    sim_server.reset()
    sim_server.missing.clear()
    yield sim_server
    sim_server.reset()


def journal_papers(sim: KnsSimulator, count: int) -> list[SimPaper]:
    found = [p for p in sim.corpus.papers if p.resource == "JOURNAL" and not p.online_first and len(p.sections) > 3]
    return found[:count]


def seed(data_dir: Path, sim: KnsSimulator, papers: list[SimPaper]) -> list[str]:
    """Store the papers as records (as a search would have), before the server starts."""
    refs = [f"rec_{hashlib.sha256(p.filename.encode()).hexdigest()[:24]}" for p in papers]
    store = Store.open(data_dir)
    try:
        for paper, ref in zip(papers, refs, strict=True):
            url = sim.detail_url(paper)
            store.put_paper(Paper(record_ref=ref, title=paper.title, authors=list(paper.authors), source=paper.source,
                                  year=paper.year, document_type="期刊", url=url, locator=url))
        store.flush()
    finally:
        store.close_sync()
    return refs


def answer(result: CallToolResult) -> dict[str, Any]:
    """``harness.payload``, and access values never reach the client."""
    text = reply_text(result)
    assert not re.search(r"invoice|nonce|token=", text), text
    return payload(result)


@asynccontextmanager
async def serve(data_dir: Path, sim: KnsSimulator, **env: str) -> AsyncIterator[McpSession]:
    """The server on ``data_dir`` with its browser on ``sim``, 50 ms between requests (and ``env``); every
    answer read by ``answer``. Operations are followed as long as the test's own timeout allows."""
    params = serve_params(data_dir, sim.browser_args, CNKI_REQUEST_INTERVAL_MS="50", **env)
    async with McpSession.serving(params, check=answer, wait_timeout=math.inf) as session:
        yield session


def error_code(reply: dict[str, Any]) -> str:
    return reply["errors"][0]["code"]


async def test_reading(sim: EntrySimulator, isolated_data_dir: Path) -> None:
    full, trial, slider, no_entry = journal_papers(sim, 4)
    refs = seed(isolated_data_dir, sim, [full, slider, no_entry])
    refs.insert(1, "")  # the trial paper is not stored: it is found on CNKI by its exact title
    sim.missing[no_entry.filename] = {"html"}
    async with serve(isolated_data_dir, sim) as session:
        # A full article, whole: the lazily loaded sections are waited for.
        sim.configure(reader="full")
        whole = await session.wait(await session.call("read_online_html", {"record_ref": refs[0], "max_characters": 200_000}))
        assert whole["kind"] == "read", whole
        assert whole["status"] == "completed", whole
        article = whole["result"]
        text = article["text"]
        for section in full.sections:
            assert section.title in text
            assert all(p in text for p in section.paragraphs)
        assert article["next_offset"] is None
        assert article["total_characters"] == len(text)
        assert article["trial"] is False
        assert article["complete_article"] is True
        assert article["coverage"]["missing_catalog_headings"] == []
        titles = [s["title"] for s in article["sections"]]
        assert [s.title for s in full.sections] == [t for t in titles if t in {s.title for s in full.sections}]
        readers = sim.count("reader")

        # By section (case and spacing ignored, sub-sections included) and by pages: from the cache.
        third = next(s for s in full.sections if s.title.startswith("三"))
        spaced = f"  {third.title[:2]} {third.title[2:]} "
        part = await session.call("read_online_html", {"record_ref": refs[0], "section": spaced})
        assert part["source"] == "cache"
        assert part["requests"] == 0
        chosen = part["result"]["section"]
        assert part["result"]["text"] == text[chosen["offset"] : chosen["offset"] + chosen["length"]]
        assert third.paragraphs[0] in part["result"]["text"]
        following = full.sections[full.sections.index(third) + 1]
        if following.level > third.level:
            assert following.title in part["result"]["text"]
        pieces, offset = [], 0
        while offset is not None:
            page = await session.call("read_online_html", {"record_ref": refs[0], "offset": offset, "max_characters": 700})
            pieces.append(page["result"]["text"])
            offset = page["result"]["next_offset"]
        assert "".join(pieces) == text
        assert len(pieces) == -(-len(text) // 700)
        missing = await session.result("read_online_html", {"record_ref": refs[0], "section": "第九章"})
        assert missing.is_error
        assert answer(missing)["errors"][0]["code"] == "SECTION_NOT_FOUND"
        assert sim.count("reader") == readers
        assert sim.count("detail") == 1

        # A trial reader is reported as trial and read again next time.
        sim.configure(reader="trial")
        first = await session.wait(await session.call("read_online_html", {"title": trial.title}))
        assert first["status"] == "completed", first
        assert first["result"]["title"] == trial.title
        assert first["result"]["record_ref"].startswith("rec_")
        assert first["result"]["trial"] is True
        assert first["result"]["complete_article"] is False
        assert first["result"]["coverage"]["scope"] == "trial"
        located = sim.count("grid")
        assert located >= 1
        again = await session.wait(await session.call("read_online_html", {"title": trial.title}))
        assert again["operation_id"] != first["operation_id"]
        assert again["result"]["trial"] is True
        assert again["result"]["record_ref"] == first["result"]["record_ref"]
        assert sim.count("detail") == 3
        assert sim.count("grid") == located  # the second call knew the record

        # The reader's slider goes to the person; the read goes on once it is solved.
        sim.configure(reader="full", reader_slider=True)
        waiting = await session.wait(await session.call("read_online_html", {"record_ref": refs[2]}), until=AWAITING)
        assert waiting["status"] == "awaiting_user"
        assert "验证" in waiting["message"]
        sim.solve()
        solved = await session.wait(waiting)
        assert solved["status"] == "completed", solved
        assert solved["result"]["complete_article"] is True
        assert slider.sections[-1].title in solved["result"]["text"]

        # No reader entry on the detail page (reached again by title after its stored link expired).
        sim.expire_locators()
        none = await session.wait(await session.call("read_online_html", {"record_ref": refs[3]}))
        assert none["status"] == "failed", none
        assert error_code(none) == "HTML_ENTRY_NOT_FOUND", none
        assert sim.count("grid") == located + 1
        assert "download_paper" in none["errors"][0]["message"]


async def test_downloading(sim: EntrySimulator, isolated_data_dir: Path, tmp_path: Path) -> None:
    papers = journal_papers(sim, 6)
    pdf, caj, refused, captcha, late, escape = papers
    refs = seed(isolated_data_dir, sim, papers)
    sim.missing[caj.filename] = {"pdf"}
    downloads = isolated_data_dir / "downloads"
    outside = tmp_path / "outside"
    outside.mkdir()
    async with serve(isolated_data_dir, sim) as session:
        sim.configure(download="ok")
        # A PDF whose bytes are the simulator's, then the same file from the local ledger.
        got = await session.wait(await session.call("download_paper", {"record_ref": refs[0]}))
        assert got["kind"] == "download", got
        assert got["status"] == "completed", got
        result = got["result"]
        expected = pages.pdf_bytes(pdf)
        assert result["format"] == "pdf"
        assert result["source"] == "download"
        assert result["sha256"] == hashlib.sha256(expected).hexdigest()
        assert result["bytes"] == len(expected)
        assert Path(result["path"]) == downloads / f"{pdf.title}_{refs[0][4:12]}.pdf"
        assert Path(result["path"]).read_bytes() == expected
        cached = await session.call("download_paper", {"record_ref": refs[0]})
        assert cached["source"] == "cache"
        assert cached["result"]["path"] == result["path"]
        assert sim.count("download") == 1

        # No PDF entry: auto takes the CAJ, into a subfolder, under the caller's name.
        got = await session.wait(await session.call("download_paper", {"record_ref": refs[1], "subdirectory": "期刊/2024", "filename": "我的论文.caj"}))
        assert got["status"] == "completed", got
        assert got["result"]["format"] == "caj"
        assert Path(got["result"]["path"]) == downloads / "期刊" / "2024" / "我的论文.caj"
        assert got["result"]["sha256"] == hashlib.sha256(pages.caj_bytes(caj, "HN")).hexdigest()

        # A refusal page: its own words come back, nothing is saved, and no click is left uncertain.
        sim.configure(download="balance")
        no = await session.wait(await session.call("download_paper", {"record_ref": refs[2]}))
        assert no["status"] == "failed"
        assert error_code(no) == "DOWNLOAD_REFUSED"
        assert "余额不足" in no["errors"][0]["message"]
        sim.configure(download="ok")

        # A captcha on the way to the file: the person solves it, the same download completes.
        sim.captcha("download")
        waiting = await session.wait(await session.call("download_paper", {"record_ref": refs[3], "format": "pdf"}), until=AWAITING)
        assert waiting["status"] == "awaiting_user", waiting
        sim.solve()
        done = await session.wait(waiting)
        assert done["status"] == "completed", done
        assert done["result"]["sha256"] == hashlib.sha256(pages.pdf_bytes(captcha)).hexdigest()

        # The file is late: the click is reported uncertain, never repeated, and found later.
        sim.fault("file", "delay", seconds=3, times=1)
        slow = await session.wait(await session.call("download_paper", {"record_ref": refs[4], "wait_seconds": 1}))
        assert error_code(slow) == "SIDE_EFFECT_UNCERTAIN", slow
        assert slow["errors"][0]["retryable"], slow
        clicks = sim.count("download")
        for _ in range(20):  # the file arrives about 3 s after the click; until then the click stays uncertain
            reply = await session.result("download_paper", {"record_ref": refs[4], "wait_seconds": 1})
            found = answer(reply)
            if not reply.is_error:
                break
            assert found["errors"][0]["code"] == "SIDE_EFFECT_UNCERTAIN"
            await asyncio.sleep(0.5)
        assert found["status"] == "completed", found
        assert found["requests"] == 0, found
        assert found["result"]["sha256"] == hashlib.sha256(pages.pdf_bytes(late)).hexdigest()
        assert sim.count("download") == clicks

        # Names and folders that would leave downloads/ are refused before anything reaches CNKI.
        (downloads / "planted").symlink_to(outside, target_is_directory=True)
        attempts = [
            ({"subdirectory": "../outside"}, "UNSAFE_OUTPUT_PATH"),
            ({"subdirectory": str(outside)}, "UNSAFE_OUTPUT_PATH"),
            ({"subdirectory": "C:\\Windows"}, "UNSAFE_OUTPUT_PATH"),
            ({"subdirectory": "\\\\server\\share"}, "UNSAFE_OUTPUT_PATH"),
            ({"subdirectory": "planted"}, "UNSAFE_OUTPUT_PATH"),
            ({"subdirectory": "planted/deeper"}, "UNSAFE_OUTPUT_PATH"),
            ({"filename": "../escape.pdf"}, "INVALID_FILENAME"),
            ({"filename": "CON.pdf"}, "INVALID_FILENAME"),
            ({"filename": "escape.caj", "format": "pdf"}, "INVALID_FILENAME"),
        ]
        requests = len(sim.requests)
        for extra, code in attempts:
            reply = await session.result("download_paper", {"record_ref": refs[5], **extra})
            assert reply.is_error, extra
            assert answer(reply)["errors"][0]["code"] == code, extra
        existing = downloads / f"{escape.title}_{refs[5][4:12]}.pdf"
        existing.write_bytes(b"mine")
        reply = await session.result("download_paper", {"record_ref": refs[5], "format": "pdf"})
        assert reply.is_error
        assert answer(reply)["errors"][0]["code"] == "FILE_EXISTS"
        assert existing.read_bytes() == b"mine"
        assert len(sim.requests) == requests
    assert list(outside.iterdir()) == []
    assert list((isolated_data_dir / "incoming").iterdir()) == []  # no transfer folder left behind
    assert not (isolated_data_dir / "escape.pdf").exists()
    assert not (tmp_path / "escape.pdf").exists()
