"""The exchange and data formats: BibTeX, RIS, EndNote tagged, JSON, CSV, Markdown and custom templates."""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from typing import Any

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Paper
from cnki_mcp.core.text import is_format_char
from cnki_mcp.core.tool_args import TEMPLATE_FIELDS
from cnki_mcp.references.citations._common import (
    AUTHOR_PLACEHOLDER,
    ENTRY_SEPARATOR,
    MAX_TEMPLATE_BYTES,
    DocType,
    Name,
    clc_text,
    doc_type,
    genre,
    issn,
    parse_name,
    unique_ids,
)

# --------------------------------------------------------------------------------------------
# BibTeX

_TEX_SPECIAL = {
    "\\": "\\textbackslash{}",
    "{": "\\{",
    "}": "\\}",
    "%": "\\%",
    "&": "\\&",
    "#": "\\#",
    "_": "\\_",
    "$": "\\$",
    "~": "\\textasciitilde{}",
    "^": "\\textasciicircum{}",
}


_UNPAIRED_BRACES = {"{": "\\textbraceleft{}", "}": "\\textbraceright{}"}


def _braces_balanced(text: str) -> bool:
    depth = 0
    for char in text:
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


def tex_escape(text: str) -> str:
    """Escape TeX specials. BibTeX counts braces even after a backslash, so ``\\{`` is used only
    when the value's braces pair up; otherwise they become brace-free commands."""
    text = " ".join(text.split())
    table = _TEX_SPECIAL if _braces_balanced(text) else {**_TEX_SPECIAL, **_UNPAIRED_BRACES}
    return "".join(table.get(char, char) for char in text)


def _tex_url(text: str) -> str:
    # url/doi stay verbatim for \url{}; braces and backslashes, which would end or break the field,
    # are percent-encoded (none of them is a valid URL character).
    return re.sub(r"\s+", "", text).replace("\\", "%5C").replace("{", "%7B").replace("}", "%7D")


_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9_:./+-]")


def _bibtex_keys(papers: list[Paper]) -> list[str]:
    """Keys from record_ref, reduced to characters every BibTeX parser accepts, made unique."""
    return unique_ids([_KEY_UNSAFE.sub("_", p.record_ref.strip()) or f"record{i}" for i, p in enumerate(papers, 1)])


_BIBTEX_AND = re.compile(r"(?:^|\s)and(?:\s|$)", re.IGNORECASE)


def _bibtex_name(name: Name) -> str:
    """"Family, Given" for Western names; Han names, single words and names BibTeX would misread
    (an extra comma, the word "and") are braced whole so they are never split."""
    whole = name.literal or (f"{name.family}, {name.given}" if "," in name.given else f"{name.given} {name.family}")
    if name.literal or "," in whole or _BIBTEX_AND.search(whole):
        return "{" + tex_escape(whole) + "}"
    return f"{tex_escape(name.family)}, {tex_escape(name.given)}"


def bibtex(papers: list[Paper]) -> str:
    entries = []
    for paper, key in zip(papers, _bibtex_keys(papers)):
        kind = doc_type(paper)
        source_field = {
            "article": "journal",
            "inproceedings": "booktitle",
            "phdthesis": "school",
            "mastersthesis": "school",
        }.get(kind.bibtex, "publisher")
        if kind.key == "newspaper":
            # Classic BibTeX has no newspaper type: @misc names the paper in howpublished.
            source_field = "howpublished"
        fields: list[tuple[str, str]] = []
        names = [parse_name(a) for a in paper.authors if a.strip()]
        if names:
            fields.append(("author", " and ".join(_bibtex_name(n) for n in names)))
        values = [
            ("title", tex_escape(paper.title)),
            (source_field, tex_escape(paper.source)),
            ("year", str(paper.year) if paper.year > 0 else ""),
            ("volume", tex_escape(paper.volume)),
            ("number", tex_escape(paper.issue)),
            ("pages", re.sub(r"^(\d+)-(\d+)$", r"\1--\2", tex_escape(paper.pages))),
            ("type", tex_escape(genre(paper, kind)) if kind.key == "thesis" else ""),
            ("note", "网络首发" if kind.key == "online_first" else ""),
            ("doi", _tex_url(paper.doi)),
            ("issn", tex_escape(issn(paper))),
            ("url", _tex_url(paper.url)),
            ("abstract", tex_escape(paper.abstract)),
            ("keywords", tex_escape(", ".join(k.strip() for k in paper.keywords if k.strip()))),
            ("clc", tex_escape(clc_text(paper))),
        ]
        fields += [(name, value) for name, value in values if value]
        lines = [f"@{kind.bibtex}{{{key},"] + [f"  {name} = {{{value}}}," for name, value in fields] + ["}"]
        entries.append("\n".join(lines))
    return ENTRY_SEPARATOR.join(entries)


