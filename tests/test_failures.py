"""Issue 41 items 1 and 2, without a browser: a failure is a failure to the client (``isError``, search_results
of a failed search, export_citations with nothing to export, messages that fit their tool, session_status's
next step), and the field check tells trouble here from a changed site, quoting no message cut mid-word."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from cnki_mcp.app import App
from cnki_mcp.core.errors import CATALOGUE, CnkiError, for_its_tool, network_unreachable
from cnki_mcp.core.model import CheckStep, Evidence, Paper, Problem, SearchEntry, SearchRecord, SessionState, SiteCheck
from cnki_mcp.core.text import shortened
from cnki_mcp.fieldcheck.tour import LOCAL_CODES, LOCAL_HINT, STRUCTURE_HINT, render, step_line
from cnki_mcp.site.session import LOOK_FIRST, NONE_SEEN, advised, session_view
from cnki_mcp.store.library import Store
from cnki_mcp.surface import server
from tests.harness import call_tool, conforms
from tests.test_contract import FakeApp, decoded

UNREACHED = Problem(code="NETWORK_UNREACHABLE", message="连不上知网", details={"reason": "dns"})


# --- isError ------------------------------------------------------------------------------------------


async def test_an_operation_that_failed_is_an_error_with_its_structured_content_unchanged() -> None:
    spent = {"requests": 3, "active_seconds": 1.5, "budget": {"max_requests": 90, "timeout_seconds": 300}}  # always in a view
    views = {
        "op_failed": {"operation_id": "op_failed", "kind": "search", "status": "failed", **spent, "errors": [{"code": "NETWORK_UNREACHABLE", "message": "连不上知网"}]},
        "op_partial": {"operation_id": "op_partial", "kind": "search", "status": "partial", **spent, "errors": [{"code": "RATE_LIMITED", "message": "限流"}]},
        "op_running": {"operation_id": "op_running", "kind": "search", "status": "running", **spent},
    }

    async def answer(tool: str, args: Any, ctx: Any) -> Any:
        return views[args.operation_id]

    async with Client(server.build_server(FakeApp(answer))) as client:
        answers = {name: await client.call_tool("operation_status", {"operation_id": name}) for name in views}
    assert answers["op_failed"].is_error is True
    assert decoded(answers["op_failed"]) == views["op_failed"]
    assert answers["op_partial"].is_error is False and decoded(answers["op_partial"]) == views["op_partial"]
    assert answers["op_running"].is_error is False


# --- search_results and export_citations of a search that failed --------------------------------------


@pytest.fixture
async def searches(isolated_data_dir: Path) -> Path:
    store = Store.open(isolated_data_dir)
    paper = Paper(record_ref=f"rec_{1:024x}", title="违约金调整的基本标准研究", authors=["王利明"], source="法学研究", year=2021)
    store.data.papers[paper.record_ref] = paper
    entry = SearchEntry(record_ref=paper.record_ref, score=0.9, eligible=True, selected=True, evidence=Evidence(relevance=0.5))
    store.put_search(SearchRecord(search_id="op_failed", status="failed", query="违约金", errors=[UNREACHED]), None)
    store.put_search(SearchRecord(search_id="op_cut", status="partial", query="违约金", entries=[entry], errors=[UNREACHED]), None)
    store.put_search(SearchRecord(search_id="op_empty", status="completed", query="违约金"), None)
    await store.close()
    return isolated_data_dir


@pytest.fixture
async def app(searches: Path):
    application = App(searches)
    yield application
    await application.close()


async def test_search_results_of_a_failed_search_says_so_and_is_no_empty_page(app: App) -> None:
    page = conforms("search_results", await call_tool(app, "search_results", {"search_id": "op_failed"}))
    assert page["status"] == "failed" and page["results"] == []
    assert page["errors"] == [{"code": "NETWORK_UNREACHABLE", "message": "连不上知网", "details": {"reason": "dns"}}]
    assert "不是知网的答复" in page["message"] and "不代表没有文献" in page["message"]


async def test_search_results_of_a_search_cut_short_says_the_list_is_not_all(app: App) -> None:
    page = conforms("search_results", await call_tool(app, "search_results", {"search_id": "op_cut"}))
    assert page["status"] == "partial" and page["total"] == 1
    assert [error["code"] for error in page["errors"]] == ["NETWORK_UNREACHABLE"]
    assert "不是知网的完整答复" in page["message"] and "continue" in page["message"]
    done = await call_tool(app, "search_results", {"search_id": "op_empty"})
    assert "errors" not in done and "message" not in done  # a completed search's page is as it was


async def test_export_of_a_search_without_records_is_nothing_to_export(app: App) -> None:
    with pytest.raises(CnkiError) as failed:
        await call_tool(app, "export_citations", {"search_id": "op_failed"})
    assert failed.value.code == "NOTHING_TO_EXPORT"
    assert "没有完成（状态 failed）" in failed.value.message and "search_results" in failed.value.message
    assert failed.value.details == {"search_id": "op_failed", "status": "failed", "scope": "selected"}
    with pytest.raises(CnkiError) as empty:
        await call_tool(app, "export_citations", {"search_id": "op_empty"})
    assert empty.value.code == "NOTHING_TO_EXPORT" and "scope=eligible" in empty.value.message
    exported = await call_tool(app, "export_citations", {"search_id": "op_cut"})  # a cut-short search's part exports
    assert "违约金调整的基本标准研究" in exported["data"]["text"]


# --- messages that fit their tool ---------------------------------------------------------------------


def test_only_a_list_says_that_an_unreached_site_is_no_empty_answer() -> None:
    def search(error: CnkiError) -> CnkiError:
        return for_its_tool(error, a_list=True, resumable="检索")

    error = network_unreachable("https://kns.cnki.net/", "proxy", net_error="net::ERR_PROXY_CONNECTION_FAILED")
    assert "这不代表没有文献" not in error.message and "continue" not in error.message and "代理服务器连接失败" in error.message
    assert search(search(error)).message.count("这不代表没有文献") == 1 and error.message.count("continue") == 1
    assert "这不代表没有文献" not in search(CnkiError("RATE_LIMITED")).message
    assert for_its_tool(network_unreachable("https://kns.cnki.net/", "dns"), a_list=False).message.endswith("然后重试。")


# Tools asked for a list (or a batch that can go on), on a site the network never reaches: each says it
# through its own error path (the operation's errors), not only the search.
UNREACHABLE_SITE = network_unreachable("https://kns.cnki.net/", "dns", net_error="net::ERR_NAME_NOT_RESOLVED")
PAPER = Paper(record_ref=f"rec_{2:024x}", title="违约金调整的基本标准研究", authors=["王利明"], source="法学研究", year=2021,
              dbname="CJFD", filename="FXYJ202101001", url="https://kns.cnki.net/kcms2/article/abstract?v=unreached")


class UnreachedSite:
    """A site backend whose every request fails as Chrome's DNS failure does (what ``Site`` raises then)."""

    epoch = 0
    browser_running = False
    has_work_tab = False

    def __getattr__(self, name: str) -> Any:
        def request(*args: Any, **kwargs: Any) -> Any:
            raise CnkiError(UNREACHABLE_SITE.code, UNREACHABLE_SITE.message, details=UNREACHABLE_SITE.details, retryable=True)

        return request


