"""Pure rules of an author: which institutions a detail page's byline gives that author, and the author's
own page (who CNKI takes the person to be: their code and institutions).

The byline (``h3.author#authorpart > span > a``, the name with ``sup`` numbers like ``1,2`` and a link to
``kcms2/author/detail?v=…``) numbers each author's institutions in the second ``h3.author`` (``1.上海科技大学``;
``h3.orgn`` on some pages). An author without numbers belongs to every institution listed (one institution
is never numbered). The institutions are given as CNKI names them, without their numbers.

The author link leads to the author's page (docs/site-notes.md "Author pages"): the 2024+ kcms2 page holds
``#kcms-author-info`` with ``h1#showname``, ``h3`` lines of ``span > a`` institutions and the hidden
``#au-name`` / ``#au-code``; the older ``kcms/detail/knetsearch.aspx?sfield=au&code=`` page shows ``#showname``
and the institutions, its code only in the address. A page with neither a name nor a code is
PARSER_UNSUPPORTED, never an author without papers.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import lxml.html
import msgspec

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.text import clean
from cnki_mcp.pages.markup import first_match, input_value, load_page, text_of, text_without

_NUMBER = re.compile(r"^\s*(\d+)\s*[.．、]\s*")
_AUTHOR_PAGES = ("/kcms2/author/detail", "/kcms/detail/knetsearch.aspx")
_CODE = re.compile(r"^\d{6,16}$")


class Byline(msgspec.Struct):
    """One author as a detail page shows them: the name, the institutions and the author link."""

    name: str
    institutions: list[str]
    link: str = ""


def _institutions(root: lxml.html.HtmlElement) -> dict[int, str]:
    part = first_match(root, "#authorpart")
    boxes = [s for s in part.itersiblings() if s.tag == "h3" and "author" in (s.get("class") or "").split()] if part is not None else []
    boxes = boxes or root.cssselect("h3.orgn")
    numbered: dict[int, str] = {}
    for n, el in enumerate((el for box in boxes for el in box.cssselect("span")), start=1):
        text = text_of(el)
        match = _NUMBER.match(text)
        name = clean(_NUMBER.sub("", text))
        if name:
            numbered[int(match[1]) if match else n] = name
    return numbered


def bylines(html: str) -> list[Byline]:
    """Every author of a detail page's byline with their institutions, in page order."""
    root = load_page(html)
    part = first_match(root, "#authorpart")
    if part is None:
        raise CnkiError("PARSER_UNSUPPORTED", "详情页没有作者栏（#authorpart）。", details={"page_kind": "detail_byline"})
    institutions = _institutions(root)
    out = []
    for span in (child for child in part if child.tag == "span"):
        anchor = first_match(span, "a")
        holder = anchor if anchor is not None else span
        name = clean(text_without(holder, "sup, .authortip, i, input")).strip(";；,，")
        if not name:
            continue
        sup = text_of(first_match(holder, "sup"))
        numbers = [int(n) for n in re.findall(r"\d+", sup)]
        names = [institutions[n] for n in numbers if n in institutions] if numbers else list(institutions.values())
        out.append(Byline(name=name, institutions=names, link=(anchor.get("href") or "") if anchor is not None else ""))
    return out


def byline_of(html: str, author: str) -> Byline | None:
    """``author`` in the byline (institutions and link); None when the byline does not name them."""
    wanted = clean(author).casefold()
    return next((line for line in bylines(html) if line.name.casefold() == wanted), None)


def affiliations(html: str, author: str) -> list[str] | None:
    """The institutions the byline gives ``author``; None when the byline does not name them."""
    line = byline_of(html, author)
    return line.institutions if line is not None else None


class AuthorPage(msgspec.Struct, frozen=True):
    """An author's own page: the person's name, their code (what the listing asks by) and institutions."""

    name: str
    code: str
    institutions: list[str]


def is_author_page(url: str) -> bool:
    """Whether ``url`` (absolute) is an author's page: kcms2's, or the older knetsearch one of an author."""
    parts = urlsplit(url)
    path = parts.path.lower()
    if path.startswith("/kcms/detail/knetsearch.aspx"):
        return parse_qs(parts.query).get("sfield", ["au"])[0].lower() == "au"
    return path.startswith(_AUTHOR_PAGES[0])


def parse_author_page(html: str, url: str) -> AuthorPage:
    """The person an author page shows: ``#au-code`` (or the address's ``code=``), the name, the institutions."""
    root = load_page(html)
    box = first_match(root, "#kcms-author-info")
    name = input_value(root, "#au-name") or text_of(first_match(root, "#showname"))
    code = input_value(root, "#au-code") or parse_qs(urlsplit(url).query).get("code", [""])[0]
    if not name or not _CODE.match(code):
        # Not final (no page_kind): a page its scripts have not filled yet is looked at rendered, then snapshotted.
        raise CnkiError("PARSER_UNSUPPORTED", "作者页的结构不受支持（没有作者姓名或作者代码）。", details={"url": url})
    holder = box if box is not None else first_match(root, "#showname")
    scope = holder if box is not None else (holder.getparent() if holder is not None else None)
    institutions: list[str] = []
    for heading in scope.cssselect("h3") if scope is not None else []:
        if "expert-field" in (heading.get("class") or "").split():
            continue
        institutions += [clean(text_of(a)) for a in heading.cssselect("span > a") if clean(text_of(a))]
    return AuthorPage(name=clean(name), code=code, institutions=list(dict.fromkeys(institutions)))
