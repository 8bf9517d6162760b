"""What every citation format shares: the formats, record types, personal names, missing fields and CSL-JSON."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from cnki_mcp.core.model import Paper
from cnki_mcp.core.text import date_numbers

_ALIASES = {
    "": "gbt7714",
    "gbt7714-2015": "gbt7714",
    "gbt7714-2025": "gbt7714_2025",
    "gbt7714-author-date": "gbt7714_author_date",
    "csl-json": "csl_json",
}

AUTHOR_PLACEHOLDER = "[作者未取得]"
SOURCE_PLACEHOLDER = "[来源未取得]"
YEAR_PLACEHOLDER = "[年份未取得]"

MAX_TEMPLATE_BYTES = 5000
# Entries of the text formats are separated by one blank line, without a trailing newline.
ENTRY_SEPARATOR = "\n\n"
# Larger exports are only returned as a file (UTF-8 bytes).
MAX_TEXT_BYTES = 512 * 1024
EXPORTS_FOLDER = "exports"


# --------------------------------------------------------------------------------------------
# Document types


@dataclass(frozen=True)
class DocType:
    key: str
    gb: str
    csl: str
    bibtex: str
    ris: str
    endnote: str


# Substring of Paper.document_type -> type; first match wins (a 博士 thesis may say 博士学位论文).
_DOC_TYPES: tuple[tuple[str, DocType], ...] = (
    ("会议", DocType("conference", "C", "paper-conference", "inproceedings", "CONF", "Conference Paper")),
    ("博士", DocType("phd", "D", "thesis", "phdthesis", "THES", "Thesis")),
    ("硕士", DocType("master", "D", "thesis", "mastersthesis", "THES", "Thesis")),
    ("学位", DocType("thesis", "D", "thesis", "misc", "THES", "Thesis")),
    ("报纸", DocType("newspaper", "N", "article-newspaper", "misc", "NEWS", "Newspaper Article")),
    ("期刊", DocType("journal", "J", "article-journal", "article", "JOUR", "Journal Article")),
    ("图书", DocType("book", "M", "book", "book", "BOOK", "Book")),
)
_UNKNOWN_TYPE = DocType("unknown", "Z", "document", "misc", "GEN", "Generic")
_ONLINE_FIRST_TYPE = DocType("online_first", "J", "article-journal", "article", "JOUR", "Journal Article")


def doc_type(paper: Paper) -> DocType:
    """Classify a record; online-first (网络首发) journal articles are a type of their own."""
    text = paper.document_type or ""
    for marker, kind in _DOC_TYPES:
        if marker in text:
            if kind.key == "journal" and paper.online_first:
                return _ONLINE_FIRST_TYPE
            return kind
    if paper.online_first:
        return _ONLINE_FIRST_TYPE
    return _UNKNOWN_TYPE


# --------------------------------------------------------------------------------------------
# Names and languages

_CJK = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\uac00-\ud7af\U00020000-\U0003ffff]")


def has_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


@dataclass(frozen=True)
class Name:
    """A personal name split for Western styles, or a literal kept whole (Han names, groups)."""

    family: str = ""
    given: str = ""
    literal: str = ""


def parse_name(raw: str) -> Name:
    text = " ".join(raw.split())
    # Han names have no given/family split in these styles: 王利明 stays 王利明.
    if not text or has_cjk(text):
        return Name(literal=text)
    if "," in text:
        family, _, given = text.partition(",")
        family, given = family.strip(), given.strip()
        return Name(family=family, given=given) if family and given else Name(literal=family or given or text)
    parts = text.split(" ")
    if len(parts) == 1:
        return Name(literal=text)
    capitalised = [part for part in parts if _is_capitalised_surname(part)]
    if capitalised and len(capitalised) < len(parts):
        # Chinese authors of English papers write the surname in capitals, first or last: WANG Fang, Fang WANG.
        family = " ".join(part.title() for part in capitalised)
        return Name(family=family, given=" ".join(part for part in parts if part not in capitalised))
    # Lower-case particles before the surname belong to it: "Maria de Souza" -> "de Souza".
    cut = len(parts) - 1
    while cut > 1 and parts[cut - 1].islower():
        cut -= 1
    return Name(family=" ".join(parts[cut:]), given=" ".join(parts[:cut]))


def _is_capitalised_surname(part: str) -> bool:
    """A name token written all in capitals (WANG, OUYANG, SIMA-QIAN), not an initial (F, F.)."""
    letters = part.replace("-", "").replace("'", "")
    return len(letters) >= 2 and letters.isalpha() and letters.isupper()


def language(paper: Paper) -> str:
    sample = paper.title or paper.source or " ".join(paper.authors)
    return "zh-CN" if has_cjk(sample) else "en"


# --------------------------------------------------------------------------------------------
# Missing fields


def missing_fields(paper: Paper) -> list[str]:
    missing = []
    if not [a for a in paper.authors if a.strip()]:
        missing.append("authors")
    if not paper.source.strip():
        missing.append("source")
    if paper.year <= 0:
        missing.append("year")
    return missing


# --------------------------------------------------------------------------------------------
# CSL-JSON

def iso_date(paper: Paper) -> str:
    """The record's date as ISO 8601 (``2024-03-05``, ``2024-03`` or ``2024``), or "" when it has none."""
    parts = date_numbers(paper.publication_date)
    if not parts or (paper.year > 0 and parts[0] != paper.year):
        parts = [paper.year] if paper.year > 0 else parts
    return "-".join(f"{part:04d}" if at == 0 else f"{part:02d}" for at, part in enumerate(parts))


