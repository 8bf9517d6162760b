"""structured_search end to end: the real MCP client, `python -m cnki_mcp serve`, headless Chromium, the simulator.

One server process (and so one browser) serves the whole module. Every expected list comes from the
simulator's oracle applied to a QueryJson this file writes by hand from the expression's meaning, so a
wrong translation by the product (field, operator, NOT, year range, sort) shows up as wrong records.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
import pytest_asyncio

from cnki_mcp.core.clock import within
from cnki_mcp.core.model import Paper
from cnki_mcp.ops.jobs import Jobs, OperationContext
from cnki_mcp.research.backend import grid_page
from cnki_mcp.site.browser import Browser
from cnki_mcp.site.grid_query import GridQuery, compile_expression
from cnki_mcp.site.limiter import Limiter
from cnki_mcp.site.site import Site
from cnki_mcp.store.library import Store
from cnki_mcp.tools import get_metadata
from tests.harness import McpSession, chromium_or_skip, serve_params
from tests.kns.corpus import Paper as SimPaper
from tests.kns.server import KnsSimulator, SimRequest

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]

SORT_CODES = {"relevance": "FFD", "date_desc": "PT", "cited_desc": "CF", "downloaded_desc": "DFR"}

SURNAMES = ["王", "张", "李", "刘", "陈", "杨", "赵", "黄", "周", "吴"]
TOPICS = ["知识图谱", "数字经济"]
# a title on one of two topics, an author with one of ten surnames, not 研究 in the title, 2015–2025:
# 18 rows, one grid page, and four different orders for the four sorts.
NARROW = {
    "op": "and",
    "items": [
        {"op": "or", "items": [{"field": "title", "value": topic} for topic in TOPICS]},
        {"op": "or", "items": [{"field": "authors", "value": name} for name in SURNAMES]},
        {"op": "not", "items": [{"field": "title", "value": "研究"}]},
    ],
}
# 的 in the title, the ten surnames, not 违约金, 2014–2026: about 110 rows, three grid pages of 50.
WIDE = {
    "op": "and",
    "items": [
        {"field": "title", "value": "的"},
        {"op": "or", "items": [{"field": "authors", "value": name} for name in SURNAMES]},
        {"op": "not", "items": [{"field": "title", "value": "违约金"}]},
    ],
}


def _item(field: str, value: str, logic: int = 0) -> dict[str, Any]:
    return {"Field": field, "Operator": "FUZZY", "Value": value, "Logic": logic}


def oracle_query(branches: list[list[dict[str, Any]]], year_from: int, year_to: int) -> dict[str, Any]:
    """A QueryJson for the simulator's oracle: OR of AND-branches, the year range as PT/7."""
    children = [{"Key": f"b{i}", "Logic": 1, "Items": items, "ChildItems": []} for i, items in enumerate(branches)]
    date = {"Field": "PT", "Operator": 7, "Value": f"{year_from}-01-01", "Value2": f"{year_to}-12-31"}
    return {"QNode": {"QGroup": [
        {"Key": "Subject", "Items": [], "ChildItems": children},
        {"Key": "ControlGroup", "Items": [], "ChildItems": [{"Key": "date", "Items": [date], "ChildItems": []}]},
    ]}}


def narrow_oracle(*, negated: bool = True, years: tuple[int, int] = (2015, 2025)) -> dict[str, Any]:
    tail = [_item("TI", "研究", 2)] if negated else []
    return oracle_query([[_item("TI", t), _item("AU", a), *tail] for a in SURNAMES for t in TOPICS], *years)


NARROW_ORACLE = narrow_oracle()
WIDE_ORACLE = oracle_query(
    [[_item("TI", "的"), _item("AU", name), _item("TI", "违约金", 2)] for name in SURNAMES], 2014, 2026
)


class Mcp(McpSession):
    """The module's connected client, with this module's shortcuts."""

    async def search(self, arguments: dict[str, Any]) -> dict[str, Any]:
        view = await self.wait(await self.call("structured_search", arguments))
        assert view["status"] == "completed", view
        return view

    async def records(self, search_id: str, scope: str = "selected") -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        offset: int | None = 0
        while offset is not None:
            page = await self.call(
                "search_results", {"search_id": search_id, "view": "records", "scope": scope, "offset": offset, "limit": 100}
            )
            rows += [row["record"] for row in page["results"]]
            offset = page["next_offset"]
        return rows


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def mcp(kns_server: KnsSimulator, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Mcp]:
    data = tmp_path_factory.mktemp("structured") / "data"
    async with Mcp.serving(serve_params(data, kns_server.browser_args)) as mcp:
        yield mcp


