"""related_papers: a paper's references, citing papers or similar papers, a page at a time in CNKI's order."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import Meta

from cnki_mcp.app.core import AppCore, progress_of
from cnki_mcp.core.call import ToolCall, seconds_since
from cnki_mcp.core.model import LocalReply, OperationView
from cnki_mcp.core.tool_args import LIMIT_DEFAULT, STATUS_WAIT_MAX, ToolArgs
from cnki_mcp.tools import Budget
from cnki_mcp.tools._fields import Limit, OnVerification, Title, choice, defaulted, exactly_one_document, given

Relation = Literal["references", "citing", "similar"]
RELATED_WAIT_DEFAULT = 40  # seconds the call waits for the list before answering with the operation
_WAIT = f"本次至多等待的秒数，1–{STATUS_WAIT_MAX}"


class Args(ToolArgs):
    # The paper is record_ref or title, exactly one, unless cursor alone carries on (validate_first).
    cursor: Annotated[str, Meta(description="上一页的 next_cursor")] = ""
    record_ref: str = ""
    title: Title = ""
    relation: Annotated[Relation, choice("INVALID_RELATION")] = "references"
    limit: Limit = LIMIT_DEFAULT
    wait_seconds: Annotated[int, defaulted(RELATED_WAIT_DEFAULT, STATUS_WAIT_MAX, "INVALID_WAIT", "秒"), Meta(description=_WAIT)] = RELATED_WAIT_DEFAULT
    refresh: Annotated[bool, Meta(description="忽略本地保存的列表")] = False
    on_verification: OnVerification = "ask"


TITLE = "参考、引证与相似文献"
DESCRIPTION = (
    "一篇论文的参考、引证或相似文献，按知网顺序分页；从关键论文扩展文献时使用。没有链接的参考文献 record_ref 为 null。"
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
    job = jobs.start("related", BUDGET.of(args.on_verification), relations.work(asked, args.limit, args.refresh), a_list=True)
    return await jobs.wait(job, args.wait_seconds - seconds_since(call), progress_of(call))
