"""Pure rules of an author on a detail page: which institutions the byline gives that author.

The byline (``h3.author#authorpart > span > a``, the name with ``sup`` numbers like ``1,2`` and a link to
``kcms2/author/detail?v=…``) numbers each author's institutions in the second ``h3.author`` (``1.上海科技大学``;
``h3.orgn`` on some pages). An author without numbers belongs to every institution listed (one institution
is never numbered). The institutions are given as CNKI names them, without their numbers.
"""

from __future__ import annotations

import re

import lxml.html
import msgspec

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.text import clean
from cnki_mcp.pages.markup import first_match, load_page, text_of, text_without

_NUMBER = re.compile(r"^\s*(\d+)\s*[.．、]\s*")


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


def affiliations(html: str, author: str) -> list[str] | None:
    """The institutions the byline gives ``author``; None when the byline does not name them."""
    wanted = clean(author).casefold()
    for line in bylines(html):
        if line.name.casefold() == wanted:
            return line.institutions
    return None
