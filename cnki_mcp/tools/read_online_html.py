"""read_online_html: a page of a paper's text, online (CNKI's HTML reader) or from its downloaded file."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from cnki_mcp.app.core import AppCore
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.model import LocalReply, OperationView
from cnki_mcp.core.tool_args import ToolArgs
from cnki_mcp.tools import Budget
from cnki_mcp.tools._fields import Offset, OnVerification, Title, choice, defaulted, exactly_one_document

Source = Literal["online", "download", "auto"]
CHARACTERS_DEFAULT = 20_000
CHARACTERS_MAX = 200_000
_CHARACTERS = f"1–{CHARACTERS_MAX}"
_SOURCE = "download 读已下载的文件；auto 有则读文件"


class Args(ToolArgs):
    record_ref: str = ""
    title: Title = ""
    section: Annotated[str, Meta(description="sections 中的标题")] = ""
    offset: Offset = 0
    max_characters: Annotated[int, defaulted(CHARACTERS_DEFAULT, CHARACTERS_MAX, "INVALID_LIMIT"), Meta(description=_CHARACTERS)] = CHARACTERS_DEFAULT
    on_verification: OnVerification = "ask"
    source: Annotated[Source, choice("INVALID_SOURCE", _SOURCE)] = "online"


TITLE = "阅读论文全文"
DESCRIPTION = (
    "读论文全文（HTML），可按章节或字符分页；核对论证、方法或数据时使用。"
)
READ_ONLY = True
OPEN_WORLD = True
BUDGET = Budget(requests=60, seconds=900)


validate_first = exactly_one_document


Result = OperationView | LocalReply


async def run(deps: AppCore, args: Args, call: ToolCall | None) -> Result:
    from cnki_mcp.core.model import ReadResult
    from cnki_mcp.documents.online_reader import TextWindow
    from cnki_mcp.ops.jobs import OperationContext
    from cnki_mcp.research.detail_tab import local_ref, resolve_paper

    ref = local_ref(await deps.catalog(), args.record_ref, args.title)
    window = TextWindow(args.section, args.offset, args.max_characters)
    local = await deps._files.read(await deps.store(), ref, args.source, window) if args.source != "online" else None
    hit = local or (deps._reader.cached(ref, window) if ref else None)
    if hit is not None:
        return hit

    async def work(op: OperationContext) -> ReadResult:
        engine = await deps.enrichment()
        paper = await resolve_paper(op, engine, ref, args.title)
        return await deps._reader.read(op, engine, deps.site(), paper, window)

    jobs = await deps.jobs()
    return await jobs.inline(jobs.start("read", BUDGET.of(args.on_verification), work), call)
