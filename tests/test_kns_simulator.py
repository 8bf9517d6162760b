"""HTTP-level tests of the local CNKI simulator (tests/kns), plus one real-browser check."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import shutil
import ssl
import time
from typing import Any
from urllib.parse import urlencode, urlsplit

import lxml.html
import pytest

from cnki_mcp.core.clock import within
from tests.harness import chromium_on_cdp
from tests.kns.corpus import Paper
from tests.kns.server import KnsSimulator

CTX = ssl._create_unverified_context()


class Reply:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    @property
    def text(self) -> str:
        return self.body.decode("utf-8")

    @property
    def doc(self) -> Any:
        return lxml.html.fromstring(self.text)

    def css(self, sel: str) -> list[Any]:
        return self.doc.cssselect(sel)


def fetch(sim: KnsSimulator, url: str, method: str = "GET", form: dict[str, Any] | None = None,
          headers: dict[str, str] | None = None) -> Reply:
    """One request over TLS to the simulator with the URL's host as Host and SNI."""
    if url.startswith("//"):
        url = "https:" + url
    parts = urlsplit(url)
    conn = http.client.HTTPSConnection("127.0.0.1", sim.port, context=CTX, timeout=10)
    h = {"Host": parts.hostname or ""}
    body = None
    if form is not None:
        body = urlencode(form)
        h["Content-Type"] = "application/x-www-form-urlencoded; charset=UTF-8"
        h["X-Requested-With"] = "XMLHttpRequest"
    h.update(headers or {})
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    try:
        conn.request(method, path or "/", body=body, headers=h)
        r = conn.getresponse()
        return Reply(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
    finally:
        conn.close()


def leaf(field: str, value: str, op: str = "FUZZY", logic: int = 0) -> dict[str, Any]:
    return {"Key": "mcp", "Title": field, "Logic": logic, "Field": field, "Operator": op, "Value": value,
            "Value2": "", "options": {}}


def qjson(*branches: list[dict[str, Any]], years: tuple[str, str] | None = None) -> dict[str, Any]:
    """QueryJson as the product writes it: Subject = OR of AND-branches, ControlGroup with a date item."""
    control: dict[str, Any] = {"Key": "ControlGroup", "Title": "", "Logic": 0, "Items": [], "ChildItems": []}
    if years:
        control["ChildItems"].append({"Key": ".tit-date-box", "Title": "发表时间", "Logic": 0, "ChildItems": [], "Items": [
            {"Key": ".tit-date-box", "Title": "发表时间", "Logic": 0, "Field": "PT", "Operator": 7,
             "Value": years[0], "Value2": years[1], "options": {}}]})
    groups = [{"Key": "mcp", "Title": "", "Logic": 0 if i == 0 else 1, "Items": b, "ChildItems": []}
              for i, b in enumerate(branches)]
    return {"Platform": "", "Resource": "CROSSDB", "Classid": "WD0FTY92", "Products": "",
            "QNode": {"QGroup": [{"Key": "Subject", "Title": "", "Logic": 0, "Items": [], "ChildItems": groups}, control]},
            "ExScope": "1", "SearchType": 1, "Rlang": "CHINESE", "KuaKuCode": "", "Expands": {}, "SearchFrom": 1}


def grid(sim: KnsSimulator, q: dict[str, Any] | str, page: int = 1, size: int = 20, sort: str = "",
         turnpage: str | None = None, key: str = "QueryJson") -> Reply:
    form = {"boolSearch": "true" if page == 1 else "false",
            key: q if isinstance(q, str) else json.dumps(q, ensure_ascii=False),
            "pageNum": page, "pageSize": size, "dstyle": "listmode", "sortField": sort, "sortType": "desc",
            "boolSortSearch": "false", "sentenceSearch": "false"}
    if turnpage is not None:
        form["turnpage"] = turnpage
        form["aside"] = ""
    else:
        form["CurPage"] = page
    return fetch(sim, "https://kns.cnki.net/kns8s/brief/grid", "POST", form,
                 {"Referer": "https://kns.cnki.net/kns8s/AdvSearch"})


def row_files(r: Reply) -> list[str]:
    return [a.get("data-filename") for a in r.css("table.result-table-list tbody tr a.icon-collect")]


def total(r: Reply) -> int:
    return int(r.css(".pagerTitleCell em")[0].text_content().replace(",", ""))


def names(papers: list[Paper]) -> list[str]:
    return [p.filename for p in papers]


# ---------------------------------------------------------------- pages render


def test_advsearch_page_has_the_template_capture_hooks(kns: KnsSimulator) -> None:
    r = fetch(kns, "https://kns.cnki.net/kns8s/AdvSearch")
    assert r.status == 200
    assert r.css("title")[0].text == "高级检索-中国知网"
    assert len(r.css("#gradetxt input[data-tipid]")) == 3
    assert r.css("input.btn-search") and r.css("#briefBox")
    assert "window.cnkiSearch" in r.text and "getSearchJsonInfo" in r.text and "/kns8s/brief/grid" in r.text
    assert r.css("input[name=onlyChecked][data-id=EN]")[0].get("checked") is not None
    assert r.css(".ecp_header_login_area .ecp_header_personal_loginbg")  # not logged in
    assert kns.count("search") == 1


def test_detail_pages_for_every_document_type(kns: KnsSimulator) -> None:
    seen = set()
    for p in kns.corpus.papers:
        if p.doc_type in seen:
            continue
        seen.add(p.doc_type)
        r = fetch(kns, kns.detail_url(p))
        assert r.status == 200, p.doc_type
        assert r.css("title")[0].text == f"{p.title} - 中国知网"
        if p.doc_type == "图书":
            assert not r.css(".wx-tit") and r.css(".main-book")
            continue
        assert r.css(".brief .wx-tit h1")[0].text_content().strip().startswith(p.title)
        assert [a.text_content() for a in r.css("#authorpart > span > a")][0].startswith(p.authors[0])
        assert r.css("#paramfilename")[0].get("value") == p.filename
        assert r.css("#DownLoadParts a#pdfDown")[0].get("href").startswith("https://bar.cnki.net/bar/download/order?id=")
        if p.doc_type == "报纸":
            assert r.css("#func609.source-info .top-tip a")[0].text == p.source
            assert "正文快照" in r.css(".abstract")[-1].text_content()
            assert not r.css("#ChDivSummary")
        else:
            assert r.css("span.abstract-text#ChDivSummary")[0].text == p.abstract
            assert [a.text for a in r.css("p.keywords a")] == [k + ";" for k in p.keywords]
    assert seen == {"期刊", "博士", "硕士", "会议", "报纸", "图书"}


def test_journal_article_detail_fields(kns: KnsSimulator) -> None:
    p = next(p for p in kns.corpus.papers if p.is_journal and not p.online_first and p.doi and p.funds
             and len(p.institutions) > 1)
    r = fetch(kns, kns.detail_url(p))
    tip = " ".join(r.css(".doc-top .top-tip")[0].text_content().split())
    assert tip.startswith(f"{p.source} . {p.year}") and f"({int(p.issue):02d}) : {p.pages}" in tip
    assert r.css(".top-tip a")[0].get("href").startswith("https://navi.cnki.net/knavi/detail?p=")
    orgs = r.css(".wx-tit h3.author")[1].text_content()
    assert all(o in orgs for o in p.institutions) and "1." in orgs
    assert r.css("#authorpart sup")  # affiliation numbers
    assert f"DOI：{p.doi}" in r.doc.text_content().replace(" ", "")
    assert r.css("p.funds a") and r.css("p.clc-code")[0].text == ";".join(p.clc)
    assert r.css("#tcaptcha_transform_dy")[0].get("style").find("-1000000px") > 0  # parked, off-screen


def test_detail_variants(kns: KnsSimulator) -> None:
    f = next(p for p in kns.corpus.papers if p.online_first)
    r = fetch(kns, kns.detail_url(f))
    assert r.css(".wx-tit h1 i.icon-shoufa") and "网络首发时间" in r.css(".head-time")[0].text_content()
    assert "(" not in r.css(".top-tip")[0].text_content()  # no issue citation
    t = next(p for p in kns.corpus.papers if p.doc_type == "博士")
    r = fetch(kns, kns.detail_url(t))
    assert "导师：" in r.text and "setTimeout" in r.text  # .doc-top filled by script
    assert not r.css(".top-tip a")
    kns.configure(institution_markup="orgn", abstract_tag="p", detail_meta=True, abstract_truncate=20,
                  double_download=True, detail_js=[t.filename])
    p = next(p for p in kns.corpus.papers if p.is_journal and len(p.institutions) > 1)
    r = fetch(kns, kns.detail_url(p))
    assert r.css("h3.orgn") and r.css("p#ChDivSummary")[0].text.endswith("…")
    assert r.css("input#abstract_text")[0].get("value") == p.abstract
    assert r.css('meta[name="citation_title"]')[0].get("content") == p.title
    assert len(r.css("a#pdfDown")) == 2
    r = fetch(kns, kns.detail_url(t))
    assert r.css("#root") and not r.css(".wx-tit")  # JS-rendered: nothing until the script runs


def test_locator_expiry_and_legacy_urls(kns: KnsSimulator) -> None:
    p = kns.corpus.papers[0]
    old = kns.detail_url(p)
    kns.expire_locators()
    assert fetch(kns, old).status == 404
    kns.configure(expired_locator="verify")
    r = fetch(kns, old)
    assert r.status == 302 and "/verify/home" in r.headers["location"]
    r = fetch(kns, f"https://kns.cnki.net/kcms2/article/abstract?dbcode={p.dbcode}&filename={p.filename}")
    assert r.status == 200 and p.title in r.text
    r = fetch(kns, f"https://kns.cnki.net/KCMS/detail/detail.aspx?dbcode={p.dbcode}&filename={p.filename}")
    assert r.status == 302 and "login.cnki.net" in r.headers["location"]


def test_journal_pages(kns: KnsSimulator) -> None:
    r = fetch(kns, kns.journal_url("FXPL"))
    assert r.status == 200
    box = r.css(".journalInfo .infobox")[0]
    # the translated title is a <p> inside h3.titbox (an HTML5 DOM keeps it there; libxml2 would hoist it out)
    assert '<h3 class="titbox titbox1">法学评论<p>Law Review</p></h3>' in r.text
    assert [s.text for s in box.cssselect(".journalType span")] == ["北大核心", "AMI核心", "CSSCI"]
    text = " ".join(box.text_content().split())
    assert "(2025版)复合影响因子：9.597" in text and "(2025版)综合影响因子：4.913" in text
    r = fetch(kns, "https://navi.cnki.net/knavi/journals/KFDX/detail")
    assert "曾用刊名：开放大学学报;广播电视大学学报;电大学刊" in r.css(".journalInfo .infobox")[0].text_content()
    r = fetch(kns, "https://navi.cnki.net/knavi/JournalDetail?pcode=CJFD&pykm=TSQB")
    assert r.css(".journalInfo")[0].text_content().count("复合影响因子：") == 2  # ambiguous on purpose
    assert "SCI 复合影响因子：99.99" in r.css("aside")[0].text_content()  # outside the root: must be ignored
    r = fetch(kns, "https://navi.cnki.net/knavi/journals/YXYX/detail")
    assert "影响因子" not in r.css(".journalInfo")[0].text_content()
    assert fetch(kns, "https://navi.cnki.net/knavi/detail?p=bogus").status == 404
    assert kns.count("journal") == 5


def test_journal_page_issn_variants(kns: KnsSimulator) -> None:
    lines = fetch(kns, kns.journal_url("FXPL")).css(".journalInfo .infobox .listbox p")
    assert [p.text_content() for p in lines][2:4] == ["ISSN：1004-1303", "CN：42-1090/D"]
    kns.configure(journal_issn="host_unit")
    page = fetch(kns, kns.journal_url("ZGFX"))
    rows = [(li.cssselect("p.hostUnit label")[0].text, li.cssselect("p.hostUnit span")[0].get("title"))
            for li in page.css(".journalInfo .infobox ul#JournalBaseInfo > li")]
    assert rows == [("主办单位：", "中国法学研究会"), ("出版周期：", "双月刊"), ("ISSN：", "1003-1707"),
                    ("CN：", "11-1030/D"), ("曾用刊名：", "法学前沿;政法研究通讯")]
    kns.configure(journal_issn="missing")
    text = fetch(kns, kns.journal_url("ZGFX")).css(".journalInfo")[0].text_content()
    assert "ISSN" not in text and "CN：" not in text and "曾用刊名：法学前沿;政法研究通讯" in text
    with pytest.raises(ValueError):
        kns.configure(journal_issn="hidden")


# ---------------------------------------------------------------- grid


def test_papers_without_html_reading_a_journal_page_or_in_a_listing(kns: KnsSimulator) -> None:
    journal = next(p for p in kns.corpus.papers if p.is_journal)
    other = next(p for p in kns.corpus.papers if p.is_journal and p.filename != journal.filename)
    kns.configure(no_html_entry=[journal.filename], no_journal_link=[journal.filename])
    bare, full = fetch(kns, kns.detail_url(journal)), fetch(kns, kns.detail_url(other))
    assert [a.text_content() for a in bare.css("li.btn-html a")] == []
    assert [a.text_content() for a in full.css("li.btn-html a")] == ["HTML阅读"]
    assert bare.css(".top-tip a") == []
    assert bare.css(".top-tip span")[0].text_content().startswith(f"{journal.source} . ")
    assert full.css(".top-tip a")[0].get("href") == kns.journal_url(other.source_key)
    kns.configure(no_html_entry=True, html_entry_decoy=True)
    greyed = fetch(kns, kns.detail_url(other))
    assert [a.get("style") is not None for a in greyed.css("li.btn-html a")] == [True]
    q = qjson([leaf("SU", "研究")])
    assert "DISSERTATION" in {p.resource for p in kns.expected(q)}
    kns.configure(listing_without={"DISSERTATION"})
    want = kns.expected(q)
    assert want
    assert "DISSERTATION" not in {p.resource for p in want}
    assert total(grid(kns, q)) == len(want)
    assert row_files(grid(kns, q)) == names(want[:20])


def test_grid_subject_search_sort_and_paging(kns: KnsSimulator) -> None:
    q = qjson([leaf("SU", "大语言模型", "TOPRANK")])
    want = kns.expected(q, "PT")
    assert len(want) > 40
    r1 = grid(kns, q, sort="PT")
    assert r1.status == 200 and total(r1) == len(want)
    assert row_files(r1) == names(want[:20])
    dates = [td.text for td in r1.css("td.date")]
    assert dates == sorted(dates, reverse=True)
    pages = -(-len(want) // 20)
    assert r1.css(".countPageMark")[0].text == f"1/{pages}"
    cursor = r1.css("#hidTurnPage")[0].get("value")
    assert cursor
    assert grid(kns, q, page=2, sort="PT").status == 400  # page 2 without the cursor
    r2 = grid(kns, q, page=2, sort="PT", turnpage=cursor)
    assert row_files(r2) == names(want[20:40]) and r2.css(".countPageMark")[0].text == f"2/{pages}"
    r50 = grid(kns, q, size=50, sort="CF")
    cf = kns.expected(q, "CF")
    assert row_files(r50) == names(cf[:50])
    cited = [p.cited for p in cf[:50]]
    assert cited == sorted(cited, reverse=True)
    assert row_files(grid(kns, q, sort="DFR")) == names(kns.expected(q, "DFR")[:20])
    assert row_files(grid(kns, q, sort="FFD")) == names(kns.expected(q, "FFD")[:20])
    kns.configure(turnpage="reset")
    assert grid(kns, q, page=2).css(".countPageMark")[0].text.startswith("1/")
    assert kns.count("grid") == 7


def test_grid_row_markup(kns: KnsSimulator) -> None:
    q = qjson([leaf("SU", "检索增强生成", "TOPRANK")])
    r = grid(kns, q)
    row = r.css("table.result-table-list tbody tr")[0]
    p = kns.paper(row.cssselect("a.icon-collect")[0].get("data-filename"))
    assert row.cssselect("td.seq input.cbItem[type=checkbox]")[0].get("data-cur") == "1"
    a = row.cssselect("td.name a.fz14")[0]
    assert a.text_content() == p.title and a.get("href") == kns.detail_url(p)
    assert row.cssselect("td.name i.freeIdent.is-hide")
    assert row.cssselect('td.name font[color="red"]')  # highlighted hit
    assert [x.text for x in row.cssselect("td.author a.KnowledgeNetLink")] == p.authors
    assert row.cssselect("td.data span")[0].text == p.doc_type
    assert row.cssselect("td.operat a.downloadlink")[0].get("href").startswith("https://bar.cnki.net/bar/download/order?id=")
    assert row.cssselect("a.icon-collect")[0].get("data-dbname") == p.dbcode
    assert r.css("input#briefRequest") and r.css("input#totalCnt")[0].get("value") == str(total(r))
    online = next(p for p in kns.corpus.papers if p.online_first)
    r = grid(kns, qjson([leaf("TI", online.title, "DEFAULT")]))
    tr = r.css("tbody tr")[row_files(r).index(online.filename)]
    assert tr.cssselect("b.marktip")[0].text == "网络首发" and len(tr.cssselect("td.date")[0].text) == 16


def test_grid_cited_variants_and_counts(kns: KnsSimulator) -> None:
    big = next(p for p in kns.corpus.papers if p.cited >= 12000)
    q = qjson([leaf("TI", big.title, "DEFAULT")])
    tr = grid(kns, q).css("tbody tr")[0]
    assert tr.cssselect("td.quote a")[0].text == f"{big.cited:,}"
    kns.configure(cited_class="cited", count_style="wan")
    tr = grid(kns, q).css("tbody tr")[0]
    assert not tr.cssselect("td.quote") and tr.cssselect("td.cited a")[0].text.endswith("万")


def test_querjson_title_author_not_and_years(kns: KnsSimulator) -> None:
    papers = kns.corpus.papers
    base = next(p for p in papers if p.is_journal and len(p.authors) >= 2)
    topic_word = "的"
    q = qjson([leaf("TI", topic_word), leaf("AU", base.authors[0], "DEFAULT"), leaf("KY", "不存在的词", "DEFAULT", 2)],
              years=(f"{base.year}-01-01", f"{base.year}-12-31"))
    got = row_files(grid(kns, q))
    want = [p for p in papers if topic_word in p.title and base.authors[0] in p.authors and p.date[:4] == str(base.year)]
    assert base.filename in got and sorted(got) == sorted(names(want))
    q_not = qjson([leaf("TI", topic_word), leaf("AU", base.authors[0], "DEFAULT"), leaf("TI", base.title, "DEFAULT", 2)])
    assert base.filename not in row_files(grid(kns, q_not, size=50))
    # open-ended year range
    q_from = qjson([leaf("SU", "数字经济", "TOPRANK")], years=("2022-01-01", ""))
    r = grid(kns, q_from, size=50)
    assert row_files(r) and all(td.text[:4] >= "2022" for td in r.css("td.date"))
    assert total(r) == len([p for p in kns.expected(q_from)])


def test_querjson_or_groups_exact_title_lookup(kns: KnsSimulator) -> None:
    picks = [p for p in kns.corpus.papers if p.is_journal][10:13]
    twin_title = next(t for t in {p.title for p in kns.corpus.papers}
                      if sum(p.title == t for p in kns.corpus.papers) == 2 and '"' not in t)
    branches = [[leaf("TI", f'"{p.title}"' if " " in p.title else p.title, "DEFAULT")] for p in picks]
    branches.append([leaf("TI", twin_title, "DEFAULT")])
    got = row_files(grid(kns, qjson(*branches)))
    assert set(names(picks)) <= set(got) and len(got) == len(set(got))
    assert len([f for f in got if kns.paper(f).title == twin_title]) == 2  # ambiguous locate
    quoted = next(p for p in kns.corpus.papers if p.title.startswith("“AI+"))
    assert row_files(grid(kns, qjson([leaf("TI", f'"{quoted.title}"', "DEFAULT")]))) == [quoted.filename]


def test_querjson_field_operators(kns: KnsSimulator) -> None:
    p = next(p for p in kns.corpus.papers if p.is_journal and p.doi and p.funds and p.corresponding)
    for item in (leaf("DOI", p.doi, "PREFIX"), leaf("DOI", p.doi, "DEFAULT"), leaf("FI", p.first_author, "DEFAULT"),
                 leaf("RP", p.corresponding, "DEFAULT"), leaf("AF", p.institutions[0]),
                 leaf("LY", p.source), leaf("FU", p.funds[0][:6]), leaf("CLC", p.clc[0][:2], "SUFFIX"),
                 leaf("AB", p.abstract[5:15]), leaf("KY", p.keywords[0], "DEFAULT"), leaf("TKA", p.keywords[1]),
                 leaf("FT", p.sections[1].paragraphs[0][:12]), leaf("RF", p.references[0][:10]),
                 leaf("ST", p.sections[3].title[3:])):
        got = row_files(grid(kns, qjson([item, leaf("TI", p.title, "DEFAULT")])))
        assert got == [p.filename], item
    # fuzzy splits on spaces; exact on list fields needs the whole element
    name = p.first_author
    assert p.filename not in row_files(grid(kns, qjson([leaf("AU", name[:1], "DEFAULT"), leaf("TI", p.title, "DEFAULT")])))
    assert p.filename in row_files(grid(kns, qjson([leaf("AU", name[:1]), leaf("TI", p.title, "DEFAULT")])))


def test_real_page_query_shapes(kns: KnsSimulator) -> None:
    # advanced search rows (ChildItems keyed by input[data-tipid=…]) and a lowercase form key
    rows = [{"Key": "input[data-tipid=gradetxt-1]", "Title": "主题", "Logic": 0, "ChildItems": [],
             "Items": [{"Key": "input[data-tipid=gradetxt-1]", "Title": "主题", "Logic": 0, "Field": "SU",
                        "Operator": "TOPRANK", "Value": "知识图谱", "Value2": ""}]},
            {"Key": "input[data-tipid=gradetxt-2]", "Title": "主题", "Logic": "OR", "ChildItems": [],
             "Items": [{"Key": "input[data-tipid=gradetxt-2]", "Title": "主题", "Logic": 1, "Field": "SU",
                        "Operator": "TOPRANK", "Value": "湿地", "Value2": ""}]}]
    q = {"QNode": {"QGroup": [{"Key": "Subject", "Title": "", "Logic": 0, "Items": [], "ChildItems": rows}]}}
    r = grid(kns, q, size=50, key="queryJson")
    want = [p for p in kns.corpus.papers if any("知识图谱" in t or "湿地" in t for t in p.field_values("SU"))]
    assert total(r) == len(want)
    # one-box shape: the item directly in the Subject group; JOURNAL library only
    onebox = {"Classid": "YSTT4HG0", "QNode": {"QGroup": [{"Key": "Subject", "Logic": 0, "ChildItems": [], "Items": [
        {"Field": "SU", "Value": "在线教育", "Operator": "TOPRANK", "Logic": 0, "Title": "主题"}]}]}}
    r = grid(kns, onebox, size=50)
    assert {td.text_content() for td in r.css("td.data")} == {"期刊"}
    # quality flag in ControlGroup
    q = qjson([leaf("SU", "违约金", "TOPRANK")])
    q["QNode"]["QGroup"][1]["Items"].append({"Field": "CSI", "Value": "Y", "Operator": "DEFAULT", "Logic": 0})
    files = row_files(grid(kns, q, size=50))
    assert files and all("CSSCI" in kns.corpus.journal(kns.paper(f).source_key).tiers for f in files)


def test_grid_rejected_and_empty_answers(kns: KnsSimulator) -> None:
    r = grid(kns, "{not json")
    assert r.css("p.no-content")[0].get("value").startswith("查询对象结构错误")
    r = grid(kns, {"QNode": {"QGroup": [{"Key": "ControlGroup", "Items": [], "ChildItems": []}]}})
    assert r.css("p.no-content")[0].get("value") == "查询对象结构错误, 没有指定检索分类！"
    empty = qjson([leaf("TI", "绝对不存在的题名XYZ", "DEFAULT")])
    r = grid(kns, empty)
    assert total(r) == 0 and r.css("p.no-content")[0].get("value") == ""
    kns.configure(empty_style="not_found")
    assert "未检索到相关文献" in grid(kns, empty).text
    kns.configure(empty_style="no_content")
    assert grid(kns, empty).text == '<p class="no-content" value="">抱歉，暂无数据，请稍后重试。</p>'


# ---------------------------------------------------------------- faults and counters


def test_status_bursts_then_ok_and_request_log(kns: KnsSimulator) -> None:
    q = qjson([leaf("SU", "糖尿病", "TOPRANK")])
    kns.fault("grid", "status", status=429, times=2)
    kns.fault("detail", "status", status=503, times=1, after=1)
    assert [grid(kns, q).status for _ in range(3)] == [429, 429, 200]
    p = kns.corpus.papers[3]
    assert [fetch(kns, kns.detail_url(p)).status for _ in range(3)] == [200, 503, 200]
    for code in (403, 404, 500, 502):
        kns.reset()
        kns.fault("journal", "status", status=code, times=1)
        assert fetch(kns, kns.journal_url("FXPL")).status == code
        assert fetch(kns, kns.journal_url("FXPL")).status == 200
    log = kns.requests
    assert [r.endpoint for r in log] == ["journal", "journal"] and log[0].status == 502
    kns.reset()
    grid(kns, q)
    rec = kns.requests[0]
    assert (rec.method, rec.host, rec.path, rec.endpoint) == ("POST", "kns.cnki.net", "/kns8s/brief/grid", "grid")
    assert json.loads(rec.form["QueryJson"]) == q and rec.form["pageSize"] == "20"
    assert rec.referer == "https://kns.cnki.net/kns8s/AdvSearch" and rec.headers["X-Requested-With"] == "XMLHttpRequest"
    assert kns.counts == {"grid": 1}


def test_session_cookies_are_set_on_every_answer_and_the_cookie_header_is_logged(kns: KnsSimulator) -> None:
    def answer(path: str, host: str, cookie: str = "") -> list[str]:
        conn = http.client.HTTPSConnection("127.0.0.1", kns.port, context=CTX, timeout=10)
        try:
            conn.request("GET", path, headers={"Host": host, **({"Cookie": cookie} if cookie else {})})
            r = conn.getresponse()
            r.read()
            return r.msg.get_all("Set-Cookie") or []
        finally:
            conn.close()

    assert answer("/kns8s/AdvSearch", "kns.cnki.net") == []  # by default the simulator sets no cookie
    kns.configure(session_cookies={"SID_kns8": "sid-1", "Ecp_Session": "tok-2"})
    set_by = {host: answer(path, host, "SID_kns8=sid-1") for host, path in (
        ("kns.cnki.net", "/kns8s/AdvSearch"), ("login.cnki.net", "/login/"), ("bar.cnki.net", "/bar/download/order"))}
    assert set_by == dict.fromkeys(set_by, [
        "SID_kns8=sid-1; Domain=.cnki.net; Path=/; Secure; HttpOnly", "Ecp_Session=tok-2; Domain=.cnki.net; Path=/; Secure; HttpOnly"])
    assert [r.headers.get("Cookie") for r in kns.requests] == [None, "SID_kns8=sid-1", "SID_kns8=sid-1", "SID_kns8=sid-1"]


def test_captcha_on_nth_request_until_solved(kns: KnsSimulator) -> None:
    q = qjson([leaf("SU", "绿色金融", "TOPRANK")])
    kns.captcha("grid", after=2)
    assert [grid(kns, q).status for _ in range(2)] == [200, 200]
    for _ in range(2):
        r = grid(kns, q)
        assert r.status == 302 and r.headers["location"].startswith("https://kns.cnki.net/verify/home?")
    assert kns.challenge_pending
    v = fetch(kns, r.headers["location"])
    assert v.status == 200 and v.css("title")[0].text == "安全验证" and v.css("#app")[0].text_content() == ""
    status = "https://kns.cnki.net/verify/status?kind=captcha"
    assert json.loads(fetch(kns, status).text) == {"pending": True, "solves": 0}  # what challenge pages poll
    assert fetch(kns, "https://kns.cnki.net/verify/solve", "POST", {}).status == 200  # the page's solve button
    assert json.loads(fetch(kns, status).text) == {"pending": False, "solves": 1}
    assert not kns.challenge_pending and grid(kns, q).status == 200
    # other styles, solved through the test hook
    kns.reset()
    kns.captcha("grid", style="vericode")
    r = grid(kns, q)
    assert r.css("form[name=vericodeForm] .verifycode #vericode") and r.css(".verifycode #changeVercode")
    kns.solve()
    assert total(grid(kns, q)) > 0
    kns.reset()
    kns.captcha("grid", style="json403")
    r = grid(kns, q)
    assert r.status == 403 and json.loads(r.text)["code"] == -403 and "/verify/home" in json.loads(r.text)["message"]
    kns.reset()
    p = kns.corpus.papers[0]
    kns.captcha("detail", style="timeout")
    assert fetch(kns, kns.detail_url(p)).css("title")[0].text == "知网节超时验证"
    kns.reset()
    kns.captcha("journal", style="title")
    assert fetch(kns, kns.journal_url("FXPL")).css("title")[0].text == "安全验证"
    kns.reset()
    kns.captcha("detail", style="tencent")
    r = fetch(kns, kns.detail_url(p))
    assert r.css("#tCaptchaDyMainWrap") and "-1000000px" not in r.css("#tcaptcha_transform_dy")[0].get("style")
    assert r.css("button.sim-solve")


def test_login_wall_denied_empty_delay_truncate(kns: KnsSimulator) -> None:
    p = kns.corpus.papers[1]
    kns.fault("detail", "login", times=1)
    r = fetch(kns, kns.detail_url(p))
    assert r.status == 302 and r.headers["location"].startswith("https://login.cnki.net/login/?ReturnURL=")
    login = fetch(kns, r.headers["location"])
    assert login.css("input[type=password]")
    kns.reset()
    kns.fault("detail", "denied", times=1)
    assert "机构未订购" in fetch(kns, kns.detail_url(p)).text
    q = qjson([leaf("SU", "湿地生态", "TOPRANK")])
    kns.fault("grid", "empty", times=1)
    first = grid(kns, q)
    assert "暂无数据，请稍后重试" in first.text and not first.css("tbody tr")
    assert first.css("tbody tr") == [] and total(grid(kns, q)) > 0
    kns.fault("grid", "reject", times=1, reason="检索式过长")
    assert grid(kns, q).css("p.no-content")[0].get("value") == "检索式过长"
    kns.fault("journal", "delay", seconds=0.3, times=1)
    t0 = time.monotonic()
    fetch(kns, kns.journal_url("FXPL"))
    assert time.monotonic() - t0 >= 0.3
    t0 = time.monotonic()
    fetch(kns, kns.journal_url("FXPL"))
    assert time.monotonic() - t0 < 0.3
    kns.configure(latency={"journal": 0.2})
    t0 = time.monotonic()
    fetch(kns, kns.journal_url("FXPL"))
    assert time.monotonic() - t0 >= 0.2
    kns.fault("detail", "truncate", times=1, fraction=0.3)
    cut = fetch(kns, kns.detail_url(p))
    assert cut.status == 200 and "</html>" not in cut.text and "#DownLoadParts" not in cut.text
    assert "</html>" in fetch(kns, kns.detail_url(p)).text
    kns.fault("detail", "truncate", times=1, mode="connection")
    with pytest.raises(http.client.IncompleteRead):
        fetch(kns, kns.detail_url(p))


# ---------------------------------------------------------------- login state, download, reader


def test_login_state_header_evidence(kns: KnsSimulator) -> None:
    adv = "https://kns.cnki.net/kns8s/AdvSearch"
    r = fetch(kns, adv)
    assert not r.css(".ecp_header_unitName") and not r.css(".ecp_header_personalName_loginbg")
    assert "机构登录" in r.css(".ecp_header_login_area")[0].text_content()
    kns.configure(login="institution", institution_name="湖滨师范大学")
    r = fetch(kns, adv)
    assert r.css(".ecp_header_login_status.ecp_header_login_status1 .ecp_header_unitName")[0].get("title") == "湖滨师范大学"
    assert r.css(".ecp_header_personal_loginbg")  # 个人登录 stays visible after an institutional login
    # a person logs in through login.cnki.net: the header then names them
    r = fetch(kns, "https://login.cnki.net/login/doLogin", "POST", {"username": "张三", "password": "x", "ReturnURL": adv})
    assert r.status == 302 and r.headers["location"] == adv and kns.scenario.login == "both"
    r = fetch(kns, "https://www.cnki.net/")
    assert r.css(".ecp_header_personalName_loginbg")[0].get("title") == "张三"
    assert [a.text for a in r.css("a") if a.text == "退出登录"] and r.css(".ecp_header_unitName")
    fetch(kns, "https://login.cnki.net/logout")
    assert kns.scenario.login == "none"


def test_download_flow(kns: KnsSimulator) -> None:
    p = next(p for p in kns.corpus.papers if p.is_journal and not p.free)
    ref = {"Referer": kns.detail_url(p)}
    order = kns.order_url(p, "pdf")
    r = fetch(kns, order)
    assert r.status == 200 and "来源应用不正确(01)" in r.text  # no Referer
    r = fetch(kns, order, headers=ref)
    assert r.status == 302 and r.headers["location"].startswith("//login.cnki.net/login/")
    kns.configure(login="personal")
    r = fetch(kns, order, headers=ref)
    assert r.status == 302 and r.headers["location"].startswith("//bar.cnki.net/bar/download/file?id=")
    f = fetch(kns, r.headers["location"], headers=ref)
    assert f.headers["content-type"] == "application/pdf" and f.headers["content-disposition"].startswith("attachment;")
    assert f.body.startswith(b"%PDF-") and b"%%EOF" in f.body[-2048:] and len(f.body) > 100
    r = fetch(kns, kns.order_url(p, "caj"), headers=ref)
    caj = fetch(kns, r.headers["location"])
    assert caj.body[:2] == b"HN" and len(caj.body) > 100
    for mode, text in (("balance", "余额不足"), ("unsubscribed", "未订购"), ("no_permission", "无权限"),
                       ("session_end", "会话已经结束")):
        kns.configure(download=mode)
        assert text in fetch(kns, order, headers=ref).text
    kns.configure(download="html")
    r = fetch(kns, order, headers=ref)
    assert fetch(kns, r.headers["location"]).headers["content-type"].startswith("text/html")
    kns.configure(download="ok")
    kns.expire_locators()
    assert "会话已经结束" in fetch(kns, order, headers=ref).text
    assert kns.count("download") == 10 and kns.count("file") == 3


def test_reader_full_trial_lazy_and_slider(kns: KnsSimulator) -> None:
    p = next(p for p in kns.corpus.papers if p.is_journal and not p.free and p.references)
    ref = {"Referer": kns.detail_url(p)}
    detail = fetch(kns, kns.detail_url(p))
    html_link = [a for a in detail.css("a") if a.text == "HTML阅读"][0].get("href")
    r = fetch(kns, html_link, headers=ref)
    assert r.status == 302 and "/nzkhtml/xmlRead/trialRead.html?" in r.headers["location"]
    trial = fetch(kns, r.headers["location"])
    assert len(trial.css("#paperRead .ChapterWrap")) == 1 and "试读结束" not in trial.text
    assert len(trial.css(".catalogboxs .tit")) == len(p.sections) + 1
    kns.configure(login="institution", reader_url="reader_xml")
    r = fetch(kns, html_link, headers=ref)
    assert "/reader/xml?invoice=" in r.headers["location"] and "loginType=trialRead" not in r.headers["location"]
    full = fetch(kns, r.headers["location"])
    assert full.css("#paperRead.ChapterContainer .ChapterH1 h1.Chapter")[0].text == p.title
    assert len(full.css("#paperRead .ChapterWrap")) == 2  # the rest arrives lazily
    chapter = full.text.split("var next = ")[1].split("url = ")[1].split(";")[0].strip('"')
    rest = fetch(kns, "https://kns.cnki.net" + chapter + "&start=2")
    assert "h3" in rest.text and 'id="bibliography"' in rest.text
    assert kns.count("reader_part") == 1
    kns.configure(reader="trial")
    assert "loginType=trialRead" in fetch(kns, html_link, headers=ref).headers["location"]
    kns.configure(reader="full", reader_slider=True)
    loc = fetch(kns, html_link, headers=ref).headers["location"]
    box = fetch(kns, loc).css(".read-btn-boxXml")
    assert box and "滑动验证，继续阅读全文" in box[0].text_content() and box[0].cssselect(".slider-wrapper")
    kns.solve()
    assert not fetch(kns, loc).css(".read-btn-boxXml")


def reader_link(kns: KnsSimulator, p: Paper) -> str:
    """Where the detail page's 「HTML阅读」 order URL redirects (the reader URL of this visit)."""
    ref = {"Referer": kns.detail_url(p)}
    return fetch(kns, kns.order_url(p, "html"), headers=ref).headers["location"]


def reader_json(kns: KnsSimulator, reader_url: str) -> dict[str, Any]:
    query = urlsplit("https:" + reader_url).query
    return json.loads(fetch(kns, f"https://kns.cnki.net/ossapi/kreader-api/v1/xml/data?{query}&datatype=all").text)


def test_kreader_url_says_trial_read_for_full_texts_too(kns: KnsSimulator) -> None:
    p = next(p for p in kns.corpus.papers if p.is_journal and not p.free and p.references)
    kns.configure(reader_generation="kreader", reader="full")
    first = reader_link(kns, p)
    assert first.startswith("//kns.cnki.net/reader/xml?invoice=") and first.endswith("&loginType=trialRead")
    assert "&dflag=xml&" in first and f"&filename={p.filename}&" in first
    assert reader_link(kns, p) != first  # a fresh invoice on every visit
    shell = fetch(kns, first)
    assert shell.css("title")[0].text == f"HTML阅读-{p.title}" and shell.css("#app")[0].text is None
    assert "/ossapi/kreader-api/v1/xml/data?" in shell.text and "#paperRead" not in shell.text


def test_kreader_data_full_trial_and_stale_invoices(kns: KnsSimulator) -> None:
    p = next(p for p in kns.corpus.papers if p.is_journal and not p.free and p.references)
    kns.configure(reader_generation="kreader", reader="full")
    full = reader_json(kns, reader_link(kns, p))
    assert full["code"] == 200 and full["data"]["metadata"]["fileName"] == p.filename
    kinds = [item["type"] for item in full["data"]["fullText"]]
    assert kinds.count("CATALOG") == len(p.sections) and {"PARAGRAPH", "FIGURE", "TABLE"} <= set(kinds)
    assert len(full["data"]["references"]) == len(p.references)
    kns.configure(reader="trial")
    trial = reader_json(kns, reader_link(kns, p))["data"]
    assert [item["type"] for item in trial["fullText"][-2:]] == ["CATALOG", "CATALOG"]  # the catalogue goes on
    assert trial["references"] == [] and "isTrial" not in trial["metadata"]
    kns.configure(reader_trial_flag=True)
    assert reader_json(kns, reader_link(kns, p))["data"]["metadata"]["isTrial"] is True
    old = reader_link(kns, p)
    kns.expire_locators()
    assert reader_json(kns, old)["code"] == 401
    assert reader_json(kns, "//kns.cnki.net/reader/xml?invoice=forged&filename=X")["code"] == 401
    assert kns.count("reader_data") == 5


def test_kreader_data_answers_once_per_invoice_when_asked(kns: KnsSimulator) -> None:
    p = next(p for p in kns.corpus.papers if p.is_journal and p.references)
    kns.configure(reader_generation="kreader", reader="full", reader_data="once")
    link = reader_link(kns, p)
    assert reader_json(kns, link)["code"] == 200
    assert reader_json(kns, link)["code"] == 401
    kns.configure(reader_data="ok")
    link = reader_link(kns, p)
    assert [reader_json(kns, link)["code"] for _ in range(2)] == [200, 200]
    kns.fault("reader_data", "status", status=500, after=1)
    query = urlsplit("https:" + reader_link(kns, p)).query
    data_url = f"https://kns.cnki.net/ossapi/kreader-api/v1/xml/data?{query}&datatype=all"
    assert [fetch(kns, data_url).status for _ in range(2)] == [200, 500]  # the page's call passes, the next fails


def test_reader_in_a_frame_and_a_decoy_entry(kns: KnsSimulator) -> None:
    p = next(p for p in kns.corpus.papers if p.is_journal and p.references)
    kns.configure(reader="full", reader_frame=True, html_entry_decoy=True)
    entries = fetch(kns, kns.detail_url(p)).css("li.btn-html a")
    assert [a.get("style") is not None for a in entries] == [True, False]
    outer = fetch(kns, reader_link(kns, p))
    frame = outer.css("iframe#readerFrame")[0].get("src")
    assert not outer.css("#paperRead") and frame.endswith("&frame=1")
    assert fetch(kns, frame).css("#paperRead.ChapterContainer")


def test_reset_restores_defaults(kns: KnsSimulator) -> None:
    kns.configure(login="personal", cited_class="cited")
    kns.captcha("grid")
    kns.expire_locators()
    fetch(kns, "https://www.cnki.net/")
    kns.reset()
    assert kns.scenario.login == "none" and kns.faults == [] and kns.requests == [] and kns.epoch == 1
    with pytest.raises(TypeError):
        kns.configure(no_such_knob=1)
    with pytest.raises(ValueError):
        kns.fault("grid", "explode")


def test_corpus_is_deterministic_and_varied(kns: KnsSimulator) -> None:
    from tests.kns.corpus import build_corpus

    again = build_corpus()
    assert [p.filename for p in again.papers] == [p.filename for p in kns.corpus.papers]
    assert len({p.filename for p in again.papers}) == len(again.papers) >= 300
    assert any(p.language == "en" for p in again.papers) and any(p.online_first for p in again.papers)


# ---------------------------------------------------------------- one real browser


@pytest.mark.browser
async def test_chromium_advsearch_script_posts_the_grid_request(kns: KnsSimulator) -> None:
    exe = shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(exe):
        pytest.skip("chromium not installed")
    import nodriver as uc
    from nodriver import cdp

    async with chromium_on_cdp(exe, kns.browser_arg_list, "kns-sim-profile-") as port:
        browser = await uc.start(host="127.0.0.1", port=port, browser_executable_path=exe)
        tab = await browser.get("https://kns.cnki.net/kns8s/AdvSearch")

        async def js(expr: str) -> Any:
            ro, exc = await within(
                tab.send(cdp.runtime.evaluate(expression=expr, await_promise=True, return_by_value=True)), 10)
            assert exc is None, exc
            return ro.value

        async def until(expr: str) -> Any:
            for _ in range(200):
                value = await js(expr)
                if value:
                    return value
                await asyncio.sleep(0.05)
            raise AssertionError(f"timed out waiting for {expr}")

        await until("document.readyState === 'complete' && typeof cnkiSearch.getSearchJsonInfo === 'function'")
        await js("""(() => { const i = document.querySelector('#gradetxt input[data-tipid]');
                    i.value = '大语言模型'; i.dispatchEvent(new Event('change', {bubbles: true}));
                    document.querySelector('input.btn-search').click(); return true; })()""")
        rows = await until("document.querySelectorAll('#briefBox table.result-table-list tbody tr').length")
        assert rows == 20
        posts = [r for r in kns.requests if r.endpoint == "grid"]
        assert len(posts) == 1 and posts[0].referer == "https://kns.cnki.net/kns8s/AdvSearch"
        qj = json.loads(posts[0].form["QueryJson"])
        subject = qj["QNode"]["QGroup"][0]
        assert subject["Key"] == "Subject" and subject["ChildItems"][0]["Items"][0]["Value"] == "大语言模型"
        assert posts[0].form["pageSize"] == "20" and posts[0].headers["X-Requested-With"] == "XMLHttpRequest"
        cursor = await js("document.getElementById('hidTurnPage').value")
        await js("document.getElementById('PageNext').click(), true")
        await until("document.getElementById('curPageHid') && document.getElementById('curPageHid').value === '2'")
        page2 = [r for r in kns.requests if r.endpoint == "grid"][1]
        assert page2.form["turnpage"] == cursor and page2.form["boolSearch"] == "false"
        try:
            await within(tab.send(cdp.browser.close()), 5)
        except Exception:  # the connection drops while Chromium closes; proc.wait below is the check
            pass
