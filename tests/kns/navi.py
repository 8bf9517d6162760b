"""navi.cnki.net's fragments: the journal search (``knavi/all/searchbaseinfo``), a journal's ``yearList`` and
an issue's ``papers`` (endpoint ``navi``), shaped like MarioZZJ's 2026 excerpts
(``shared/cnki-samples/mariozzj-knavi-yearList-papers-and-detail.excerpts.html``).

All three answer POSTs carrying ``X-Requested-With`` only (else 404, as a hand-typed address gets);
``yearList`` also wants the journal page's ``time`` token (else a 请求参数错误 page). The issues of a
journal are the issues its corpus papers carry; an issue's rows are its papers in page order, under the
column heading of their topic (``navi_columns=False``: no headings).
"""

from __future__ import annotations

import json
from html import escape as esc
from typing import Any

from .corpus import Corpus, Journal, Paper
from .pages import decode_token, detail_url, encode_token, source_url


def issues(corpus: Corpus, key: str) -> dict[int, list[int]]:
    """year → issue numbers (newest first) of a journal, from its corpus papers."""
    found: dict[int, set[int]] = {}
    for p in corpus.papers:
        if p.source_key == key and p.issue.isdigit() and not p.online_first:
            found.setdefault(p.year, set()).add(int(p.issue))
    return {y: sorted(found[y], reverse=True) for y in sorted(found, reverse=True)}


def issue_code(key: str, year: int, issue: int) -> str:
    return encode_token("yq", key, year, issue)


def toc(corpus: Corpus, key: str, year: int, issue: int) -> list[Paper]:
    """An issue's papers in page order (the oracle of the papers fragment)."""
    rows = [p for p in corpus.papers if p.source_key == key and p.year == year and p.issue == str(issue) and not p.online_first]
    return sorted(rows, key=lambda p: (int(p.pages.split("-")[0]) if p.pages.split("-")[0].isdigit() else 0, p.filename))


def section(n: int) -> str:
    """The column heading of an issue's n-th paper (0-based): the first stands under 特稿, the others under 学术研究."""
    return "特稿" if n == 0 else "学术研究"


def search_fragment(corpus: Corpus, form: dict[str, str], former_shown: bool = False) -> str:
    """The navi search's answer: journals whose name contains the value (LY 来源名称; TI 刊名(曾用刊名) also
    their former names) or whose ISSN/CN equals it. ``former_shown``: entries also show 曾用刊名."""
    try:
        item = json.loads(form.get("searchStateJson", ""))["QNode"]["QGroup"][0]["ChildItems"][0]["Items"][0]
        name, value = item["Name"], str(item["Value"]).strip("'")
    except (ValueError, KeyError, IndexError, TypeError):
        return '<div class="result"><p class="no-content">请求参数错误</p></div>'
    journals = [j for j in corpus.journals.values() if j.kind == "journal"]
    if name == "SN":
        hits = [j for j in journals if j.issn.upper() == value.upper()]
    elif name == "CN":
        hits = [j for j in journals if j.cn.upper() == value.upper()]
    elif name == "TI":
        hits = [j for j in journals if value and any(value in n for n in (j.name, *j.former))]
    else:
        hits = [j for j in journals if value and value in j.name]
    if not hits:
        return '<div class="result"><p class="no-content">没有找到相关出版物</p><input type="hidden" id="totalCnt" value="0"/></div>'
    items = "".join(_search_item(j, former_shown) for j in hits)
    return f'<div class="result"><input type="hidden" id="totalCnt" value="{len(hits)}"/><ul class="list_tab">{items}</ul></div>'


def _search_item(j: Journal, former_shown: bool) -> str:
    former = f'<p>曾用刊名：{esc(";".join(j.former))}</p>' if former_shown and j.former else ""
    return (f'<li><div class="re_bookCover"><a href="{esc(source_url(j.key))}" target="_blank" title="{esc(j.name)}">'
            f'<img src="https://c61.cnki.net/cjfd/small/{j.key}.jpg"></a></div>'
            f'<div class="detials"><a href="{esc(source_url(j.key))}" target="_blank"><h1>{esc(j.name)}</h1></a>'
            f'<p>ISSN：{esc(j.issn)}</p><p>CN：{esc(j.cn)}</p>{former}<p>主办单位：{esc(j.sponsor)}</p></div></li>')


