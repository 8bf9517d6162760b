"""End to end: related_papers (references, citing papers) through the real MCP client over stdio.

The server runs with a real headless Chromium pointed at the CNKI simulator, whose citation API
(tests/kns/citations.py) answers per database, in pages, and can answer a decoy record or a challenge.
Records are seeded into the store (research.db) before the server starts, as a search would have left them.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from cnki_mcp.core.model import Paper
from cnki_mcp.store.library import Store
from tests.harness import AWAITING, chromium_path
from tests.kns.citations import Ref
from tests.kns.corpus import Paper as SimPaper
from tests.kns.server import KnsSimulator
from tests.test_e2e_documents import serve

pytestmark = [
    pytest.mark.browser,
    pytest.mark.timeout(300),
    pytest.mark.skipif(chromium_path() is None, reason="没有可用的 Chromium"),
]

TYPES = {"JOURNAL": "期刊", "DISSERTATION": "博士"}


def reset(sim: KnsSimulator) -> None:
    """Defaults, with detail pages that render their reference and citing lists (the fallback)."""
    sim.reset()
    sim.configure(citation_rendered=True)


@pytest.fixture
def sim(kns: KnsSimulator) -> KnsSimulator:
    """The session's simulator (tests/kns/fixtures.py), reset for this test as ``reset`` says."""
    reset(kns)
    return kns


def richest(sim: KnsSimulator, resource: str, skip: int = 0) -> SimPaper:
    """A paper of this kind with references of several databases, unlinked ones among them, and citing papers."""
    graph = sim.graph
    found = [
        p for p in sim.corpus.papers
        if p.resource == resource and len({r.database for r in graph.references[p.filename]}) >= 3
        and any(r.paper is None for r in graph.references[p.filename]) and len(graph.citing.get(p.filename, [])) >= 2
    ]
    found.sort(key=lambda p: (-len(graph.references[p.filename]), p.idx))
    return found[skip]


def seed(data_dir: Path, sim: KnsSimulator, papers: list[SimPaper]) -> list[str]:
    refs = [f"rec_{hashlib.sha256(p.filename.encode()).hexdigest()[:24]}" for p in papers]
    store = Store.open(data_dir)
    try:
        for paper, ref in zip(papers, refs, strict=True):
            url = sim.detail_url(paper)
            store.put_paper(Paper(record_ref=ref, title=paper.title, authors=list(paper.authors), source=paper.source,
                                  year=paper.year, document_type=TYPES.get(paper.resource, ""), url=url, locator=url,
                                  cited=paper.cited))
        store.flush()
    finally:
        store.close_sync()
    return refs


def expected(refs: list[Ref]) -> list[tuple[str | None, str]]:
    """(title of a linked item, None) or (None, title in the citation of an unlinked one), in CNKI's order."""
    return [(r.paper.title, "") if r.paper is not None else (None, r.title) for r in refs]


def seen(papers: list[dict[str, Any]]) -> list[tuple[str | None, str]]:
    out: list[tuple[str | None, str]] = []
    for item in papers:
        if item["record_ref"] is None:
            out.append((None, item["citation"]))
        else:
            assert item["record_ref"].startswith("rec_"), item
            out.append((item["title"], ""))
    return out


def same(got: list[tuple[str | None, str]], want: list[tuple[str | None, str]]) -> None:
    assert len(got) == len(want), (got, want)
    for (title, citation), (w_title, w_text) in zip(got, want, strict=True):
        if w_title is None:
            assert title is None and w_text in citation, (citation, w_text)
        else:
            assert title == w_title