def grid_posts(kns: KnsSimulator) -> list[SimRequest]:
    """Our grid POSTs (50 rows a page), not the page's own template click (20 rows)."""
    return [r for r in kns.requests if r.endpoint == "grid" and r.method == "POST" and r.form.get("pageSize") == "50"]


def assert_record(record: dict[str, Any], paper: SimPaper, kns: KnsSimulator) -> None:
    assert (record["title"], record["authors"], record["source"], record["year"]) == (
        paper.title, paper.authors, paper.source, paper.year
    )
    assert record["filename"] == paper.filename
    url = urlsplit(record["url"])
    assert (url.scheme, url.hostname, url.path) == ("https", "kns.cnki.net", "/kcms2/article/abstract")
    assert record["url"] == kns.detail_url(paper) and "locator" not in record
    assert not any(k in key.lower() for key, _ in parse_qsl(url.query) for k in ("token", "ticket", "session", "signature"))


STABLE_REFS: dict[str, str] = {}  # filename -> record_ref across every search of the module


def assert_stable_refs(records: list[dict[str, Any]]) -> None:
    for record in records:
        assert STABLE_REFS.setdefault(record["filename"], record["record_ref"]) == record["record_ref"]
    assert len({r["record_ref"] for r in records}) == len(records)


@pytest.mark.parametrize("sort", list(SORT_CODES))
async def test_title_author_not_and_years_in_each_sort_return_the_oracle_records(
    mcp: Mcp, kns: KnsSimulator, sort: str
) -> None:
    expected = kns.expected(NARROW_ORACLE, SORT_CODES[sort])
    assert 10 <= len(expected) <= 50  # one grid page
    assert all(2015 <= p.year <= 2025 and "研究" not in p.title for p in expected)
    assert all(any(t in p.title for t in TOPICS) and any(s in "".join(p.authors) for s in SURNAMES) for p in expected)

    view = await mcp.search({
        "expression": NARROW, "year_from": 2015, "year_to": 2025, "sort": sort, "limit": 50,
        "options": {"freshness": "live"},
    })
    result = view["result"]
    assert result["plan"]["method"] == "structured" and result["enhanced_count"] == 0
    assert result["candidate_count"] == result["selected_count"] == len(expected)
    assert [row["title"] for row in result["results"]] == [p.title for p in expected]

    (post,) = grid_posts(kns)
    assert (post.form["sortField"], post.form["pageNum"], post.status) == (SORT_CODES[sort], "1", 200)
    assert kns.count("detail") == 0  # metadata=basic is the structured default

    records = await mcp.records(result["search_id"])
    assert [r["filename"] for r in records] == [p.filename for p in expected]
    for record, paper in zip(records, expected):
        assert_record(record, paper, kns)
    assert_stable_refs(records)


async def test_the_narrow_expression_tells_sorts_negation_and_years_apart(kns: KnsSimulator) -> None:
    """Guards the test above: each sort, the NOT and the year range change the expected list."""
    orders = {tuple(p.filename for p in kns.expected(NARROW_ORACLE, code)) for code in SORT_CODES.values()}
    assert len(orders) == 4
    plain = len(kns.expected(NARROW_ORACLE))
    assert len(kns.expected(narrow_oracle(negated=False))) > plain
    assert len(kns.expected(narrow_oracle(years=(2000, 2030)))) > plain