def year_list_fragment(corpus: Corpus, key: str, page: int, per_page: int) -> str:
    years = issues(corpus, key)
    shown = list(years.items())[page * per_page:(page + 1) * per_page]
    dls = "".join(
        f'<dl id="{y}_Year_Issue" class="s-dataList clearfix"><dt><em>{y}</em></dt><dd>'
        + "".join(f'<a id="yq{y}{n:02d}" onclick=\'JournalDetail.BindIssueClick(this)\' value="{issue_code(key, y, n)}">No.{n:02d}</a>'
                  for n in nums)
        + "</dd></dl>" for y, nums in shown)
    return (f'<input type="hidden" id="totalCnt" value="{len(years)}"/>'
            f'<div class="yearissuepage" id="yearissue{page}" pageindex="{page}">{dls}</div>')


def papers_fragment(corpus: Corpus, code: str, epoch: int, columns: bool) -> str | None:
    """An issue's table of contents; None for a code that names no issue."""
    parts = decode_token(code) or []
    if len(parts) != 4 or parts[0] != "yq" or not parts[2].isdigit() or not parts[3].isdigit():
        return None
    rows = toc(corpus, parts[1], int(parts[2]), int(parts[3]))
    out: list[str] = []
    heading = None
    for n, p in enumerate(rows):
        if columns and section(n) != heading:
            heading = section(n)
            out.append(f'<dt class="tit">专栏:{esc(heading)}</dt>')
        free = "<label>免费</label>" if p.free else ""
        authors = "".join(f"{a};" for a in p.authors)
        out.append(
            f'<dd class="row clearfix{" bgcGray" if n % 2 else ""}"><span class="name">'
            f'<a target="_blank" href="{esc(detail_url(p, epoch))}">{esc(p.title)}</a>'
            f'<b name="encrypt" id="{esc(p.filename)}" value="">{free}</b></span>'
            f'<span class="author" title="{esc(authors)}">{esc(authors)}</span>'
            f'<span class="company" title="{esc(p.pages)}">{esc(p.pages)}</span></dd>')
    if not out:
        return '<div><p class="no-content">暂无数据</p></div>'
    return f'<div><div>{"".join(out)}</div></div>'


def answer(corpus: Corpus, method: str, path: str, query: dict[str, str], form: dict[str, str],
           headers: dict[str, Any], sc: Any, epoch: int) -> tuple[int, str]:
    """(status, body) of a navi fragment request."""
    if method != "POST" or headers.get("X-Requested-With") != "XMLHttpRequest":
        return 404, "<html><body>404 页面不存在</body></html>"
    parts = path.strip("/").split("/")
    if path.rstrip("/").lower() == "/knavi/all/searchbaseinfo":
        return 200, search_fragment(corpus, form, sc.navi_hit_former)
    if len(parts) == 4 and parts[1] == "journals":
        key, what = parts[2].upper(), parts[3].lower()
        if corpus.journal(key) is None:
            return 404, "<html><body>404 出版物不存在</body></html>"
        if what == "yearlist":
            if form.get("time") != encode_token("t", key):
                return 200, '<div class="error"><p>请求参数错误，请刷新页面后重试</p></div>'
            page = int(form.get("pIdx", "0")) if form.get("pIdx", "0").isdigit() else 0
            return 200, year_list_fragment(corpus, key, page, sc.navi_years_per_page)
        if what == "papers":
            body = papers_fragment(corpus, query.get("yearIssue", ""), epoch, sc.navi_columns)
            return (200, body) if body is not None else (200, '<div class="error"><p>请求参数错误</p></div>')
    return 404, "<html><body>404 页面不存在</body></html>"
