"""download_paper: one paper's PDF or CAJ file into downloads/, checked, never clicked twice by accident."""

from __future__ import annotations

import asyncio
from typing import Annotated

from msgspec import Meta

from cnki_mcp.app.core import AppCore
from cnki_mcp.core import settings
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.model import LocalReply, OperationView
from cnki_mcp.core.tool_args import DOWNLOAD_WAIT_DEFAULT, ToolArgs
from cnki_mcp.tools import Budget
from cnki_mcp.tools._fields import DownloadWait, Format, OnVerification, Subdirectory, Title, exactly_one_document


class Args(ToolArgs):
    record_ref: str = ""
    title: Title = ""
    format: Format = "auto"
    filename: Annotated[str, Meta(description="扩展名须与格式一致")] = ""
    subdirectory: Subdirectory = ""
    wait_seconds: DownloadWait = DOWNLOAD_WAIT_DEFAULT
    retry: Annotated[bool, Meta(description="SIDE_EFFECT_UNCERTAIN 后经用户确认才传")] = False
    on_verification: OnVerification = "ask"


TITLE = "下载论文"
DESCRIPTION = (
    "把一篇论文的 PDF/CAJ 下载到 downloads/ 并校验。可能产生费用：只在用户明确要文件时使用，了解内容用 read_online_html。"
)
READ_ONLY = False
OPEN_WORLD = True
BUDGET = Budget(requests=30, seconds=1800)


validate_first = exactly_one_document


Result = OperationView | LocalReply


async def run(deps: AppCore, args: Args, call: ToolCall | None) -> Result:
    from cnki_mcp.core.files import remove_empty_folders
    from cnki_mcp.core.model import DownloadResult
    from cnki_mcp.documents.download import prior
    from cnki_mcp.documents.download_files import DownloadRequest, check_names, check_target
    from cnki_mcp.ops.jobs import OperationContext
    from cnki_mcp.research.detail_tab import local_ref, resolve_paper

    store = await deps.store()
    # A bad cap is refused before anything else: it must never silently lift the cap.
    limit = settings.daily_download_limit(deps.config.daily_download_limit)
    ref = local_ref(await deps.catalog(), args.record_ref, args.title)
    request = DownloadRequest(
        format=args.format, filename=args.filename, subdirectory=args.subdirectory, wait_seconds=args.wait_seconds, retry=args.retry
    )
    title = store.data.papers[ref].title if ref else ""
    # The name and folder first: a bad one is refused even for a paper downloaded before.
    await asyncio.to_thread(check_names, store.downloads_dir, request)
    if ref:
        earlier = await prior(store, ref, request)
        if earlier is not None:
            return earlier
    await asyncio.to_thread(check_target, store.downloads_dir, request, title, ref)

    async def work(op: OperationContext) -> DownloadResult:
        try:
            engine = await deps.enrichment()
            paper = await resolve_paper(op, engine, ref, args.title)
            return await deps._downloads.download(op, engine, deps.site(), paper, request, daily_limit=limit)
        except BaseException:
            # The caller's folder was made before the attempt; an empty one must not stay behind.
            await asyncio.to_thread(remove_empty_folders, store.downloads_dir, request.subdirectory)
            raise

    jobs = await deps.jobs()
    return await jobs.inline(jobs.start("download", BUDGET.of(args.on_verification), work), call)
