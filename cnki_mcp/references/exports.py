"""export_citations' answer: the named papers exported, the part of a search it covered, what had no record."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Protocol

import msgspec

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import CitationResult, ExportReply
from cnki_mcp.references import citations
from cnki_mcp.research.relations import with_unlinked
from cnki_mcp.store.library import Store


class Asked(Protocol):
    """What an export reads of export_citations' arguments."""

    @property
    def record_refs(self) -> list[str]: ...
    @property
    def format(self) -> str: ...
    @property
    def template(self) -> str: ...
    @property
    def filename(self) -> str: ...


class ExportPart(msgspec.Struct, frozen=True):
    """The entries of a search one export_citations call takes: ``start`` to ``end`` of ``total``."""

    search_id: str
    start: int
    end: int
    total: int


async def write_export(
    root: Path,
    store: Store,
    refs: list[str],
    args: Asked,
    part: ExportPart | None,
    unlinked: list[str] | None = None,
) -> ExportReply:
    """The papers ``refs`` names, exported in the call's format; a part of a search says where the rest begins,
    and items without a record (a reference list's books) are listed, never dropped."""
    papers = [store.data.papers[ref] for ref in dict.fromkeys(refs) if ref in store.data.papers]
    if not papers and unlinked:
        return ExportReply(data=with_unlinked(CitationResult(args.format, 0), unlinked))
    unknown = [ref for ref in dict.fromkeys(args.record_refs) if ref not in store.data.papers]
    if not papers and unknown:
        raise CnkiError(
            "RECORD_NOT_FOUND",
            f"本地没有这些记录：{'、'.join(unknown[:10])}；请先检索或用 get_metadata 取得它们，再导出。",
            details={"record_refs": unknown},
        )
    if not papers:
        raise CnkiError("INVALID_INPUT", "没有可以导出的文献：给出的 record_refs、search_id 或 titles 都没有对应的本地记录。")
    result = await asyncio.to_thread(
        citations.export, papers, args.format, args.template or None, data_dir=root, filename=args.filename
    )
    with_unlinked(result, unlinked or [])
    if unknown:
        result.warnings.append(f"本地没有这些记录，未导出：{'、'.join(unknown[:10])}。")
    if args.format == "refworks" and args.filename and not args.filename.lower().startswith("download"):
        # CiteSpace's CNKI conversion only picks up files whose names begin with "download".
        result.warnings.append("CiteSpace 的知网格式转换只读取以 download 开头的文件；用于 CiteSpace 时请改名为 download_….txt。")
    if part is not None:
        result.search_total = part.total
        if part.end < part.total:
            result.next_offset = part.end
            result.warnings.append(
                f"检索 {part.search_id} 共 {part.total} 篇，本次导出第 {part.start + 1}–{part.end} 篇；"
                f"用 offset={part.end} 再调用一次导出其余部分。"
            )
    return ExportReply(data=result)
