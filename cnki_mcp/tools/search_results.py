"""search_results: a page of a stored search, read from the store without visiting CNKI."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from cnki_mcp.app.core import AppCore
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.model import Paper, TitleRow, public_paper
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


async def run(deps: AppCore, args: Args, call: ToolCall | None) -> Result:
    from cnki_mcp.app.core import scoped, stored_search

    store = await deps.store()
    record = stored_search(store, args.search_id)
    entries = scoped(record, args.scope)
    page = entries[args.offset : args.offset + args.limit]
    end = args.offset + len(page)
    return Result(
        search_id=record.search_id,
        status=record.status,
        scope=args.scope,
        total=len(entries),
        offset=args.offset,
        next_offset=end if end < len(entries) else None,
        results=[_row(store.data.papers.get(e.record_ref), e, args.view) for e in page],
    )


def _row(paper: Paper | None, entry: Any, view: str) -> dict[str, Any] | TitleRow:
    if view == "titles":
        return TitleRow.of(paper) if paper is not None else TitleRow(record_ref=entry.record_ref)
    data = public_paper(paper) if paper is not None else {"record_ref": entry.record_ref}
    if view == "compact":
        row = {k: data[k] for k in COMPACT_FIELDS if k in data}
        row.update(score=round(entry.score, 4), eligible=entry.eligible)
        return row
    return {"record": data, "score": round(entry.score, 4), "eligible": entry.eligible, "evidence": msgspec.to_builtins(entry.evidence)}
