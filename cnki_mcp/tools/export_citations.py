"""export_citations: papers as a reference list or bibliographic data, in one of the citation formats."""

from __future__ import annotations

from typing import Annotated, Any

from msgspec import Meta

from cnki_mcp.app.core import AppCore, scoped, stored_search
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.files import refuse_existing, validate_filename
from cnki_mcp.core.model import ExportReply, OperationView
from cnki_mcp.core.tool_args import BATCH_MAX, CITATION_FORMATS, TEMPLATE_FIELDS, CitationFormat, ToolArgs
from cnki_mcp.ops.jobs import OperationContext
from cnki_mcp.tools import Budget
from cnki_mcp.tools._fields import Offset, WithSearchScope, choice, documents_given

EXPORT_MAX = 1000  # records in one export: record_refs, and entries of a search per call (offset pages on)
# CNKI's own tagged formats, read by bibliometric tools (CiteSpace): with search_id they take every candidate,
# and saved to a file, all of them in that one file.
WHOLE_SET_FORMATS = ("refworks", "noteexpress")
_REFERENCES_OF = "导出这篇文献（record_ref）的参考文献表：先用 related_papers 读取过；知网没有链接到记录的条目原样列在 unlinked 中"
_OFFSET = f"配合 search_id：从第几篇开始导出，默认 0；一次最多导出 {EXPORT_MAX} 篇，结果的 next_offset 给出下一批的起点"
_SEARCH_ID = f"导出某次检索的结果（每次最多 {EXPORT_MAX} 篇；refworks/noteexpress 默认全部候选，给 filename 时全部存入一个文件）"
_TEMPLATE = f"format=custom 时的模板，占位符有 {' '.join('{' + f + '}' for f in TEMPLATE_FIELDS)}；字面花括号写成 {{{{ }}}}"


class Args(ToolArgs):
    record_refs: Annotated[list[str], Meta(description=f"要导出的 record_ref 列表，最多 {EXPORT_MAX} 个")] = []
    references_of: Annotated[str, Meta(description=_REFERENCES_OF)] = ""
    titles: Annotated[list[str], Meta(description=f"完整题名列表，会访问知网定位并读取详情，最多 {BATCH_MAX} 个")] = []
    search_id: Annotated[str, Meta(description=_SEARCH_ID)] = ""
    scope: WithSearchScope = "selected"
    offset: Annotated[Offset, Meta(description=_OFFSET)] = 0
    format: Annotated[CitationFormat, choice("INVALID_FORMAT", f"{'、'.join(CITATION_FORMATS)}；默认 gbt7714")] = "gbt7714"
    template: Annotated[str, Meta(description=_TEMPLATE)] = ""
    filename: Annotated[str, Meta(description="保存到数据目录 exports/ 下的文件名；同名文件已存在时不覆盖")] = ""


TITLE = "导出参考文献"
DESCRIPTION = (
    "把文献导出为参考文献或题录数据：GB/T 7714（gbt7714 为 2015 顺序编码制，gbt7714_2025 为 2025 顺序编码制，"
    "gbt7714_author_date 为著者-出版年制）、APA、MLA、Chicago、Vancouver、BibTeX、RIS、EndNote、CSL-JSON、"
    f"JSON、CSV、Markdown 或自定义模板，共 {len(CITATION_FORMATS)} 种格式；缺少作者、来源、年份的文献会列出。"
    "用户要参考文献列表或导入文献管理软件时使用；给 filename 时保存到 exports/ 目录。"
)
READ_ONLY = False
OPEN_WORLD = True
BUDGET = Budget(requests=300, seconds=900)


def validate_first(args: Any, raw: dict[str, Any]) -> None:
    """The batch limits and at least one source of documents, before any other rule."""
    if len(args.record_refs) > EXPORT_MAX:
        raise CnkiError(
            "BATCH_TOO_LARGE",
            f"record_refs 一次最多 {EXPORT_MAX} 个，收到 {len(args.record_refs)} 个；请分批导出。",
            details={"count": len(args.record_refs), "limit": EXPORT_MAX},
        )
    if len(args.titles) > BATCH_MAX:
        raise CnkiError(
            "BATCH_TOO_LARGE",
            f"titles 最多 {BATCH_MAX} 个，收到 {len(args.titles)} 个；请分批导出。",
            details={"count": len(args.titles)},
        )
    documents_given(args, also="references_of")


def validate(args: Args, raw: dict[str, Any]) -> None:
    """A custom format's template, the file's name; CNKI's tagged formats take a search's candidates by default."""
    if args.format in WHOLE_SET_FORMATS and "scope" not in raw:
        args.scope = "candidates"
    if args.format == "custom":
        if not args.template:
            raise CnkiError("INVALID_TEMPLATE", "format=custom 需要 template，例如 {authors}. {title}[J]. {journal}, {year}.", details={"field": "template"})
        from cnki_mcp.references.citations import validate_template

        validate_template(args.template)
    if args.filename:
        validate_filename(args.filename)


Result = OperationView | ExportReply


async def run(deps: AppCore, args: Args, call: ToolCall | None) -> Result:
    from cnki_mcp.references.exports import ExportPart, write_export
    from cnki_mcp.research.relations import stored_references

    store = await deps.store()
    refs = list(args.record_refs)
    part: ExportPart | None = None
    unlinked: list[str] = []
    if args.references_of:
        listed, unlinked = stored_references(store, args.references_of)
        refs += listed
    if args.search_id:
        entries = scoped(stored_search(store, args.search_id), args.scope)
        whole = args.format in WHOLE_SET_FORMATS and bool(args.filename)
        end = len(entries) if whole else min(args.offset + EXPORT_MAX, len(entries))
        part = ExportPart(args.search_id, args.offset, end, len(entries))
        refs += [e.record_ref for e in entries[part.start : part.end]]
    if args.filename:
        refuse_existing(store.exports_dir / args.filename, "请换一个文件名")
    if not args.titles:
        return await write_export(deps.root, store, refs, args, part, unlinked)

    async def work(op: OperationContext) -> ExportReply:
        engine = await deps.enrichment()
        op.stage("locate")
        found, problems = await engine.resolve_titles(op, args.titles)
        for problem in problems:
            op.add_error(problem)
        # Details make the citation complete (volume, issue, pages, DOI); a failed one is still cited.
        fatal = await engine.enrich(op, found, "metadata", quality=False, record_errors=False)
        if fatal is not None:
            raise fatal
        return await write_export(deps.root, store, refs + found, args, part, unlinked)

    jobs = await deps.jobs()
    return await jobs.inline(jobs.start("export", BUDGET.of(), work), call)