# --------------------------------------------------------------------------------------------
# RIS and EndNote tagged


def _clean(text: str) -> str:
    return " ".join(text.split())


def _opening(paper: Paper, kind: tuple[str, str], author_tag: str, title_tag: str) -> list[tuple[str, str]]:
    """A tagged record's first lines: its type, one line per author, the title."""
    authors = [(author_tag, _clean(a)) for a in paper.authors if a.strip()]
    return [kind, *authors, (title_tag, _clean(paper.title))]


@dataclass(frozen=True)
class _ClosingTags:
    """A tagged format's tags for the closing lines, which RIS and EndNote write alike."""

    genre: str
    doi: str
    issn: str
    url: str
    abstract: str
    keyword: str
    clc: str
    online_first: str


_RIS_CLOSING = _ClosingTags("M3", "DO", "SN", "UR", "AB", "KW", "CN", "N1")
_ENDNOTE_CLOSING = _ClosingTags("%9", "%R", "%@", "%U", "%X", "%K", "%L", "%Z")


def _closing(paper: Paper, kind: DocType, tags: _ClosingTags) -> list[tuple[str, str]]:
    """A tagged record's last lines: genre, DOI, ISSN, URL, abstract, one line per keyword, CLC, the online-first note."""
    lines = [(tags.genre, genre(paper, kind)), (tags.doi, _clean(paper.doi)), (tags.issn, _clean(issn(paper)))]
    lines += [(tags.url, _clean(paper.url)), (tags.abstract, _clean(paper.abstract))]
    lines += [(tags.keyword, _clean(k)) for k in paper.keywords if k.strip()]
    lines.append((tags.clc, _clean(clc_text(paper))))
    if kind.key == "online_first":
        lines.append((tags.online_first, "网络首发"))
    return lines


def ris(papers: list[Paper]) -> str:
    records = []
    for paper in papers:
        kind = doc_type(paper)
        lines = _opening(paper, ("TY", kind.ris), "AU", "TI")
        # T2 is the source of every RIS type (journal, proceedings, newspaper); theses and books
        # name the school/publisher in PB.
        lines.append(("PB" if kind.csl in ("thesis", "book", "document") else "T2", _clean(paper.source)))
        if kind.csl == "article-journal":
            lines.append(("JO", _clean(paper.source)))
        lines.append(("PY", str(paper.year) if paper.year > 0 else ""))
        if kind.key == "newspaper" and paper.publication_date.strip():
            lines.append(("DA", _clean(paper.publication_date).replace("-", "/")))
        lines += [("VL", _clean(paper.volume)), ("IS", _clean(paper.issue))]
        pages = _clean(paper.pages)
        if pages:
            start, dash, end = pages.partition("-")
            lines.append(("SP", start.strip()))
            if dash:
                lines.append(("EP", end.strip()))
        lines += _closing(paper, kind, _RIS_CLOSING)
        body = [f"{tag}  - {value}" for tag, value in lines if value]
        records.append("\r\n".join(body + ["ER  - "]))
    return "\r\n\r\n".join(records) + "\r\n"


def endnote(papers: list[Paper]) -> str:
    records = []
    for paper in papers:
        kind = doc_type(paper)
        lines = _opening(paper, ("%0", kind.endnote), "%A", "%T")
        source_tag = {"thesis": "%I", "book": "%I", "document": "%I", "paper-conference": "%B"}.get(kind.csl, "%J")
        lines.append((source_tag, _clean(paper.source)))
        lines.append(("%D", str(paper.year) if paper.year > 0 else ""))
        if kind.key == "newspaper":
            lines.append(("%8", _clean(paper.publication_date)))
        lines += [("%V", _clean(paper.volume)), ("%N", _clean(paper.issue)), ("%P", _clean(paper.pages))]
        lines += _closing(paper, kind, _ENDNOTE_CLOSING)
        records.append("\n".join(f"{tag} {value}" for tag, value in lines if value))
    return ENTRY_SEPARATOR.join(records)


# --------------------------------------------------------------------------------------------
# Data formats


def json_text(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2)


# What a spreadsheet may read as the start of a formula; the full-width forms too (an IME turns them into
# the ASCII ones, and some spreadsheets do when they read the cell).
_FORMULA_CHARS = "=+-@＝＋－＠"


