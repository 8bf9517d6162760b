"""Fields and rules many tools share, each stated once: a tool's ``Args`` writes ``limit: Limit = LIMIT_DEFAULT``
and, where its wording differs, adds its own description (``Annotated[Limit, Meta(description=...)]``; msgspec
merges the two ``Meta``).

Pure: imports only ``core``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import Meta

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.text import is_blank
from cnki_mcp.core.tool_args import DOWNLOAD_WAIT_DEFAULT, DOWNLOAD_WAIT_MAX, LIMIT_MAX, YEAR_MAX, DownloadFormat, Scope

Policy = Literal["ask", "skip"]
Sort = Literal["relevance", "date_desc", "cited_desc", "downloaded_desc"]


def choice(code: str, description: str | None = None) -> Meta:
    """The rule of an enum whose empty value ("") reads as its default; ``code`` names a value outside it."""
    return Meta(description=description, extra={"code": code, "empty_means_default": True})


# Described once, in the instructions (awaiting_user): ask (the default) waits for the person, skip skips.
OnVerification = Annotated[Policy, choice("INVALID_POLICY")]
Limit = Annotated[
    int, Meta(ge=1, le=LIMIT_MAX, description=f"1–{LIMIT_MAX}", extra={"code": "INVALID_LIMIT", "empty_means_default": True})
]
Offset = Annotated[int, Meta(ge=0, extra={"code": "INVALID_OFFSET"})]
SortField = Annotated[Sort, choice("INVALID_SORT")]
# A search's part, beside search_id (how scope, offset and limit pick a search's papers is said once, in the
# instructions).
ScopeRule = Annotated[Scope, choice("INVALID_SCOPE")]
Format = Annotated[DownloadFormat, choice("INVALID_FORMAT", "auto：有 PDF 用 PDF，否则 CAJ")]
# One paper named by record_ref or title, exactly one (``exactly_one_document``; said in the instructions).
Title = Annotated[str, Meta(description="完整题名")]
Subdirectory = Annotated[str, Meta(description="downloads/ 下的子目录")]
# The operation a call names; none: the only one running.
OperationId = Annotated[str, Meta(description="省略时为唯一在运行的任务")]


def defaulted(default: int, maximum: int, code: str, unit: str = "") -> Meta:
    """The rule of an integer where 0 means ``default``, else 1..``maximum`` (``unit`` follows the bound in the
    message: "秒")."""
    return Meta(
        ge=1,
        le=maximum,
        extra={"code": code, "empty_means_default": True, "message": f"{{field}} 须在 {{ge}}–{{le}}{unit} 之间（0 表示默认 {default}），收到的是 {{value}}。"},
    )


DownloadWait = Annotated[
    int,
    defaulted(DOWNLOAD_WAIT_DEFAULT, DOWNLOAD_WAIT_MAX, "INVALID_WAIT", "秒"),
    Meta(description=f"等下载完成的秒数，1–{DOWNLOAD_WAIT_MAX}"),
]
_YEAR_RULE = Meta(ge=0, le=YEAR_MAX, extra={"code": "INVALID_YEAR", "message": "{field} 须在 {ge}–{le} 之间（0 表示不限），收到的是 {value}。"})
# Inclusive, 0 for no bound: said in the instructions.
YearFrom = Annotated[int, _YEAR_RULE]
YearTo = Annotated[int, _YEAR_RULE]


def years_in_order(args: Any, raw: dict[str, Any]) -> None:
    """The range's order, checked right after ``year_to`` (each bound's own range is the fields' Meta rule):
    a tool's ``AFTER = {"year_to": years_in_order}``."""
    year_from, year_to = args.year_from, args.year_to
    if year_from > 0 and year_to > 0 and year_from > year_to:
        raise CnkiError("INVALID_YEAR", f"year_from（{year_from}）不能大于 year_to（{year_to}）。", details={"field": "year_from"})


def given(value: str) -> str:
    """A string argument trimmed; one with nothing visible in it (spaces, NUL, zero-width) counts as absent."""
    return "" if is_blank(value) else value.strip()


def exactly_one_document(args: Any, raw: dict[str, Any] | None = None) -> None:
    """``record_ref`` or ``title``, exactly one of them (both trimmed in place); a tool's ``validate_first``
    where that is its only rule before the fields' own."""
    args.record_ref, args.title = given(args.record_ref), given(args.title)
    named = [name for name, value in (("record_ref", args.record_ref), ("title", args.title)) if value]
    if len(named) != 1:
        why = "不能同时提供" if named else "须提供其一"
        raise CnkiError("INVALID_INPUT", f"record_ref 与 title 二选一，{why}。", details={"field": "record_ref"})


def documents_given(args: Any, also: str = "") -> None:
    """``record_refs``, ``titles`` or ``search_id`` (or the field ``also`` names), at least one; each trimmed
    in place, blank entries dropped."""
    args.record_refs = [ref for ref in map(given, args.record_refs) if ref]
    args.titles = [title for title in map(given, args.titles) if title]
    args.search_id = given(args.search_id)
    other = ""
    if also:
        other = given(getattr(args, also))
        setattr(args, also, other)
    if not (args.record_refs or args.titles or args.search_id or other):
        raise CnkiError("NO_DOCUMENTS", "请至少提供 record_refs、titles 或 search_id 之一。")
