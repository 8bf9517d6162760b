"""read_online_html: a page of a paper's text, online (CNKI's HTML reader) or from its downloaded file."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from cnki_mcp.app.core import AppCore
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.model import LocalReply, OperationView
from cnki_mcp.core.tool_args import ToolArgs
from cnki_mcp.tools import Budget
from cnki_mcp.tools._fields import Offset, OnVerification, RecordRef, Title, choice, defaulted, exactly_one_document

Source = Literal["online", "download", "auto"]
CHARACTERS_DEFAULT = 20_000
CHARACTERS_MAX = 200_000
_CHARACTERS = f"本次最多返回的字符数，1–{CHARACTERS_MAX}，默认 {CHARACTERS_DEFAULT}"
_SOURCE = (
    "online（默认，知网在线阅读）；download（读已用 download_paper 下载的 PDF 或内含 PDF 的 CAJ，"
    "不访问知网）；auto（有可读的下载文件时读文件，没有或读不出文字时在线阅读）"
)


class Args(ToolArgs):
    record_ref: RecordRef = ""
    title: Title = ""
    section: Annotated[str, Meta(description="只读这一章节（取返回的 sections 中的标题）")] = ""
    offset: Annotated[Offset, Meta(description="从第几个字符开始，用于翻页（取上次返回的 next_offset）")] = 0
    max_characters: Annotated[int, defaulted(CHARACTERS_DEFAULT, CHARACTERS_MAX, "INVALID_LIMIT"), Meta(description=_CHARACTERS)] = CHARACTERS_DEFAULT
    on_verification: OnVerification = "ask"
    source: Annotated[Source, choice("INVALID_SOURCE", _SOURCE)] = "online"


TITLE = "阅读论文全文"
DESCRIPTION = (
    "读取论文的 HTML 全文，可按章节（section）或按字符分页（offset、max_characters）；需要核对论文的论证、方法或数据时使用。"
    "全文缓存 30 分钟（试读或不完整的 10 分钟），翻页和换章节不再访问知网。trial=true 表示只有试读，complete_article=true "
    "才表示已确认是完整全文。source=download 读已下载的 PDF，结果形式相同，coverage 给出页码。"
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
