"""A zero is final only when confirmed, end to end: the real MCP client, `python -m cnki_mcp serve`, headless
Chromium and the simulator answering with CNKI's empty shell (抱歉，暂无数据，请稍后重试) beside a toolbar
共找到 0 条结果 — on page 2 of a listing, on page 1 of a query that has hits, for title lookups, and for a
burst of real zeros.

One server process (and so one browser) serves the whole module; the waits are the product's real ones.
The burst test comes last: it leaves a control answer standing for a minute, which no test after it may meet.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from tests.harness import McpSession, serve_params
from tests.kns.corpus import Paper as SimPaper
from tests.kns.server import KnsSimulator, SimRequest

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(400)]

LLM = {"field": "keywords", "value": "大语言模型", "match": "exact"}
SURNAMES = ["王", "张", "李", "刘", "陈", "杨", "赵", "黄", "周", "吴"]
# 的 in the title and ten surnames: three grid pages of 50.
WIDE = {
    "op": "and",
    "items": [
        {"field": "title", "value": "的"},
        {"op": "or", "items": [{"field": "authors", "value": name} for name in SURNAMES]},
    ],
}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def mcp(kns_server: KnsSimulator, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[McpSession]:
    data = tmp_path_factory.mktemp("zeros") / "data"
    async with McpSession.serving(serve_params(data, kns_server.browser_args), wait_timeout=200) as mcp:
        # The search template is captured before any test arms a grid fault (the capture's click is a grid POST).
        await structured(mcp, LLM)
        yield mcp


def grid_posts(kns: KnsSimulator) -> list[SimRequest]:
    """Our grid POSTs (50 rows a page), not the page's own template click (20 rows)."""
    return [r for r in kns.requests if r.endpoint == "grid" and r.method == "POST" and r.form.get("pageSize") == "50"]


def is_control(post: SimRequest) -> bool:
    """The control listing: 主题 = 研究 and nothing else."""
    items = [
        item
        for group in json.loads(post.form["QueryJson"])["QNode"]["QGroup"]
        if group["Key"] == "Subject"
        for child in group["ChildItems"]
        for item in child["Items"]
    ]
    return [(item["Field"], item["Value"]) for item in items] == [("SU", "研究")]


async def structured(mcp: McpSession, expression: dict[str, Any], **options: Any) -> dict[str, Any]:
    arguments = {"expression": expression, "options": {"freshness": "live", **options}}
    return await mcp.wait(await mcp.call("structured_search", arguments), timeout=300)


def unique_journal_papers(kns: KnsSimulator, count: int) -> list[SimPaper]:
    """Journal papers whose title no other paper holds (an exact-title lookup finds one record) and that
    no search of this module lists (so no title is known locally before its lookup)."""
    titles = [p.title for p in kns.corpus.papers]
    papers = [
        p for p in kns.corpus.papers
        if p.resource == "JOURNAL" and p.language == "zh" and sum(p.title in t for t in titles) == 1
        and not ("的" in p.title and any(author[0] in SURNAMES for author in p.authors))  # WIDE lists those
        and LLM["value"] not in p.keywords
    ]
    return papers[:count]


def reference_line(paper: SimPaper) -> str:
    return f"{', '.join(paper.authors)}. {paper.title}[J]. {paper.source}, {paper.year}."


async def test_page_1_of_a_query_with_hits_answering_the_zero_shell_is_waited_out(mcp: McpSession, kns: KnsSimulator) -> None:
    clean = await structured(mcp, LLM)
    kns.clear_log()
    kns.fault("grid", "empty", empty_style="zero", times=2)  # the query and the control: the site is throttling
    view = await structured(mcp, LLM)
    (coverage,) = view["result"]["coverage"]
    assert view["status"] == "completed", view
    assert coverage == clean["result"]["coverage"][0] and coverage["rows"] > 0
    assert "zero_confirmed_by" not in coverage
    posts = grid_posts(kns)
    assert [is_control(p) for p in posts[:3]] == [False, True, False]
    assert [p.form["pageNum"] for p in posts[:3]] == ["1", "1", "1"]


