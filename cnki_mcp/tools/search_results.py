"""search_results: a page of a stored search, read from the store without visiting CNKI."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from cnki_mcp.app.core import AppCore
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.model import Paper, Problem, TitleRow, public_paper
from cnki_mcp.core.tool_args import LIMIT_DEFAULT, ToolArgs
from cnki_mcp.tools._fields import Limit, Offset, ScopeRule, choice

View = Literal["titles", "compact", "records"]
COMPACT_FIELDS = ("record_ref", "title", "authors", "year", "source", "abstract")


class Args(ToolArgs):
    search_id: Annotated[str, Meta(description="search、structured_search 或 expert_search 返回的 search_id")]
    scope: Annotated[ScopeRule, Meta(description="selected 筛选结果；eligible 相关文献；candidates 全部候选")] = "selected"
    view: Annotated[View, choice("INVALID_VIEW", "compact 加摘要与评分；records 完整题录")] = "titles"
    offset: Offset = 0
    limit: Limit = LIMIT_DEFAULT


TITLE = "读取检索结果"
DESCRIPTION = (
    "按 search_id 分页读取已保存的检索结果，不访问知网。"
)
READ_ONLY = True
OPEN_WORLD = False


class Result(msgspec.Struct, kw_only=True):
    """A page of a stored search; ``next_offset`` is null on the last page. A row is a ``TitleRow`` (titles) or
    the paper's public fields with its score (compact), or the whole record with the score's evidence (records)."""

    search_id: str
    status: str
    scope: str
    total: int
    offset: int
    next_offset: int | None
    results: list[Any]  # TitleRow (titles) or a dict (compact, records): msgspec cannot type a Struct-or-dict union
    # A search that failed or was cut short: why, and that the list is not CNKI's whole answer.
    errors: list[Problem] | msgspec.UnsetType = msgspec.UNSET
    message: str | msgspec.UnsetType = msgspec.UNSET


_FAILED = "这次检索失败了，列表不是知网的答复，不代表没有文献；原因见 errors。排除原因后用 operation_control 的 continue 继续，或重新检索。"
_CUT_SHORT = "这次检索没有完成（{status}），列表只含已取得的部分，不是知网的完整答复；原因见 errors。可以用 operation_control 的 continue 继续。"


async def run(deps: AppCore, args: Args, call: ToolCall | None) -> Result:
    from cnki_mcp.app.core import scoped, stored_search

    store = await deps.store()
    record = stored_search(store, args.search_id)
    entries = scoped(record, args.scope)
    page = entries[args.offset : args.offset + args.limit]
    end = args.offset + len(page)
    result = Result(
        search_id=record.search_id,
        status=record.status,
        scope=args.scope,
        total=len(entries),
        offset=args.offset,
        next_offset=end if end < len(entries) else None,
        results=[_row(store.data.papers.get(e.record_ref), e, args.view) for e in page],
    )
    if record.status != "completed":
        result.errors = record.errors
        result.message = _FAILED if record.status == "failed" else _CUT_SHORT.format(status=record.status)
    return result


def _row(paper: Paper | None, entry: Any, view: str) -> dict[str, Any] | TitleRow:
    if view == "titles":
        return TitleRow.of(paper) if paper is not None else TitleRow(record_ref=entry.record_ref)
    data = public_paper(paper) if paper is not None else {"record_ref": entry.record_ref}
    if view == "compact":
        row = {k: data[k] for k in COMPACT_FIELDS if k in data}
        row.update(score=round(entry.score, 4), eligible=entry.eligible)
        return row
    return {"record": data, "score": round(entry.score, 4), "eligible": entry.eligible, "evidence": msgspec.to_builtins(entry.evidence)}
