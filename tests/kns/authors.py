"""CNKI's author pages (endpoint ``author``): the page a detail page's byline links each author to.

Shaped like the public accounts of it (docs/site-notes.md "Author pages"): the 2024+ ``kcms2/author/detail?v=``
page holds ``#kcms-author-info`` with ``h1#showname``, ``h3`` lines whose ``span > a`` name the institutions
(``kcms2/organ/detail`` links) and the hidden ``#au-name`` / ``#au-code``; the older
``kcms/detail/knetsearch.aspx?sfield=au&code=`` page shows ``#showname`` and the institutions, with the code
only in its address (``author_page="legacy"``). ``author_page="redesigned"`` is a page the product has never
seen (no name box, no code). A person is ``corpus.Person``: a name, the institutions they wrote at, their papers.
"""

from __future__ import annotations

from html import escape as esc
from typing import Any

from .corpus import Corpus, Paper, Person
from .pages import KNS, decode_token, encode_token, header_html, page, simple_page


def person_of(corpus: Corpus, query: dict[str, str]) -> Person | None:
    """The person an author page's address names (``v=`` token or ``code=``)."""
    if query.get("code"):
        return corpus.people.get(query["code"])
    parts = decode_token(query.get("v", "")) or []
    return corpus.people.get(parts[1]) if len(parts) == 2 and parts[0] == "a" else None


def newest_first(person: Person) -> list[Paper]:
    """The person's papers as the author page and an AUC listing order them (the oracle)."""
    return sorted(person.papers, key=lambda p: p.date, reverse=True)


def author_page(person: Person, sc: Any) -> str:
    organs = "".join(f'<span><a target="_blank" href="{KNS}/kcms2/organ/detail?v={encode_token("g", o)}">{esc(o)}</a></span>'
                     for o in reversed(person.institutions))  # the latest first
    papers = "".join(f"<li><a>{esc(p.title)}</a></li>" for p in newest_first(person)[:10])
    if sc.author_page == "redesigned":
        body = f'<div class="scholar-app"><div class="scholar-card">{esc(person.name)}</div><ul>{papers}</ul></div>'
        return page(f"{person.name} - 学者 - 中国知网", header_html(sc) + body)
    hidden = "" if sc.author_page == "legacy" else (
        f'<input type="hidden" id="au-name" value="{esc(person.name)}"><input type="hidden" id="au-code" value="{person.code}">')
    info = "" if sc.author_page == "legacy" else ' id="kcms-author-info"'
    body = f"""{header_html(sc)}
<div class="wrapper"><div class="main"><div class="container full-screen"><div>
<div class="author-info"{info}>
  <h1 id="showname">{esc(person.name)}</h1>
  <h3 class="organ">{organs}</h3>
  <h3 class="expert-field">专业：<span>综合</span></h3>
  <div class="amount">{len(person.papers)}</div><div class="amount">{sum(p.downloads for p in person.papers)}</div>
</div>
<div id="KCMS-AUTHOR-JOURNAL-LITERATURES"><ul>{papers}</ul></div>
</div></div></div></div>{hidden}"""
    return page(f"{person.name} - 作者 - 中国知网", body)


def answer(corpus: Corpus, query: dict[str, str], sc: Any) -> tuple[int, str]:
    person = person_of(corpus, query)
    if person is None:
        return 404, simple_page("作者不存在", "404 作者不存在或链接已失效")
    return 200, author_page(person, sc)
