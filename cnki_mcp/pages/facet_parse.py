"""CNKI's left facet panel (``#divGroup``, also the answer of ``kns8s/group/result``) read into groups.

Pure. The panel: ``dl[groupid]`` per group, ``dt b`` its title, ``dd[field][tit]`` per field (主题 holds
主要主题 ``ZYZT`` and 次要主题 ``CYZT``), ``li`` entries with ``input[type=checkbox][value]`` (the code),
the name in ``text`` or ``title`` (else the link text) and a count ``span`` like ``(8464)``, ``(1,234)`` or
``(1.41万)`` (rounded: ``approximate``). Entries hidden behind 更多 are entries too, so hidden markup is
kept. A group whose ``dd`` holds no entry is ``folded`` (the page fills it when opened).

An empty ``#divGroup`` is a panel without those groups (``{}``); an answer with neither it nor any
``dl[groupid]``, or an entry without a readable count, is a panel of an unknown
shape: PARSER_UNSUPPORTED, never an empty answer.
"""

from __future__ import annotations

import re

import lxml.html
import msgspec

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.text import trim
from cnki_mcp.pages.markup import NON_CONTENT_TAGS, parse_markup
from cnki_mcp.pages.parse import parse_count

PREVIEW_CHARS = 120
_COUNT_SPAN = re.compile(r"^[(（]\s*([\d,.，]+\s*万?)\s*[)）]$")


class FacetEntry(msgspec.Struct, frozen=True):
    field: str
    value: str  # the checkbox's value: what a refinement sends
    name: str  # what the panel shows
    count: int
    approximate: bool = False  # the count was written in 万 (rounded by CNKI)


class FacetGroup(msgspec.Struct):
    ident: str
    title: str
    entries: list[FacetEntry] = []
    folded: bool = False


def _text(el: lxml.html.HtmlElement) -> str:
    return trim(el.text_content())


def _count(li: lxml.html.HtmlElement) -> tuple[int, bool] | None:
    for span in li.iter("span"):
        match = _COUNT_SPAN.match(_text(span))
        if match:
            count = parse_count(match[1])
            if count is not None:
                return count, "万" in match[1]
    return None


def _entry(li: lxml.html.HtmlElement, field: str, ident: str) -> FacetEntry:
    box = next((el for el in li.iter("input") if (el.get("type") or "").lower() == "checkbox"), None)
    value = trim(box.get("value") or "") if box is not None else ""
    name = trim((box.get("text") or box.get("title") or "") if box is not None else "")
    if not name:
        link = next(li.iter("a"), None)
        name = _text(link) if link is not None else ""
    counted = _count(li)
    if not value or not name or counted is None:
        preview = _text(li)[:PREVIEW_CHARS]
        raise CnkiError(
            "PARSER_UNSUPPORTED",
            f"知网分组面板的条目结构不受支持（{ident}）：{preview}",
            details={"group": ident, "preview": preview},
        )
    return FacetEntry(field=field, value=value, name=name, count=counted[0], approximate=counted[1])


def parse_facet_panel(html: str) -> dict[str, FacetGroup]:
    """The panel's groups by groupid, entries in CNKI's order; PARSER_UNSUPPORTED for an unknown shape."""
    root = parse_markup(html)
    for el in [el for el in root.iter() if isinstance(el.tag, str) and el.tag in NON_CONTENT_TAGS]:
        el.drop_tree()
    groups: dict[str, FacetGroup] = {}
    for dl in root.iter("dl"):
        ident = trim(dl.get("groupid") or dl.get("groupId") or "")
        if not ident:
            continue
        bold = dl.cssselect("dt b")
        title_el = bold[0] if bold else next(dl.iter("dt"), None)
        group = FacetGroup(ident=ident, title=_text(title_el) if title_el is not None else "")
        for dd in dl.iter("dd"):
            field = trim(dd.get("field") or "") or ident.split("|||")[0]
            group.entries += [_entry(li, field, ident) for li in dd.iter("li")]
        group.folded = not group.entries
        groups[ident] = group
    if not groups and not root.cssselect("#divGroup"):
        preview = trim(root.text_content())[:PREVIEW_CHARS]
        raise CnkiError(
            "PARSER_UNSUPPORTED",
            f"知网分组面板的结构不受支持（没有 dl[groupid]）：{preview or '（空白）'}",
            details={"preview": preview},
        )
    return groups
