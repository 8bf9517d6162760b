"""End to end: read_online_html on CNKI's 2026 reader and the reader variants around it.

The real MCP client over stdio, ``python -m cnki_mcp serve`` with a real headless Chromium, the
local simulator (tests/kns) set to ``reader_generation="kreader"``: the reader URL is the 2026
``reader/xml?…&loginType=trialRead`` (for full texts too), its page an app shell fed by
``ossapi/kreader-api/v1/xml/data``. Requests are counted by the simulator per endpoint.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.harness import chromium_path
from tests.kns.corpus import Paper as SimPaper
from tests.kns.server import KnsSimulator
from tests.test_e2e_documents import entry_sim, entry_simulator, error_code, journal_papers, seed, serve  # noqa: F401  (its fixtures ``sim`` and ``sim_server``: a simulator of this module's own)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(chromium_path() is None, reason="没有可用的 Chromium"),
]


def papers_with_references(sim: KnsSimulator, count: int) -> list[SimPaper]:  # noqa: F811 - the fixture imported above
    return [p for p in journal_papers(sim, 40) if p.references][:count]


def reader_counts(sim: KnsSimulator) -> dict[str, int]:  # noqa: F811 - the fixture imported above
    return {name: sim.count(name) for name in ("detail", "download", "reader", "reader_data", "reader_part")}


async def test_2026_reader(sim: KnsSimulator, isolated_data_dir: Path) -> None:  # noqa: F811 - the fixture imported above
    full, trial, fallback, refused, decoy = papers_with_references(sim, 5)
    refs = seed(isolated_data_dir, sim, [full, trial, fallback, refused, decoy])
    async with serve(isolated_data_dir, sim) as session:
        # A full text behind a loginType=trialRead URL: read from the page's JSON, reported complete.
        sim.configure(reader_generation="kreader", reader="full", login="institution")
        whole = await session.wait(await session.call("read_online_html", {"record_ref": refs[0], "max_characters": 200_000}))
        assert whole["status"] == "completed", whole
        article = whole["result"]
        text = article["text"]
        assert sim.requests[[r.endpoint for r in sim.requests].index("reader")].query["loginType"] == "trialRead"
        assert article["trial"] is False
        assert article["complete_article"] is True
        coverage = article["coverage"]
        assert coverage["generation"] == "reader_json"
        assert coverage["scope"] == "full"
        assert coverage["trial_evidence"] == []
        assert coverage["missing_catalog_headings"] == []
        for section in full.sections:
            assert section.title in text
            assert all(p in text for p in section.paragraphs)
        assert "图1" in text
        assert "类别 | 数量" in text
        assert f"[1] {full.references[0]}" in text
        titles = [(s["level"], s["title"]) for s in article["sections"]]
        assert titles == [(s.level, s.title) for s in full.sections] + [(1, "参考文献")]
        first_read = reader_counts(sim)
        assert first_read == {"detail": 1, "download": 1, "reader": 1, "reader_data": 2, "reader_part": 0}
        assert whole["requests"] == 3  # the detail page, the click (order → reader page), the reader data

        # Paging concatenates to the whole text; a section read; all from the cache.
        pieces, offset = [], 0
        while offset is not None:
            page = await session.call("read_online_html", {"record_ref": refs[0], "offset": offset, "max_characters": 900})
            assert page["source"] == "cache"
            assert page["requests"] == 0
            pieces.append(page["result"]["text"])
            offset = page["result"]["next_offset"]
        assert "".join(pieces) == text
        third = next(s for s in full.sections if s.title.startswith("三"))
        part = await session.call("read_online_html", {"record_ref": refs[0], "section": third.title})
        chosen = part["result"]["section"]
        assert part["result"]["text"] == text[chosen["offset"] : chosen["offset"] + chosen["length"]]
        assert reader_counts(sim) == first_read

        # A real trial: reported as trial with what showed it, not handed to a person for its slider.
        sim.configure(reader="trial", reader_trial_flag=True)
        tried = await session.wait(await session.call("read_online_html", {"record_ref": refs[1], "max_characters": 300}))
        assert tried["status"] == "completed", tried
        result = tried["result"]
        assert result["trial"] is True
        assert result["complete_article"] is False
        assert result["coverage"]["scope"] == "trial"
        assert result["coverage"]["generation"] == "reader_json"
        evidence = "\n".join(result["coverage"]["trial_evidence"])
        assert "试读结束" in evidence
        assert "metadata.isTrial" in evidence
        assert "目录还有" in evidence
        assert result["coverage"]["missing_catalog_headings"] == [s.title for s in trial.sections[1:]]
        before = reader_counts(sim)
        following = await session.call("read_online_html", {"record_ref": refs[1], "offset": result["next_offset"]})
        assert following["source"] == "cache"
        assert following["result"]["trial"] is True
        assert reader_counts(sim) == before  # paging a trial text re-opens nothing
        again = await session.wait(await session.call("read_online_html", {"record_ref": refs[1]}))
        assert again["result"]["trial"] is True
        assert sim.count("detail") == before["detail"] + 1

        # The page used up its invoice: the data call answers {code:401}, the rendered page is read.
        sim.configure(reader="full", reader_trial_flag=False, reader_data="once")
        dom = await session.wait(await session.call("read_online_html", {"record_ref": refs[2], "max_characters": 200_000}))
        assert dom["status"] == "completed", dom
        coverage = dom["result"]["coverage"]
        assert coverage["generation"] == "reader_dom", coverage
        assert coverage["scope"] == "full", coverage
        assert "code 401" in coverage["fallback_reason"]
        assert ".json" in coverage["fallback_reason"]
        snapshots = list((isolated_data_dir / "diagnostics").glob("reader-data-*.json"))
        invoice = next(r for r in reversed(sim.requests) if r.endpoint == "reader_data").query["invoice"]
        assert len(snapshots) == 1
        assert invoice not in snapshots[0].read_text(encoding="utf-8")
        assert dom["result"]["complete_article"] is True
        for section in fallback.sections:
            assert section.title in dom["result"]["text"]
            assert all(p in dom["result"]["text"] for p in section.paragraphs)
        assert [(s["level"], s["title"]) for s in dom["result"]["sections"]] == [
            (s.level, s.title) for s in fallback.sections
        ] + [(1, "参考文献")]
        assert "返回顶部" not in dom["result"]["text"]
        assert "欢迎" not in dom["result"]["text"]

        # A refusal: the site's words at once, with a snapshot.
        sim.configure(reader="refused")
        started = time.monotonic()
        no = await session.wait(await session.call("read_online_html", {"record_ref": refs[3]}))
        assert no["status"] == "failed", no
        assert error_code(no) == "READER_REFUSED", no
        assert "本刊只收录题录信息" in no["errors"][0]["message"]
        order = next(r for r in reversed(sim.requests) if r.endpoint == "download")
        answered = time.time() - order.at
        assert answered < 6.0, answered
        assert (isolated_data_dir / "diagnostics" / no["errors"][0]["details"]["snapshot"]).exists()
        print(f"refusal answered {answered:.2f} s after the click; whole call {time.monotonic() - started:.2f} s")

        # A refusal page in place of the reader (legacy text): the same, at once.
        sim.configure(reader="refused_page")
        page_no = await session.wait(await session.call("read_online_html", {"record_ref": refs[3]}))
        assert error_code(page_no) == "READER_REFUSED", page_no
        assert "没有订购该专辑" in page_no["errors"][0]["message"], page_no
        assert page_no["errors"][0]["details"]["snapshot"].startswith("reader-")

        # A styled stand-in entry ahead of the real one is skipped.
        sim.configure(reader="full", reader_data="ok", html_entry_decoy=True)
        chosen_entry = await session.wait(await session.call("read_online_html", {"record_ref": refs[4]}))
        assert chosen_entry["status"] == "completed"
        assert chosen_entry["result"]["complete_article"] is True


async def test_nzkhtml_reader_in_a_frame(sim: KnsSimulator, isolated_data_dir: Path) -> None:  # noqa: F811 - the fixture imported above
    (paper,) = papers_with_references(sim, 1)
    refs = seed(isolated_data_dir, sim, [paper])
    async with serve(isolated_data_dir, sim) as session:
        sim.configure(reader="full", reader_frame=True)
        read = await session.wait(await session.call("read_online_html", {"record_ref": refs[0], "max_characters": 200_000}))
        assert read["status"] == "completed", read
        coverage = read["result"]["coverage"]
        assert coverage["generation"] == "nzkhtml"
        assert coverage["container"] == "iframe #paperRead"
        assert read["result"]["complete_article"] is True
        for section in paper.sections:
            assert section.title in read["result"]["text"]
        assert sim.count("reader_part") == 1  # the frame's lazily loaded chapters were waited for