@pytest.mark.slow
async def test_page_2_answering_a_zero_toolbar_beside_the_shell_is_waited_out(mcp: McpSession, kns: KnsSimulator) -> None:
    started = time.monotonic()
    clean = await structured(mcp, WIDE, candidate_target=150)
    clean_seconds = time.monotonic() - started
    kns.clear_log()
    kns.fault("grid", "empty", empty_style="zero", min_page=2, times=1)  # 共找到 0 条结果 + 暂无数据，请稍后重试
    started = time.monotonic()
    view = await structured(mcp, WIDE, candidate_target=150)
    throttled_seconds = time.monotonic() - started
    (coverage,) = view["result"]["coverage"]
    print(f"\npage 2 throttled once: clean {clean_seconds:.1f} s, throttled {throttled_seconds:.1f} s, "
          f"added {throttled_seconds - clean_seconds:.1f} s")
    assert view["status"] == "completed", view
    assert coverage == clean["result"]["coverage"][0]
    assert (coverage["pages"], coverage["rows"], coverage["exhausted"]) == (3, coverage["total"], True)
    assert view["result"]["candidate_count"] == clean["result"]["candidate_count"]
    posts = grid_posts(kns)
    assert [p.form["pageNum"] for p in posts] == ["1", "2", "2", "3"]  # no control listing on page 2
    assert posts[2].at - posts[1].at >= 5 - 0.1  # the first wait


async def test_title_lookups_wait_out_a_throttled_zero_and_find_the_paper(mcp: McpSession, kns: KnsSimulator) -> None:
    listed, ordered = unique_journal_papers(kns, 2)
    kns.configure(download="ok", login="institution")
    kns.fault("grid", "empty", empty_style="zero", times=2)
    metadata = await mcp.wait(await mcp.call("get_metadata", {"titles": [listed.title]}))
    assert metadata["status"] == "completed", metadata
    assert [r["filename"] for r in metadata["result"]["records"]] == [listed.filename]
    kns.fault("grid", "empty", empty_style="zero", times=2)
    download = await mcp.wait(await mcp.call("download_paper", {"title": ordered.title}))
    assert download["status"] == "completed", download
    local = await mcp.call("get_metadata", {"record_refs": [download["result"]["record_ref"]], "local_only": True})
    assert [r["filename"] for r in local["result"]["records"]] == [ordered.filename]
    assert [is_control(p) for p in grid_posts(kns)] == [False, True, False] * 2


@pytest.mark.slow
async def test_title_lookups_under_throttling_that_outlasts_the_waits_never_say_not_found(
    mcp: McpSession, kns: KnsSimulator
) -> None:
    checked, listed, ordered = unique_journal_papers(kns, 5)[2:]
    kns.fault("grid", "empty", empty_style="zero")  # every grid answer, the control's too, for the whole test
    started = time.monotonic()
    views = await asyncio.gather(
        mcp.call("check_references", {"references": [reference_line(checked)]}),
        mcp.call("get_metadata", {"titles": [listed.title]}),
        mcp.call("download_paper", {"title": ordered.title}),
    )
    references, metadata, download = [await mcp.wait(view, timeout=300) for view in views]
    print(f"\nthrottling throughout: the title lookups answered after {time.monotonic() - started:.1f} s")
    (entry,) = references["result"]["entries"]
    assert entry["status"] == "unchecked" and "SITE_TEMPORARILY_EMPTY" in entry["message"], entry
    assert references["result"]["summary"]["not_found"] == 0
    assert metadata["result"]["records"] == []
    assert [e["code"] for e in metadata["errors"]] == ["SITE_TEMPORARILY_EMPTY"]
    assert metadata["errors"][0]["retryable"] is True
    assert download["status"] == "partial", download  # a retryable failure
    assert [(e["code"], e["retryable"]) for e in download["errors"]] == [("SITE_TEMPORARILY_EMPTY", True)]


async def test_a_burst_of_genuine_zeros_costs_one_control_listing(mcp: McpSession, kns: KnsSimulator) -> None:
    titles = [f"没有这样的题名{n}" for n in range(5)]
    started = time.monotonic()
    views = [await structured(mcp, {"field": "title", "value": title}) for title in titles]
    seconds = time.monotonic() - started
    posts = grid_posts(kns)
    controls = sum(is_control(p) for p in posts)
    print(f"\n5 genuine zeros (共找到 0 条结果 + 暂无数据，请稍后重试) in {seconds:.1f} s: "
          f"{len(posts)} grid requests, {controls} of them control listings")
    assert [v["result"]["coverage"][0]["zero_confirmed_by"] for v in views] == ["control_query"] * 5
    assert [(v["result"]["coverage"][0]["total"], v["result"]["coverage"][0]["exhausted"]) for v in views] == [(0, True)] * 5
    assert [is_control(p) for p in posts] == [False, True, False, False, False, False]
