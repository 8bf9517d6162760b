"""CNKI's own tagged exports: RefWorks (what CiteSpace's CNKI converter reads) and NoteExpress.

Both follow the files CNKI's 导出与分析 writes (see docs/site-notes.md, "CNKI's RefWorks and NoteExpress
exports"): one record per ``RT`` block (RefWorks) or ``{Reference Type}`` block (NoteExpress), records
separated by a blank line, CRLF line ends; authors, affiliations and keywords on one line joined by ``;``
(affiliations and NoteExpress authors with CNKI's trailing ``;``); RefWorks tags in CNKI's order, the volume
under CNKI's lowercase ``vo``. A value is one line: inner line breaks become spaces, and ``;`` inside one
name or keyword becomes a space so the list splits where it should.
"""

from __future__ import annotations

from cnki_mcp.core.model import Paper
from cnki_mcp.references.citations._common import DocType, doc_type, has_cjk, issn

_CRLF = "\r\n"
# CNKI's RefWorks reference types, by our document type; anything else is written as a journal article,
# the only type every reader of these files takes.
_RT = {"phd": "Dissertation/Thesis", "master": "Dissertation/Thesis", "thesis": "Dissertation/Thesis",
       "conference": "Conference Proceeding", "newspaper": "Newspaper Article"}
_NOTEEXPRESS_TYPE = {"phd": "Thesis", "master": "Thesis", "thesis": "Thesis",
                     "conference": "Conference Proceedings", "newspaper": "Newspaper Article"}
_DEGREE = {"phd": "博士", "master": "硕士"}


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _joined(values: list[str], trailing: bool = False) -> str:
    """``a;b;c`` as CNKI writes lists (``a;b;`` with ``trailing``); a ``;`` inside one value would split it."""
    parts = [_one_line(v.replace(";", " ").replace("；", " ")) for v in values]
    text = ";".join(p for p in parts if p)
    return text + ";" if text and trailing else text


def _language(paper: Paper) -> str:
    return "中文;" if has_cjk(paper.title + paper.source) else "英文;"


def _cn(paper: Paper) -> str:
    return paper.quality.cn if paper.quality is not None else ""


def _year(paper: Paper) -> str:
    return str(paper.year) if paper.year > 0 else ""


def _records(rows: list[list[tuple[str, str]]], separator: str) -> str:
    blocks = [_CRLF.join(f"{tag}{separator}{_one_line(value)}" for tag, value in record if value.strip()) for record in rows]
    return (_CRLF + _CRLF).join(blocks) + _CRLF


def _refworks_record(paper: Paper, kind: DocType) -> list[tuple[str, str]]:
    rows = [("RT", _RT.get(kind.key, "Journal Article")), ("SR", "1"), ("A1", _joined(paper.authors))]
    if kind.csl == "thesis":
        rows += [("PB", paper.source), ("T1", paper.title), ("CL", _DEGREE.get(kind.key, "")), ("YR", _year(paper))]
    elif kind.key == "newspaper":
        rows += [("AD", _joined(paper.institutions, trailing=True)), ("T1", paper.title), ("JF", paper.source)]
        rows += [("OP", paper.pages), ("FD", paper.publication_date.split(" ")[0]), ("YR", _year(paper))]
    else:
        rows += [("AD", _joined(paper.institutions, trailing=True)), ("T1", paper.title), ("JF", paper.source)]
        rows += [("YR", _year(paper)), ("IS", paper.issue), ("vo", paper.volume), ("OP", paper.pages)]
    rows += [("K1", _joined(paper.keywords)), ("AB", paper.abstract), ("SN", issn(paper)), ("CN", _cn(paper))]
    rows += [("LA", _language(paper)), ("DS", "CNKI"), ("LK", paper.url), ("DO", paper.doi)]
    return rows


def refworks(papers: list[Paper]) -> str:
    return _records([_refworks_record(p, doc_type(p)) for p in papers], " ")


def _noteexpress_record(paper: Paper, kind: DocType) -> list[tuple[str, str]]:
    rows = [("Reference Type", _NOTEEXPRESS_TYPE.get(kind.key, "Journal Article"))]
    rows += [("Title", paper.title), ("Author", _joined(paper.authors, trailing=True))]
    if kind.csl == "thesis":
        rows += [("Publisher", paper.source), ("Type of Work", _DEGREE.get(kind.key, ""))]
    elif kind.key == "newspaper":
        rows += [("Secondary Title", paper.source), ("Date", paper.publication_date.split(" ")[0])]
    else:
        rows += [("Author Address", _joined(paper.institutions, trailing=True))]
        rows += [("Secondary Title" if kind.key == "conference" else "Journal", paper.source)]
    rows += [("Year", _year(paper)), ("Volume", paper.volume), ("Issue", paper.issue), ("Pages", paper.pages)]
    rows += [("Keywords", _joined(paper.keywords)), ("Abstract", paper.abstract), ("ISBN/ISSN", issn(paper))]
    rows += [("Notes", _cn(paper)), ("URL", paper.url), ("DOI", paper.doi), ("Database Provider", "CNKI")]
    return [("{" + tag + "}", value) for tag, value in rows]


def noteexpress(papers: list[Paper]) -> str:
    return _records([_noteexpress_record(p, doc_type(p)) for p in papers], ": ")
