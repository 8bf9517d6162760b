"""Pure rules of a journal's navi pages: the journal search, the detail page's keys, ``yearList`` and ``papers``.

navi.cnki.net answers these as HTML fragments to POSTs from a navi page (MarioZZJ's account of the
endpoints, 2026): ``knavi/all/searchbaseinfo`` (the journal search: ``a[href*=knavi/detail]`` per journal,
ISSN：/CN： and sometimes 曾用刊名： in its text; a name is asked as 刊名(曾用刊名), ``TI %``, which CNKI matches
against current and former titles), ``knavi/journals/{pykm}/yearList`` (``dl#2025_Year_Issue`` → ``dd a#yq202506[value]``
No.06; ``#totalCnt`` years, about 20 a page) and ``knavi/journals/{pykm}/papers?yearIssue=<value>`` (``dt.tit``
column headings, ``dd.row`` rows: ``span.name a`` title link, ``b[name=encrypt][id]`` the file name,
``span.author[title]``, ``span.company[title]`` the page range). A fragment that is none of these is
PARSER_UNSUPPORTED, never an empty answer.
"""

from __future__ import annotations

import json
import re
from urllib.parse import quote, urlencode

import lxml.html
import msgspec

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.identity import record_ref_for
from cnki_mcp.core.model import IssueYear, JournalIssue, Paper
from cnki_mcp.core.text import clean, trim
from cnki_mcp.pages.markup import first_match, input_value, load_page, page_text, split_values, text_of, text_without
from cnki_mcp.pages.parse import _author_names, _clean_title, cn_value, former_names, issn_value, now
from cnki_mcp.pages.urls import is_site_url, public_url, resolve_href

NAVI = "https://navi.cnki.net"
NAVI_HOME = f"{NAVI}/knavi"
SEARCH_URL = f"{NAVI}/knavi/all/searchbaseinfo"
PCODE = "CJFD,CCJD"
# What each look-up field is called in the navi search's QNode: 刊名(曾用刊名) (current and former titles), ISSN, CN.
SEARCH_FIELDS = {"journal": ("TI", "%", "刊名(曾用刊名)"), "issn": ("SN", "=", "ISSN"), "cn": ("CN", "=", "CN")}
_PYKM = re.compile(r"^[A-Za-z0-9]{2,12}$")
_ISSUE_TEXT = re.compile(r"(?:No\.?\s*)?(\d{1,3}|S\d|Z\d|增刊\d?)", re.I)
_ISSUE_ID = re.compile(r"^yq(\d{4})(\w+)$")
# An ISSN as the entry writes it, when its check digit does not verify (the look-up compares it as given).
_ISSN_LINE = re.compile(r"ISSN\s*[：:]\s*(\d{4}-?\d{3}[\dXx])")
_JOURNAL_LINKS = 'a[href*="knavi/detail"], a[href*="/knavi/journals/"]'
_EMPTY = re.compile(r"暂无|没有找到|未找到|无数据|没有收录")


class JournalHit(msgspec.Struct):
    """One journal of the navi search: its name, detail page and the ISSN/CN its entry shows."""

    name: str
    url: str
    issn: str = ""
    cn: str = ""
    former: list[str] = []  # 曾用刊名 when the entry shows them


class JournalKeys(msgspec.Struct):
    """What a journal's detail page gives the issue fragments: its pykm, the session token and its name
    (with its former names, 曾用刊名)."""

    pykm: str
    time: str
    name: str
    former: list[str] = []


class YearList(msgspec.Struct):
    total_years: int  # #totalCnt: years the journal has in all (the list is paged)
    years: list[IssueYear]


class TocRow(msgspec.Struct):
    """One row of an issue's table of contents, as a record plus its column heading."""

    paper: Paper
    section: str = ""


def _unsupported(what: str, html: str) -> CnkiError:
    preview = clean(page_text(load_page(html)))[:80] if html else ""
    return CnkiError("PARSER_UNSUPPORTED", f"期刊导航的{what}结构不受支持：{preview}", details={"page_kind": f"navi_{what}"})


# -- requests -----------------------------------------------------------------------------------


def search_form(field: str, value: str) -> str:
    """The navi search's form body for a journal name (``field="journal"``), an ISSN or a CN."""
    name, operate, label = SEARCH_FIELDS[field]
    state = {
        "StateID": "", "Platfrom": "", "QueryTime": "", "Account": "knavi", "ClientToken": "", "Language": "",
        "CNode": {"PCode": "OYXNO5VW", "SMode": "", "OperateT": ""},
        "QNode": {"SelectT": "", "Select_Fields": "", "S_DBCodes": "", "QGroup": [{
            "Key": "subject", "Logic": 1, "Items": [], "ChildItems": [{
                "Key": "txt", "Logic": 1,
                "Items": [{"Key": "txt_1", "Title": "", "Logic": 1, "Name": name, "Operate": operate,
                           "Value": f"'{value}'", "ExtendType": 0, "ExtendValue": "", "Value2": ""}],
                "ChildItems": []}]}],
            "OrderBy": "OTA|DESC", "GroupBy": "", "Additon": ""},
    }
    return urlencode({
        "searchStateJson": json.dumps(state, ensure_ascii=False), "displaymode": "1", "pageindex": "1",
        "pagecount": "10", "index": "UXTGKYC2", "searchType": label, "parentcode": "BTBKQV4X", "switchdata": "search",
    })


def year_list_url(pykm: str) -> str:
    return f"{NAVI}/knavi/journals/{quote(pykm)}/yearList"


