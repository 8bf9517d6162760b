"""Citation and export formats for ``export_citations``.

``render(papers, fmt, template)`` turns stored records into one text in one of ``FORMATS``:

* seven prose styles (GB/T 7714-2015 numeric, GB/T 7714-2025 numeric, GB/T 7714-2015 author-date,
  APA 7, MLA 9, Chicago author-date, Vancouver/NLM) that follow the published rules as the official CSL
  styles encode them (checked against citeproc-js);
* exchange formats for reference managers (BibTeX, RIS, EndNote tagged, CSL-JSON);
* CNKI's own tagged exports (RefWorks, which CiteSpace's CNKI converter reads, and NoteExpress);
* data formats (JSON, CSV, Markdown) and safe ``custom`` templates.

Missing authors, source or year are listed per record in ``missing_fields``; the prose styles show a
placeholder such as ``[作者未取得]`` in their place.

``export(...)`` adds what the tool does around it: saving under ``<data>/exports/`` without
overwriting anything, and the 512 KB rule for text returned inline. ``validate_template`` lets the
tool reject a bad ``custom`` template before any work starts.
"""

from __future__ import annotations

from pathlib import Path

from cnki_mcp.core import files
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import CitationResult, Paper, public_paper
from cnki_mcp.core.tool_args import CHECK_STYLES as PROSE_FORMATS
from cnki_mcp.core.tool_args import CITATION_FORMATS as FORMATS
from cnki_mcp.core.tool_args import TEMPLATE_FIELDS
from cnki_mcp.references.citations._cnki import noteexpress, refworks
from cnki_mcp.references.citations._common import (
    _ALIASES,
    AUTHOR_PLACEHOLDER,
    ENTRY_SEPARATOR,
    EXPORTS_FOLDER,
    MAX_TEXT_BYTES,
    SOURCE_PLACEHOLDER,
    YEAR_PLACEHOLDER,
    DocType,
    Name,
    csl_item,
    csl_items,
    doc_type,
    missing_fields,
    parse_name,
)
from cnki_mcp.references.citations._data import (
    CSV_COLUMNS,
    bibtex,
    csv_cell,
    csv_text,
    custom,
    endnote,
    json_text,
    markdown,
    ris,
    tex_escape,
    validate_template,
)
from cnki_mcp.references.citations._prose import prose_entries, title_case

__all__ = [
    "AUTHOR_PLACEHOLDER",
    "CSV_COLUMNS",
    "FORMATS",
    "MAX_TEXT_BYTES",
    "PROSE_FORMATS",
    "SOURCE_PLACEHOLDER",
    "TEMPLATE_FIELDS",
    "YEAR_PLACEHOLDER",
    "DocType",
    "Name",
    "csl_item",
    "csl_items",
    "csv_cell",
    "doc_type",
    "export",
    "missing_fields",
    "normalize_format",
    "parse_name",
    "prose_entries",
    "render",
    "tex_escape",
    "title_case",
    "validate_template",
]


# --------------------------------------------------------------------------------------------
# Entry point


def normalize_format(fmt: str | None) -> str:
    name = (fmt or "").strip().lower()
    name = _ALIASES.get(name, name)
    if name not in FORMATS:
        raise CnkiError(
            "INVALID_FORMAT",
            f"不支持的格式：{fmt}；可用：{'、'.join(FORMATS)}。",
            details={"allowed": list(FORMATS)},
        )
    return name


def render(papers: list[Paper], fmt: str, template: str | None = None) -> CitationResult:
    """Render ``papers`` (in the caller's order) in format ``fmt``.

    Raises INVALID_FORMAT for an unknown format and INVALID_TEMPLATE for a bad ``custom`` template.
    """
    name = normalize_format(fmt)
    if name == "custom":
        text = custom(papers, template or "")
    elif name in PROSE_FORMATS:
        text = ENTRY_SEPARATOR.join(entry for _, entry in prose_entries(papers, name))
    elif name == "bibtex":
        text = bibtex(papers)
    elif name == "ris":
        text = ris(papers)
    elif name == "endnote":
        text = endnote(papers)
    elif name == "csl_json":
        text = json_text(csl_items(papers))
    elif name == "json":
        text = json_text([public_paper(p) for p in papers])
    elif name == "csv":
        text = csv_text(papers)
    elif name == "refworks":
        text = refworks(papers)
    elif name == "noteexpress":
        text = noteexpress(papers)
    else:
        text = markdown(papers)
    missing = {p.record_ref: m for p in papers if (m := missing_fields(p))}
    return CitationResult(format=name, count=len(papers), text=text, missing_fields=missing)


def export(
    papers: list[Paper],
    fmt: str,
    template: str | None = None,
    *,
    data_dir: Path | None = None,
    filename: str = "",
) -> CitationResult:
    """Render, save to ``<data_dir>/exports/<filename>`` when a name is given, apply the size rule.

    The file is written before the size check, so an oversized export still reaches the disk; the
    reply then carries only ``path``. Without a file name an oversized text is OUTPUT_TOO_LARGE.
    Existing files are never overwritten (FILE_EXISTS). Blocks on disk I/O: use asyncio.to_thread.
    """
    if filename:
        files.validate_filename(filename)
    result = render(papers, fmt, template)
    if filename:
        if data_dir is None:
            raise ValueError("data_dir is required to save an export")
        folder = files.safe_folder(Path(data_dir), EXPORTS_FOLDER)
        result.path = files.write_new_file(folder, filename, result.text.encode("utf-8")).path
    size = len(result.text.encode("utf-8"))
    if size > MAX_TEXT_BYTES:
        if not result.path:
            raise CnkiError(
                "OUTPUT_TOO_LARGE",
                f"导出内容有 {size} 字节，超过 512 KB；请指定 filename 保存为文件。",
                details={"bytes": size, "limit": MAX_TEXT_BYTES},
            )
        result.text = ""
    return result