async def test_paging_beyond_page_one_follows_the_turn_page_cursor(mcp: Mcp, kns: KnsSimulator) -> None:
    expected = kns.expected(WIDE_ORACLE, "PT")
    assert 100 < len(expected) <= 150

    view = await mcp.search({
        "expression": WIDE, "year_from": 2014, "year_to": 2026, "sort": "date_desc", "limit": 100,
        "options": {"candidate_target": 150, "freshness": "live"},
    })
    result = view["result"]
    (coverage,) = result["coverage"]
    assert {k: coverage[k] for k in ("pages", "rows", "total", "exhausted")} == {
        "pages": 3, "rows": len(expected), "total": len(expected), "exhausted": True
    }, coverage
    assert result["candidate_count"] == len(expected) and result["selected_count"] == 100
    assert len(result["results"]) == 100

    posts = grid_posts(kns)
    assert [p.form["pageNum"] for p in posts] == ["1", "2", "3"] and all(p.status == 200 for p in posts)
    first, *later = posts
    assert "turnpage" not in first.form and first.form["boolSearch"] == "true"
    assert json.loads(first.form["QueryJson"])["SearchFrom"] == 1
    for post in later:  # the simulator answers a later page without page 1's cursor with HTTP 400
        assert post.form["turnpage"] and post.form["boolSearch"] == "false"
        assert json.loads(post.form["QueryJson"])["SearchFrom"] == 4
    assert later[0].form["turnpage"] == later[1].form["turnpage"]  # one cursor per listing
    assert all(p.form["sortField"] == "PT" for p in posts)

    candidates = await mcp.records(result["search_id"], scope="candidates")
    assert [r["filename"] for r in candidates] == [p.filename for p in expected]
    for record, paper in zip(candidates, expected):
        assert_record(record, paper, kns)
    assert_stable_refs(candidates)
    selected = await mcp.records(result["search_id"])
    assert [r["filename"] for r in selected] == [p.filename for p in expected[:100]]


async def test_ranked_metadata_reads_the_detail_pages(mcp: Mcp, kns: KnsSimulator) -> None:
    expected = kns.expected(NARROW_ORACLE, "CF")
    view = await mcp.search({
        "expression": NARROW, "year_from": 2015, "year_to": 2025, "sort": "cited_desc", "limit": 50,
        "options": {"metadata": "ranked", "freshness": "live"},
    })
    result = view["result"]
    assert [row["title"] for row in result["results"]] == [p.title for p in expected]
    assert result["enhanced_count"] == len(expected)  # up to 30 candidates all get their detail page
    details = [r for r in kns.requests if r.endpoint == "detail"]
    requested = {dict(parse_qsl(urlsplit(r.url).query))["v"] for r in details}
    assert requested == {dict(parse_qsl(urlsplit(kns.detail_url(p)).query))["v"] for p in expected}
    assert len(details) == len(expected)  # read through the network stack, no rendering needed
    assert kns.count("journal") >= 1

    records = await mcp.records(result["search_id"])
    assert [r["filename"] for r in records] == [p.filename for p in expected]
    for record, paper in zip(records, expected):
        assert_record(record, paper, kns)
        assert record["abstract"] == paper.abstract and record["keywords"] == paper.keywords
        assert record["detail_observed_at"]
    assert_stable_refs(records)


async def test_request_starts_stay_an_interval_apart_around_the_template_click(
    kns: KnsSimulator, tmp_path: Path
) -> None:
    """The click's own request leaves after the click's checks; the next one must still wait a full interval."""
    store = await asyncio.to_thread(Store.open, tmp_path / "data")
    await store.start()
    browser = Browser(tmp_path / "profile", Path(chromium_or_skip()), headless=True, extra_args=kns.browser_arg_list)
    site = Site(browser, Limiter(interval_ms=200), store.diagnostics_dir)
    papers = [p for p in kns.corpus.papers if p.doc_type == "期刊"][:3]
    query = GridQuery(compile_expression({"field": "title", "value": "知识图谱"}))

    async def work(op: OperationContext) -> None:
        await asyncio.gather(
            grid_page(site, op, query, 1),
            *(site.detail(op, Paper(title=p.title, locator=kns.detail_url(p))) for p in papers),
        )

    try:
        job = Jobs(store).start("metadata", get_metadata.BUDGET.of(), work)
        await within(job.done.wait(), 60)
    finally:
        await browser.close()
        await store.close()
    assert job.record.status == "completed", job.record.errors
    arrivals = sorted((r for r in kns.requests if r.endpoint != "other"), key=lambda r: r.at)
    assert [r.endpoint for r in arrivals].count("grid") == 2
    assert len(arrivals) == 6  # page, click, ours, 3 details
    gaps = [round(b.at - a.at, 3) for a, b in itertools.pairwise(arrivals)]
    # Starts are an interval apart; on the wire a loaded machine can delay one request's arrival by tens of
    # milliseconds, bringing it closer to the next — never most of an interval.
    assert min(gaps) >= 0.2 - 0.06, gaps