async def pages_of(session: Any, first: dict[str, Any], limit: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every page of a list from its first call's arguments, following next_cursor: (papers, replies)."""
    replies = []
    reply = await session.wait(await session.call("related_papers", {**first, "limit": limit}))
    while True:
        assert reply["status"] == "completed", reply
        replies.append(reply)
        cursor = reply["result"]["next_cursor"]
        if not cursor:
            break
        reply = await session.call("related_papers", {"cursor": cursor, "limit": limit})
        if reply.get("operation_id"):
            reply = await session.wait(reply)
    return [p for r in replies for p in r["result"]["papers"]], replies


async def test_references_and_citing(sim: KnsSimulator, isolated_data_dir: Path) -> None:
    journal, thesis = richest(sim, "JOURNAL"), richest(sim, "DISSERTATION")
    graph = sim.graph
    refs = seed(isolated_data_dir, sim, [journal, thesis])
    async with serve(isolated_data_dir, sim) as session:
        # A thesis's references: every database asked once, then two pages; unlinked works kept as text.
        want = expected(graph.references[thesis.filename])
        limit = len(want) // 2 + 1
        papers, replies = await pages_of(session, {"record_ref": refs[1]}, limit)
        assert len(replies) == 2
        first = replies[0]
        assert first["kind"] == "related"
        assert first["result"]["relation"] == "references"
        assert first["result"]["source"]["record_ref"] == refs[1]
        assert first["result"]["total"] == len(want)
        assert first["result"]["origin"] == "api"
        assert first["requests"] == 13, first  # one request per database, and the work tab's first CNKI page
        assert replies[1]["source"] == "cache" and replies[1]["requests"] == 0
        same(seen(papers), want)
        assert len({p["database"] for p in papers}) >= 3
        unlinked = [p for p in papers if p["record_ref"] is None]
        assert unlinked and all(p["citation"] for p in unlinked)
        assert sim.count("citation") == 12

        # The records are in the catalogue: get_metadata and export_citations work on them.
        linked = [p["record_ref"] for p in papers if p["record_ref"]]
        local = await session.call("get_metadata", {"record_refs": linked[:3], "local_only": True})
        assert [r["title"] for r in local["result"]["records"]] == [p["title"] for p in papers if p["record_ref"]][:3]
        exported = await session.call("export_citations", {"references_of": refs[1]})
        assert exported["data"]["count"] == len(linked)
        assert len(exported["data"]["unlinked"]) == len(unlinked)

        # Asked again: the stored list answers (prefer_cache), no request.
        again = await session.call("related_papers", {"record_ref": refs[1], "limit": limit})
        assert again["source"] == "cache" and again["requests"] == 0
        assert seen(again["result"]["papers"]) == seen(replies[0]["result"]["papers"])

        # A journal paper's references, the API answering at most 3 items a request: pages are read as needed.
        sim.configure(citation_size_cap=3)
        want = expected(graph.references[journal.filename])
        before = sim.count("citation")
        papers, replies = await pages_of(session, {"title": journal.title}, 4)
        same(seen(papers), want)
        assert replies[0]["result"]["total"] == len(want)
        databases = {r.database for r in graph.references[journal.filename]}
        pages_needed = sum(-(-len(graph.items("references", journal, d)) // 3) for d in databases)
        assert sim.count("citation") - before == 12 + pages_needed - len(databases)

        # Citing papers of both, several databases among them, the second page by cursor.
        sim.configure(citation_size_cap=100)
        for paper, ref in ((journal, refs[0]), (thesis, refs[1])):
            want = expected(graph.citing[paper.filename])
            papers, replies = await pages_of(session, {"record_ref": ref, "relation": "citing"}, 2)
            assert replies[0]["result"]["relation"] == "citing"
            assert replies[0]["result"]["total"] == len(want)
            same(seen(papers), want)
            assert len(replies) == -(-len(want) // 2)
        assert len({r.database for r in graph.citing[thesis.filename]}) >= 2

        # Similar papers: one list.
        similar = await session.wait(await session.call("related_papers", {"record_ref": refs[0], "relation": "similar", "limit": 5}))
        assert similar["status"] == "completed", similar
        assert [p["title"] for p in similar["result"]["papers"]] == [r.paper.title for r in graph.similar(journal)[:5]]
        assert similar["requests"] == 1


async def test_decoy_and_challenge(sim: KnsSimulator, isolated_data_dir: Path) -> None:
    journal, other, thesis = richest(sim, "JOURNAL"), richest(sim, "JOURNAL", 1), richest(sim, "DISSERTATION")
    graph = sim.graph
    refs = seed(isolated_data_dir, sim, [journal, other, thesis])
    async with serve(isolated_data_dir, sim) as session:
        # A decoy: the same record for every database. Not data: the detail page's own lists are read.
        sim.captcha("citation", style="decoy")
        reply = await session.wait(await session.call("related_papers", {"record_ref": refs[1]}))
        assert reply["status"] == "completed", reply
        result = reply["result"]
        assert result["origin"] == "page", result
        assert any("详情页" in w for w in result["warnings"]), result
        same(seen(result["papers"]), expected(graph.references[other.filename])[: len(result["papers"])])
        assert result["total"] == len(graph.references[other.filename])
        assert sim.count("detail") >= 1
        print(f"\ndecoy: {reply['requests']} requests ({sim.count('citation')} to the API)")
        reset(sim)

        # A challenge in the middle of a list (the grid's -403 JSON): handed to a person, then the list goes on.
        sim.captcha("citation", after=5, style="json403")
        waiting = await session.wait(await session.call("related_papers", {"record_ref": refs[2], "relation": "references"}),
                                     until=AWAITING)
        assert waiting["status"] == "awaiting_user", waiting
        assert "验证" in waiting["message"]
        sim.solve()
        done = await session.wait(waiting)
        assert done["status"] == "completed", done
        assert done["result"]["origin"] == "api"
        print(f"challenge after 5 requests: {done['requests']} requests ({sim.count('citation')} to the API)")
        same(seen(done["result"]["papers"]), expected(graph.references[thesis.filename]))

        # With on_verification=skip a challenge is not handed over; the list comes from the detail page.
        reset(sim)
        sim.captcha("citation", style="json403")
        skipped = await session.wait(await session.call(
            "related_papers", {"record_ref": refs[0], "relation": "citing", "on_verification": "skip"}))
        assert skipped["status"] == "completed", skipped
        assert skipped["result"]["origin"] == "page"
        same(seen(skipped["result"]["papers"]), expected(graph.citing[journal.filename]))


def mentions(paper: SimPaper, term: str) -> bool:
    return term in paper.title or term in paper.abstract or any(term in k for k in paper.keywords)


async def test_api_variants(sim: KnsSimulator, isolated_data_dir: Path) -> None:
    """``start`` counting items instead of pages, a small answer cap, and an API that is gone."""
    journal, thesis = richest(sim, "JOURNAL"), richest(sim, "DISSERTATION")
    graph = sim.graph
    refs = seed(isolated_data_dir, sim, [journal, thesis])
    async with serve(isolated_data_dir, sim) as session:
        sim.configure(citation_start="record", citation_size_cap=3)
        papers, replies = await pages_of(session, {"record_ref": refs[1]}, 100)
        same(seen(papers), expected(graph.references[thesis.filename]))
        assert len(replies) == 1
        print(f"\nthesis references, 3 items an answer, start counting items: {replies[0]['requests']} requests")

        sim.configure(citation_api="gone", citation_start="page", citation_size_cap=100)
        reply = await session.wait(await session.call("related_papers", {"record_ref": refs[0], "relation": "citing"}))
        assert reply["status"] == "completed", reply
        assert reply["result"]["origin"] == "page"
        same(seen(reply["result"]["papers"]), expected(graph.citing[journal.filename]))
        print(f"API gone, the detail page's list: {reply['requests']} requests")


async def test_the_2026_citation_area_is_followed_to_its_list_pages_and_an_empty_or_unknown_one_is_unavailable(
    sim: KnsSimulator, isolated_data_dir: Path
) -> None:
    """Issue 39 item 6: the API refuses; the detail page's 2026 area holds only tabs and #MapArea, its 参考文献 /
    引证文献 links (a.ReferLinkOn) lead to the lists. An empty or unknown area is RELATIONS_UNAVAILABLE with a snapshot."""
    papers = [richest(sim, "JOURNAL", n) for n in range(3)]
    graph = sim.graph
    refs = seed(isolated_data_dir, sim, papers)
    async with serve(isolated_data_dir, sim) as session:
        sim.configure(citation_api="gone", citation_area="link")
        for relation, lists in (("references", graph.references), ("citing", graph.citing)):
            before = len(sim.requests)
            reply = await session.wait(await session.call("related_papers", {"record_ref": refs[0], "relation": relation}))
            assert reply["status"] == "completed", reply
            assert reply["result"]["origin"] == "page"
            same(seen(reply["result"]["papers"]), expected(lists[papers[0].filename]))
            followed = [r for r in sim.requests[before:] if r.path.startswith("/kcms/detail/frame/list.aspx")]
            assert [r.query["RefType"] for r in followed] == ["1" if relation == "references" else "3"], followed

        for n, area in ((1, "empty"), (2, "unknown")):
            sim.configure(citation_area=area)
            reply = await session.wait(await session.call("related_papers", {"record_ref": refs[n], "relation": "citing"}))
            assert reply["status"] != "completed" and not reply.get("result"), reply  # never an empty list
            (error,) = reply["errors"]
            assert error["code"] == "RELATIONS_UNAVAILABLE", error
            snapshot = isolated_data_dir / "diagnostics" / error["details"]["snapshot"]
            assert "relations-area" in snapshot.name and snapshot.is_file(), error
            assert ("MapArea" if area == "empty" else "cite-network-v3") in snapshot.read_text(encoding="utf-8")


async def test_search_expand_finds_what_no_query_term_reaches(sim: KnsSimulator, isolated_data_dir: Path) -> None:
    query = "实体链接"  # a keyword of the topic 知识图谱: many papers of the topic never use it
    by_title = {p.title: p for p in sim.corpus.papers}
    async with serve(isolated_data_dir, sim) as session:
        plain = await session.wait(await session.call("search", {"query": query, "options": {"freshness": "live"}}), timeout=600)
        assert plain["status"] == "completed", plain
        plain_requests = plain["requests"]
        grids = sim.count("grid")
        counts = dict(sim.counts)
        plain_refs = {r["record_ref"] for r in (await session.call(
            "search_results", {"search_id": plain["result"]["search_id"], "scope": "candidates", "limit": 100}))["results"]}
        assert sim.count("citation") == 0

        # The same search snowballing from its 5 best papers, its budget running out during the expansion.
        arguments = {"query": query, "options": {"expand": 5, "freshness": "live", "max_requests": grids + 40}}
        first = await session.wait(await session.call("search", arguments), timeout=600)
        assert first["status"] == "partial", first
        assert first["errors"][-1]["code"] == "BUDGET_EXHAUSTED", first
        asked = sim.count("citation")
        assert asked > 0
        done = await session.wait(await session.call(
            "operation_control", {"action": "continue", "operation_id": first["operation_id"], "additional_requests": 600}),
            timeout=600)
        assert done["status"] == "completed", done
        urls = [r.url for r in sim.requests if r.endpoint == "citation"]
        assert len(urls) == len(set(urls))  # continue asked no list page again
        coverage = {c["channel"]: c for c in done["result"]["coverage"]}
        citation = coverage["citation"]
        assert citation["pages"] == 10  # references and citing papers of 5 papers
        assert citation["added"] > 0
        expand_requests = done["requests"] - plain_requests  # a continue carries the counter on
        more = {k: v - counts.get(k, 0) for k, v in sim.counts.items() if v != counts.get(k, 0)}
        print(f"\nexpand=5: {len(urls)} citation API requests, {done['requests']} requests in all "
              f"against {plain_requests} without expansion ({expand_requests} more); by endpoint: {more}; "
              f"{citation['added']} candidates added")

        # Among the relevant papers: one the query's words never reach, found through the graph.
        eligible = (await session.call("search_results", {
            "search_id": done["result"]["search_id"], "scope": "eligible", "view": "records", "limit": 100}))["results"]
        reached = [
            row for row in eligible
            if row["evidence"]["graph_links"] >= 2 and row["record"]["record_ref"] not in plain_refs
            and row["record"]["title"] in by_title and not mentions(by_title[row["record"]["title"]], query)
        ]
        assert reached, [(r["record"]["title"], r["evidence"]) for r in eligible]
        topic = by_title[reached[0]["record"]["title"]]
        assert "知识图谱" in topic.title or "知识图谱" in topic.keywords
