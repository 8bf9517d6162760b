"""Parsers against saved CNKI samples (``tests/fixtures/cnki-samples``, with their origins) and our own
fixture pages for each reported variant of the real site (``tests/fixtures/pages``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import PARSER_VERSION, Paper
from cnki_mcp.pages.page_state import (
    classify_response,
    inspect_live_page,
    parse_download_refusal,
    parse_session,
    refusal_in_url,
)
from cnki_mcp.pages.parse import check_identity, parse_count, parse_detail, parse_grid, parse_journal, strip_role_suffix
from cnki_mcp.pages.urls import is_site_url, public_url
from tests.kns.corpus import JOURNALS
from tests.kns.pages import journal_page
from tests.kns.server import Scenario

JOURNALS_BY_KEY = {journal.key: journal for journal in JOURNALS}
SAMPLES = Path(__file__).parent / "fixtures" / "cnki-samples"
PAGES = Path(__file__).parent / "fixtures" / "pages"
GRID_URL = "https://kns.cnki.net/kns8s/brief/grid"
DETAIL_URL = "https://kns.cnki.net/kcms2/article/abstract?v=tok&uniplatform=NZKPT"
JOURNAL_URL = "https://navi.cnki.net/knavi/detail?p=abc&uniplatform=NZKPT"
READER_URL = "https://kns.cnki.net/nzkhtml/xmlRead/xml.html?fileName=X&tableName=CJFDTOTAL&dbCode=CJFD"


def sample(name: str) -> str:
    return (SAMPLES / name).read_text(encoding="utf-8")


def page(name: str) -> str:
    return (PAGES / name).read_text(encoding="utf-8")


def error_of(call, *args, **kwargs) -> CnkiError:
    with pytest.raises(CnkiError) as caught:
        call(*args, **kwargs)
    return caught.value


# --------------------------------------------------------------------------------------------
# small rules


@pytest.mark.parametrize(
    ("text", "count"),
    [("12", 12), ("1,024", 1024), (" 1.2万 ", 12000), ("3.5万", 35000), ("0", 0), ("2.5", 3), ("", None), ("-", None), ("约3", None)],
)
def test_count_rule(text: str, count: int | None) -> None:
    assert parse_count(text) == count


@pytest.mark.parametrize(
    ("name", "clean"),
    [("林倩(文)", "林倩"), ("胡馨元（编）", "胡馨元"), ("王某（主编）", "王某"), ("赵(编著)", "赵"), ("文天祥", "文天祥"), ("周二 (执笔)", "周二")],
)
def test_role_suffix(name: str, clean: str) -> None:
    assert strip_role_suffix(name) == clean


def test_host_and_public_url_rules() -> None:
    assert is_site_url("https://kns.cnki.net/kcms2/article/abstract?v=1")
    assert is_site_url("https://cnki.net/")
    assert not is_site_url("http://kns.cnki.net/")
    assert not is_site_url("https://cnki.net.example.com/")
    assert not is_site_url("https://evilcnki.net/")
    assert public_url("https://kns.cnki.net/kcms2/article/abstract?v=1&uniplatform=NZKPT").startswith("https://")
    assert public_url("https://kns.cnki.net/kcms2/author/detail?v=1") == ""
    assert public_url("https://user@kns.cnki.net/kcms2/article/abstract?v=1") == ""
    assert public_url("https://kns.cnki.net/kcms2/article/abstract?v=1&access_token=x") == ""
    assert public_url("https://kns.cnki.net/kcms2/article/abstract?SessionId=x") == ""


# --------------------------------------------------------------------------------------------
# grid: saved samples


def test_grid_azazo1_fragment_td_cited_variant() -> None:
    grid = parse_grid(sample("azazo1-brief-grid-fragment.trimmed.html"), GRID_URL)
    assert (grid.total, grid.page, grid.page_count, grid.exhausted) == (34967, 1, 300, False)
    first, second = grid.rows
    assert first.title == "RAG-Maldetect：基于检索增强生成的安卓恶意软件检测方法"
    assert first.authors == ["何易临", "丁锰", "许晓宇"]
    assert first.source == "计算机工程与应用"
    assert (first.publication_date, first.year, first.document_type) == ("2024-03-15", 2024, "期刊")
    assert (first.cited, first.downloaded) == (12, 1024)
    assert first.online_first is True
    assert first.url == first.locator == "https://kns.cnki.net/kcms2/article/abstract?v=FAKEdetailToken0aaa"
    assert "免费" not in first.title
    # Relative locator resolved against the grid URL.
    assert second.locator == "https://kns.cnki.net/kcms2/article/abstract?v=relativeToken"
    assert (second.title, second.authors, second.source) == ("深度学习在医学影像中的应用", ["张三"], "中国医学影像学杂志")
    assert (second.cited, second.downloaded, second.online_first) == (0, 0, False)


def test_grid_hunnu_result_page_td_quote_variant() -> None:
    grid = parse_grid(sample("hunnu-kns8s-results-page-2026.redacted.html"), "https://kns.cnki.net/kns8s/defaultresult/index")
    assert grid.total == 5 and grid.page == 1 and grid.exhausted
    assert [row.title for row in grid.rows] == [
        "示例技术的规范问题：一个分析框架",
        "示例系统中的规则设计与责任分配",
        "示例议题治理的比较进路",
        "示例应用的审查研究",
        "示例传统与现代社会",
    ]
    first = grid.rows[0]
    assert (first.dbname, first.filename, first.dbcode) == ("CAPJ", "SLXK20260910001", "")
    assert first.online_first and first.cited is None and first.downloaded == 12
    assert (first.publication_date, first.year) == ("2026-09-10 16:30", 2026)
    assert first.authors == ["作者甲", "作者乙"] and first.source == "示例学刊"
    assert first.url.startswith("https://kns.cnki.net/kcms2/article/abstract?v=synthetic-slxk20260910001")
    assert [row.cited for row in grid.rows] == [None, 2, 11, None, 40]
    assert grid.rows[3].source == "示例医学杂志"
    assert [row.filename for row in grid.rows][1:] == ["SLXK202604003", "SLXK202506007", "SLYX202608012", "SLXK201803002"]
    assert all(row.dbname == "CJFQ" for row in grid.rows[1:])


def test_grid_sentence_search_blocks() -> None:
    grid = parse_grid(sample("azazo1-brief-senquery-fragment.trimmed.html"), "https://kns.cnki.net/kns8s/brief/senquery")
    assert (grid.total, grid.page, grid.page_count) == (79, 1, 4)
    (row,) = grid.rows
    assert row.title == "人工智能时代人才能力的重构与培育研究"
    assert row.authors == ["何彦杰", "倪凯"]
    assert (row.source, row.document_type, row.publication_date, row.year) == ("科技创业月刊", "期刊", "2026-09-21", 2026)
    assert row.downloaded == 32 and row.url == "https://kns.cnki.net/kcms2/article/abstract?v=senToken"


def test_grid_no_content_variants() -> None:
    empty, rejected = [line for line in sample("azazo1-brief-grid-no-content.trimmed.html").splitlines() if line.startswith("<div")]
    temporary = error_of(parse_grid, empty, GRID_URL)
    assert temporary.code == "SITE_TEMPORARILY_EMPTY" and temporary.retryable
    assert temporary.details == {"preview": "抱歉，暂无数据，请稍后重试。", "shell": True}
    busy = error_of(parse_grid, "<div><p>服务繁忙，请稍后重试</p></div>", GRID_URL)
    assert busy.details["shell"] is False
    refused = error_of(parse_grid, rejected, GRID_URL)
    assert refused.code == "QUERY_REJECTED"
    assert "查询对象结构错误" in refused.message and refused.details["reason"] == "查询对象结构错误, 没有指定检索分类！"


@pytest.mark.parametrize("reason", ["查询对象结构错误！", "参数校验失败", "起始游标越界"])
def test_grid_refusal_in_a_plain_hidden_input(reason: str) -> None:
    html = f'<input type="hidden" id="errorMsg" value="{reason}"><p class="no-content" value="">抱歉，暂无数据，请稍后重试。</p>'
    refused = error_of(parse_grid, html, GRID_URL)
    assert refused.code == "QUERY_REJECTED"
    assert refused.details["reason"] == reason


def test_grid_zero_stated_by_the_page() -> None:
    counted = parse_grid('<div><span class="pagerTitleCell">共找到<em>0</em>条结果</span><p>暂无数据</p></div>', GRID_URL)
    not_found = parse_grid('<div class="no-content-box"><p class="no-content" value="">未检索到相关文献</p></div>', GRID_URL)
    assert (counted.total, counted.exhausted, counted.zero) == (0, True, "stated")
    assert (not_found.total, not_found.exhausted, not_found.zero) == (0, True, "stated")


@pytest.mark.parametrize(
    "html",
    [
        '<div><span class="pagerTitleCell">共找到<em>0</em>条结果</span>'
        '<p class="no-content" value="">抱歉，暂无数据，请稍后重试。</p></div>',
        '<div><span class="pagerTitleCell">共找到<em>0</em>条结果</span><p>系统繁忙</p></div>',
        '<div class="no-content-box"><p>未检索到相关文献，请稍后再试</p></div>',
    ],
)
def test_a_zero_beside_the_throttle_text_is_a_shell_for_the_listing_to_judge(html: str) -> None:
    shell = error_of(parse_grid, html, GRID_URL)
    assert (shell.code, shell.details["shell"]) == ("SITE_TEMPORARILY_EMPTY", True)


def test_grid_echo_of_the_query_and_sort_marker() -> None:
    grid = parse_grid(sample("hunnu-kns8s-results-page-2026.redacted.html"), GRID_URL)
    assert grid.products == "CJFQ,CAPJ,ZHYX,CJTL"
    assert grid.view == "changeDBCh"
    assert grid.sort_shown == "PT"


def test_grid_cited_count_is_never_read_from_a_citation_string() -> None:
    row = ('<table class="result-table-list"><tr><td class="name"><a class="fz14" href="/kcms2/article/abstract?v=x">题名</a></td>'
           '<td class="cited">1,204</td><td class="quote"><span>[1]张三.题名[J].期刊,2024,44(03):1-10.</span></td></tr></table>')
    quote_only = row.replace('<td class="cited">1,204</td>', "")
    assert parse_grid(row, GRID_URL).rows[0].cited == 1204
    assert parse_grid(quote_only, GRID_URL).rows[0].cited is None


def test_grid_verify_page_is_not_a_grid() -> None:
    assert error_of(parse_grid, sample("hushiliang-verify-home-challenge.constructed.html"), GRID_URL).code == "PARSER_UNSUPPORTED"


# --------------------------------------------------------------------------------------------
# grid: reference fixture (§10.3) and own variants


def test_grid_core_fixture() -> None:
    grid = parse_grid(page("grid-core.html"), GRID_URL)
    (row,) = grid.rows
    assert row.cited == 12000 and row.downloaded == 3401
    assert f"{row.dbname}:{row.filename}".upper() == "CJFD:ABC"
    assert row.record_ref == "rec_e6ffa524e3f95ed688f14341"  # provisional ref of native key CJFD:ABC (engine §6.4)
    assert row.locator == "https://kns.cnki.net/kcms2/article/abstract?v=1&dbname=CJFD&filename=ABC"
    assert row.title == "民法典合同编研究"
    assert row.authors == ["张三", "李四"]
    assert row.source == "法学研究"
    assert grid.total == 1 and grid.exhausted


def test_grid_changed_login_page_is_an_error() -> None:
    problem = error_of(parse_grid, page("grid-changed-login.html"), GRID_URL)
    assert problem.code == "PARSER_UNSUPPORTED" and "changed login page" in problem.message


def test_grid_legacy_table_cursor_and_pager() -> None:
    grid = parse_grid(page("grid-kns8-legacy.html"), GRID_URL)
    assert (grid.total, grid.page, grid.page_count, grid.cursor, grid.exhausted) == (123, 2, 3, "turn-cursor-2", False)
    thesis, newspaper = grid.rows
    assert (thesis.dbcode, thesis.dbname, thesis.filename) == ("CMFD", "CMFD202301", "1023456789.nh")
    assert thesis.authors == ["王五", "赵六"] and thesis.document_type == "硕士" and thesis.year == 2023
    assert thesis.cited is None and thesis.downloaded == 35000
    assert newspaper.locator == "" and newspaper.url == ""
    assert newspaper.authors == ["钱七"] and newspaper.source == "人民日报"
    assert newspaper.cited is None and newspaper.downloaded is None


def test_grid_last_page_is_exhausted() -> None:
    html = page("grid-kns8-legacy.html").replace("2/3", "3/3")
    assert parse_grid(html, GRID_URL).exhausted


def test_grid_genuine_zero_results() -> None:
    grid = parse_grid(page("grid-zero.html"), GRID_URL)
    assert grid.rows == [] and grid.total == 0 and grid.exhausted


def test_grid_zero_total_beside_the_shell_is_unconfirmed() -> None:
    shell = error_of(parse_grid, page("grid-zero-total.html"), GRID_URL)
    assert (shell.code, shell.details["shell"]) == ("SITE_TEMPORARILY_EMPTY", True)


def test_grid_empty_preview_is_capped() -> None:
    problem = error_of(parse_grid, "<p>" + "变" * 400 + "</p>", GRID_URL)
    assert problem.details["preview"] == "变" * 160


def test_grid_too_large() -> None:
    assert error_of(parse_grid, "<p>" + "x" * (8 * 1024 * 1024) + "</p>", GRID_URL).code == "RESPONSE_TOO_LARGE"


# --------------------------------------------------------------------------------------------
# detail pages


def test_detail_online_first_sample() -> None:
    paper = parse_detail(sample("hunnu-kcms2-detail-online-first-2026.modelled.html"), DETAIL_URL)
    assert paper.title == "城市轨道交通网络规划的示例研究"
    assert paper.authors == ["作者甲", "作者乙"]
    assert paper.source == "示例管理评论"
    assert paper.source_url == "https://navi.cnki.net/knavi/detail?p=fixture-journal&uniplatform=NZKPT"
    assert (paper.publication_date, paper.year) == ("2026-04-11", 2026)
    assert paper.abstract == "本文以脱敏样本说明网络首发文章页的结构。"
    assert paper.keywords == ["城市轨道交通", "网络规划"]
    assert paper.online_first and paper.document_type == "期刊"
    assert (paper.dbcode, paper.filename, paper.dbname) == ("CAPJ", "FIXTURE20260409001", "")
    assert paper.url == DETAIL_URL == paper.locator
    assert paper.clc_codes == ["F273.1"]
    assert paper.detail_parser == PARSER_VERSION and paper.detail_observed_at


@pytest.mark.parametrize(
    ("row", "codes"),
    [
        ('<span class="rowtit">分类号：</span><p class="clc-code">TP18;TP311.13;G250.7</p>', ["TP18", "TP311.13", "G250.7"]),
        ('<span class="rowtit">分类号：</span><p>D923.4；F832.5</p>', ["D923.4", "F832.5"]),
        ('<span id="catalog_ZTCLS">分类号：R-0</span>', ["R-0"]),
        ('<span class="rowtit">分类号：</span><p>暂无</p>', []),
    ],
)
def test_detail_clc_codes(row: str, codes: list[str]) -> None:
    html = f'<html><body><div class="wx-tit"><h1>题名</h1></div><ul><li class="top-space">{row}</li></ul></body></html>'
    assert parse_detail(html, DETAIL_URL).clc_codes == codes


def test_detail_newspaper_sample_keeps_snapshot_as_excerpt() -> None:
    paper = parse_detail(sample("hunnu-kcms2-detail-newspaper-2026.modelled.html"), DETAIL_URL)
    assert paper.title == "示例城市推进社区体育设施建设"
    assert paper.authors == ["记者甲"]
    assert (paper.source, paper.document_type) == ("示例日报", "报纸")
    assert paper.abstract == "" and paper.excerpt == "本报讯 示例正文快照。"
    # The 报纸日期 row, not the 在线公开时间 two days later across the new year.
    assert (paper.publication_date, paper.year) == ("2025-12-31", 2025)
    assert paper.keywords == []  # the keywords row is hidden on the page
    assert not paper.online_first


def test_detail_mariozzj_excerpt_second_h3_author_institutions() -> None:
    paper = parse_detail(sample("mariozzj-knavi-yearList-papers-and-detail.excerpts.html"), DETAIL_URL)
    assert paper.title == '"人工智能+"背景下的高质量数据集建设：图书馆的机遇与挑战'
    assert paper.authors == ["张晓林"]
    assert paper.institutions == ["上海科技大学", "中国科学院文献情报中心"]
    assert paper.abstract == "摘要全文..."
    assert paper.keywords == ["人工智能+", "高质量数据集"]
    assert paper.funds == ['国家社会科学基金重大项目"..."(项目编号:23&ZD224)的研究成果']


def test_detail_core_fixture() -> None:
    paper = parse_detail(page("detail-core.html"), DETAIL_URL)
    assert paper.title == "合同解除的法律后果"  # not the login widget's 自动登录
    assert paper.authors == ["王某", "李某"]
    assert paper.institutions == ["某大学法学院", "某研究中心"]
    assert paper.abstract == "本文讨论合同解除后的恢复原状与损害赔偿。"
    assert (paper.source, paper.publication_date, paper.year) == ("法学期刊1", "2024", 2024)
    assert (paper.volume, paper.issue, paper.pages) == ("", "3", "1-10")
    assert paper.keywords == ["合同解除", "恢复原状"]


def test_detail_meta_tags_win_and_roles_are_stripped() -> None:
    paper = parse_detail(page("detail-meta.html"), DETAIL_URL)
    assert paper.title == "城市更新中的公众参与"
    assert paper.authors == ["林倩", "胡馨元"]
    assert paper.institutions == ["某师范大学"]
    assert paper.source == "城市规划学刊"
    assert (paper.publication_date, paper.year, paper.volume, paper.issue, paper.pages) == ("2021-05-20", 2021, "45", "5", "33-41")
    assert paper.doi == "10.16361/j.upf.202105005"
    assert paper.keywords == ["城市更新", "公众参与", "治理"]
    assert paper.abstract == "本文以三个案例讨论城市更新中的公众参与机制。"


def test_detail_2026_page_from_aria_snapshot() -> None:
    paper = parse_detail(page("detail-journal-2026.html"), DETAIL_URL)
    assert paper.title == "投贷联动、媒体监督与科技企业AI漂洗"
    assert paper.authors == ["李媛媛", "崔梦萦"]  # no e-mail tooltip, no affiliation digits
    assert paper.institutions == ["西南财经大学金融学院", "四川大学经济学院"]
    assert (paper.source, paper.year, paper.issue, paper.pages) == ("财经科学", 2026, "2", "113-126")
    assert paper.source_url == "https://navi.cnki.net/knavi/detail?p=redacted&uniplatform=NZKPT"
    assert paper.doi == "10.27041/j.cnki.cjkx.2026.02.008"
    # The visible summary is cut; the hidden input holds the whole abstract.
    assert paper.abstract == "文章考察媒体监督与科技企业AI漂洗，并报告稳健的经验证据。投贷联动显著抑制了漂洗行为。"
    assert paper.funds == ["国家自然科学基金项目(72000000)", "教育部人文社会科学研究项目(24YJC000000)"]
    assert (paper.dbcode, paper.filename, paper.dbname) == ("CJFQ", "CJKX202602009", "")
    assert paper.document_type == "期刊"


def test_detail_orgn_variant_plain_byline_and_text_doi() -> None:
    paper = parse_detail(page("detail-orgn.html"), DETAIL_URL)
    assert paper.title == "乡村振兴背景下的土地流转研究"
    assert paper.authors == ["陈一", "周二"]
    assert paper.institutions == ["中国农业大学经济管理学院", "农业农村部农村经济研究中心"]
    assert paper.keywords == ["土地流转", "农户收入", "乡村振兴"]
    assert paper.funds == ["国家社会科学基金(20BJY000)"]
    assert paper.doi == "10.13246/j.cnki.iae.2022.01.004"
    assert (paper.volume, paper.issue, paper.pages, paper.year) == ("43", "1", "45-58", 2022)


def test_detail_doctoral_master_conference_variants() -> None:
    doctoral = parse_detail(page("detail-doctoral.html"), DETAIL_URL)
    assert (doctoral.document_type, doctoral.source, doctoral.publication_date, doctoral.year) == ("博士", "华东政法大学", "2023-06-01", 2023)
    assert doctoral.source_url == "https://kns.cnki.net/knavi/detail?p=univ1&uniplatform=NZKPT"
    assert (doctoral.dbcode, doctoral.filename) == ("CDFD", "1023999999.nh")
    master = parse_detail(page("detail-master.html"), DETAIL_URL)
    assert (master.document_type, master.source, master.publication_date, master.year) == ("硕士", "某师范大学", "2024-06", 2024)
    conference = parse_detail(page("detail-conference.html"), DETAIL_URL)
    # No knavi link: the source stays with the grid row (the 会议名称 row names the meeting, not the proceedings).
    assert conference.document_type == "会议" and conference.source == "" and conference.source_url == ""
    assert (conference.publication_date, conference.year, conference.pages) == ("2023-10-14", 2023, "268-275")
    assert (conference.dbcode, conference.filename) == ("CPFD", "ZGFX202310001004")
    assert conference.institutions == ["某大学知识产权学院"]


def test_detail_newspaper_reference_fixture() -> None:
    paper = parse_detail('<h1>报纸题名</h1><div>正文快照：<span class="abstract-text">正文片段</span></div>', DETAIL_URL)
    assert (paper.title, paper.abstract, paper.excerpt) == ("报纸题名", "", "正文片段")


def test_detail_without_trustworthy_title() -> None:
    html = page("grid-changed-login.html").replace("<h1>changed login page</h1>", "")
    problem = error_of(parse_detail, html, DETAIL_URL)
    assert problem.code == "PARSER_UNSUPPORTED" and problem.message == "详情页缺少可信题名"
    assert "page_kind" not in problem.details  # may still render into a paper's page


def test_book_page_is_recognised_as_unsupported_at_once() -> None:
    problem = error_of(parse_detail, page("detail-book.html"), DETAIL_URL)
    assert problem.code == "PARSER_UNSUPPORTED" and problem.details["page_kind"] == "book"
    assert "图书" in problem.message


def test_detail_identifier_fallbacks() -> None:
    html = '<div class="wx-tit"><h1>题</h1></div><input name="dbname" value="CJFDLAST2024"><input id="filename" value="FX01">'
    paper = parse_detail(html, "https://kns.cnki.net/kcms2/article/abstract?v=1&dbcode=CJFQ")
    assert (paper.dbcode, paper.dbname, paper.filename) == ("CJFQ", "CJFDLAST2024", "FX01")
    paper = parse_detail('<div class="wx-tit"><h1>题</h1></div>', "https://user@kns.cnki.net/kcms2/article/abstract?v=1")
    assert paper.url == "" and paper.locator.startswith("https://user@")


# --------------------------------------------------------------------------------------------
# identity check (§4.3)


def _paper(**fields: object) -> Paper:
    base = {"title": "研究——以上海为例", "authors": ["王某", "李某"], "source": "法学研究"}
    base.update(fields)
    return Paper(**base)  # type: ignore[arg-type]


def test_identity_accepts_same_paper_with_cosmetic_differences() -> None:
    check_identity(_paper(), _paper(title="研究 —— 以上海为例", source="法学研究 .", authors=["王某"]))
    check_identity(_paper(doi="10.1/ABC"), _paper(doi="https://doi.org/10.1/abc"))
    check_identity(_paper(authors=[]), _paper(authors=["别人"]))
    check_identity(_paper(source=""), _paper(source="别的刊"))
    check_identity(_paper(dbname="cjfd", filename="abc", dbcode="CJFQ"), _paper(dbname="CJFD", filename="ABC", dbcode="cjfq"))


@pytest.mark.parametrize(
    ("expected", "seen"),
    [
        ({}, {"title": "研究——以北京为例"}),
        ({}, {"authors": ["李某", "王某"]}),
        ({}, {"source": "中国法学"}),
        ({"doi": "10.1/a"}, {"doi": "10.1/b"}),
        ({"dbname": "CJFD", "filename": "A"}, {"dbname": "CJFD", "filename": "B"}),
        ({"dbcode": "CJFQ"}, {"dbcode": "CDFD"}),
    ],
)
def test_identity_conflicts(expected: dict, seen: dict) -> None:
    problem = error_of(check_identity, _paper(**expected), _paper(**seen))
    assert problem.code == "IDENTITY_CONFLICT"
    assert problem.details == {"requested": _paper(**expected).title, "observed": _paper(**seen).title}


# --------------------------------------------------------------------------------------------
# journal pages (§5)


def test_journal_core_fixture() -> None:
    quality = parse_journal(page("journal-core.html"), JOURNAL_URL, "法学评论")
    assert (quality.canonical_title, quality.identity_basis) == ("法学评论", "current_title")
    assert quality.tiers == ["北大核心", "AMI核心", "CSSCI"]
    assert [(e.tier, e.text) for e in quality.tier_evidence][0] == ("北大核心", "北大核心 AMI核心 CSSCI")
    assert (quality.composite_impact, quality.aggregate_impact, quality.metric_year) == (9.597, 4.913, 2025)
    assert (quality.state, quality.source_url, quality.parser) == ("present", JOURNAL_URL, PARSER_VERSION)
    assert parse_journal(page("journal-core.html"), JOURNAL_URL, "Law Review").identity_basis == "translated_title"


@pytest.mark.parametrize(
    ("requested", "basis"),
    [
        ("开放大学学报", "current_title"),
        ("Journal of Open University", "translated_title"),
        ("广播电视大学学报", "former_title"),
        ("电大学刊。", "former_title"),
    ],
)
def test_journal_identity_basis(requested: str, basis: str) -> None:
    assert parse_journal(page("journal-former.html"), JOURNAL_URL, requested).identity_basis == basis


@pytest.mark.parametrize("requested", ["大学学报", "", "开放大学"])
def test_journal_identity_needs_an_exact_name(requested: str) -> None:
    problem = error_of(parse_journal, page("journal-former.html"), JOURNAL_URL, requested)
    assert problem.code == "SOURCE_IDENTITY_UNCONFIRMED"
    assert problem.details == {"requested_source": requested, "observed_source": "开放大学学报"}


def test_journal_tier_filters_and_metrics() -> None:
    quality = parse_journal(page("journal-former.html"), JOURNAL_URL, "开放大学学报")
    # Label-sized elements only, 收录： label allowed, word boundaries, nothing from the h3 or <aside>.
    assert quality.tiers == ["CSSCI扩展版", "AMI综合评价入库", "EI", "SCI-E"]
    assert quality.tier_evidence[0].text == "收录：CSSCI扩展版、AMI综合评价入库"
    assert quality.composite_impact is None  # printed twice: unknown
    assert quality.aggregate_impact == 0.876
    assert quality.metric_year == 2024 and quality.state == "present"


JOURNAL_2026_TAGS = (
    '<html><body><dl class="journalInfo"><dd class="infobox"><h3 class="titbox titbox1">法学评论</h3>'
    '<p class="journalType journalType2"><span title="北大核心期刊">北大核心期刊</span><span title="WJCI">WJCI</span>'
    '<span title="AMI">AMI</span><span title="CSSCI">CSSCI</span></p>{extra}</dd></dl></body></html>'
)


def test_journal_tags_in_their_2026_spelling() -> None:
    quality = parse_journal(JOURNAL_2026_TAGS.format(extra=""), JOURNAL_URL, "法学评论")
    assert quality.tiers == ["北大核心", "WJCI", "AMI", "CSSCI"]
    assert quality.tier_evidence[0].text == "北大核心期刊"


def test_journal_tags_cas_jst_scopus_and_excellence_are_read_with_the_others() -> None:
    extra = '<p class="journalType"><span>CAS</span><span>JST</span><span>Scopus</span><span>卓越期刊</span></p>'
    quality = parse_journal(JOURNAL_2026_TAGS.format(extra=extra), JOURNAL_URL, "法学评论")
    assert quality.tiers == ["北大核心", "WJCI", "AMI", "CSSCI", "CAS", "JST", "Scopus", "卓越期刊"]
    # Whole tags only: a longer word that merely starts with one is no tag.
    assert parse_journal(JOURNAL_2026_TAGS.format(extra="<p>CASE</p>"), JOURNAL_URL, "法学评论").tiers[-1] == "CSSCI"


def test_journal_bare_ami_tag_gives_way_to_a_levelled_one() -> None:
    levelled = JOURNAL_2026_TAGS.format(extra="<ul><li>AMI核心</li></ul>")
    assert parse_journal(levelled, JOURNAL_URL, "法学评论").tiers == ["北大核心", "WJCI", "CSSCI", "AMI核心"]


def test_journal_heading_markup_is_matched_to_the_entity() -> None:
    sidebar = '<div class="related"><h3 class="titbox">其他期刊<p>Other Review</p></h3></div>'
    html = page("journal-core.html").replace("<body>", "<body>" + sidebar)
    assert parse_journal(html, JOURNAL_URL, "Law Review").identity_basis == "translated_title"
    assert error_of(parse_journal, html, JOURNAL_URL, "Other Review").code == "SOURCE_IDENTITY_UNCONFIRMED"


def test_journal_without_metrics_is_unknown() -> None:
    quality = parse_journal(page("journal-no-metrics.html"), JOURNAL_URL, "某大学学报(社会科学版)")
    assert quality.state == "unknown" and quality.tiers == [] and quality.composite_impact is None
    assert quality.canonical_title == "某大学学报（社会科学版）"


# The 2024+ 基本信息 list (spec §5: ``ul#JournalBaseInfo``, ``li > p.hostUnit > label + span``).
JOURNAL_BASE_INFO = (
    '<html><body><dl class="journalInfo"><dd class="infobox"><h3 class="titbox titbox1">法学评论</h3>'
    '<p class="journalType journalType2"><span title="CSSCI">CSSCI</span></p><ul id="JournalBaseInfo">'
    '<li><p class="hostUnit"><label>主办单位：</label><span title="武汉大学">武汉大学</span></p></li>'
    '<li><p class="hostUnit"><label>{issn_label}</label><span title="{issn}">{issn}</span></p></li>'
    '<li><p class="hostUnit"><label>CN：</label><span title="{cn}">{cn}</span></p></li>'
    '</ul></dd></dl></body></html>'
)


@pytest.mark.parametrize(
    ("label", "issn", "cn", "want"),
    [
        ("ISSN：", "1004-1303", "42-1090/D", ("1004-1303", "42-1090/D")),
        ("ISSN:", "1674-733x", "11-5847/TP", ("1674-733X", "11-5847/TP")),  # ASCII colon, lower-case check digit
        ("ISSN：", "１００４－１３０３", "４２－１０９０／Ｄ", ("1004-1303", "42-1090/D")),  # full-width forms
        ("ISSN：", "10041303", "42-1090/D", ("1004-1303", "42-1090/D")),  # no hyphen
        ("ISSN：", "1004-1304", "", ("", "")),  # a wrong check digit is a misread, not an ISSN
        ("主管单位：", "1004-1303", "", ("", "")),  # no ISSN label
    ],
)
def test_journal_issn_and_cn_from_the_base_info(label: str, issn: str, cn: str, want: tuple[str, str]) -> None:
    quality = parse_journal(JOURNAL_BASE_INFO.format(issn_label=label, issn=issn, cn=cn), JOURNAL_URL, "法学评论")
    assert (quality.issn, quality.cn) == want


@pytest.mark.parametrize(("variant", "want"), [("plain", ("1003-1707", "11-1030/D")), ("host_unit", ("1003-1707", "11-1030/D")), ("missing", ("", ""))])
def test_journal_issn_on_the_simulators_page(variant: str, want: tuple[str, str]) -> None:
    journal = JOURNALS_BY_KEY["ZGFX"]
    html = journal_page(journal, Scenario(journal_issn=variant), [])
    quality = parse_journal(html, JOURNAL_URL, "政法研究通讯")
    assert (quality.issn, quality.cn, quality.identity_basis) == (*want, "former_title")
    assert quality.tiers == ["CSSCI", "北大核心", "AMI顶级"]


def test_journal_issn_outside_the_info_box_is_read_from_the_base_info_list_only() -> None:
    html = JOURNAL_BASE_INFO.format(issn_label="ISSN：", issn="1004-1303", cn="42-1090/D")
    moved = html.replace('<ul id="JournalBaseInfo">', '</dd></dl><ul id="JournalBaseInfo">').replace("</ul></dd></dl>", "</ul>")
    assert parse_journal(moved, JOURNAL_URL, "法学评论").issn == "1004-1303"
    decoy = JOURNAL_2026_TAGS.format(extra="").replace("</body>", "<aside><p>ISSN：1000-0933</p></aside></body>")
    assert parse_journal(decoy, JOURNAL_URL, "法学评论").issn == ""


def test_journal_without_entity() -> None:
    problem = error_of(parse_journal, page("journal-missing.html"), JOURNAL_URL, "法学评论")
    assert problem.code == "SOURCE_SCHEMA_UNSUPPORTED" and problem.message == "来源页没有可辨认的期刊实体"


# --------------------------------------------------------------------------------------------
# response classification (§8.1)


@pytest.mark.parametrize(
    ("status", "url", "body", "code"),
    [
        (429, GRID_URL, "", "RATE_LIMITED"),
        (200, GRID_URL, "<html><head><title> 安全验证 </title></head></html>", "VERIFICATION_REQUIRED"),
        (200, GRID_URL, '<form name="vericodeForm"><div class="verifycode"><input id="vericode"></div></form>', "VERIFICATION_REQUIRED"),
        (200, GRID_URL, "<input id=vericode>", "VERIFICATION_REQUIRED"),
        (200, "https://kns.cnki.net/verify/home?captchaType=x", "<div id=app></div>", "VERIFICATION_REQUIRED"),
        (200, DETAIL_URL, "<title>知网节超时验证</title><div>请点击</div>", "VERIFICATION_REQUIRED"),
        (403, GRID_URL, '{"code":403,"message":"https://kns.cnki.net/verify/home?x=1"}', "VERIFICATION_REQUIRED"),
        (401, DETAIL_URL, "", "LOGIN_REQUIRED"),
        (200, "https://login.cnki.net/login/?ReturnURL=x", "<form></form>", "LOGIN_REQUIRED"),
        (403, DETAIL_URL, "<p>Forbidden</p>", "ACCESS_DENIED"),
        (200, DETAIL_URL, "<body><p>您没有该资源的访问权限</p></body>", "ACCESS_DENIED"),
        (200, DETAIL_URL, "<body><p>机构未订购该资源</p></body>", "ACCESS_DENIED"),
        (404, DETAIL_URL, "", "LOCATOR_EXPIRED"),
        (500, GRID_URL, "", "SITE_UNAVAILABLE"),
        (503, GRID_URL, "", "SITE_UNAVAILABLE"),
        (200, GRID_URL, "<p>系统检测到异常访问，请稍后再试</p>", "RATE_LIMITED"),
        (200, GRID_URL, '<div id="briefBox"><p class="no-content" value="">抱歉，暂无数据，请稍后重试。</p></div>', "SITE_TEMPORARILY_EMPTY"),
    ],
)
def test_classify_response(status: int, url: str, body: str, code: str) -> None:
    problem = classify_response(status, url, body)
    assert problem is not None and problem.code == code
    assert problem.details == {"status": status, "url": url}


@pytest.mark.parametrize(
    ("status", "url", "body"),
    [
        (200, GRID_URL, "grid-core.html"),
        (200, GRID_URL, "grid-zero-total.html"),
        (200, DETAIL_URL, "detail-journal-2026.html"),  # parked slider text is not a challenge
        (200, READER_URL, "reader-fulltext.html"),
        (200, GRID_URL, "grid-changed-login.html"),  # left to the parser
    ],
)
def test_classify_response_passes_normal_pages(status: int, url: str, body: str) -> None:
    assert classify_response(status, url, page(body)) is None


def test_classify_response_samples() -> None:
    assert classify_response(200, "https://kns.cnki.net/kns8s/defaultresult/index", sample("hunnu-kns8s-results-page-2026.redacted.html")) is None
    verify = classify_response(200, "https://kns.cnki.net/verify/home", sample("hushiliang-verify-home-challenge.constructed.html"))
    assert verify is not None and verify.code == "VERIFICATION_REQUIRED"
    rejected = sample("azazo1-brief-grid-no-content.trimmed.html").splitlines()[-1]
    assert classify_response(200, GRID_URL, rejected) is None  # the parser reports the reason
    # A denial sentence on a page that has its content is not a denial.
    denied_text = page("detail-core.html").replace("参考文献中 CSSCI", "机构未订购的全文需购买")
    assert classify_response(200, DETAIL_URL, denied_text) is None


def test_classify_response_too_large() -> None:
    problem = classify_response(200, GRID_URL, "x" * (8 * 1024 * 1024 + 1))
    assert problem is not None and problem.code == "RESPONSE_TOO_LARGE"


# --------------------------------------------------------------------------------------------
# live-page inspection (§8.2) and session identity (§8.4)


@pytest.mark.parametrize(
    ("html", "url"),
    [
        ('<iframe src="https://turing.captcha.qcloud.com/x" title="验证"></iframe>', DETAIL_URL),
        ('<div id="tCaptchaDyMainWrap">拖动下方拼图完成验证</div>', DETAIL_URL),
        ('<div class="geetest_panel"></div>', DETAIL_URL),
        ('<div id="nc_1_wrapper"></div>', DETAIL_URL),
        ('<div style="position:fixed;top:120px" id="tcaptcha_transform_dy">拖动下方拼图完成验证</div>', DETAIL_URL),
        ('<form name="vericodeForm"><div class="verifycode"><input id="vericode"><a id="changeVercode">换一张</a></div></form>', GRID_URL),
        ("<title>安全验证</title>", "https://kns.cnki.net/kns8s/AdvSearch"),
        ('<div id="app"></div>', "https://kns.cnki.net/verify/home"),
    ],
)
def test_inspect_challenges(html: str, url: str) -> None:
    assert inspect_live_page(html, url).state == "challenge"


@pytest.mark.parametrize(
    "html",
    [
        '<div class="verification-component" style="position:absolute;top:-1000000px"><div id="tcaptcha_transform_dy">拖动下方拼图完成验证</div></div>',
        '<div class="geetest_panel" style="display: none"></div>',
        '<div class="verifycode"><input id="vericode"></div>',  # no refresh control
        '<iframe src="https://example.cnki.net/ads"></iframe>',
    ],
)
def test_inspect_hidden_or_partial_widgets_are_not_challenges(html: str) -> None:
    assert inspect_live_page(html, DETAIL_URL).state == "ready"


def test_inspect_samples_and_reader_slider() -> None:
    results = inspect_live_page(sample("hunnu-kns8s-results-page-2026.redacted.html"), "https://kns.cnki.net/kns8s/defaultresult/index")
    assert results.state == "ready" and results.institutions == ["示例大学图书馆"] and results.identity_ready
    assert not results.personal
    verify = inspect_live_page(sample("hushiliang-verify-home-challenge.constructed.html"), "https://kns.cnki.net/verify/home")
    assert verify.state == "challenge"
    slider = inspect_live_page(page("reader-slider.html"), READER_URL)
    assert slider.state == "challenge" and slider.reason == "阅读页滑动验证"
    assert inspect_live_page(page("reader-trial.html"), READER_URL).state == "ready"


def test_inspect_login_prompts() -> None:
    form = '<form><input type="text" name="u"><input type="password" name="p"></form>'
    assert inspect_live_page(form, "https://login.cnki.net/login/").state == "login"
    assert inspect_live_page(form, "https://kns.cnki.net/kns8s/AdvSearch").state == "ready"
    hidden = '<div style="display:none"><input type="password"></div>'
    assert inspect_live_page(hidden, "https://login.cnki.net/login/").state == "ready"
    frame = '<iframe src="https://passport.cnki.net/sso/frame"></iframe>'
    assert inspect_live_page(frame, DETAIL_URL).state == "login"


def test_inspect_denied_only_without_content() -> None:
    denied = inspect_live_page("<body><p>您没有阅读该文献的权限</p></body>", READER_URL)
    assert denied.state == "denied" and denied.reason == "您没有阅读该文献的权限"
    with_body = inspect_live_page('<div id="paperRead">无权访问的提示</div>', READER_URL)
    assert with_body.state == "ready"


def test_session_institution_from_samples() -> None:
    session = parse_session(sample("hunnu-kcms2-detail-newspaper-2026.modelled.html"))
    assert (session.personal, session.institution, session.institution_evidence) == ("not_observed", "observed", ["湖南师范大学"])
    assert (session.permission_scope, session.evidence_source) == ("unknown", "kns_header") and session.observed_at


def test_session_personal_and_legacy_headers() -> None:
    personal = parse_session(page("session-personal.html"))
    assert (personal.personal, personal.personal_evidence) == ("authenticated", ["张用户"])
    assert personal.institution == "not_observed"  # 机构登录 is a placeholder, not a name
    legacy = parse_session(page("session-legacy.html"))
    assert (legacy.personal, legacy.institution, legacy.institution_evidence) == ("authenticated", "observed", ["某大学图书馆"])
    anonymous = parse_session(page("session-anonymous.html"))
    assert (anonymous.personal, anonymous.institution) == ("not_observed", "not_observed")
    assert inspect_live_page(page("session-anonymous.html"), "https://kns.cnki.net/kns8s/AdvSearch").identity_ready


# --------------------------------------------------------------------------------------------
# download popups (§7.2)


@pytest.mark.parametrize(
    "text",
    ["您的账户余额不足，请充值", "贵机构未订购该资源", "您无权下载", "超出下载限额", "超出今日下载次数限制", "来源应用不正确(01)", "会话已经结束，请返回原页面刷新"],
)
def test_download_refusal(text: str) -> None:
    assert parse_download_refusal(f"<html><body><div class=msg>{text}</div></body></html>") == text


def test_download_refusal_ignores_ordinary_pages_and_late_text() -> None:
    assert parse_download_refusal("<body><p>下载中，请稍候</p></body>") is None
    assert parse_download_refusal("<body><p>" + "说明" * 200 + "余额不足</p></body>") is None


# --------------------------------------------------------------------------------------------
# LIVE_PAGE_SCRIPT in a real Chromium: visibility that static HTML cannot tell


@pytest.mark.browser
def test_live_page_script_marks_invisible_elements(tmp_path: Path, chromium: str) -> None:
    import subprocess

    from cnki_mcp.pages.page_state import LIVE_PAGE_SCRIPT

    html = tmp_path / "live.html"
    html.write_text(
        "<html><head><style>.gone{display:none}</style></head><body>"
        '<div class="geetest_panel gone">样式表隐藏</div>'
        '<div id="tcaptcha_transform_dy" style="position:absolute;top:-1000000px">拖动下方拼图完成验证</div>'
        '<div class="captcha-dialog" style="width:200px;height:50px">请完成安全验证</div>'
        '<div class="ecp_header_unitName">示例大学图书馆</div>'
        f"<script>{LIVE_PAGE_SCRIPT};</script></body></html>",
        encoding="utf-8",
    )
    done = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", html.as_uri()],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    dom = done.stdout
    state = inspect_live_page(dom, DETAIL_URL)
    assert state.state == "challenge" and state.institutions == ["示例大学图书馆"]  # the visible dialog
    without_dialog = dom.replace('class="captcha-dialog"', 'class="notice"')
    assert inspect_live_page(without_dialog, DETAIL_URL).state == "ready"
    # Without the marks, static HTML takes the stylesheet-hidden GeeTest panel for a challenge.
    unmarked = without_dialog.replace("data-cnki-hidden", "data-x")
    assert inspect_live_page(unmarked, DETAIL_URL).state == "challenge"


def test_refusal_in_url_reads_the_error_pages_message() -> None:
    url = ("https://kns.cnki.net/kns8s/ErrorMsg.html?errorMsg=%E5%AF%B9%E4%B8%8D%E8%B5%B7%EF%BC%8C%E6%9C%AC%E5%88%8A"
           "%E5%8F%AA%E6%94%B6%E5%BD%95%E9%A2%98%E5%BD%95%E4%BF%A1%E6%81%AF&errorCode=-1")
    assert refusal_in_url(url) == "对不起，本刊只收录题录信息"
    assert refusal_in_url("https://bar.cnki.net/bar/ErrorMsg.html") == "知网错误页（没有给出原因）"
    assert refusal_in_url("https://kns.cnki.net/kns8s/AdvSearch?errorMsg=x") is None
    assert refusal_in_url("https://evil.example/ErrorMsg.html?m=%E6%9C%AA%E8%AE%A2%E8%B4%AD") is None


def test_download_refusal_texts_of_every_generation() -> None:
    for text in ("对不起，本刊只收录题录信息，暂不提供原文下载", "对不起，贵单位没有订购该专辑，请您与贵单位图书馆联系订购！",
                 "产品不在有效期范围之内！", "对不起，您的操作太过频繁！请退出后重新登录。"):
        assert parse_download_refusal(f"<body><p>{text}</p></body>") == text


@pytest.mark.parametrize("digits", [16, 29, 40, 4000])
def test_a_count_of_too_many_digits_is_unsupported_not_a_crash(digits: int) -> None:
    assert error_of(parse_count, "9" * digits).code == "PARSER_UNSUPPORTED"  # before: decimal.InvalidOperation from 29
    assert error_of(parse_count, "1" * digits + ".5万").code == "PARSER_UNSUPPORTED"
    assert parse_count("9" * 15) == 10**15 - 1
