"""Records as Zotero items, in the JSON the Zotero connector's ``/connector/saveItems`` takes. Pure.

Item types: journalArticle (期刊, 网络首发), thesis (博士/硕士, with ``university`` and ``thesisType``),
conferencePaper, newspaperArticle, book, document for anything else. Han names are single-field
creators (``fieldMode: 1``); Western names are split (``WANG Fang`` → lastName Wang, firstName Fang).
Keywords become tags (trimmed, blank ones dropped, each once), the 中图分类号 goes into ``extra``; a DOI
goes into the DOI field where the item type has one, into ``extra`` otherwise. Dates are ISO 8601
(``2024-03-05``, ``2024-03``, ``2024``) whatever form CNKI wrote them in; a journal article carries the
ISSN its journal page gave.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from cnki_mcp.core.model import Paper
from cnki_mcp.references.citations._common import (
    clc_text,
    doc_type,
    genre,
    iso_date,
    issn,
    language,
    parse_name,
)

_TYPES = {
    "journal": "journalArticle",
    "online_first": "journalArticle",
    "phd": "thesis",
    "master": "thesis",
    "thesis": "thesis",
    "conference": "conferencePaper",
    "newspaper": "newspaperArticle",
    "book": "book",
}
# Where the record's source goes, per item type.
_SOURCE_FIELD = {
    "journalArticle": "publicationTitle",
    "newspaperArticle": "publicationTitle",
    "conferencePaper": "proceedingsTitle",
    "thesis": "university",
    "book": "publisher",
    "document": "publisher",
}
_HAS_DOI = frozenset({"journalArticle", "conferencePaper"})
_HAS_ISSN = frozenset({"journalArticle"})
_HAS_ISSUE = frozenset({"journalArticle"})
_HAS_VOLUME = frozenset({"journalArticle", "conferencePaper", "book"})
_HAS_PAGES = frozenset({"journalArticle", "conferencePaper", "newspaperArticle"})


def clean_tags(values: list[str]) -> list[str]:
    """Tags as Zotero should get them: inner runs of spaces (full-width ones too) made one space, the ends
    trimmed, blank ones dropped, each kept once in its first place."""
    return list(dict.fromkeys(tag for tag in (" ".join(value.split()) for value in values) if tag))


def connector_id(record_ref: str) -> str:
    """The item's id within a save: what ``parentItemID`` names when its attachment is sent."""
    return f"cnki-{record_ref}"


def creators(paper: Paper) -> list[dict[str, Any]]:
    out = []
    for raw in paper.authors:
        name = parse_name(raw)
        if name.literal:
            out.append({"creatorType": "author", "lastName": name.literal, "fieldMode": 1})
        elif name.family:
            out.append({"creatorType": "author", "lastName": name.family, "firstName": name.given})
    return out


def item_type(paper: Paper) -> str:
    return _TYPES.get(doc_type(paper).key, "document")


# A note given as HTML is kept when it uses only these tags (no attributes but a link's http(s) href);
# anything else is text.
_SIMPLE_TAG = re.compile(r"</?(?:p|br|b|strong|i|em|u|s|sub|sup|ul|ol|li|h[1-6]|blockquote|code|pre)\s*/?>|<a href=\"https?://[^\"<>]*\">|</a>", re.I)
_ANY_TAG = re.compile(r"<[^>]*>")


def note_html(text: str) -> str:
    """A note as Zotero stores it (HTML): simple HTML as given, plain text escaped, its blank-line-separated
    paragraphs as ``<p>`` and its other line breaks as ``<br/>``."""
    text = text.strip()
    tags = _ANY_TAG.findall(text)
    if tags and all(_SIMPLE_TAG.fullmatch(tag) for tag in tags):
        return text
    paragraphs = [p for p in re.split(r"\n\s*\n", text.replace("\r\n", "\n")) if p.strip()]
    return "".join("<p>" + "<br/>".join(html.escape(line.strip()) for line in p.strip().split("\n")) + "</p>" for p in paragraphs)


def zotero_item(paper: Paper, note: str = "") -> dict[str, Any]:
    """One item for ``saveItems``: every field the record has, in the fields its type has; ``note`` (given) as
    its child note (``notes``, which Zotero 7 and 8 both save with the item)."""
    kind = item_type(paper)
    item: dict[str, Any] = {"id": connector_id(paper.record_ref), "itemType": kind, "title": paper.title}
    named = creators(paper)
    if named:
        item["creators"] = named
    date = iso_date(paper)
    if date:
        item["date"] = date
    if paper.source.strip():
        item[_SOURCE_FIELD[kind]] = paper.source.strip()
    if kind == "thesis":
        item["thesisType"] = genre(paper, doc_type(paper)) or "学位论文"
    for field, value, types in (
        ("volume", paper.volume, _HAS_VOLUME), ("issue", paper.issue, _HAS_ISSUE), ("pages", paper.pages, _HAS_PAGES),
    ):
        if value.strip() and kind in types:
            item[field] = value.strip()
    if issn(paper) and kind in _HAS_ISSN:
        item["ISSN"] = issn(paper)
    extra = []
    if paper.doi.strip():
        if kind in _HAS_DOI:
            item["DOI"] = paper.doi.strip()
        else:
            extra.append(f"DOI: {paper.doi.strip()}")
    if paper.clc_codes:
        extra.append(f"CLC: {clc_text(paper)}")
    if extra:
        item["extra"] = "\n".join(extra)
    if paper.abstract.strip():
        item["abstractNote"] = paper.abstract.strip()
    if paper.url.strip():
        item["url"] = paper.url.strip()
    item["language"] = language(paper)
    item["libraryCatalog"] = "CNKI"
    item["tags"] = [{"tag": tag} for tag in clean_tags(paper.keywords)]
    item["attachments"] = []
    if note.strip():
        item["notes"] = [{"note": note_html(note)}]
    return item


def ascii_json(data: dict[str, Any]) -> str:
    """JSON with every non-ASCII character escaped: an HTTP header (``X-Metadata``) must be ASCII."""
    return json.dumps(data, ensure_ascii=True, separators=(",", ":"))