def date_parts(paper: Paper, kind: DocType) -> list[int]:
    """Year only, except newspapers, which are cited by their full issue date."""
    if paper.year <= 0:
        return []
    if kind.key == "newspaper":
        parts = date_numbers(paper.publication_date)
        if parts and parts[0] == paper.year:
            return parts
    return [paper.year]


def issn(paper: Paper) -> str:
    """The ISSN the journal page gave (kept with the record's journal evidence), or ""."""
    return paper.quality.issn if paper.quality is not None else ""


def genre(paper: Paper, kind: DocType) -> str:
    zh = language(paper) == "zh-CN"
    if kind.key == "phd":
        return "博士学位论文" if zh else "Doctoral dissertation"
    if kind.key == "master":
        return "硕士学位论文" if zh else "Master\u2019s thesis"
    if kind.key == "thesis":
        return "学位论文" if zh else "Thesis"
    return ""


def csl_item(paper: Paper) -> dict[str, Any]:
    """One CSL-JSON item: Han names as literals, Western names split, theses/books with a publisher."""
    kind = doc_type(paper)
    item: dict[str, Any] = {"id": paper.record_ref, "type": kind.csl, "title": paper.title}
    names = [parse_name(a) for a in paper.authors if a.strip()]
    if names:
        item["author"] = [
            {"literal": n.literal} if n.literal else {"family": n.family, "given": n.given} for n in names
        ]
    parts = date_parts(paper, kind)
    if parts:
        item["issued"] = {"date-parts": [parts]}
    source = paper.source.strip()
    if source:
        # Theses name the degree-granting school and books the publisher; the rest sit in a container.
        item["publisher" if kind.csl in ("thesis", "book", "document") else "container-title"] = source
    named = genre(paper, kind)
    if named:
        item["genre"] = named
    for key, value in (("volume", paper.volume), ("issue", paper.issue), ("page", paper.pages)):
        if value.strip():
            item[key] = value.strip()
    if paper.doi.strip():
        item["DOI"] = paper.doi.strip()
    if issn(paper):
        item["ISSN"] = issn(paper)
    if paper.url.strip():
        item["URL"] = paper.url.strip()
    if paper.abstract.strip():
        item["abstract"] = paper.abstract.strip()
    keywords = [k.strip() for k in paper.keywords if k.strip()]
    if keywords:
        item["keyword"] = ", ".join(keywords)
    if paper.clc_codes:
        item["call-number"] = clc_text(paper)
    item["language"] = language(paper)
    return item


def clc_text(paper: Paper) -> str:
    """中图分类号 as one call number (RIS CN, EndNote %L, CSL call-number): ``TP18; TP311.13``."""
    return "; ".join(code.strip() for code in paper.clc_codes if code.strip())


def unique_ids(names: list[str]) -> list[str]:
    """Suffix repeated identifiers (_2, _3 …): citeproc and BibTeX keep only one item per id."""
    seen: set[str] = set()
    out = []
    for name in names:
        candidate, n = name, 2
        while candidate.lower() in seen:
            candidate, n = f"{name}_{n}", n + 1
        seen.add(candidate.lower())
        out.append(candidate)
    return out


def csl_items(papers: list[Paper]) -> list[dict[str, Any]]:
    items = [csl_item(p) for p in papers]
    for item, item_id in zip(items, unique_ids([p.record_ref for p in papers])):
        item["id"] = item_id
    return items