@pytest.fixture
async def unreached(isolated_data_dir: Path):
    store = Store.open(isolated_data_dir)
    store.data.papers[PAPER.record_ref] = PAPER
    await store.close()
    application = App(isolated_data_dir, site_factory=UnreachedSite)
    yield application
    await application.close()


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("related_papers", {"record_ref": PAPER.record_ref, "relation": "citing"}),
        ("author_papers", {"author": "王利明", "institution": "中国人民大学"}),
        ("journal_issues", {"journal": "法学研究"}),
        ("search_facets", {"expression": {"field": "subject", "value": "违约金"}}),
    ],
)
async def test_every_tool_asked_for_a_list_says_an_unreached_site_is_no_empty_answer(
    unreached: App, tool: str, arguments: dict[str, Any]
) -> None:
    view = await call_tool(unreached, tool, arguments)
    assert view["status"] == "failed", view
    (error,) = view["errors"]
    assert error["code"] == "NETWORK_UNREACHABLE" and error["message"].endswith("这不代表没有文献。"), error
    assert "continue" not in error["message"], error  # nothing to go on with: the call is made again


async def test_a_batch_download_stopped_by_an_unreached_site_says_it_can_go_on(unreached: App) -> None:
    view = await call_tool(unreached, "download_papers", {"record_refs": [PAPER.record_ref], "interval_seconds": 5})
    (error,) = view["errors"]
    assert error["code"] == "NETWORK_UNREACHABLE" and error["details"]["remaining"] == 1, error
    assert error["message"].endswith("continue 继续这次批量下载。") and "这不代表没有文献" not in error["message"], error


