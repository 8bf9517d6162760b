"""related_papers: a paper's references, citing papers or similar papers, a page at a time in CNKI's order."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import Meta

from cnki_mcp.app.core import AppCore, progress_of
from cnki_mcp.core.call import ToolCall, seconds_since
from cnki_mcp.core.model import LocalReply, OperationView
from cnki_mcp.core.tool_args import LIMIT_DEFAULT, STATUS_WAIT_MAX, ToolArgs
from cnki_mcp.tools import Budget
from cnki_mcp.tools._fields import OnVerification, PageLimit, RecordRef, Title, choice, defaulted, exactly_one_document, given

Relation = Literal["references", "citing", "similar"]
RELATED_WAIT_DEFAULT = 40  # seconds the call waits for the list before answering with the operation
_WAIT = f"本次调用最多等待的秒数，1–{STATUS_WAIT_MAX}，默认 {RELATED_WAIT_DEFAULT}；未完成时返回 operation_id，用 operation_status 继续等待"


class Args(ToolArgs):
    # The paper is record_ref or title, exactly one, unless cursor alone carries on (validate_first).
    cursor: Annotated[str, Meta(description="翻页：传入上一页结果中的 next_cursor（其余参数可省略）")] = ""
    record_ref: RecordRef = ""
    title: Title = ""
    relation: Annotated[Relation, choice("INVALID_RELATION", "默认 references")] = "references"
    limit: PageLimit = LIMIT_DEFAULT
    wait_seconds: Annotated[int, defaulted(RELATED_WAIT_DEFAULT, STATUS_WAIT_MAX, "INVALID_WAIT", "秒"), Meta(description=_WAIT)] = RELATED_WAIT_DEFAULT
    refresh: Annotated[bool, Meta(description="忽略本地保存的列表，重新从知网读取")] = False
    on_verification: OnVerification = "ask"


TITLE = "参考、引证与相似文献"
DESCRIPTION = (
    "一篇论文的参考文献（references，默认）、引证文献（citing）或相似文献（similar），按知网的顺序分页；从关键论文扩展文献时使用。"
    "论文都带 record_ref；知网没有链接的参考文献（图书、外文等）只有引文文本，record_ref 为 null。"
    "读过的列表保存在本地（参考文献 30 天，其他 7 天），再次调用和翻页不重复访问知网。"
)
READ_ONLY = True
OPEN_WORLD = True
BUDGET = Budget(requests=200, seconds=900)


def validate_first(args: Any, raw: dict[str, Any]) -> None:
    """Before any other rule: a cursor alone carries on; otherwise record_ref or title, exactly one (all trimmed in place)."""
    args.cursor = given(args.cursor)
    args.record_ref, args.title = given(args.record_ref), given(args.title)
    if not args.cursor or args.record_ref or args.title:
        exactly_one_document(args)


Result = OperationView | LocalReply


async def run(deps: AppCore, args: Args, call: ToolCall | None) -> Result:
    relations = await deps.relations()
    asked = relations.request(args.record_ref, args.title, args.cursor, args.relation)
    hit = None if args.refresh else relations.cached(asked, args.limit)
    if hit is not None:
        return hit
    jobs = await deps.jobs()
    job = jobs.start("related", BUDGET.of(args.on_verification), relations.work(asked, args.limit, args.refresh))
    return await jobs.wait(job, args.wait_seconds - seconds_since(call), progress_of(call))
