"""export_citations: papers as a reference list or bibliographic data, in one of the citation formats."""

from __future__ import annotations

from typing import Annotated, Any

from msgspec import Meta

from cnki_mcp.app.core import AppCore, scoped, stored_search
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.files import refuse_existing, validate_filename
from cnki_mcp.core.model import ExportReply, OperationView
from cnki_mcp.core.tool_args import BATCH_MAX, TEMPLATE_FIELDS, CitationFormat, ToolArgs
from cnki_mcp.ops.jobs import OperationContext
from cnki_mcp.tools import Budget
from cnki_mcp.tools._fields import Offset, ScopeRule, choice, documents_given

EXPORT_MAX = 1000  # records in one export: record_refs, and entries of a search per call (offset pages on)
# CNKI's own tagged formats, read by bibliometric tools (CiteSpace): with search_id they take every candidate,
# and saved to a file, all of them in that one file.
WHOLE_SET_FORMATS = ("refworks", "noteexpress")
_REFERENCES_OF = "这篇的参考文献表（先用 related_papers 读过）"
_TEMPLATE = f"custom 的模板，占位符 {' '.join('{' + f + '}' for f in TEMPLATE_FIELDS)}；花括号本身写 {{{{ }}}}"


class Args(ToolArgs):
    record_refs: Annotated[list[str], Meta(description=f"至多 {EXPORT_MAX} 个")] = []
    references_of: Annotated[str, Meta(description=_REFERENCES_OF)] = ""
    titles: Annotated[list[str], Meta(description=f"完整题名，至多 {BATCH_MAX} 个")] = []
    search_id: Annotated[str, Meta(description="refworks/noteexpress 默认全部候选，给 filename 时存入一个文件")] = ""
    scope: ScopeRule = "selected"
    offset: Offset = 0
    format: Annotated[CitationFormat, choice("INVALID_FORMAT", "gbt7714 为 2015 版，gbt7714_author_date 为著者-出版年制")] = "gbt7714"
    template: Annotated[str, Meta(description=_TEMPLATE)] = ""
    filename: Annotated[str, Meta(description="不覆盖已有文件")] = ""


TITLE = "导出参考文献"
DESCRIPTION = (
    f"把文献导出为参考文献列表或文献管理软件的格式；一次至多 {EXPORT_MAX} 篇，给 filename 时存到 exports/。"
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
        record = stored_search(store, args.search_id)
        entries = scoped(record, args.scope)
        if not entries and not (refs or args.titles):
            raise _nothing_to_export(record.search_id, record.status, args.scope)
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


def _nothing_to_export(search_id: str, status: str, scope: str) -> CnkiError:
    """NOTHING_TO_EXPORT for a search whose ``scope`` holds no paper, saying whether the search ended."""
    if status != "completed":
        why = (
            f"检索 {search_id} 没有完成（状态 {status}），{scope} 范围里还没有文献可导出；"
            "请先用 search_results 查看原因，排除后用 operation_control 的 continue 继续，再导出。"
        )
    else:
        why = f"检索 {search_id} 的 {scope} 范围里没有文献，没有可导出的内容；可以改用 scope=eligible 或 candidates，或换检索条件重新检索。"
    return CnkiError("NOTHING_TO_EXPORT", why, details={"search_id": search_id, "status": status, "scope": scope})