def csv_cell(value: str) -> str:
    """A spreadsheet opens cells starting with = + - @ (also full-width, and after any spaces, tabs, CRs or
    invisible format characters) as formulas: quote them."""
    start = next((char for char in value if not (char.isspace() or is_format_char(char))), "")
    if value.startswith(("\t", "\r")) or (start and start in _FORMULA_CHARS):
        return "'" + value
    return value


CSV_COLUMNS = ("title", "authors", "source", "year", "volume", "issue", "pages", "doi", "url", "clc")


def csv_text(papers: list[Paper]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for paper in papers:
        row = [
            paper.title,
            "; ".join(a.strip() for a in paper.authors if a.strip()),
            paper.source,
            str(paper.year) if paper.year > 0 else "",
            paper.volume,
            paper.issue,
            paper.pages,
            paper.doi,
            paper.url,
            clc_text(paper),
        ]
        writer.writerow([csv_cell(cell) for cell in row])
    # The byte-order mark lets Excel detect UTF-8 and show Chinese text instead of mojibake.
    return "\ufeff" + buffer.getvalue()


def markdown(papers: list[Paper]) -> str:
    lines = []
    for paper in papers:
        title = re.sub(r"([\\\[\]*_`<>])", r"\\\1", _clean(paper.title)) or "(无题名)"
        url = _clean(paper.url).replace(" ", "%20").replace("(", "%28").replace(")", "%29")
        line = f"[{title}]({url})" if url else title
        lines.append(f"- {line}")
    return ENTRY_SEPARATOR.join(lines)


# --------------------------------------------------------------------------------------------
# custom templates

_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")


def _template_tokens(template: str) -> list[tuple[str, str]]:
    """Split a template into ("text", s) and ("field", name) tokens, or raise INVALID_TEMPLATE."""
    if len(template.encode("utf-8")) > MAX_TEMPLATE_BYTES:
        raise CnkiError("INVALID_TEMPLATE", f"custom 模板不能超过 {MAX_TEMPLATE_BYTES} 字节。")
    if "\x00" in template or "\x01" in template:
        raise CnkiError("INVALID_TEMPLATE", "custom 模板不能包含控制字符。")
    tokens: list[tuple[str, str]] = []
    position = 0
    for match in _TOKEN.finditer(template):
        if match.start() > position:
            tokens.append(("text", template[position : match.start()]))
        position = match.end()
        token = match.group(0)
        if token in ("{{", "}}"):
            tokens.append(("text", token[0]))
        elif token in ("{", "}"):
            hint = "字面花括号请写成 {{ 或 }}。"
            raise CnkiError(
                "INVALID_TEMPLATE",
                f"custom 模板中有未配对的“{token}”（第 {match.start() + 1} 个字符）；{hint}",
            )
        else:
            name = match.group(1)
            if name not in TEMPLATE_FIELDS:
                allowed = "、".join(f"{{{f}}}" for f in TEMPLATE_FIELDS)
                raise CnkiError(
                    "INVALID_TEMPLATE",
                    f"custom 模板中的占位符 {{{name}}} 不受支持；可用：{allowed}。",
                    details={"placeholder": name, "allowed": list(TEMPLATE_FIELDS)},
                )
            tokens.append(("field", name))
    if position < len(template):
        tokens.append(("text", template[position:]))
    return tokens


def validate_template(template: str) -> None:
    """Raise INVALID_TEMPLATE for unknown placeholders, unbalanced braces or oversized templates."""
    _template_tokens(template)


def _template_values(paper: Paper) -> dict[str, str]:
    authors = ", ".join(_clean(a) for a in paper.authors if a.strip()) or AUTHOR_PLACEHOLDER
    return {
        "title": _clean(paper.title),
        "authors": authors,
        "source": _clean(paper.source),
        "journal": _clean(paper.source),
        "year": str(paper.year) if paper.year > 0 else "",
        "volume": _clean(paper.volume),
        "issue": _clean(paper.issue),
        "pages": _clean(paper.pages),
        "doi": _clean(paper.doi),
        "url": _clean(paper.url),
        "record_ref": paper.record_ref,
        "type": _clean(paper.document_type),
        "clc": _clean(clc_text(paper)),
    }


def custom(papers: list[Paper], template: str) -> str:
    tokens = _template_tokens(template)
    entries = []
    for paper in papers:
        values = _template_values(paper)
        # Values are inserted after parsing, so braces inside them are never read as placeholders.
        entries.append("".join(values[v] if kind == "field" else v for kind, v in tokens))
    return ENTRY_SEPARATOR.join(entries)
