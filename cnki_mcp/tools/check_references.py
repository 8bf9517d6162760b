"""check_references: a reference list checked entry by entry against CNKI, each with a corrected entry."""

from __future__ import annotations

import functools
from typing import Annotated, Any

from msgspec import Meta

from cnki_mcp.app.core import AppCore
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import OperationView
from cnki_mcp.core.text import is_blank
from cnki_mcp.core.tool_args import TEXT_BYTES_MAX, CheckStyle, ToolArgs
from cnki_mcp.tools import Budget
from cnki_mcp.tools._fields import OnVerification, choice

CHECK_ENTRIES_MAX = 200  # entries in one call
_TEXT = f"整段列表（或用 references），至多 {TEXT_BYTES_MAX // 1024} KB"
_STYLE = "corrected 的格式"


class Args(ToolArgs):
    text: Annotated[str, Meta(description=_TEXT)] = ""
    # After parse: the entries to check, in order (split from text when given).
    references: list[str] = []
    style: Annotated[CheckStyle, choice("INVALID_FORMAT", _STYLE)] = "gbt7714"
    on_verification: OnVerification = "ask"


TITLE = "核对参考文献"
DESCRIPTION = (
    "核对用户的参考文献列表：逐条到知网比对，给出 status（not_found 不证明是编造的）和按知网记录重写的 corrected。"
    f"至多 {CHECK_ENTRIES_MAX} 条。"
)
READ_ONLY = True
OPEN_WORLD = True
BUDGET = Budget(requests=300, seconds=900)


def validate_first(args: Any, raw: dict[str, Any]) -> None:
    """``text`` or ``references`` (one of them), within the size and count limits, before the style and the policy;
    afterwards ``references`` holds the entries to check."""
    text = "" if is_blank(args.text) else args.text
    given = [item for item in args.references if not is_blank(item)]
    if bool(text) == bool(given):
        why = "不能同时提供" if text else "须提供其一"
        raise CnkiError(
            "REFERENCES_REQUIRED",
            f"text（粘贴的参考文献列表）与 references（每条一个字符串）二选一，{why}。",
            details={"field": "text"},
        )
    size = sum(len(item.encode("utf-8")) for item in (text, *given))
    if size > TEXT_BYTES_MAX:
        raise CnkiError(
            "INPUT_TOO_LARGE",
            f"参考文献列表最大 512 KB（{TEXT_BYTES_MAX} 字节），收到 {size} 字节；请分批核对。",
            details={"bytes": size},
        )
    from cnki_mcp.references.reflist import split_entries

    # A pasted list is read only up to the entry past the limit: a longer one is refused all the same.
    entries = split_entries(text, CHECK_ENTRIES_MAX) if text else [item.strip() for item in given]
    if len(entries) > CHECK_ENTRIES_MAX:
        received = f"text 中的条目超过 {CHECK_ENTRIES_MAX} 条" if text else f"收到 {len(entries)} 条"
        raise CnkiError(
            "TOO_MANY_ENTRIES",
            f"一次最多核对 {CHECK_ENTRIES_MAX} 条参考文献，{received}；请分成几次调用，每次不超过 {CHECK_ENTRIES_MAX} 条。",
            details={"limit": CHECK_ENTRIES_MAX} | ({} if text else {"count": len(entries)}),
        )
    if not entries:
        raise CnkiError("REFERENCES_REQUIRED", "text 中没有找到参考文献条目（只有标题或空行）。", details={"field": "text"})
    args.text, args.references = text, entries


Result = OperationView


async def run(deps: AppCore, args: Args, call: ToolCall | None) -> Result:
    from cnki_mcp.references import refcheck

    jobs, engine = await deps.jobs(), await deps.enrichment()
    work = functools.partial(refcheck.check, engine=engine, texts=args.references, style=args.style, pasted=args.text)
    return await jobs.inline(jobs.start("references", BUDGET.of(args.on_verification), work), call)
