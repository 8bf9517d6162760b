"""The site layer end to end: real headless Chromium, the real Site, and the local CNKI simulator.

One browser serves every in-process test of this module (the work page and template persist as they
do in production); the MCP tests at the end start the real server over stdio with its own browser.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import psutil
import pytest
import pytest_asyncio

from cnki_mcp.core.clock import within
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Budget, Paper
from cnki_mcp.ops.jobs import Job, Jobs, OperationContext
from cnki_mcp.pages.parse import GridPage
from cnki_mcp.research.backend import followed, grid_page
from cnki_mcp.site.browser import Browser
from cnki_mcp.site.grid_query import GridQuery, compile_expression
from cnki_mcp.site.limiter import Limiter
from cnki_mcp.site.session import LOOK_FIRST, Sessions
from cnki_mcp.site.site import Site
from cnki_mcp.store.library import Store
from cnki_mcp.tools import get_metadata, login, session_status
from tests.harness import AWAITING, McpSession, chromium_or_skip, processes_on, serve_params
from tests.kns import pages as sim_pages
from tests.kns.server import KnsSimulator

pytestmark = pytest.mark.browser

SHORT_WAITS = (0.2, 0.4, 0.8)


class Env(msgspec.Struct):
    site: Site
    jobs: Jobs
    sessions: Sessions
    store: Store


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env(kns_server: KnsSimulator, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    root = tmp_path_factory.mktemp("site-data")
    store = await asyncio.to_thread(Store.open, root)
    await store.start()
    browser = Browser(
        store.browser_dir / "profile", Path(chromium_or_skip()), headless=True, extra_args=kns_server.browser_arg_list
    )
    site = Site(browser, Limiter(interval_ms=10, max_inflight=6), store.diagnostics_dir)
    site.listings.empty_waits = SHORT_WAITS  # the real 5 s / 15 s / 60 s schedule is exercised over MCP
    site.listings.control_reuse = 0.0  # every test asks its own control listing; the reuse has a test of its own
    yield Env(site=site, jobs=Jobs(store), sessions=Sessions(site), store=store)
    await browser.close()
    await store.close()


async def run(
    env: Env, work: Callable[[OperationContext], Awaitable[Any]], *, on_verification: str = "ask", kind: str = "metadata",
    budget: Budget | None = None,
) -> Job:
    job = env.jobs.start(kind, budget or get_metadata.BUDGET.of(on_verification), work)
    await within(job.done.wait(), 60)
    return job


async def until_awaiting(job: Job, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while job.record.status != "awaiting_user":
        assert not job.done.is_set(), job.record.errors
        assert time.monotonic() < deadline, "the operation never asked for a person"
        await asyncio.sleep(0.05)


async def warm(env: Env, kns: KnsSimulator) -> None:
    """Capture the search template before a test arms grid faults, so the faults meet our requests."""
    query = GridQuery(compile_expression({"field": "title", "value": "知识图谱"}))
    assert (await run(env, lambda op: grid_page(env.site, op, query, 1))).record.status == "completed"
    kns.clear_log()


def grid_posts(kns: KnsSimulator) -> list[Any]:
    return [r for r in kns.requests if r.endpoint == "grid" and r.method == "POST"]


def filenames(rows: list[Paper]) -> list[str]:
    return [row.filename for row in rows]


TOPIC = {
    "op": "and",
    "items": [{"field": "subject", "value": "研究"}, {"op": "not", "items": [{"field": "title", "value": "违约金"}]}],
}


@pytest.mark.asyncio(loop_scope="module")
async def test_template_capture_and_three_pages_with_cursor_years_and_sort(env: Env, kns: KnsSimulator) -> None:
    query = GridQuery(compile_expression(TOPIC), year_from=2020, year_to=2024, sort="date_desc")
    job = await run(env, lambda op: grid_page(env.site, op, query, 1))
    assert job.record.status == "completed", job.record.errors
    first = job.record.result

    async def pages(op: OperationContext) -> list[Any]:
        return [await grid_page(env.site, op, query, page) for page in (2, 3)]

    job = await run(env, pages)
    assert job.record.status == "completed", job.record.errors
    posts = grid_posts(kns)
    # the page's own click captured the template (anchor typed, its 20 rows); our POSTs ask for 50
    clicked = [p for p in posts if p.form["pageSize"] == "20"]
    assert len(clicked) == 1 and len(posts) == 4
    assert json.loads(clicked[0].form["QueryJson"])["QNode"]["QGroup"][0]["ChildItems"][0]["Items"][0]["Value"] == "研究"
    ours = [p for p in posts if p is not clicked[0]]
    assert [p.form["pageNum"] for p in ours] == ["1", "2", "3"]
    assert all(p.form["sortField"] == "PT" and p.form["sortType"] == "desc" and p.form["pageSize"] == "50" for p in ours)
    assert all(p.referer == "https://kns.cnki.net/kns8s/AdvSearch" for p in ours)
    assert "turnpage" not in ours[0].form and ours[0].form["boolSearch"] == "true"
    assert ours[1].form["turnpage"] and ours[1].form["boolSearch"] == "false" and "CurPage" not in ours[1].form
    query_json = json.loads(ours[2].form["QueryJson"])
    assert query_json["SearchFrom"] == 4 and json.loads(ours[0].form["QueryJson"])["SearchFrom"] == 1
    # pages after the first carry what page 1's answer said of the query, as the page's own script does
    assert (query_json["Products"], query_json["View"]) == (sim_pages.PRODUCTS["WD0FTY92"], "changeDBCh")
    assert "View" not in json.loads(ours[0].form["QueryJson"])
    control = next(g for g in query_json["QNode"]["QGroup"] if g["Key"] == "ControlGroup")
    date = control["ChildItems"][-1]["Items"][0]
    assert (date["Field"], date["Operator"], date["Value"], date["Value2"]) == ("PT", 7, "2020-01-01", "2024-12-31")
    expected = kns.expected(ours[0].form["QueryJson"], "PT")
    assert 100 < len(expected) <= 150 and all(2020 <= p.year <= 2024 and "违约金" not in p.title for p in expected)
    rows = first["rows"] + [r for page in job.record.result for r in page["rows"]]
    assert [r["filename"] for r in rows] == [p.filename for p in expected]
    assert first["total"] == len(expected) and first["cursor"] and not first["exhausted"]
    assert job.record.result[-1]["exhausted"]
    assert env.site.limiter.backoff == 1.0

    # a lost cursor (after a restart: template and cursors gone) costs a capture and page 1 first
    env.site.listings.forget()
    kns.clear_log()
    job = await run(env, lambda op: grid_page(env.site, op, query, 2))
    ours = [p for p in grid_posts(kns) if p.form["pageSize"] == "50"]
    assert job.record.status == "completed"
    assert job.record.requests == 4  # the search page, the template click, page 1, page 2
    assert [p.form["pageNum"] for p in ours] == ["1", "2"]
    assert [r["filename"] for r in job.record.result["rows"]] == [p.filename for p in expected[50:100]]


@pytest.mark.asyncio(loop_scope="module")
async def test_detail_journal_render_fallback_expiry_and_locate(env: Env, kns: KnsSimulator) -> None:
    journal_papers = [p for p in kns.corpus.papers if p.doc_type == "期刊" and not p.online_first and p.language == "zh"]
    sim, rendered, moved = journal_papers[:3]
    kns.configure(detail_js={rendered.filename})

    def requested(p: Any, locator: str) -> Paper:
        return Paper(record_ref=f"rec_{p.filename.lower()}", title=p.title, authors=list(p.authors), source=p.source,
                     locator=locator, document_type="期刊")

    stale = kns.detail_url(moved)
    kns.expire_locators()

    async def work(op: OperationContext) -> dict[str, Any]:
        paper = await env.site.detail(op, requested(sim, kns.detail_url(sim)))
        quality = await env.site.journal(op, paper)
        late = await env.site.detail(op, requested(rendered, kns.detail_url(rendered)))
        try:
            await env.site.detail(op, requested(moved, stale))
        except CnkiError as exc:
            expired = exc.code
        located = await followed(op, env.site.locate(op, [moved.title, "不存在的题名"]))
        return {"paper": paper, "quality": quality, "late": late, "expired": expired, "located": located}

    job = await run(env, work)
    assert job.record.status == "completed", job.record.errors
    result = job.record.result
    paper = result["paper"]
    assert paper["record_ref"] == f"rec_{sim.filename.lower()}" and paper["title"] == sim.title
    assert paper["abstract"] == sim.abstract and paper["keywords"] == sim.keywords
    assert paper["filename"] == sim.filename and paper["source_url"].startswith("https://navi.cnki.net/knavi/")
    assert result["quality"]["canonical_title"] == sim.source and result["quality"]["identity_basis"]
    assert result["late"]["abstract"] == rendered.abstract  # only the rendered tab shows it
    assert result["expired"] == "LOCATOR_EXPIRED"
    assert [r["filename"] for r in result["located"][moved.title]] == [moved.filename]
    assert result["located"]["不存在的题名"] == [] and result["located"][moved.title][0]["locator"] != stale
    counts = kns.counts
    assert counts["detail"] == 4 and counts["journal"] == 1  # sim 1, rendered 2 (load + render), stale 1
    assert json.loads(grid_posts(kns)[-1].form["QueryJson"])["QNode"]["QGroup"][0]["ChildItems"][1]["Items"][0]["Operator"] == "DEFAULT"


@pytest.mark.asyncio(loop_scope="module")
async def test_a_book_page_is_unsupported_at_once_without_rendering(env: Env, kns: KnsSimulator) -> None:
    book = next(p for p in kns.corpus.papers if p.doc_type == "图书")
    paper = Paper(record_ref="rec_book", title=book.title, locator=kns.detail_url(book), document_type="图书")
    kns.clear_log()

    async def work(op: OperationContext) -> None:
        await env.site.detail(op, paper)

    job = await run(env, work)
    assert [e.code for e in job.record.errors] == ["PARSER_UNSUPPORTED"]
    assert job.record.errors[0].details["page_kind"] == "book"
    assert kns.count("detail") == 1  # read once, never rendered again for nothing


@pytest.mark.asyncio(loop_scope="module")
async def test_a_detail_read_first_puts_the_work_tab_on_cnki(env: Env, kns: KnsSimulator) -> None:
    site = Site(env.site.browser, Limiter(interval_ms=10), env.store.diagnostics_dir)  # a fresh work tab
    kns.configure(login="institution")
    paper = next(p for p in kns.corpus.papers if p.doc_type == "硕士")
    job = await run(env, lambda op: site.detail(op, Paper(title=paper.title, locator=kns.detail_url(paper))))
    assert job.record.status == "completed", job.record.errors
    assert job.record.result["title"] == paper.title and job.record.requests == 2
    assert [r.endpoint for r in kns.requests] == ["search", "detail"]
    assert kns.requests[1].headers.get("Sec-Fetch-Mode") != "navigate"  # read without rendering


@pytest.mark.asyncio(loop_scope="module")
async def test_a_broken_grid_answer_is_reported_and_saved_for_diagnosis(env: Env, kns: KnsSimulator) -> None:
    query = GridQuery(compile_expression({"field": "keywords", "value": "碳排放", "match": "exact"}))
    await warm(env, kns)
    kns.fault("grid", "truncate", fraction=0.01, times=1)
    before = set(env.store.diagnostics_dir.glob("grid-*.html"))
    job = await run(env, lambda op: grid_page(env.site, op, query, 1))
    assert [e.code for e in job.record.errors] == ["PARSER_UNSUPPORTED"]
    saved = set(env.store.diagnostics_dir.glob("grid-*.html")) - before
    assert len(saved) == 1
    assert "url=https://kns.cnki.net/kns8s/brief/grid" in saved.pop().read_text(encoding="utf-8")


FOUND = GridQuery(compile_expression({"field": "keywords", "value": "语义检索", "match": "exact"}))
NOTHING = GridQuery(compile_expression({"field": "title", "value": "没有这样的题名"}))


def subject_of(post: Any) -> str:
    return json.loads(post.form["QueryJson"])["QNode"]["QGroup"][0]["ChildItems"][0]["Items"][0]["Value"]


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("style", ["no_content", "zero"])
async def test_a_shell_on_page_1_and_on_the_control_is_asked_again_after_a_wait(
    env: Env, kns: KnsSimulator, style: str
) -> None:
    await warm(env, kns)
    kns.fault("grid", "empty", empty_style=style, times=2)  # the query and the control: the site is throttling
    started = time.monotonic()
    job = await run(env, lambda op: grid_page(env.site, op, FOUND, 1))
    assert job.record.status == "completed", job.record.errors
    assert job.record.result["rows"] and job.record.result["zero"] == ""
    assert [subject_of(p) for p in grid_posts(kns)] == ["语义检索", "研究", "语义检索"]
    assert time.monotonic() - started >= SHORT_WAITS[0]


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("style", ["no_content", "zero"])
async def test_a_zero_beside_the_throttle_text_is_confirmed_by_a_control_listing(
    env: Env, kns: KnsSimulator, style: str
) -> None:
    await warm(env, kns)
    kns.configure(empty_style=style)  # the bare shell one scraper captured, or 共找到 0 条结果 beside it
    job = await run(env, lambda op: grid_page(env.site, op, NOTHING, 1))
    assert job.record.status == "completed", job.record.errors
    assert (job.record.result["total"], job.record.result["exhausted"]) == (0, True)
    assert job.record.result["zero"] == "control"
    assert [subject_of(p) for p in grid_posts(kns)] == ["没有这样的题名", "研究"]


@pytest.mark.asyncio(loop_scope="module")
async def test_one_control_answer_stands_for_a_burst_of_zeros(env: Env, kns: KnsSimulator) -> None:
    env.site.listings.forget()  # no control answer from an earlier test
    await warm(env, kns)
    titles = [f"没有这样的题名{n}" for n in range(5)]
    env.site.listings.control_reuse = 60.0

    async def zeros(op: OperationContext) -> list[GridPage]:
        return [await grid_page(env.site, op, GridQuery(compile_expression({"field": "title", "value": t})), 1) for t in titles]

    try:
        job = await run(env, zeros)
    finally:
        env.site.listings.control_reuse = 0.0
    assert job.record.status == "completed", job.record.errors
    assert [page["zero"] for page in job.record.result] == ["control"] * 5
    assert [subject_of(p) for p in grid_posts(kns)] == [titles[0], "研究", *titles[1:]]


@pytest.mark.asyncio(loop_scope="module")
async def test_a_zero_the_page_states_without_the_throttle_text_needs_no_second_look(env: Env, kns: KnsSimulator) -> None:
    await warm(env, kns)
    kns.configure(empty_style="not_found")  # 未检索到相关文献
    job = await run(env, lambda op: grid_page(env.site, op, NOTHING, 1))
    assert job.record.result["zero"] == "stated"
    assert job.record.requests == 1


@pytest.mark.asyncio(loop_scope="module")
async def test_throttling_from_page_3_is_waited_out_and_the_listing_completes(env: Env, kns: KnsSimulator) -> None:
    query = GridQuery(compile_expression({"field": "subject", "value": "研究"}))
    await warm(env, kns)
    kns.fault("grid", "empty", min_page=3, duration=0.5)  # every page ≥ 3 answers the shell for half a second

    async def pages(op: OperationContext) -> list[GridPage]:
        return [await grid_page(env.site, op, query, page) for page in (1, 2, 3, 4)]

    job = await run(env, pages)
    assert job.record.status == "completed", job.record.errors
    assert [len(page["rows"]) for page in job.record.result] == [50, 50, 50, 50]
    asked = [p.form["pageNum"] for p in grid_posts(kns)]
    assert asked[:3] == ["1", "2", "3"]
    assert asked[-2:] == ["3", "4"]
    assert asked.count("1") == 1  # no control listing on page ≥ 2: an empty page there is never the end


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("style", ["zero", "not_found"])
async def test_a_zero_on_page_2_whatever_it_says_is_waited_out(env: Env, kns: KnsSimulator, style: str) -> None:
    query = GridQuery(compile_expression({"field": "subject", "value": "研究"}))
    await warm(env, kns)
    kns.fault("grid", "empty", empty_style=style, min_page=2, times=1)  # 共找到 0 条结果 + shell, or 未检索到

    async def pages(op: OperationContext) -> list[GridPage]:
        return [await grid_page(env.site, op, query, page) for page in (1, 2)]

    job = await run(env, pages)
    assert job.record.status == "completed", job.record.errors
    first, second = job.record.result
    assert (len(first["rows"]), len(second["rows"])) == (50, 50)
    assert second["total"] == first["total"] > 100 and not second["exhausted"]
    assert [p.form["pageNum"] for p in grid_posts(kns)] == ["1", "2", "2"]  # no control listing on page 2


@pytest.mark.asyncio(loop_scope="module")
async def test_throttling_that_outlasts_the_waits_is_temporary_never_zero(env: Env, kns: KnsSimulator) -> None:
    await warm(env, kns)
    kns.fault("grid", "empty")  # the control listing gets the shell too: the site is throttling
    before = set(env.store.diagnostics_dir.glob("grid-empty-*.html"))
    job = await run(env, lambda op: grid_page(env.site, op, FOUND, 1))
    (error,) = job.record.errors
    assert job.record.status == "partial"
    assert error.code == "SITE_TEMPORARILY_EMPTY"
    assert error.retryable
    assert error.details["waited_seconds"] == round(sum(SHORT_WAITS))
    assert job.record.requests == 4 + 4  # the page four times, a control listing after each shell
    assert len(set(env.store.diagnostics_dir.glob("grid-empty-*.html")) - before) == 1


@pytest.mark.asyncio(loop_scope="module")
async def test_a_refusal_in_a_hidden_input_is_reported_with_its_words(env: Env, kns: KnsSimulator) -> None:
    await warm(env, kns)
    kns.fault("grid", "reject", reason="查询对象结构错误！", where="input", times=1)
    job = await run(env, lambda op: grid_page(env.site, op, FOUND, 1))
    (error,) = job.record.errors
    assert error.code == "QUERY_REJECTED"
    assert error.details["reason"] == "查询对象结构错误！"
    assert (env.store.diagnostics_dir / error.details["snapshot"]).is_file()
    assert job.record.requests == 1


@pytest.mark.asyncio(loop_scope="module")
async def test_a_sort_the_first_answer_ignored_is_asked_the_way_the_sort_links_ask(env: Env, kns: KnsSimulator) -> None:
    query = GridQuery(compile_expression({"field": "subject", "value": "研究"}), sort="cited_desc")
    await warm(env, kns)
    kns.configure(sort_honoured="sort_request")
    job = await run(env, lambda op: grid_page(env.site, op, query, 1))
    posts = grid_posts(kns)
    cited = [row["cited"] or 0 for row in job.record.result["rows"]]
    assert job.record.status == "completed", job.record.errors
    assert cited == sorted(cited, reverse=True)
    assert [p.form["boolSortSearch"] for p in posts] == ["false", "true"]
    assert json.loads(posts[1].form["QueryJson"])["SearchFrom"] == 5


@pytest.mark.asyncio(loop_scope="module")
async def test_a_sort_the_site_never_applies_is_said(env: Env, kns: KnsSimulator) -> None:
    query = GridQuery(compile_expression({"field": "subject", "value": "研究"}), sort="date_desc")
    await warm(env, kns)
    kns.configure(sort_honoured="never")
    job = await run(env, lambda op: grid_page(env.site, op, query, 1))  # the caller records what the site said
    (error,) = job.record.errors
    assert job.record.status == "partial"
    assert error.code == "SORT_NOT_APPLIED"
    assert error.details == {"requested": "PT", "shown": "FFD"}
    assert job.record.result["rows"]


@pytest.mark.asyncio(loop_scope="module")
async def test_pages_after_the_first_echo_products_and_view_where_the_site_requires_them(
    env: Env, kns: KnsSimulator
) -> None:
    query = GridQuery(compile_expression({"field": "subject", "value": "研究"}))
    await warm(env, kns)
    kns.configure(paging_echo="required")
    job = await run(env, lambda op: grid_page(env.site, op, query, 2))
    assert job.record.status == "completed", job.record.errors
    assert len(job.record.result["rows"]) == 50


@pytest.mark.asyncio(loop_scope="module")
async def test_rate_limit_and_server_errors_back_off_then_succeed(env: Env, kns: KnsSimulator) -> None:
    await warm(env, kns)
    kns.fault("grid", "status", status=429, times=2)
    kns.fault("detail", "status", status=503, times=1)
    paper = next(p for p in kns.corpus.papers if p.doc_type == "期刊")
    query = GridQuery(compile_expression({"field": "keywords", "value": "知识图谱", "match": "exact"}))

    async def work(op: OperationContext) -> Any:
        page = await grid_page(env.site, op, query, 1)
        detail = await env.site.detail(op, Paper(title=paper.title, locator=kns.detail_url(paper)))
        return [len(page.rows), detail.title]

    started = time.monotonic()
    job = await run(env, work)
    assert job.record.status == "completed", job.record.errors
    listed = len(kns.expected(json.loads(grid_posts(kns)[-1].form["QueryJson"])))
    assert job.record.result == [min(50, listed), paper.title]
    assert [r.status for r in grid_posts(kns)] == [429, 429, 200]
    assert time.monotonic() - started >= 2 + 4 + 2  # 2 s and 4 s for the grid, 2 s for the detail page
    assert env.site.limiter.backoff > 1.0


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("style", ["redirect", "vericode", "json403", "json200"])
async def test_grid_captcha_waits_for_a_person_then_completes(env: Env, kns: KnsSimulator, style: str) -> None:
    await warm(env, kns)
    kns.captcha("grid", style=style)
    query = GridQuery(compile_expression({"field": "title", "value": "大语言模型"}), sort="cited_desc")
    epoch = env.site.epoch
    job = env.jobs.start("search", get_metadata.BUDGET.of(), lambda op: grid_page(env.site, op, query, 1))
    await until_awaiting(job)
    assert "验证" in job.record.message and env.site.person.page(job.record.operation_id) is not None
    assert env.site.limiter.held
    kns.solve()
    await within(job.done.wait(), 30)
    assert job.record.status == "completed", job.record.errors
    assert job.record.result["rows"] and env.site.epoch == epoch + 1
    assert not env.site.limiter.held and env.site.person.page() is None
    if style == "redirect":
        assert kns.count("verify") >= 1  # the work page went to the verification page
    assert grid_posts(kns)[-1].status == 200


@pytest.mark.asyncio(loop_scope="module")
async def test_the_grids_json_challenge_is_shown_on_its_verify_page_and_page_1_is_asked_as_a_continuation(
    env: Env, kns: KnsSimulator
) -> None:
    await warm(env, kns)
    kns.captcha("grid", style="json403")
    kns.configure(rechallenge_new_search=True)  # a new search right after a solve is challenged again
    query = GridQuery(compile_expression({"field": "title", "value": "大语言模型"}))
    epoch = env.site.epoch
    job = env.jobs.start("search", get_metadata.BUDGET.of(), lambda op: grid_page(env.site, op, query, 1))
    await until_awaiting(job)
    shown = env.site.person.page(job.record.operation_id)
    assert shown is not None
    assert "/verify/home?captchaType=blockPuzzle" in shown.url
    assert "returnUrl=https%3A%2F%2Fkns.cnki.net%2Fkns8s%2FAdvSearch" in shown.url
    kns.solve()
    await within(job.done.wait(), 30)
    posts = grid_posts(kns)
    assert job.record.status == "completed", job.record.errors
    assert env.site.epoch == epoch + 1  # one human step: the retry did not start a new search
    assert [(p.status, p.form["boolSearch"]) for p in posts] == [(403, "true"), (200, "false")]
    assert kns.count("search") == 1  # back on the search page; the template was not captured again


@pytest.mark.asyncio(loop_scope="module")
async def test_a_challenge_that_keeps_coming_back_stops_after_four_attempts(env: Env, kns: KnsSimulator) -> None:
    await warm(env, kns)
    kns.captcha("grid", style="vericode")
    query = GridQuery(compile_expression({"field": "keywords", "value": "幻觉"}))
    job = env.jobs.start("metadata", get_metadata.BUDGET.of(), lambda op: grid_page(env.site, op, query, 1))
    for _ in range(3):  # the person says "done" three times, the site asks again each time
        await until_awaiting(job)
        await env.jobs.resume(job.record.operation_id)
    await within(job.done.wait(), 30)
    assert [e.code for e in job.record.errors] == ["VERIFICATION_REPEATED"]
    assert not env.site.limiter.held


@pytest.mark.asyncio(loop_scope="module")
async def test_skip_policy_skips_the_challenge(env: Env, kns: KnsSimulator) -> None:
    await warm(env, kns)
    kns.captcha("grid")
    query = GridQuery(compile_expression({"field": "subject", "value": "碳排放"}))
    job = await run(env, lambda op: grid_page(env.site, op, query, 1), on_verification="skip")
    assert job.record.status == "skipped"
    assert [e.code for e in job.record.errors] == ["VERIFICATION_SKIPPED"]
    assert not env.site.limiter.held


@pytest.mark.asyncio(loop_scope="module")
async def test_login_wall_on_a_detail_page_is_handed_to_a_person(env: Env, kns: KnsSimulator) -> None:
    paper = next(p for p in kns.corpus.papers if p.doc_type == "期刊" and p.free is False)
    kns.fault("detail", "login", times=2)  # the resource load and the rendered tab both meet it
    job = env.jobs.start("metadata", get_metadata.BUDGET.of(),
                         lambda op: env.site.detail(op, Paper(title=paper.title, locator=kns.detail_url(paper))))
    await until_awaiting(job)
    assert "登录" in job.record.message
    tab = env.site.person.page(job.record.operation_id)
    assert tab is not None and "login.cnki.net" in tab.url
    # the person types an account and submits the site's own form
    await env.site.evaluate(
        tab, "document.querySelector('#TextBoxUserName').value = 'reader', document.querySelector('#loginForm').submit(), true"
    )
    await within(job.done.wait(), 30)
    assert job.record.status == "completed", job.record.errors
    assert job.record.result["abstract"] == paper.abstract
    assert kns.scenario.login == "personal"


@pytest.mark.asyncio(loop_scope="module")
async def test_login_polls_the_tabs_and_session_refresh_reads_the_header(env: Env, kns: KnsSimulator) -> None:
    kns.configure(login="institution", institution_name="华东政法大学")
    job = await run(env, lambda op: followed(op, env.sessions.refresh(op)), kind="session", budget=session_status.BUDGET.of())
    assert job.record.status == "completed", job.record.errors
    assert job.record.result == {
        "personal": "not_observed", "institution": "observed", "institution_evidence": ["华东政法大学"],
        "permission_scope": "unknown", "evidence_source": "kns_header", "observed_at": job.record.result["observed_at"],
    }
    # already logged in: login returns at once without a person
    job = await run(env, lambda op: followed(op, env.sessions.login(op)), kind="login", budget=login.BUDGET.of())
    assert job.record.status == "completed" and job.record.result["institution"] == "observed"
    assert env.sessions.cached()["cached"] is True

    kns.configure(login="none")
    job = env.jobs.start("login", login.BUDGET.of(), lambda op: followed(op, env.sessions.login(op)))
    await until_awaiting(job)
    assert "登录" in job.record.message and env.site.person.page(job.record.operation_id) is not None
    tab = env.site.person.page(job.record.operation_id)
    assert tab is not None
    # the person follows the header's 个人登录 link and logs in; the poll sees the header change
    await env.site.evaluate(tab, "location.href = document.querySelector('.ecp_header_personal_loginbg').href, true")
    await env.site.wait_for(tab, "!!document.querySelector('#loginForm')", 10)
    await env.site.evaluate(tab, "document.querySelector('#loginForm').submit(), true")
    await within(job.done.wait(), 30)
    assert job.record.status == "completed", job.record.errors
    assert job.record.result["personal"] == "authenticated" and job.record.result["institution"] == "not_observed"
    assert env.site.person.page() is None


@pytest.mark.asyncio(loop_scope="module")
async def test_killed_browser_is_unavailable_until_recover(env: Env, kns: KnsSimulator) -> None:
    browser = env.site.browser
    generation = browser.connection_generation
    process = psutil.Process(browser.process_id)
    for proc in [*process.children(recursive=True), process]:
        proc.kill()
    deadline = time.monotonic() + 5
    while browser.running and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    query = GridQuery(compile_expression({"field": "subject", "value": "碳排放"}))
    job = await run(env, lambda op: grid_page(env.site, op, query, 1))
    assert job.record.status == "failed" and job.record.errors[0].code == "BROWSER_UNAVAILABLE"
    await env.site.recover()
    job = await run(env, lambda op: grid_page(env.site, op, query, 1))
    assert job.record.status == "completed", job.record.errors
    assert job.record.result["rows"] and browser.connection_generation == generation + 1


# --------------------------------------------------------------------------------------------
# Through the real MCP client and server (stdio)


async def test_login_session_show_and_recover_over_mcp(kns: KnsSimulator, tmp_path: Path) -> None:
    profile = tmp_path / "browser" / "profile"
    kns.configure(login="institution", institution_name="华东政法大学")
    async with McpSession.serving(serve_params(tmp_path, kns.browser_args), read_timeout=60) as mcp:
        assert len((await mcp.client.list_tools()).tools) == 22
        report = await mcp.call("diagnostics", {})
        assert await mcp.call("session_status", {}) == {
            "personal": "not_observed", "institution": "not_observed", "permission_scope": "unknown",
            "evidence_source": "not_checked", "cached": True, "next_step": LOOK_FIRST,
        }
        assert not report.get("browser", {}).get("running")
        assert processes_on(profile) == []
        assert (await mcp.call("operation_control", {"action": "show"}))["errors"][0]["code"] == "VERIFICATION_NOT_FOUND"

        login = await mcp.call("login", {})
        assert login["status"] == "completed", login
        assert login["kind"] == "login", login
        assert login["result"]["institution"] == "observed"
        assert login["result"]["institution_evidence"] == ["华东政法大学"]
        cached = await mcp.call("session_status", {})
        assert cached["cached"] is True
        assert cached["institution"] == "observed"
        report = await mcp.call("diagnostics", {})
        assert report["browser"]["running"]
        assert report["browser"]["profile_directory"] == str(profile)

        # a person logs in with a personal account while login waits; resume ends the wait
        kns.configure(login="none")
        waiting = await mcp.wait(await mcp.call("login", {"force": True}), until=AWAITING, timeout=20)
        assert waiting["status"] == "awaiting_user", waiting
        assert await mcp.call("operation_control", {"action": "show"}) == {"status": "shown"}
        kns.configure(login="personal", personal_name="reader")
        resumed = await mcp.call("operation_control", {"action": "resume", "operation_id": waiting["operation_id"]})
        resumed = await mcp.wait(resumed, timeout=20)
        assert resumed["status"] == "completed", resumed
        assert resumed["result"]["personal"] == "authenticated"

        fresh = await mcp.call("session_status", {"refresh": True})
        assert fresh["kind"] == "session", fresh
        assert fresh["result"]["personal"] == "authenticated", fresh
        assert "cached" not in fresh["result"]

        pid = report["browser"]["process_id"]
        psutil.Process(pid).kill()
        await asyncio.sleep(0.5)
        failed = await mcp.call("session_status", {"refresh": True})
        assert failed["errors"][0]["code"] == "BROWSER_UNAVAILABLE", failed
        recovered = await mcp.call("operation_control", {"action": "recover"})
        assert recovered["status"] == "completed"
        again = await mcp.call("session_status", {"refresh": True})
        assert again["status"] == "completed"
        assert again["result"]["personal"] == "authenticated"
        assert (await mcp.call("diagnostics", {}))["browser"]["connection_generation"] == 2
    deadline = time.monotonic() + 10
    while processes_on(profile) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert processes_on(profile) == []
