"""The citation graph of the simulated corpus, and CNKI's answers about it.

Every paper cites earlier papers of its own topic — journal articles (CJFD), doctoral and master
theses (CDFD, CMFD), conference papers (CPFD), books (CBBD), now and then a newspaper article (CCND) —
plus works CNKI links to no record: books outside CNKI (NLNK) and foreign articles without a link
(WWJD). Citing lists are the inverse; a paper whose grid row counts citations is cited at least once.
Similar papers are the papers of the same topic sharing the most keywords.

Served (``server.py``, endpoint ``citation``) as the scrapers of 2025–2026 read them:

    GET /restapi/citation-api/v1/literature/references?v=<v>&type=<DB>REF&start=<page>&size=<n>
    GET /restapi/citation-api/v1/literature/citations?v=<v>&type=<DB>REF&start=<page>&size=<n>
    GET /restapi/literature-api/v1/articles/relations/similar?v=<v>&uniplatform=NZKPT&start=&size=

answering ``{"code":200,"message":"success","data":{"total":N,"data":[{"metadata":[{"name":"TI",
"value":…},{"name":"AU","value":"a;b;"},…],"relations":[{"scope":"ABSTRACT","url":<detail>}]}]}}``.
Detail pages render the first 10 items of each database of both lists by script (``rendered``).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import pages
from .corpus import TOPICS, Corpus, Paper
from .downloads import esc

if TYPE_CHECKING:
    from .server import Scenario

DATABASES = ("CJFD", "CDFD", "CMFD", "CPFD", "IPFD", "CCND", "CYFD", "CBBD", "SCPD", "SCSD", "WWJD", "NLNK")
DATABASE_OF = {"CJFQ": "CJFD", "CAPJ": "CJFD", "CDFD": "CDFD", "CMFD": "CMFD", "CPFD": "CPFD", "CCND": "CCND", "CBBD": "CBBD"}
DATABASE_NAMES = {
    "CJFD": "中国学术期刊网络出版总库", "CDFD": "中国博士学位论文全文数据库", "CMFD": "中国优秀硕士学位论文全文数据库",
    "CPFD": "中国重要会议论文全文数据库", "CCND": "中国重要报纸全文数据库", "CBBD": "图书数据库",
    "WWJD": "外文题录数据库", "NLNK": "其他文献",
}
MARKS = {"CJFD": "J", "CDFD": "D", "CMFD": "D", "CPFD": "C", "CCND": "N", "CBBD": "M", "WWJD": "J", "NLNK": "M"}
LINKED = {"JOURNAL": (3, 8), "DISSERTATION": (10, 18), "CONFERENCE": (2, 5), "BOOK": (0, 2), "NEWSPAPER": (0, 0)}
UNLINKED = {"JOURNAL": (1, 2), "DISSERTATION": (2, 4), "CONFERENCE": (0, 1), "BOOK": (0, 0), "NEWSPAPER": (0, 0)}
# The detail page's citation area (``citation_area``): the lists inside it (up to 2025), the 2026 area whose
# 参考文献/引证文献 are a.ReferLinkOn links to list pages, that area with nothing in it, or markup of no known kind.
AREAS = ("lists", "link", "empty", "unknown")
SIMILAR_COUNT = 15
RENDERED_PER_DATABASE = 10
FOREIGN_AUTHORS = ("Smith J", "Brown K", "Miller A", "Garcia M", "Tanaka H", "Müller F", "Dubois C")
FOREIGN_JOURNALS = ("Journal of Information Science", "Computer Law & Security Review", "Ecological Economics",
                    "The Lancet", "Educational Researcher")
PRESSES = ("东湖大学出版社", "北江人民出版社", "法律知识出版社", "科学技术文献出版社")


@dataclass
class Ref:
    """One item of a list: a corpus paper, or a work CNKI links to no record (``paper`` None)."""

    database: str
    paper: Paper | None = None
    title: str = ""
    authors: list[str] = field(default_factory=list)
    source: str = ""
    year: int = 0

    def citation(self) -> str:
        mark = MARKS.get(self.database, "")
        return f"{self.title}[{mark}].{','.join(self.authors)}.{self.source}.{self.year}"


def database_of(p: Paper) -> str:
    return DATABASE_OF.get(p.dbcode, "CJFD")


def _topic(p: Paper) -> int:
    return p.idx % len(TOPICS)


class Graph:
    """References, citing and similar papers of every corpus paper (built once, deterministic)."""

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus
        self.references: dict[str, list[Ref]] = {}
        self.citing: dict[str, list[Ref]] = {}
        by_topic: dict[int, list[Paper]] = {}
        for p in corpus.papers:
            by_topic.setdefault(_topic(p), []).append(p)
        self._by_topic = by_topic
        for p in corpus.papers:
            self.references[p.filename] = self._cite(p)
        self._cover_counted_citations()
        for p in corpus.papers:
            for ref in self.references[p.filename]:
                if ref.paper is not None:
                    self.citing.setdefault(ref.paper.filename, []).append(Ref(database_of(p), p))
        for refs in self.citing.values():
            refs.sort(key=lambda r: (DATABASES.index(r.database), -(r.paper.year if r.paper else 0), r.paper.idx if r.paper else 0))

    def _cite(self, p: Paper) -> list[Ref]:
        rng = random.Random(f"cites-{p.filename}")
        low, high = LINKED.get(p.resource, (0, 0))
        pool = [q for q in self._by_topic[_topic(p)] if q is not p and q.year <= p.year and q.title != p.title
                and (q.resource != "NEWSPAPER" or rng.random() < 0.1)]
        chosen = rng.sample(pool, k=min(len(pool), rng.randint(low, high)))
        refs = [Ref(database_of(q), q) for q in chosen]
        low, high = UNLINKED.get(p.resource, (0, 0))
        for n in range(rng.randint(low, high)):
            if n % 2 == 0:
                refs.append(Ref("NLNK", title=f"{p.keywords[0]}原理（第{rng.randint(2, 5)}版）",
                                authors=[p.authors[0][:1] + "明"], source=rng.choice(PRESSES), year=rng.randint(1998, p.year)))
            else:
                topic_en = TOPICS[list(TOPICS)[_topic(p)]][0]
                refs.append(Ref("WWJD", title=f"On {topic_en}: an empirical study {rng.randint(1, 99)}",
                                authors=rng.sample(FOREIGN_AUTHORS, 2), source=rng.choice(FOREIGN_JOURNALS),
                                year=rng.randint(2005, p.year)))
        refs.sort(key=lambda r: (DATABASES.index(r.database), -(r.paper.year if r.paper else r.year)))
        return refs

    def _cover_counted_citations(self) -> None:
        """A paper the grid shows as cited is cited by at least one later paper of the corpus."""
        cited = {ref.paper.filename for refs in self.references.values() for ref in refs if ref.paper is not None}
        citers = [q for q in self.corpus.papers if q.resource in ("JOURNAL", "DISSERTATION", "CONFERENCE")]
        for p in self.corpus.papers:
            if p.cited <= 0 or p.filename in cited:
                continue
            later = [q for q in citers if q is not p and q.year >= p.year and q.title != p.title]
            if later:
                q = random.Random(f"cover-{p.filename}").choice(later)
                self.references[q.filename].append(Ref(database_of(p), p))
                cited.add(p.filename)

    def similar(self, p: Paper) -> list[Ref]:
        mine = set(p.keywords)
        others = [q for q in self._by_topic[_topic(p)] if q is not p]
        others.sort(key=lambda q: (-len(mine & set(q.keywords)), q.idx))
        return [Ref(database_of(q), q) for q in others[:SIMILAR_COUNT]]

    def items(self, relation: str, p: Paper, database: str = "") -> list[Ref]:
        """The list a request names: one database of references or citing papers, or the similar papers."""
        if relation == "similar":
            return self.similar(p)
        refs = self.references if relation == "references" else self.citing
        return [r for r in refs.get(p.filename, []) if r.database == database]


def item_json(ref: Ref, epoch: int) -> dict[str, Any]:
    q = ref.paper
    if q is None:
        metadata = [("TI", ref.title), ("AU", "".join(f"{a};" for a in ref.authors)), ("LY", ref.source), ("YE", str(ref.year))]
        return {"metadata": [{"name": k, "value": v} for k, v in metadata]}
    metadata = [("TI", q.title), ("AU", "".join(f"{a};" for a in q.authors)), ("YE", str(q.year)), ("LY", q.source),
                ("AB", q.abstract), ("PT", q.date[:10])]
    return {"metadata": [{"name": k, "value": v} for k, v in metadata],
            "relations": [{"scope": "ABSTRACT", "url": pages.detail_url(q, epoch)}]}


def _body(data: Any, code: int = 200, message: str = "success") -> str:
    return json.dumps({"code": code, "message": message, "data": data}, ensure_ascii=False)


def answer(graph: Graph, path: str, query: dict[str, str], sc: Scenario, epoch: int) -> tuple[int, str, str]:
    """(status, content type, body) for one request of the API."""
    if sc.citation_api == "gone":
        return 404, "text/html; charset=utf-8", pages.simple_page("页面不存在", "404 页面不存在")
    parts = pages.decode_token(query.get("v", "")) or []
    p = graph.corpus.by_filename(parts[2]) if len(parts) == 3 and parts[0] == "v" else None
    if p is None or parts[1] != str(epoch):
        return 200, "application/json; charset=utf-8", _body(None, 400, "请求信息有误")
    relation = "similar" if "/relations/similar" in path else "references" if path.endswith("/references") else "citing"
    kind = query.get("type", "")
    database = kind[:-3] if kind.endswith("REF") else ""
    if relation != "similar" and database not in DATABASES:
        return 200, "application/json; charset=utf-8", _body(None, 400, "参数错误")
    try:
        start, size = max(1, int(query.get("start") or 1)), int(query.get("size") or 10)
    except ValueError:
        return 200, "application/json; charset=utf-8", _body(None, 400, "参数错误")
    size = min(max(size, 1), sc.citation_size_cap)
    items = graph.items(relation, p, database)
    offset = start - 1 if sc.citation_start == "record" else (start - 1) * size
    if sc.citation_api == "empty":
        items = []
    page = [item_json(ref, epoch) for ref in items[offset: offset + size]]
    if sc.citation_relative_links:  # the detail links as a path on the answering site, no host
        for item in page:
            for link in item.get("relations", []):
                link["url"] = link["url"].removeprefix(pages.KNS)
    if sc.citation_api == "bad_shape":
        return 200, "application/json; charset=utf-8", _body({"count": len(items), "list": page})
    if sc.citation_lone_surrogate:  # JSON may escape half a pair: \ud83d with nothing after it
        for item in page:
            for entry in item["metadata"]:
                if entry["name"] == "AB":
                    entry["value"] += "\ud83d"
        return 200, "application/json; charset=utf-8", json.dumps({"code": 200, "message": "success", "data": {"total": len(items), "data": page}})
    return 200, "application/json; charset=utf-8", _body({"total": len(items), "data": page})


def decoy(graph: Graph, epoch: int) -> str:
    """The fixed record a site under pressure answers for any paper and any database."""
    return _body({"total": 1, "data": [item_json(Ref("CJFD", graph.corpus.papers[0]), epoch)]})


# --- what the detail page renders itself ----------------------------------------------------------


def _li(n: int, ref: Ref, epoch: int) -> str:
    q = ref.paper
    if q is None:
        return f"<li><em>[{n}]</em>{esc(ref.citation())}</li>"
    mark = MARKS.get(ref.database, "J")
    return (f'<li><em>[{n}]</em><a target="_blank" href="{esc(pages.detail_url(q, epoch))}">{esc(q.title)}</a>'
            f"[{mark}].{esc(','.join(q.authors))}.{esc(q.source)}.{q.year}</li>")


def _section(kind: str, refs: list[Ref], epoch: int) -> str:
    blocks = []
    for database in DATABASES:
        mine = [r for r in refs if r.database == database]
        if not mine:
            continue
        items = "".join(_li(n + 1, r, epoch) for n, r in enumerate(mine[:RENDERED_PER_DATABASE]))
        blocks.append(f'<div class="essayBox"><div class="dbTitle">{DATABASE_NAMES.get(database, database)}'
                      f'<b class="titleTotle">({len(mine)})</b></div><ul class="ebBd">{items}</ul></div>')
    notice = "" if blocks else '<p class="no-data">暂无数据</p>'
    return f'<div class="module-content" id="{kind}-list" data-relation="{kind}">{"".join(blocks)}{notice}</div>'


LIST_PATH = "/kcms/detail/frame/list.aspx"
REF_TYPES = {"1": "references", "3": "citing"}  # KCMS's RefType: 1 参考文献, 2 二级参考文献, 3 引证文献 …
_TABS = ("参考文献", "引证文献", "共引文献", "同被引文献", "二级参考文献", "二级引证文献")


def list_url(p: Paper, ref_type: str) -> str:
    return f"{LIST_PATH}?dbcode={p.dbcode}&filename={p.filename}&dbname={p.dbcode}&RefType={ref_type}&vl="


def _area_2026(p: Paper, area: str) -> str:
    """The 2026 citation area: tabs and #MapArea (its links to the list pages, or nothing), the nxgp-* containers
    empty, KCMS's hidden #ref_nodata notice; ``unknown``: a redesign with none of these."""
    if area == "unknown":
        return '<div class="cite-network-v3"><canvas width="600" height="300"></canvas><span>引文网络加载中</span></div>'
    links = "" if area == "empty" else (
        f'<a class="ReferLinkOn" id="references" href="{esc(list_url(p, "1"))}" target="_blank">参考文献</a>'
        f'<a id="citations" href="{esc(list_url(p, "3"))}" target="_blank">引证文献</a>'
        f'<a id="secondreferences" href="{esc(list_url(p, "2"))}" target="_blank">二级参考文献</a>')
    tabs = "".join(f"<li>{t}</li>" for t in _TABS)
    empty = "".join(f'<div class="nxgp-{kind}"></div>' for kind in ("references", "citations", "coreferences"))
    return (f'<div id="refpartdiv"><h5 class="module-title">引文网络</h5><ul class="module-tab">{tabs}</ul>'
            f'<div id="MapArea">{links}</div>{empty}<div id="ref_nodata" style="display:none">暂无数据</div></div>')


