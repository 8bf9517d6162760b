"""Loading page markup and reading text out of it: the helpers every page parser shares.

Pure functions over lxml trees. ``load_page`` applies the pre-cleaning all parsers rely on
(scripts, styles and hidden elements removed); ``parse_markup`` keeps them, for
inspections that decide visibility themselves.
"""

from __future__ import annotations

import copy
import re

import lxml.html
from lxml import etree

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.text import clean, trim

MAX_MARKUP_BYTES = 8 * 1024 * 1024
NON_CONTENT_TAGS = frozenset({"script", "style", "noscript", "template"})
_KEEP_TAGS = frozenset({"html", "head", "body", "input", "meta", "title"})
_HIDING_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.I)


def check_size(html: str) -> None:
    if len(html) > MAX_MARKUP_BYTES // 4 and len(html.encode("utf-8", "replace")) > MAX_MARKUP_BYTES:
        raise CnkiError("RESPONSE_TOO_LARGE", "页面超过 8 MB，未解析。", details={"limit_bytes": MAX_MARKUP_BYTES})


def parse_markup(html: str) -> lxml.html.HtmlElement:
    check_size(html)
    parser = lxml.html.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True, huge_tree=True)
    try:
        return lxml.html.document_fromstring(html.encode("utf-8", "replace"), parser=parser)
    except (etree.ParserError, ValueError):
        return lxml.html.document_fromstring(b"<html><body></body></html>", parser=parser)


def prune(root: lxml.html.HtmlElement) -> lxml.html.HtmlElement:
    """The pre-cleaning every parser applies: scripts and hidden elements go."""
    doomed = []
    for el in root.iter():
        tag = el.tag if isinstance(el.tag, str) else ""
        if tag in NON_CONTENT_TAGS:
            doomed.append(el)
        elif tag and tag not in _KEEP_TAGS and (
            el.get("hidden") is not None
            or (el.get("aria-hidden") or "").strip().lower() == "true"
            or _HIDING_STYLE.search(el.get("style") or "")
        ):
            doomed.append(el)
    for el in doomed:
        el.drop_tree()
    return root


def load_page(html: str) -> lxml.html.HtmlElement:
    return prune(parse_markup(html))


def text_of(el: lxml.html.HtmlElement | None) -> str:
    return clean(el.text_content()) if el is not None else ""


def spaced_text(el: lxml.html.HtmlElement | None) -> str:
    """Text with a space between every text node, so adjacent blocks never run together."""
    return clean(" ".join(el.itertext())) if el is not None else ""


def own_text(el: lxml.html.HtmlElement) -> str:
    """The element's text with its child elements removed (their tails stay)."""
    parts = [el.text or ""]
    parts.extend(child.tail or "" for child in el)
    return clean(" ".join(parts))


def text_without(el: lxml.html.HtmlElement, selector: str) -> str:
    twin = copy.deepcopy(el)
    twin.tail = None
    for junk in twin.cssselect(selector):
        junk.drop_tree()
    return text_of(twin)


def first_match(root: lxml.html.HtmlElement, selector: str) -> lxml.html.HtmlElement | None:
    found = root.cssselect(selector)
    return found[0] if found else None


def input_value(root: lxml.html.HtmlElement, selector: str) -> str:
    el = first_match(root, selector)
    return trim(el.get("value") or "") if el is not None else ""


def page_text(root: lxml.html.HtmlElement) -> str:
    body = root.find("body")
    return text_of(body if body is not None else root)


def split_values(text: str, separators: str = ";；,，") -> list[str]:
    return [part for part in re.split(f"[{separators}]", text) if trim(part)]


def meta_tags(root: lxml.html.HtmlElement) -> dict[str, list[str]]:
    """``<meta name|property content>`` values by lower-cased name, in page order, without repeats."""
    found: dict[str, list[str]] = {}
    for el in root.iter("meta"):
        name = (el.get("name") or el.get("property") or "").strip().lower()
        content = clean(el.get("content") or "")
        if name and content:
            values = found.setdefault(name, [])
            if content not in values:
                values.append(content)
    return found


def meta_first(meta: dict[str, list[str]], *names: str) -> str:
    for name in names:
        if meta.get(name):
            return meta[name][0]
    return ""


def meta_all(meta: dict[str, list[str]], *names: str) -> list[str]:
    return [value for name in names for value in meta.get(name, [])]
