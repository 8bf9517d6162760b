"""download_papers: many papers' files as one paced, resumable background operation (``documents.batch``)."""

from __future__ import annotations

from typing import Annotated, Any

from msgspec import Meta

from cnki_mcp.app.core import AppCore, stored_refs
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import OperationView
from cnki_mcp.core.tool_args import DOWNLOAD_WAIT_DEFAULT, ToolArgs
from cnki_mcp.tools._batch import start_batch
from cnki_mcp.tools._fields import DownloadWait, Format, Offset, OnVerification, ScopeRule, Subdirectory, defaulted, given

PAPERS_MAX = 200  # record_refs, or entries of a search, in one batch
PAPERS_LIMIT_DEFAULT = 20
INTERVAL_DEFAULT = 12  # the least seconds between two download orders (peers pace 8–15 s)
INTERVAL_MIN = 5
INTERVAL_MAX = 600
_INTERVAL = f"点击间隔秒数，{INTERVAL_MIN}–{INTERVAL_MAX}"
_INTERVAL_RULE = {
    "code": "INVALID_INTERVAL",
    "empty_means_default": True,
    "message": f"{{field}} 须在 {{ge}}–{{le}} 秒之间（0 表示默认 {INTERVAL_DEFAULT}），收到的是 {{value}}。",
}


class Args(ToolArgs):
    record_refs: Annotated[list[str], Meta(description=f"至多 {PAPERS_MAX} 个")] = []
    search_id: str = ""
    scope: ScopeRule = "selected"
    offset: Offset = 0
    limit: Annotated[
        int,
        defaulted(PAPERS_LIMIT_DEFAULT, PAPERS_MAX, "INVALID_LIMIT", " 篇"),
        Meta(description=f"1–{PAPERS_MAX}"),
    ] = PAPERS_LIMIT_DEFAULT
    format: Format = "auto"
    subdirectory: Subdirectory = ""
    interval_seconds: Annotated[int, Meta(ge=INTERVAL_MIN, le=INTERVAL_MAX, description=_INTERVAL, extra=_INTERVAL_RULE)] = INTERVAL_DEFAULT
    wait_seconds: DownloadWait = DOWNLOAD_WAIT_DEFAULT
    on_verification: OnVerification = "ask"


TITLE = "批量下载论文"
DESCRIPTION = (
    "批量下载论文（后台任务，用 operation_status 跟进）。可能产生费用：先和用户确认要哪些（流程见 cnki://guide）。"
)
READ_ONLY = False
OPEN_WORLD = True


def validate_first(args: Any, raw: dict[str, Any]) -> None:
    """``record_refs`` or ``search_id``, one of them (both trimmed, blank entries dropped), and not too many refs."""
    args.record_refs = [ref for ref in map(given, args.record_refs) if ref]
    args.search_id = given(args.search_id)
    if bool(args.record_refs) == bool(args.search_id):
        why = "不能同时提供" if args.search_id else "须提供其一"
        raise CnkiError("NO_DOCUMENTS", f"record_refs 与 search_id 二选一，{why}。", details={"field": "record_refs"})
    if len(args.record_refs) > PAPERS_MAX:
        raise CnkiError(
            "BATCH_TOO_LARGE",
            f"record_refs 一次最多 {PAPERS_MAX} 个，收到 {len(args.record_refs)} 个；请分批下载。",
            details={"field": "record_refs", "count": len(args.record_refs), "limit": PAPERS_MAX},
        )


Result = OperationView


async def run(deps: AppCore, args: Args, call: ToolCall | None) -> Result:
    from cnki_mcp.documents import batch
    from cnki_mcp.documents.download_files import DownloadRequest

    store = await deps.store()
    refs = list(args.record_refs)
    if args.search_id:
        refs += stored_refs(store, args.search_id, args.scope, args.offset, args.limit)
    if not refs:
        raise CnkiError(
            "NO_DOCUMENTS",
            f"检索 {args.search_id} 的 {args.scope} 范围从第 {args.offset} 条起没有论文；请换 scope 或 offset。",
            details={"search_id": args.search_id, "scope": args.scope, "offset": args.offset},
        )
    request = DownloadRequest(format=args.format, subdirectory=args.subdirectory, wait_seconds=args.wait_seconds)
    state = await batch.plan(store, refs, request, args.interval_seconds, args.search_id)
    return await start_batch(deps, state, batch.budget(state, args.on_verification), call)
