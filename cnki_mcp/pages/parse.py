"""Parsers for the content of the CNKI pages the product reads: the result grid, detail pages
and journal pages. The HTML reader has a module of its own (``reader.py``), what a page says about
access ``page_state.py``, and the shared markup helpers live in ``markup.py``.

All functions are pure: HTML text in, msgspec Structs out, failures as ``CnkiError``; saving a page
that failed is ``snapshots.py``'s job. Page text is
only ever treated as data. Selectors follow the structures public tools and captured pages record
(docs/site-notes.md); where sources disagree (``td.quote`` vs ``td.cited``, second ``h3.author`` vs ``h3.orgn`` …) every variant
is accepted.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Iterable, Iterator
from decimal import ROUND_HALF_UP, Decimal
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import lxml.html
import msgspec

from cnki_mcp.core.clock import utc_now_iso
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.identity import detail_matches, record_ref_for
from cnki_mcp.core.model import (
    PARSER_VERSION,
    Paper,
    Problem,
    Quality,
    TierEvidence,
)
from cnki_mcp.core.text import (
    clean,
    loads_site_json,
    normalize,
    source_key,
    strip_source_tail,
    trim,
    unique_strings,
)
from cnki_mcp.pages.markup import (
    first_match,
    input_value,
    load_page,
    meta_all,
    meta_first,
    meta_tags,
    own_text,
    page_text,
    prune,
    spaced_text,
    split_values,
    text_of,
    text_without,
)
from cnki_mcp.pages.urls import public_url, resolve_href

log = logging.getLogger(__name__)

EMPTY_PREVIEW_CHARS = 160
# A detail page's line of page range, page count and size: ``.total-inform`` on the mainland site,
# ``.total-inform-oversea`` on the overseas one (docs/site-notes.md "Abroad").
SUMMARY_BLOCK = ".total-inform, .total-inform-oversea"
REFUSAL_SAMPLE_CHARS = 300


# --------------------------------------------------------------------------------------------
# Structs returned to the site layer (internal; clients see Paper, Quality, Section …)


class GridPage(msgspec.Struct):
    """One brief/grid answer. ``total`` is None when the page does not say; 0 means a real zero."""

    rows: list[Paper] = []
    total: int | None = None
    page: int = 0  # current page from the pager, 0 when unknown
    page_count: int = 0  # last page from the pager, 0 when unknown
    cursor: str = ""  # #hidTurnPage, needed to ask for the next page
    exhausted: bool = False
    # What the site made of the query (#briefRequest): the page's own script sends both back when paging.
    products: str = ""
    view: str = ""
    sort_shown: str = ""  # the sort code the page marks as active (#orderList li.cur), "" when unmarked
    zero: str = ""  # why an empty page is a real zero: "stated" by the page, or "control" (site.py)
    problems: list[Problem] = []  # what the site says beside the rows (SORT_NOT_APPLIED), for the caller to record


# --------------------------------------------------------------------------------------------
# Small value rules shared by grid and detail

_COUNT = re.compile(r"(\d+(?:\.\d+)?)(万?)")
# More digits than any count CNKI shows (its whole catalogue has under 10⁹ records): not a count we read
# (29 and more would not even round in Decimal's default precision).
COUNT_DIGITS = 15
_YEAR = re.compile(r"(?<!\d)(?:18|19|20|21)\d{2}(?!\d)")
_ROLE_SUFFIX = re.compile(r"\s*[(（]\s*(?:主编|编著|编译|撰文|执笔|整理|口述|供稿|文|著|编|译|撰|摄|图)\s*[)）]\s*$")
_TITLE_MARKERS = re.compile(r"(?:\s*(?:附视频|网络首发|MT翻译))+\s*$")


def parse_count(text: str) -> int | None:
    """A count cell: digits with optional decimals and 万; anything else is unknown (None); PARSER_UNSUPPORTED
    past COUNT_DIGITS digits."""
    value = trim(text.replace(",", "").replace("，", ""))
    match = _COUNT.fullmatch(value)
    if not match:
        return None
    if len(match[1].partition(".")[0]) > COUNT_DIGITS:
        raise CnkiError("PARSER_UNSUPPORTED", f"页面上的计数位数过多（{value[:40]}…），不是能读取的计数。", details={"count_text": value[:40]})
    number = Decimal(match[1]) * (10000 if match[2] else 1)
    return int(number.quantize(Decimal(1), rounding=ROUND_HALF_UP))


def year_of(text: str) -> int:
    match = _YEAR.search(text)
    return int(match[0]) if match else 0


def strip_role_suffix(name: str) -> str:
    """``林倩(文)`` → ``林倩``: bylines carry roles that are not part of the name."""
    return _ROLE_SUFFIX.sub("", trim(name))


def _author_names(texts: Iterable[str]) -> list[str]:
    names = (strip_role_suffix(trim(text).strip(";；,，")) for text in texts)
    return unique_strings(names)


def _clean_title(text: str) -> str:
    return _TITLE_MARKERS.sub("", clean(text))


def _identifiers(scope: lxml.html.HtmlElement, locator: str) -> dict[str, Any]:
    """dbcode/dbname/filename (strings, passed on as a Paper's keyword arguments) from the first
    [data-filename] element, else the locator query."""
    ids: dict[str, Any] = {"dbcode": "", "dbname": "", "filename": ""}
    marked = first_match(scope, "[data-filename]")
    if marked is not None:
        for key in ids:
            ids[key] = trim(marked.get(f"data-{key}") or "")
    if locator:
        query = {key.lower(): value for key, value in parse_qsl(urlsplit(locator).query)}
        for key in ids:
            ids[key] = ids[key] or trim(query.get(key, ""))
    return ids


# --------------------------------------------------------------------------------------------
# Result grid

_ZERO_RESULT = re.compile(r"未找到|没有找到|未检索到|暂无.{0,6}结果")
TEMPORARY_EMPTY = re.compile(r"暂无数据|稍后重试|服务繁忙")
# Words of a throttled site: an empty answer that carries them is no zero by itself, whatever count it shows.
THROTTLE_TEXT = re.compile(r"稍后|繁忙")
_GRID_REFUSAL = re.compile(r"查询对象结构错误|参数校验|起始游标越界|没有指定检索分类|检索表达式.{0,6}错误")
_TOTAL_TEXT = re.compile(r"(?:共找到|找到)\s*([\d,]+(?:\.\d+)?万?)\s*条")


def _grid_rows(root: lxml.html.HtmlElement) -> Iterator[lxml.html.HtmlElement]:
    for table in root.cssselect("table.result-table-list, table.GridTableContent"):
        for tr in table.iter("tr"):
            parent = tr.getparent()
            if parent is not None and parent.tag == "thead":
                continue
            yield tr


def _with_ref(paper: Paper) -> Paper:
    """Rows carry their provisional record_ref, so a paper seen again keeps its ref."""
    paper.record_ref = record_ref_for(paper)
    return paper


def _title_link(scope: lxml.html.HtmlElement, selector: str, base_url: str) -> tuple[str, str] | None:
    """(title, locator) of a row's title link; None when the row has no titled link."""
    anchor = first_match(scope, selector)
    title = _clean_title(anchor.text_content()) if anchor is not None else ""
    if anchor is None or not title:
        return None
    return title, resolve_href(anchor.get("href"), base_url)


def _grid_row(tr: lxml.html.HtmlElement, base_url: str) -> Paper | None:
    found = _title_link(tr, "td.name a, a.fz14", base_url)
    if found is None:
        return None
    title, locator = found
    authors: list[str] = []
    cell = first_match(tr, "td.author")
    if cell is not None:
        links = cell.cssselect("a")
        texts = [text_without(a, "sup") for a in links] if links else split_values(text_without(cell, "sup"))
        authors = _author_names(texts)
    date = text_of(first_match(tr, "td.date"))
    downloaded = first_match(tr, "td.download")
    abstract = first_match(tr, ".abstract")
    return Paper(
        title=title,
        authors=authors,
        source=strip_source_tail(text_of(first_match(tr, "td.source"))),
        year=year_of(date),
        publication_date=date,
        document_type=text_of(first_match(tr, "td.data")),
        url=public_url(locator),
        locator=locator,
        cited=_cited_count(tr),
        downloaded=parse_count(text_of(downloaded)) if downloaded is not None else None,
        abstract=text_of(abstract),
        keywords=unique_strings(text_of(a).strip(";；") for a in tr.cssselect(".keywords a")),
        online_first=any("网络首发" in text_of(mark) for mark in tr.cssselect(".marktip")),
        listed_at=now(),
        **_identifiers(tr, locator),
    )


def _cited_count(tr: lxml.html.HtmlElement) -> int | None:
    """The citation count of a row. Some layouts put a ready-made GB/T citation string in ``td.quote``
    (the 引用 column) and the count in ``td.cited``: only a cell that reads as a count counts."""
    for cell in tr.cssselect("td.cited, td.quote"):
        count = parse_count(text_of(cell))
        if count is not None:
            return count
    return None


_SENTENCE_LABEL = re.compile(r"^\s*(?:句子|段落)\s*\d*\s*[：:]\s*")


def _sentence_row(block: lxml.html.HtmlElement, base_url: str) -> Paper | None:
    """A 句子检索 (brief/senquery) result block: ``.middle`` with ``h6 a.fz14`` and ``.baseinfo``."""
    found = _title_link(block, "h6 a.fz14, a.fz14", base_url)
    if found is None:
        return None
    title, locator = found
    info = first_match(block, ".baseinfo")
    authors: list[str] = []
    source = date = doctype = ""
    downloaded: int | None = None
    if info is not None:
        authors = _author_names(text_of(a) for a in info.cssselect("a.KnowledgeNetLink"))
        for span in info.cssselect("span"):
            label = text_of(first_match(span, "label"))
            if label.startswith("来源"):
                source = strip_source_tail(text_without(span, "label"))
        date = text_of(first_match(info, ".date"))
        doctype = text_of(first_match(info, "em")).strip("【】[] ")
        count = first_match(info, "a.downloadCnt")
        downloaded = parse_count(text_of(count)) if count is not None else None
    return Paper(
        title=title,
        authors=authors,
        source=source,
        sentence=_SENTENCE_LABEL.sub("", text_of(first_match(block, "h5")) or text_of(first_match(block, "dd"))),
        year=year_of(date),
        publication_date=date,
        document_type=doctype,
        url=public_url(locator),
        locator=locator,
        downloaded=downloaded,
        listed_at=now(),
        **_identifiers(block, locator),
    )


def grid_total(root: lxml.html.HtmlElement) -> int | None:
    for el in root.cssselect(".pagerTitleCell em, #countPageDiv em"):
        count = parse_count(text_of(el))
        if count is not None:
            return count
    match = _TOTAL_TEXT.search(page_text(root))
    if match:
        return parse_count(match[1])
    hidden = input_value(root, "#totalCnt")
    return parse_count(hidden) if hidden else None


# The pager's mark, "2/7": this page and the last.
_PAGE_MARK = re.compile(r"(\d+)\s*/\s*(\d+)")


def _grid_pager(root: lxml.html.HtmlElement) -> tuple[int, int]:
    current = last = 0
    mark = first_match(root, ".countPageMark")
    if mark is not None:
        match = _PAGE_MARK.search(text_of(mark))
        if match:
            current, last = int(match[1]), int(match[2])
        elif (mark.get("data-pagenum") or "").strip().isdigit():
            last = int(mark.get("data-pagenum").strip())
    if not current:
        hidden = input_value(root, "#curPageHid")
        if hidden.isdigit():
            current = int(hidden)
        else:
            active = first_match(root, "a.cur[data-curpage]")
            if active is not None and (active.get("data-curpage") or "").strip().isdigit():
                current = int(active.get("data-curpage").strip())
    return current, last


def empty_kind(root: lxml.html.HtmlElement) -> tuple[str, str]:
    """Why a grid answer has no rows: zero, rejected (reason), temporary, or "" (unknown).

    A refusal's reason sits in ``p.no-content[value]`` or in a plain hidden input
    (``<input value="查询对象结构错误！">``, 参数校验…, 起始游标越界).
    """
    for note in root.cssselect("p.no-content"):
        reason = trim(note.get("value") or "")
        if reason:
            return "rejected", reason
    for field in root.iter("input"):
        reason = trim(field.get("value") or "")
        if _GRID_REFUSAL.search(reason):
            return "rejected", reason
    text = page_text(root)
    if _ZERO_RESULT.search(text):
        return "zero", ""
    if TEMPORARY_EMPTY.search(text):
        return "temporary", ""
    return "", ""


def _brief_request(root: lxml.html.HtmlElement) -> tuple[str, str]:
    """(Products, View) of the query as the site echoes it in ``#briefRequest``; ("", "") when absent."""
    raw = input_value(root, "#briefRequest")
    try:
        request = loads_site_json(raw) if raw else {}
        inner = (request.get("queryJson") or request.get("QueryJson")) if isinstance(request, dict) else None
        query = loads_site_json(inner) if isinstance(inner, str) else inner
    except ValueError:
        return "", ""
    if not isinstance(query, dict):
        return "", ""
    fields = {str(key).lower(): value for key, value in query.items()}
    products, view = fields.get("products"), fields.get("view")
    return (products if isinstance(products, str) else ""), (view if isinstance(view, str) else "")


def _sort_shown(root: lxml.html.HtmlElement) -> str:
    for item in root.cssselect("#orderList li"):
        if "cur" in (item.get("class") or "").split():
            return trim(item.get("data-sort") or item.get("id") or "").upper()
    return ""


def parse_grid(html: str, base_url: str) -> GridPage:
    """Rows and pager of a brief/grid answer (or of the rendered result page around it).

    An empty answer is a zero only when the page says so (a count of 0, 未检索到…) without the
    throttle text (稍后, 繁忙). The bare ``p.no-content`` shell (抱歉，暂无数据，请稍后重试), also beside
    a toolbar 共找到 0 条结果, is SITE_TEMPORARILY_EMPTY with ``details.shell``: CNKI answers both a
    real zero and throttling with it, and the listing decides which from the page number and a
    control query. A refusal is QUERY_REJECTED.
    """
    root = load_page(html)
    rows = [_with_ref(paper) for tr in _grid_rows(root) if (paper := _grid_row(tr, base_url)) is not None]
    if not rows:
        rows = [
            _with_ref(paper)
            for block in root.cssselect(".middle")
            if block.cssselect(".baseinfo") and (paper := _sentence_row(block, base_url)) is not None
        ]
    total = grid_total(root)
    page, page_count = _grid_pager(root)
    cursor = input_value(root, "#hidTurnPage")
    products, view = _brief_request(root)
    zero = ""
    if not rows:
        kind, reason = empty_kind(root)
        text = page_text(root)
        preview = text[:EMPTY_PREVIEW_CHARS]
        if kind == "rejected":
            raise CnkiError(
                "QUERY_REJECTED", f"知网拒绝了这次检索：{reason}", details={"reason": reason, "preview": preview}
            )
        stated = total == 0 or kind == "zero"
        shell = (kind == "temporary" and bool(root.cssselect("p.no-content")) and not stated) or (
            stated and bool(THROTTLE_TEXT.search(text))
        )
        if shell or (total != 0 and kind == "temporary"):
            raise CnkiError(
                "SITE_TEMPORARILY_EMPTY", f"知网暂时没有返回数据：{preview}", details={"preview": preview, "shell": shell}
            )
        if not stated:
            raise CnkiError(
                "PARSER_UNSUPPORTED", f"检索结果页结构不受支持：{preview}", details={"preview": preview}
            )
        total, zero = 0, "stated"
    exhausted = (total is not None and len(rows) >= total) or (page_count > 0 and page >= page_count)
    return GridPage(
        rows=rows,
        total=total,
        page=page,
        page_count=page_count,
        cursor=cursor,
        exhausted=exhausted,
        products=products,
        view=view,
        sort_shown=_sort_shown(root),
        zero=zero,
    )


# --------------------------------------------------------------------------------------------
# Detail page

_LOGIN_WIDGET = re.compile(r"login|Login|ecp_")
_ISSUE = re.compile(
    r"(?<!\d)((?:19|20)\d{2})\s*[,，.]?\s*(\d+)?\s*[(（]\s*([A-Za-z]*\d+[A-Za-z]*)\s*[)）]"
    r"\s*[:：]?\s*(\d+(?:\s*[-—–]\s*\d+)?)?"
)
_DATE = re.compile(r"(?<!\d)((?:18|19|20|21)\d{2})[-/.年](\d{1,2})(?:[-/.月](\d{1,2}))?")
_DOI_TEXT = re.compile(r"DOI\s*[:：]\s*(10\.\d{4,9}/[^\s<>]+)", re.I)
_INSTITUTION_INDEX = re.compile(r"^\d+\s*[.．、]\s*")
_DBCODE_TYPES = {
    "CJFD": "期刊",
    "CJFQ": "期刊",
    "CJFN": "期刊",
    "CAPJ": "期刊",
    "CDFD": "博士",
    "CMFD": "硕士",
    "CPFD": "会议",
    "IPFD": "会议",
    "CCND": "报纸",
    "CYFD": "年鉴",
}
_DATE_ROWS = ("报纸日期", "出版日期", "发表日期", "发表时间", "会议时间")


def _rows(root: lxml.html.HtmlElement) -> dict[str, str]:
    """Label rows (``.rowtit`` 摘要：, 导师：, 报纸日期： …) mapped to the text that follows them."""
    rows: dict[str, str] = {}
    for tit in root.cssselect(".rowtit, .rowtit2"):
        label = text_of(tit).rstrip("：:")
        if not label or label in rows:
            continue
        value = tit.getnext()
        text = text_of(value) if value is not None else clean(tit.tail or "")
        if text:
            rows[label] = text
    return rows


def _detail_title(root: lxml.html.HtmlElement) -> str:
    for el in root.cssselect(".wx-tit h1, .h1-scholar"):
        title = _clean_title(el.text_content())
        if title:
            return title
    for h1 in root.iter("h1"):
        if any(
            _LOGIN_WIDGET.search(anc.get("class") or "") or re.search(r"login|Login", anc.get("id") or "")
            for anc in h1.iterancestors()
        ):
            continue
        title = _clean_title(h1.text_content())
        if title:
            return title
    return ""


def _byline_text(el: lxml.html.HtmlElement) -> list[str]:
    if el.cssselect("a"):
        return [text_without(el, "sup, .authortip, i")]
    return split_values(text_without(el, "sup, .authortip, i"))


def _detail_authors(root: lxml.html.HtmlElement, meta: dict[str, list[str]]) -> list[str]:
    texts = meta_all(meta, "citation_author", "dc.creator")
    if not texts:
        part = first_match(root, "#authorpart")
        if part is not None:
            spans = [child for child in part if child.tag == "span"]
            texts = [name for span in spans for name in _byline_text(span)]
            if not texts:
                texts = [text_without(a, "sup, .authortip, i") for a in part.cssselect("a")]
            if not texts:
                texts = split_values(text_without(part, "sup, .authortip"))
    if not texts:
        first = first_match(root, ".wx-tit > h3.author")
        if first is not None:
            texts = [text_without(el, "sup, .authortip, i") for el in first.cssselect("a, span")]
    return _author_names(texts)


def _detail_institutions(root: lxml.html.HtmlElement, meta: dict[str, list[str]]) -> list[str]:
    texts = meta_all(meta, "citation_author_institution", "citation_author_affiliation")
    part = first_match(root, "#authorpart")
    if part is not None:
        for sibling in part.itersiblings():
            if sibling.tag == "h3" and "author" in (sibling.get("class") or "").split():
                texts.extend(text_of(el) for el in sibling.cssselect("a, span"))
    if not texts:
        texts = [text_of(el) for el in root.cssselect(".orgn a, .author-org a, #catalog_ORG")]
    if not texts:
        for orgn in root.cssselect("h3.orgn, .orgn"):
            spans = orgn.cssselect("span")
            texts.extend([text_of(span) for span in spans] if spans else split_values(text_of(orgn), ";；"))
    return unique_strings(_INSTITUTION_INDEX.sub("", trim(text).strip(";；")) for text in texts)


def _source_link(root: lxml.html.HtmlElement) -> lxml.html.HtmlElement | None:
    for selector in (".top-tip .source a", ".top-tip a[href*='navi.cnki.net']", ".top-tip a[href*='/knavi/']"):
        for link in root.cssselect(selector):
            if "收录来源" in text_of(link) or "ydsm" in (link.get("class") or ""):
                continue
            if text_of(link):
                return link
    return None


def _date_text(text: str) -> str:
    match = _DATE.search(text)
    if not match:
        return ""
    year, month, day = match.groups()
    return f"{year}-{int(month):02d}" + (f"-{int(day):02d}" if day else "")


def _detail_abstract(root: lxml.html.HtmlElement) -> tuple[str, str]:
    """(abstract, excerpt): a 正文快照/全文快照 block is an excerpt, never an abstract."""
    el = first_match(root, "#ChDivSummary")
    if el is None:
        el = first_match(root, ".abstract-text")
    if el is None:
        el = next((cand for cand in root.cssselect("#abstract_text") if cand.tag != "input"), None)
    text = ""
    if el is not None:
        text = re.sub(r"^摘要\s*[:：]\s*", "", text_of(el))
        parent = el.getparent()
        if parent is not None and re.search("正文快照|全文快照", text_of(parent)):
            return "", text
    # The visible summary may be cut short; the hidden input carries the whole abstract.
    full = input_value(root, "input#abstract_text")
    if full and "<" in full:
        full = text_of(lxml.html.fragment_fromstring(full, create_parent="div"))
    full = clean(full)
    if full and len(full) > len(text) and full.startswith(text.rstrip("…. ")[:20]):
        text = full
    return text, ""


def _detail_keywords(root: lxml.html.HtmlElement, meta: dict[str, list[str]]) -> list[str]:
    parts = meta_all(meta, "citation_keywords", "dc.subject")
    if not parts:
        el = first_match(root, ".keywords, #ChDivKeyWord, #catalog_KEYWORD")
        if el is not None:
            anchors = el.cssselect("a")
            parts = [text_of(a) for a in anchors] if anchors else [text_of(el)]
    words = (re.sub(r"^关键词\s*[:：]\s*", "", trim(part)) for part in parts)
    return unique_strings(word for text in words for word in split_values(text))


def _detail_funds(root: lxml.html.HtmlElement) -> list[str]:
    texts = [text_of(el) for el in root.cssselect("#catalog_FUND, .funds a")]
    if not texts:
        texts = [text_of(el) for el in root.cssselect(".funds")]
    funds = (re.sub(r"^基金(?:资助)?\s*[:：]\s*", "", trim(text)) for text in texts)
    return unique_strings(part.strip(" ;；。") for text in funds for part in split_values(text, ";；"))


_CLC_CODE = re.compile(r"[A-Z][A-Z0-9]*(?:[.\-+=:/][0-9A-Za-z]+)*")


def _detail_clc(root: lxml.html.HtmlElement, rows: dict[str, str]) -> list[str]:
    """中图分类号 from the 分类号 row (``p.clc-code``; the legacy ``#catalog_ZTCLS``): ``TP18;TP311.13``."""
    text = text_of(first_match(root, "p.clc-code, #catalog_ZTCLS")) or rows.get("分类号", "")
    text = re.sub(r"^分类号\s*[:：]\s*", "", text)
    return unique_strings(code for code in re.split(r"[;；,，、\s]+", text) if _CLC_CODE.fullmatch(code))


def _detail_identifiers(root: lxml.html.HtmlElement, url: str) -> dict[str, Any]:
    ids = _identifiers(root, url)
    for key in ids:
        ids[key] = ids[key] or input_value(root, f"input[name={key}], input#{key}")
    # 记笔记 links and hidden parameters carry dbcode and filename; their table name is not the
    # dbname the grid reports, so it is not used (a mismatch would look like a different paper).
    note = first_match(root, "li.btn-note a[href]")
    query = {k.lower(): v for k, v in parse_qsl(urlsplit(note.get("href")).query)} if note is not None else {}
    for key in ("dbcode", "filename"):
        ids[key] = ids[key] or input_value(root, f"#param{key}") or trim(query.get(key, ""))
    return ids


def _detail_type(root: lxml.html.HtmlElement, dbcode: str, rows: dict[str, str]) -> str:
    if dbcode.upper() in _DBCODE_TYPES:
        return _DBCODE_TYPES[dbcode.upper()]
    if any(label in rows for label in ("报纸日期", "版名", "版号")):
        return "报纸"
    if "会议名称" in rows:
        return "会议"
    if any(label in rows for label in ("导师", "学科专业", "学位授予年度")):
        degree = " ".join(rows.values()) + text_of(first_match(root, ".top-tip"))
        if "博士" in degree:
            return "博士"
        if "硕士" in degree:
            return "硕士"
    return ""


# Detail pages of kinds the product does not read (a book's page lists chapters, not a paper).
_UNSUPPORTED_DETAIL_KINDS = ((".main-book, .book-info", "book", "图书"),)


def parse_detail(html: str, url: str) -> Paper:
    """Every field of a kcms2 detail page, first non-empty source wins."""
    root = load_page(html)
    for selector, kind, label in _UNSUPPORTED_DETAIL_KINDS:
        if first_match(root, selector) is not None:
            # Recognised, so rendering the page again would not help: details.page_kind says so.
            raise CnkiError(
                "PARSER_UNSUPPORTED", f"暂不支持读取{label}的详情页。", details={"url": url, "page_kind": kind}
            )
    meta = meta_tags(root)
    title = _clean_title(meta_first(meta, "citation_title", "dc.title")) or _detail_title(root)
    if not title:
        raise CnkiError("PARSER_UNSUPPORTED", "详情页缺少可信题名", details={"url": url})
    rows = _rows(root)

    link = _source_link(root)
    source_url = resolve_href(link.get("href"), url) if link is not None else ""
    source = meta_first(meta, "citation_journal_title", "citation_conference_title", "dc.source")
    source = strip_source_tail(source or (text_of(link) if link is not None else ""))

    top_tip = text_of(first_match(root, ".top-tip"))
    date = meta_first(meta, "citation_publication_date", "citation_date", "dc.date")
    volume = meta_first(meta, "citation_volume")
    issue = meta_first(meta, "citation_issue")
    pages = meta_first(meta, "citation_pages")
    cited_issue = _ISSUE.search(top_tip)
    if cited_issue:
        date = date or cited_issue[1]
        volume = volume or (cited_issue[2] or "")
        issue = issue or (cited_issue[3].lstrip("0") or "0" if cited_issue[3].isdigit() else cited_issue[3])
        pages = pages or re.sub(r"\s*[-—–]\s*", "-", cited_issue[4] or "")
    if not pages:
        pages = "-".join(unique_strings(meta_all(meta, "citation_firstpage", "citation_lastpage")))
    if not pages:
        printed = re.search(r"页码\s*[:：]\s*(\d+(?:\s*[-—–]\s*\d+)?)", spaced_text(first_match(root, SUMMARY_BLOCK)))
        pages = re.sub(r"\s*[-—–]\s*", "-", printed[1]) if printed else ""
    if not date:
        date = text_of(first_match(root, ".top-tip .date, #catalog_PUBLISHDATE, #ndate"))
    if not date:
        date = next((_date_text(rows[label]) for label in _DATE_ROWS if label in rows), "")
    if not date:
        date = _date_text(text_of(first_match(root, ".head-time")))
    year = year_of(top_tip) or year_of(date)

    abstract, excerpt = _detail_abstract(root)
    if not abstract and not excerpt:
        abstract = meta_first(meta, "citation_abstract", "dc.description")

    doi = meta_first(meta, "citation_doi", "dc.identifier.doi")
    if not doi:
        match = _DOI_TEXT.search(f"DOI：{rows['DOI']}" if "DOI" in rows else spaced_text(root.find("body")))
        doi = match[1].rstrip(".;；,，。") if match else ""

    ids = _detail_identifiers(root, url)
    online_first = "网络首发" in text_of(first_match(root, ".head-time")) or bool(root.cssselect(".wx-tit h1 .icon-shoufa"))
    observed = now()
    return Paper(
        title=title,
        authors=_detail_authors(root, meta),
        institutions=_detail_institutions(root, meta),
        source=source,
        source_url=source_url,
        year=year,
        publication_date=date,
        volume=volume,
        issue=issue,
        pages=pages,
        doi=doi,
        abstract=abstract,
        excerpt=excerpt,
        keywords=_detail_keywords(root, meta),
        funds=_detail_funds(root),
        clc_codes=_detail_clc(root, rows),
        document_type=_detail_type(root, ids["dbcode"], rows),
        url=public_url(url),
        locator=url,
        online_first=online_first,
        detail_observed_at=observed,
        detail_parser=PARSER_VERSION,
        **ids,
    )


def check_identity(paper_expected: Paper, paper_seen: Paper) -> None:
    """Raise IDENTITY_CONFLICT unless the page shows the requested paper."""
    same = detail_matches(paper_expected, paper_seen)
    if not same:
        raise CnkiError(
            "IDENTITY_CONFLICT",
            "详情页与请求文献不一致",
            details={"requested": paper_expected.title, "observed": paper_seen.title},
        )


# --------------------------------------------------------------------------------------------
# Journal page

_TIER = re.compile(
    r"(?<![A-Za-z0-9])(?:CSSCI来源期刊|CSSCI扩展版|CSSCI|CSCD来源期刊|CSCD核心库|CSCD扩展库|CSCD|北大核心期刊|北大核心"
    r"|SSCI|SCI-E|SCI|A&HCI|EI来源期刊|EI|WJCI|AMI(?:综合评价)?(?:顶级|权威|核心|扩展|入库)?"
    r"|CAS|JST|Scopus|卓越期刊)(?![A-Za-z0-9])",
    re.I,
)
# Tags written in a longer form on some pages, kept under the name the rest of the product uses.
_TIER_NAMES = {"北大核心期刊": "北大核心"}
_TIER_LABEL = re.compile(r"^(?:数据库收录|来源类别|期刊荣誉|期刊收录|收录)\s*[:：]")
_TIER_SEPARATORS = re.compile(r"[\s，,；;、:：()（）\[\]]+")
_COMPOSITE = re.compile(r"复合影响因子\s*[:：]?\s*(\d+(?:\.\d+)?)")
_AGGREGATE = re.compile(r"综合影响因子\s*[:：]?\s*(\d+(?:\.\d+)?)")
_METRIC_YEAR = re.compile(r"[(（]\s*(20\d{2})\s*版\s*[)）]\s*(?:复合|综合)影响因子")
_FORMER = re.compile(r"^曾用刊名[:：]")
# 基本信息 lines, read after NFKC (full-width digits, letters, hyphens and colons are common).
_BASE_INFO_LINE = re.compile(r"^(ISSN|CN)\s*:\s*(.*)", re.I)
_ISSN = re.compile(r"(?<![0-9A-Za-z])(\d{4})\s*[-‐‑–—]?\s*(\d{3}[\dX])(?![0-9A-Za-z])", re.I)
_CN = re.compile(r"(?<![0-9A-Za-z])(\d{2})\s*[-‐‑–—]\s*(\d{4})\s*/\s*([A-Z][A-Z0-9.]*)", re.I)
_TITBOX_MARKUP = re.compile(
    r"<h3\b[^>]*\bclass\s*=\s*[\"']?[^\"'>]*\btitbox\b[^>]*>(.*?)</h3\s*>", re.S | re.I
)


def _title_lines(head: lxml.html.HtmlElement) -> list[str]:
    """Lines of ``h3.titbox`` without its child elements; a <br> starts a new line."""
    lines = [head.text or ""]
    for child in head:
        if child.tag == "br":
            lines.append("")
        lines[-1] += " " + (child.tail or "")
    return [line for line in (clean(line) for line in lines) if line]


def former_names(line: str) -> list[str]:
    """The journal names a ``曾用刊名：a;b`` line gives ([] for any other line)."""
    return split_values(_FORMER.sub("", line), ";；") if _FORMER.match(line) else []


def issn_value(text: str) -> str:
    """The first ISSN in ``text`` as ``NNNN-NNNC``, or "" when none has a valid check digit (a misread)."""
    for match in _ISSN.finditer(unicodedata.normalize("NFKC", text)):
        digits = (match[1] + match[2]).upper()
        total = sum(int(d) * weight for d, weight in zip(digits[:7], range(8, 1, -1)))
        check = (11 - total % 11) % 11
        if digits[7] == ("X" if check == 10 else str(check)):
            return f"{digits[:4]}-{digits[4:]}"
    return ""


def cn_value(text: str) -> str:
    """The first 国内统一连续出版物号 in ``text`` as ``11-1234/D``, or ""."""
    match = _CN.search(unicodedata.normalize("NFKC", text))
    return f"{match[1]}-{match[2]}/{match[3].upper()}" if match else ""


def _base_info(root: lxml.html.HtmlElement, box: lxml.html.HtmlElement) -> tuple[str, str]:
    """(ISSN, CN) from the journal's labelled info lines (``ISSN：`` / ``CN：``), inside the info box or
    in the 2024+ ``ul#JournalBaseInfo``."""
    issn = cn = ""
    for el in [*box.cssselect("p, li"), *root.cssselect("#JournalBaseInfo p, #JournalBaseInfo li")]:
        text = unicodedata.normalize("NFKC", text_of(el))
        line = _BASE_INFO_LINE.match(text)
        if line is None:
            continue
        if line[1].upper() == "ISSN":
            issn = issn or issn_value(line[2])
        else:
            cn = cn or cn_value(line[2])
    return issn, cn


def _single_number(pattern: re.Pattern[str], text: str) -> float | None:
    found = pattern.findall(text)
    return float(found[0]) if len(found) == 1 else None


def parse_journal(html: str, url: str, expected_source: str) -> Quality:
    """Tiers and impact factors of a navi.cnki.net journal page, bound to the paper's source."""
    root = load_page(html)
    box = first_match(root, ".journalInfo .infobox")
    head = first_match(box, "h3.titbox") if box is not None else None
    lines = _title_lines(head) if head is not None else []
    # libxml2 closes an <h3> at a child <p> (browsers do not), so re-read the heading's own markup.
    for markup in _TITBOX_MARKUP.finditer(html) if lines else ():
        twin = prune(lxml.html.fragment_fromstring(markup[1], create_parent="h3"))
        twin_lines = _title_lines(twin)
        if twin_lines and twin_lines[0] == lines[0]:
            head, lines = twin, twin_lines
            break
    if box is None or head is None or not lines:
        raise CnkiError("SOURCE_SCHEMA_UNSUPPORTED", "来源页没有可辨认的期刊实体", details={"url": url})
    current = lines[0]
    names = [(current, "current_title")]
    names += [(line, "translated_title") for line in lines[1:]]
    names += [(text_of(p), "translated_title") for p in head.cssselect("p")]
    for el in box.cssselect("p, li"):
        names += [(name, "former_title") for name in former_names(text_of(el))]
    wanted = source_key(expected_source)
    basis = next((basis for name, basis in names if wanted and source_key(name) == wanted), "")
    if not basis:
        raise CnkiError(
            "SOURCE_IDENTITY_UNCONFIRMED",
            "期刊页名称与来源不符",
            details={"requested_source": expected_source, "observed_source": current},
        )

    tiers: list[str] = []
    evidence: list[TierEvidence] = []
    for el in box.iter("p", "span", "a", "li"):
        if any(anc.tag in ("h1", "h2", "h3") for anc in el.iterancestors()):
            continue
        text = own_text(el)
        found = [match[0] for match in _TIER.finditer(text)]
        if not found:
            continue
        rest = _TIER_SEPARATORS.sub("", _TIER.sub("", text))
        if rest and not _TIER_LABEL.match(text):
            continue
        for tier in found:
            tier = _TIER_NAMES.get(tier, tier)
            if normalize(tier) not in {normalize(seen) for seen in tiers}:
                tiers.append(tier)
                evidence.append(TierEvidence(tier=tier, text=text))
    if "AMI" in tiers and any(tier.startswith("AMI") and tier != "AMI" for tier in tiers):
        # A bare AMI tag says less than the levelled one the same page lists.
        at = tiers.index("AMI")
        del tiers[at], evidence[at]

    issn, cn = _base_info(root, box)
    box_text = text_of(box)
    composite = _single_number(_COMPOSITE, box_text)
    aggregate = _single_number(_AGGREGATE, box_text)
    metric = _METRIC_YEAR.search(box_text)
    present = bool(tiers) or composite is not None or aggregate is not None
    return Quality(
        canonical_title=current,
        identity_basis=basis,
        tiers=tiers,
        tier_evidence=evidence,
        composite_impact=composite,
        aggregate_impact=aggregate,
        metric_year=int(metric[1]) if metric else 0,
        issn=issn,
        cn=cn,
        source_url=url,
        state="present" if present else "unknown",
        observed_at=now(),
        parser=PARSER_VERSION,
    )


def now() -> str:
    return utc_now_iso()
