"""Tool arguments of the tools not yet moved to ``cnki_mcp.tools`` (whose rules live in their Struct's ``Meta``):
one msgspec Struct and one validator per tool, and ``parse`` that runs them.

``parse(kind, validate, raw)`` is the only entry point (``tools.parse_arguments`` picks the pair of a
tool from the registry). It rejects unknown fields, wrong types and missing required fields with
``INVALID_INPUT`` (null on an optional field counts as not given), then applies the range and enum rules of
each tool in the documented order and raises the precise code (``INVALID_QUERY``, ``INVALID_LIMIT`` …) with a Chinese message that names the
field. What it returns is complete: an omitted value, and 0 or "" where the contract says "0 means the
default", already carry the documented default, so later code never re-applies defaults.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from cnki_mcp.core.errors import CnkiError, ErrorCode
from cnki_mcp.core.text import is_blank
from cnki_mcp.core.tool_args import (
    BATCH_MAX,
    DOWNLOAD_FORMATS,
    DOWNLOAD_WAIT_DEFAULT,
    DOWNLOAD_WAIT_MAX,
    INTERVAL_DEFAULT,
    INTERVAL_MAX,
    INTERVAL_MIN,
    LIMIT_DEFAULT,
    LIMIT_MAX,
    METADATA_FIELDS,
    PAPERS_LIMIT_DEFAULT,
    PAPERS_MAX,
    POLICIES,
    READ_CHARACTERS_DEFAULT,
    READ_CHARACTERS_MAX,
    READ_SOURCES,
    SCOPES,
    DownloadPaperArgs,
    DownloadPapersArgs,
    GetMetadataArgs,
    ReadOnlineHtmlArgs,
    ToolArgs,
)
from cnki_mcp.tools._parse import an_object, structural_error, without_nulls

Validator = Callable[[Any, dict[str, Any]], None]


# --- entry point -----------------------------------------------------------------------------------


def parse(kind: type[ToolArgs], validate: Validator, raw: dict[str, Any] | None) -> ToolArgs:
    """Convert ``raw`` to ``kind`` and validate it; raise CnkiError with the precise code on the first problem."""
    given = without_nulls(an_object(raw), kind)
    try:
        args = msgspec.convert(given, kind)
    except msgspec.ValidationError as exc:
        raise structural_error(str(exc), {"": kind}) from None
    validate(args, given)
    return args


# --- shared rules ----------------------------------------------------------------------------------


def _choice(value: str, allowed: tuple[str, ...], default: str, code: ErrorCode, field: str) -> str:
    """An enum value where "" means the default."""
    value = value or default
    if value not in allowed:
        raise CnkiError(code, f"{field} 只能是 {'、'.join(allowed)}，收到的是 {value!r}。", details={"field": field})
    return value


def _limit(value: int, field: str = "limit") -> int:
    if value == 0:
        return LIMIT_DEFAULT
    if not 1 <= value <= LIMIT_MAX:
        raise CnkiError("INVALID_LIMIT", f"{field} 须在 1–{LIMIT_MAX} 之间，收到的是 {value}。", details={"field": field})
    return value


def _offset(value: int, field: str = "offset") -> None:
    if value < 0:
        raise CnkiError("INVALID_OFFSET", f"{field} 不能为负数，收到的是 {value}。", details={"field": field})


def _policy(value: str, field: str = "on_verification") -> str:
    return _choice(value, POLICIES, "ask", "INVALID_POLICY", field)


def _given(value: str) -> str:
    """A string argument trimmed; one with nothing visible in it (spaces, NUL, zero-width) counts as absent."""
    return "" if is_blank(value) else value.strip()


def _exactly_one_document(args: ReadOnlineHtmlArgs | DownloadPaperArgs) -> None:
    args.record_ref, args.title = _given(args.record_ref), _given(args.title)
    given = [name for name, value in (("record_ref", args.record_ref), ("title", args.title)) if value]
    if len(given) != 1:
        why = "不能同时提供" if given else "须提供其一"
        raise CnkiError("INVALID_INPUT", f"record_ref 与 title 二选一，{why}。", details={"field": "record_ref"})


def _documents_given(args: GetMetadataArgs) -> None:
    args.record_refs = [ref for ref in map(_given, args.record_refs) if ref]
    args.titles = [title for title in map(_given, args.titles) if title]
    args.search_id = _given(args.search_id)
    if not (args.record_refs or args.titles or args.search_id):
        raise CnkiError("NO_DOCUMENTS", "请至少提供 record_refs、titles 或 search_id 之一。")


# --- per-tool rules (raw is the decoded input, for "was this given?" questions) ---------------------


def validate_get_metadata(args: GetMetadataArgs, raw: dict[str, Any]) -> None:
    count = len(args.record_refs) + len(args.titles)
    if count > BATCH_MAX:
        raise CnkiError(
            "BATCH_TOO_LARGE",
            f"record_refs 与 titles 合计最多 {BATCH_MAX} 篇，收到 {count} 篇；请分批调用。",
            details={"count": count},
        )
    _documents_given(args)
    args.scope = _choice(args.scope, SCOPES, "selected", "INVALID_SCOPE", "scope")
    _offset(args.offset)
    if args.limit > BATCH_MAX:
        raise CnkiError(
            "BATCH_TOO_LARGE", f"limit 最多 {BATCH_MAX}，收到 {args.limit}；请用 offset 分批读取。", details={"field": "limit"}
        )
    args.limit = _limit(args.limit)
    unknown = [f for f in args.fields if f.strip() not in METADATA_FIELDS]
    if unknown:
        raise CnkiError(
            "INVALID_FIELDS",
            f"fields 中有未知字段：{'、'.join(unknown)}。可用字段：{'、'.join(sorted(METADATA_FIELDS))}。",
            details={"fields": unknown},
        )
    args.fields = [f.strip() for f in args.fields]


def _defaulted(value: int, default: int, maximum: int, code: ErrorCode, field: str, unit: str = "") -> int:
    """An integer where 0 means the default, else 1..maximum."""
    value = value or default
    if not 1 <= value <= maximum:
        raise CnkiError(
            code,
            f"{field} 须在 1–{maximum}{unit} 之间（0 表示默认 {default}），收到的是 {value}。",
            details={"field": field},
        )
    return value


def validate_read_online_html(args: ReadOnlineHtmlArgs, raw: dict[str, Any]) -> None:
    _exactly_one_document(args)
    _offset(args.offset)
    args.max_characters = _defaulted(args.max_characters, READ_CHARACTERS_DEFAULT, READ_CHARACTERS_MAX, "INVALID_LIMIT", "max_characters")
    args.on_verification = _policy(args.on_verification)
    args.source = _choice(args.source, READ_SOURCES, "online", "INVALID_SOURCE", "source")


def validate_download_paper(args: DownloadPaperArgs, raw: dict[str, Any]) -> None:
    _exactly_one_document(args)
    args.format = _choice(args.format, DOWNLOAD_FORMATS, "auto", "INVALID_FORMAT", "format")
    args.wait_seconds = _defaulted(args.wait_seconds, DOWNLOAD_WAIT_DEFAULT, DOWNLOAD_WAIT_MAX, "INVALID_WAIT", "wait_seconds", "秒")
    args.on_verification = _policy(args.on_verification)


def validate_download_papers(args: DownloadPapersArgs, raw: dict[str, Any]) -> None:
    """``record_refs`` or ``search_id`` (one of them); the rest as download_paper, plus the interval."""
    args.record_refs = [ref for ref in map(_given, args.record_refs) if ref]
    args.search_id = _given(args.search_id)
    if bool(args.record_refs) == bool(args.search_id):
        why = "不能同时提供" if args.search_id else "须提供其一"
        raise CnkiError("NO_DOCUMENTS", f"record_refs 与 search_id 二选一，{why}。", details={"field": "record_refs"})
    if len(args.record_refs) > PAPERS_MAX:
        raise CnkiError(
            "BATCH_TOO_LARGE", f"record_refs 一次最多 {PAPERS_MAX} 个，收到 {len(args.record_refs)} 个；请分批下载。",
            details={"field": "record_refs", "count": len(args.record_refs), "limit": PAPERS_MAX},
        )
    args.scope = _choice(args.scope, SCOPES, "selected", "INVALID_SCOPE", "scope")
    _offset(args.offset)
    args.limit = _defaulted(args.limit, PAPERS_LIMIT_DEFAULT, PAPERS_MAX, "INVALID_LIMIT", "limit", " 篇")
    args.format = _choice(args.format, DOWNLOAD_FORMATS, "auto", "INVALID_FORMAT", "format")
    args.interval_seconds = args.interval_seconds or INTERVAL_DEFAULT
    if not INTERVAL_MIN <= args.interval_seconds <= INTERVAL_MAX:
        raise CnkiError(
            "INVALID_INTERVAL",
            f"interval_seconds 须在 {INTERVAL_MIN}–{INTERVAL_MAX} 秒之间（0 表示默认 {INTERVAL_DEFAULT}），收到的是 {args.interval_seconds}。",
            details={"field": "interval_seconds"},
        )
    args.wait_seconds = _defaulted(args.wait_seconds, DOWNLOAD_WAIT_DEFAULT, DOWNLOAD_WAIT_MAX, "INVALID_WAIT", "wait_seconds", "秒")
    args.on_verification = _policy(args.on_verification)


    args.on_verification = _policy(args.on_verification)
