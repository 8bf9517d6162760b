"""get_metadata: the full records of papers named by record_ref, full title or a stored search."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import Meta

from cnki_mcp.app.core import AppCore, stored_refs
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import PRIVATE_PAPER_FIELDS, LocalReply, OperationView, Paper, public_paper
from cnki_mcp.core.tool_args import BATCH_MAX, LIMIT_DEFAULT, LIMIT_MAX, ToolArgs
from cnki_mcp.tools import Budget
from cnki_mcp.tools._fields import Offset, ScopeRule, documents_given

# Names ``fields`` may select: the public Paper fields.
METADATA_FIELDS = frozenset(f.encode_name for f in msgspec.structs.fields(Paper) if f.encode_name not in PRIVATE_PAPER_FIELDS)
_LIMIT_RULE = {"code": "INVALID_LIMIT", "empty_means_default": True, "message": f"{{field}} 须在 {{ge}}–{LIMIT_MAX} 之间，收到的是 {{value}}。"}


class Args(ToolArgs):
    record_refs: list[str] = []
    titles: Annotated[list[str], Meta(description="完整题名")] = []
    search_id: str = ""
    scope: ScopeRule = "selected"
    offset: Offset = 0
    # Only the low bound here: above BATCH_MAX is BATCH_TOO_LARGE (validate).
    limit: Annotated[int, Meta(ge=1, description=f"1–{LIMIT_MAX}", extra=_LIMIT_RULE)] = LIMIT_DEFAULT
    fields: Annotated[list[str], Meta(description="只要这些，如 abstract、doi、quality")] = []
    quality: Annotated[bool, Meta(description="加期刊收录与影响因子")] = False
    refresh: Annotated[bool, Meta(description="忽略 30 天内读过的详情")] = False
    local_only: Annotated[bool, Meta(description="不访问知网")] = False


TITLE = "取得完整题录"
DESCRIPTION = (
    f"完整题录：作者、单位、来源、卷期页、DOI、摘要、关键词、基金；需要摘要、来源或核对书目时使用。至多 {BATCH_MAX} 篇。"
)
READ_ONLY = True
OPEN_WORLD = True
BUDGET = Budget(requests=600, seconds=900)


def validate_first(args: Any, raw: dict[str, Any]) -> None:
    """The count of record_refs and titles together, then at least one way to name the papers."""
    count = len(args.record_refs) + len(args.titles)
    if count > BATCH_MAX:
        raise CnkiError(
            "BATCH_TOO_LARGE",
            f"record_refs 与 titles 合计最多 {BATCH_MAX} 篇，收到 {count} 篇；请分批调用。",
            details={"count": count},
        )
    documents_given(args)


def validate(args: Args, raw: dict[str, Any]) -> None:
    if args.limit > BATCH_MAX:
        raise CnkiError("BATCH_TOO_LARGE", f"limit 最多 {BATCH_MAX}，收到 {args.limit}；请用 offset 分批读取。", details={"field": "limit"})
    unknown = [f for f in args.fields if f.strip() not in METADATA_FIELDS]
    if unknown:
        raise CnkiError(
            "INVALID_FIELDS",
            f"fields 中有未知字段：{'、'.join(unknown)}。可用字段：{'、'.join(sorted(METADATA_FIELDS))}。",
            details={"fields": unknown},
        )
    args.fields = [f.strip() for f in args.fields]


Result = OperationView | LocalReply


async def run(deps: AppCore, args: Args, call: ToolCall | None) -> Result:
    from cnki_mcp.ops.jobs import OperationContext

    store = await deps.store()
    if not args.local_only:
        refs = list(args.record_refs)
        if args.search_id:
            refs += stored_refs(store, args.search_id, args.scope, args.offset, args.limit)
        quality = args.quality or "quality" in args.fields

        async def work(op: OperationContext) -> dict[str, Any]:
            engine = await deps.enrichment()
            return await engine.metadata(op, refs, args.titles, quality=quality, refresh=args.refresh, fields=args.fields)

        jobs = await deps.jobs()
        return await jobs.inline(jobs.start("metadata", BUDGET.of(), work), call)
    from cnki_mcp.research.enrich import select_fields

    refs, problems = (await deps.catalog()).resolve_local(args.record_refs or [], args.titles or [])
    if args.search_id:
        refs += stored_refs(store, args.search_id, args.scope, args.offset, args.limit)
    records = []
    seen: set[str] = set()
    for ref in refs:
        paper = store.data.papers.get(ref)
        if paper is None or ref in seen:
            continue
        seen.add(ref)
        records.append(select_fields(public_paper(paper), args.fields))
    found: dict[str, Any] = {"records": records}
    if problems:
        found["errors"] = problems
    return LocalReply(source="local", result=found)