def test_session_status_without_a_login_says_what_to_do_next() -> None:
    assert advised(session_view(SessionState(), cached=True))["next_step"] == LOOK_FIRST
    seen = advised(session_view(SessionState(evidence_source="kns_header", observed_at="2026-12-01T00:00:00Z")))
    assert seen["next_step"] == NONE_SEEN and "login" in NONE_SEEN
    logged_in = SessionState(institution="observed", institution_evidence=["某大学"], observed_at="2026-12-01T00:00:00Z")
    assert "next_step" not in advised(session_view(logged_in))
    assert "next_step" not in session_view(SessionState())  # login's own answer is left as it was


async def test_session_status_answers_with_the_next_step(app: App) -> None:
    assert (await call_tool(app, "session_status", {}))["next_step"] == LOOK_FIRST


# --- the field check ----------------------------------------------------------------------------------


def test_local_trouble_is_named_by_catalogued_codes_none_of_them_a_site_change() -> None:
    assert LOCAL_CODES <= set(CATALOGUE)
    assert not LOCAL_CODES & {"SITE_STRUCTURE_CHANGED", "PARSER_UNSUPPORTED", "QUERY_TEMPLATE_UNSUPPORTED", "READER_UNSUPPORTED"}


@pytest.mark.parametrize(
    "error",
    [
        network_unreachable("https://kns.cnki.net/", "dns", net_error="net::ERR_NAME_NOT_RESOLVED"),
        network_unreachable("https://kns.cnki.net/", "proxy", net_error="net::ERR_PROXY_CONNECTION_FAILED"),
        network_unreachable("https://kns.cnki.net/", "blocked", status=418),
        CnkiError("BROWSER_UNAVAILABLE", "浏览器启动后立即退出（退出码 1）：没有图形界面（浏览器报告缺少 X 服务器或 $DISPLAY）。可以：设置 CNKI_HEADLESS=1。"),
        CnkiError("LOGIN_REQUIRED"),
    ],
    ids=["dns", "proxy", "cdn-418", "no-display", "login"],
)
def test_a_step_blocked_here_is_named_whole_and_asks_for_no_report(error: CnkiError) -> None:
    blocked = CheckStep(name="template", label="检索页（高级检索的检索请求）", status="blocked", code=error.code, message=error.message)
    skipped = CheckStep(name="grid", label="检索结果第 1 页", status="skipped", message="检查在「检索页」停止")
    check = SiteCheck(status="blocked", started_at="t", requests=1, seconds=2.0, steps=[blocked, skipped])
    lines = render(check)
    assert lines[0] == f"! 检索页（高级检索的检索请求）：{error.code} {error.message}（0 次请求，0.0 秒）"
    assert lines[-1].startswith("0/2 项通过，1 项未检查（标 –），1 项没能检查（标 !）")
    assert lines[-1].endswith(LOCAL_HINT)
    assert not any("改版" in line or "issue" in line or "--report" in line for line in lines)


def test_a_changed_page_is_still_a_failure_that_asks_for_a_report() -> None:
    failed = CheckStep(name="grid", label="检索结果第 1 页", status="failed", code="SITE_STRUCTURE_CHANGED", message="页面结构与预期不符，缺少：题名。")
    check = SiteCheck(status="failed", started_at="t", steps=[failed])
    assert render(check)[-1].endswith(STRUCTURE_HINT)


def test_a_long_failure_is_cut_after_a_whole_sentence() -> None:
    message = "第一句说明发生了什么。" * 10 + "最后一句很长" * 20
    line = step_line(CheckStep(name="grid", label="检索结果第 1 页", status="failed", code="PARSER_UNSUPPORTED", message=message))
    assert "什么。…快照" not in line and "什么。…没有保存快照" in line


@pytest.mark.parametrize(
    ("message", "limit", "expected"),
    [
        ("短消息。", 10, "短消息。"),
        ("第一句。第二句；第三句很长很长很长", 12, "第一句。第二句；…"),
        ("第一句。第二句很长很长很长", 10, "第一句。…"),
        ("no sentence end here at all", 12, "no sentence…"),
        ("没有任何标点的一长串文字没有任何标点", 8, "没有任何标点的…"),
    ],
)
def test_shortened_ends_at_a_sentence_or_clause_never_inside_a_word(message: str, limit: int, expected: str) -> None:
    assert shortened(message, limit) == expected
    assert len(shortened(message, limit)) <= limit