def year_list_form(keys: JournalKeys, page: int) -> str:
    return urlencode({"pIdx": str(page), "time": keys.time, "isEpublish": "0", "pcode": PCODE})


def papers_url(pykm: str, code: str, page: int = 0) -> str:
    query = urlencode({"yearIssue": code, "pageIdx": str(page), "pcode": PCODE, "isEpublish": "0"})
    return f"{NAVI}/knavi/journals/{quote(pykm)}/papers?{query}"


# -- answers ----------------------------------------------------------------------------------


def _former_in(el: lxml.html.HtmlElement) -> list[str]:
    """The former names (曾用刊名：a;b lines) under ``el``, once each."""
    return list(dict.fromkeys(n for line in el.cssselect("p, li") for n in former_names(text_of(line))))


def parse_search(html: str, base_url: str) -> list[JournalHit]:
    """The journals a navi search lists; [] only for an answer that says it found nothing."""
    root = load_page(html)
    hits: list[JournalHit] = []
    seen: set[str] = set()
    for anchor in root.cssselect(_JOURNAL_LINKS):
        url = resolve_href(anchor.get("href"), base_url)
        name = trim(anchor.get("title") or "") or text_of(anchor)
        if not url or not name or url in seen:
            continue
        seen.add(url)
        box = anchor
        for _ in range(5):  # the entry holding the link (cover and name link alike): its text carries ISSN：/CN：
            parent = box.getparent()
            if parent is None or len({resolve_href(a.get("href"), base_url) for a in parent.cssselect(_JOURNAL_LINKS)}) > 1:
                break
            box = parent
        text = text_of(box)
        raw_issn = _ISSN_LINE.search(text)
        hits.append(JournalHit(name=clean(name), url=url, issn=issn_value(text) or (raw_issn[1].upper() if raw_issn else ""),
                               cn=cn_value(text), former=_former_in(box)))
    if hits or _EMPTY.search(page_text(root)):
        return hits
    raise _unsupported("检索结果", html)


def parse_keys(html: str) -> JournalKeys:
    """The journal page's ``#pykm``, ``#time``, name (``#shareChName`` or ``h3.titbox``) and 曾用刊名 lines."""
    root = load_page(html)
    pykm = input_value(root, "#pykm")
    name = input_value(root, "#shareChName")
    if not name:
        head = first_match(root, "h3.titbox, .titbox1")
        name = text_without(head, "p") if head is not None else ""
    if not _PYKM.match(pykm):
        raise _unsupported("期刊页", html)
    return JournalKeys(pykm=pykm.upper(), time=input_value(root, "#time"), name=name, former=_former_in(root))


def _issue_label(anchor: lxml.html.HtmlElement) -> str:
    match = _ISSUE_TEXT.search(text_of(anchor))
    if match:
        return match[1]
    found = _ISSUE_ID.match(anchor.get("id") or "")
    return found[2] if found else ""


def parse_year_list(html: str) -> YearList:
    """A ``yearList`` fragment: each year (newest first, as the page lists them) with its issues."""
    root = load_page(html)
    years: list[IssueYear] = []
    for block in root.cssselect("dl.s-dataList, dl[id$=_Year_Issue]"):
        year_text = text_of(first_match(block, "dt em")) or text_of(first_match(block, "dt"))
        match = re.search(r"\d{4}", year_text) or re.match(r"(\d{4})", block.get("id") or "")
        if not match:
            continue
        issues = []
        for anchor in block.cssselect("dd a"):
            label, code = _issue_label(anchor), trim(anchor.get("value") or "")
            if label and code:
                issues.append(JournalIssue(issue=label, code=code))
        years.append(IssueYear(year=int(match[0]), issues=issues))
    total_text = input_value(root, "#totalCnt")
    total = int(total_text) if total_text.isdigit() else len(years)
    if not years and not (total_text == "0" or _EMPTY.search(page_text(root))):
        raise _unsupported("年期列表", html)
    return YearList(total_years=total, years=years)


def parse_papers(html: str, base_url: str, journal: str, year: int, issue: str) -> list[TocRow]:
    """A ``papers`` fragment: the issue's rows in page order, each under the column heading before it."""
    root = load_page(html)
    rows: list[TocRow] = []
    section = ""
    for el in root.cssselect("dt.tit, dd.row, dd"):
        if el.tag == "dt":
            section = clean(text_of(el)).removeprefix("专栏:").removeprefix("专栏：").strip()
            continue
        name = first_match(el, "span.name")
        if name is None:
            continue
        anchor = first_match(name, "a")
        title = _clean_title(text_of(anchor) if anchor is not None else text_without(name, "b, label"))
        if not title:
            continue
        locator = resolve_href(anchor.get("href") if anchor is not None else "", base_url)
        marked = first_match(el, 'b[name="encrypt"]')
        filename = trim(marked.get("id") or "") if marked is not None else ""
        author = first_match(el, "span.author")
        authors = _author_names(split_values(trim(author.get("title") or "") or text_of(author))) if author is not None else []
        pages = first_match(el, "span.company")
        paper = Paper(
            title=title, authors=authors, source=journal, year=year, issue=issue.lstrip("0") or issue,
            document_type="期刊", filename=filename,
            pages=trim(pages.get("title") or "") or text_of(pages) if pages is not None else "",
            url=public_url(locator), locator=locator if is_site_url(locator) else "", listed_at=now(),
        )
        paper.record_ref = record_ref_for(paper)
        rows.append(TocRow(paper=paper, section=section))
    if not rows and not _EMPTY.search(page_text(root)):
        raise _unsupported("目录", html)
    return rows