def rendered(graph: Graph, p: Paper, epoch: int, area: str = "lists") -> str:
    """The detail page's citation area, filled in by script 150 ms after load: the 参考文献 and 引证文献 lists
    (``lists``) or the 2026 area (see AREAS)."""
    if area == "lists":
        html = (_section("reference", graph.references.get(p.filename, []), epoch)
                + _section("citing", graph.citing.get(p.filename, []), epoch))
    else:
        html = _area_2026(p, area)
    return (f'<div class="relations-area"></div><script>setTimeout(function(){{'
            f'document.querySelector(".relations-area").innerHTML = {json.dumps(html, ensure_ascii=False)};}}, 150);</script>')


def list_page(graph: Graph, query: dict[str, str], epoch: int) -> tuple[int, str]:
    """(status, HTML) of the page an area link leads to: the list's database blocks as KCMS list pages write
    them (first 10 items of each, a heading with the count)."""
    p = graph.corpus.by_filename(query.get("filename", ""))
    relation = REF_TYPES.get(query.get("RefType", ""))
    if p is None or relation is None:
        return 404, pages.simple_page("页面不存在", "404 页面不存在")
    refs = graph.references if relation == "references" else graph.citing
    body = _section("reference" if relation == "references" else "citing", refs.get(p.filename, []), epoch)
    return 200, f"<!DOCTYPE html><html><head><title>{_TABS[0] if relation == 'references' else _TABS[1]}</title></head><body>{body}</body></html>"
