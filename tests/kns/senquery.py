"""句子检索 (``POST kns8s/brief/senquery``, endpoint ``senquery``), shaped like azazo1's trimmed capture
(``shared/cnki-samples/azazo1-brief-senquery-fragment.trimmed.html``).

The QueryJson must be a sentence search: ``SearchType`` 5 and a Subject group holding exactly one item
``{Key: "sentence0", Field: "FT", Operator, Value, Value2, Title}`` whose Operator and Title agree
(``SENTENCE`` 同一句, ``NEAR`` 同段); anything else (a SU item, two items, …) is refused the way azazo1 saw it:
查询对象结构错误, 没有指定检索分类！. A paper matches when one of its sentences (同一句: split at 。！？) or
paragraphs (同段: title, abstract, each section paragraph) holds both terms; each match is one block
(``.middle``: ``h5`` 句子N：… with the terms in ``<font color="red">``, ``h6 a.fz14`` the title link,
``.baseinfo`` authors / 【type】 / source / date / downloads), 20 to a page, in corpus order.
"""

from __future__ import annotations

import json
import math
import re
from html import escape as esc
from typing import Any

from .corpus import Corpus, Paper
from .pages import author_url, detail_url, encode_token, highlight, source_url

REFUSED = "查询对象结构错误, 没有指定检索分类！"
SCOPES = {"SENTENCE": "同一句", "NEAR": "同段"}
PAGE_SIZE = 20
_SENTENCE_END = re.compile(r"(?<=[。！？])")


class Refused(Exception):
    pass


def sentence_item(query_json: str) -> tuple[dict[str, Any], tuple[int, int]]:
    """(the sentence item, (year_from, year_to)) of a senquery QueryJson; Refused when it is not one."""
    try:
        q = json.loads(query_json)
        groups = q["QNode"]["QGroup"]
    except (ValueError, KeyError, TypeError):
        raise Refused(REFUSED) from None
    subject = [g for g in groups if isinstance(g, dict) and g.get("Key") == "Subject"]
    items = subject[0].get("Items", []) if len(subject) == 1 else []
    if str(q.get("SearchType")) != "5" or len(items) != 1 or subject[0].get("ChildItems"):
        raise Refused(REFUSED)
    item = items[0]
    if item.get("Field") != "FT" or SCOPES.get(str(item.get("Operator"))) != item.get("Title") \
            or not str(item.get("Value", "")).strip() or not str(item.get("Value2", "")).strip():
        raise Refused(REFUSED)
    years = (0, 0)
    for g in groups:
        for child in (g.get("ChildItems") or []) if isinstance(g, dict) and g.get("Key") == "ControlGroup" else []:
            for it in child.get("Items", []):
                if it.get("Field") == "PT":
                    years = (int(str(it.get("Value") or "0")[:4] or 0), int(str(it.get("Value2") or "0")[:4] or 0))
    return item, years


def units(p: Paper, operator: str) -> list[str]:
    """The paper's sentences (SENTENCE) or paragraphs (NEAR), in reading order."""
    paragraphs = [p.title, p.abstract, *(para for s in p.sections for para in s.paragraphs)]
    if operator == "NEAR":
        return [x for x in paragraphs if x]
    return [s for para in paragraphs for s in _SENTENCE_END.split(para) if s.strip()]


def matches(corpus: Corpus, item: dict[str, Any], years: tuple[int, int] = (0, 0)) -> list[tuple[Paper, str]]:
    """(paper, its first sentence or paragraph holding both terms), in corpus order (the oracle)."""
    a, b = str(item["Value"]).strip().lower(), str(item["Value2"]).strip().lower()
    out = []
    for p in corpus.papers:
        if (years[0] and p.year < years[0]) or (years[1] and p.year > years[1]):
            continue
        hit = next((u for u in units(p, str(item["Operator"])) if a in u.lower() and b in u.lower()), None)
        if hit is not None:
            out.append((p, hit))
    return out


def fragment(found: list[tuple[Paper, str]], page: int, epoch: int, terms: list[str], fingerprint: str) -> str:
    total = len(found)
    pages = max(1, math.ceil(total / PAGE_SIZE))
    blocks = []
    for n, (p, text) in enumerate(found[(page - 1) * PAGE_SIZE: page * PAGE_SIZE], start=(page - 1) * PAGE_SIZE + 1):
        authors = "".join(f'<a class="KnowledgeNetLink" href="{esc(author_url(a))}">{esc(a)};</a>' for a in p.authors)
        source = (f'<a target="_blank" href="{esc(source_url(p.source_key))}">{esc(p.source)}</a>' if p.source_key
                  else esc(p.source))
        blocks.append(
            f'<div class="middle"><h5><label>句子{n}：</label>{highlight(text, terms)}<br></h5>'
            f'<h6><label>句子来自：</label><span><a class="fz14" target="_blank" href="{esc(detail_url(p, epoch))}">'
            f'{esc(p.title)}</a></span></h6><div class="baseinfo"><span><label>作者：</label>{authors}</span>'
            f'<em>【{esc(p.doc_type)}】</em><span><label>来源：</label>{source}</span>'
            f'<span class="date">{esc(p.date[:10])}</span>'
            f'<span class="opts-count">下载<a class="downloadCnt" href="javascript:void(0);"><em>{p.downloads}</em></a></span>'
            f'</div></div>')
    turnpage = encode_token("sq", fingerprint)
    return (f'<div id="briefBox"><div id="countPageDiv"><span class="pagerTitleCell"><span>共找到</span> <em>{total:,}</em> '
            f'<span>条结果</span></span> <span class="countPageMark" data-pagenum="{pages}">{page}/{pages}</span></div>'
            f'{"".join(blocks)}<input id="hidTurnPage" type="hidden" value="{turnpage}"></div>')
