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
from cnki_mcp.core.files import validate_filename
from cnki_mcp.core.text import is_blank
from cnki_mcp.core.tool_args import (
    BATCH_MAX,
    CHECK_ENTRIES_MAX,
    CHECK_STYLES,
    CITATION_FORMATS,
    EXPAND_MAX,
    EXPORT_MAX,
    FACET_LIMIT_DEFAULT,
    FACET_LIMIT_MAX,
    FACET_NAMES,
    FRESHNESS,
    LIMIT_DEFAULT,
    LIMIT_MAX,
    METADATA,
    MODES,
    OPTION_RANGES,
    POLICIES,
    QUERY_MAX,
    RELATED_WAIT_DEFAULT,
    RELATIONS,
    SCOPES,
    SORTS,
    STATUS_WAIT_MAX,
    TAG_CHARS,
    TEXT_BYTES_MAX,
    YEAR_MAX,
    ZOTERO_MAX,
    AuthorPapersArgs,
    CheckReferencesArgs,
    ExportCitationsArgs,
    JournalIssuesArgs,
    LinkReferencesArgs,
    NativeSearchArgs,
    RelatedPapersArgs,
    SaveToZoteroArgs,
    SearchArgs,
    SearchFacetsArgs,
    SearchOptions,
    ToolArgs,
)
from cnki_mcp.tools._parse import an_object, structural_error, without_nulls

Validator = Callable[[Any, dict[str, Any]], None]


# --- entry point -----------------------------------------------------------------------------------


def parse(kind: type[ToolArgs], validate: Validator, raw: dict[str, Any] | None) -> ToolArgs:
    """Convert ``raw`` to ``kind`` and validate it; raise CnkiError with the precise code on the first problem."""
    given = _without_nulls(an_object(raw), kind)
    try:
        args = msgspec.convert(given, kind)
    except msgspec.ValidationError as exc:
        raise structural_error(str(exc), {"": kind, "options": SearchOptions}) from None
    validate(args, given)
    return args


def _without_nulls(raw: dict[str, Any], kind: type[ToolArgs]) -> dict[str, Any]:
    """``without_nulls`` (which goes into ``options``), and in ``concept_groups`` of the search."""
    given = without_nulls(raw, kind)
    groups = given.get("concept_groups")
    if isinstance(groups, list):
        # The contract types each group as ["null","array"]; a null group is an empty one.
        given["concept_groups"] = [[] if g is None else g for g in groups]
    return given


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


def _years(year_from: int, year_to: int) -> None:
    for field, year in (("year_from", year_from), ("year_to", year_to)):
        if not 0 <= year <= YEAR_MAX:
            raise CnkiError(
                "INVALID_YEAR", f"{field} 须在 0–{YEAR_MAX} 之间（0 表示不限），收到的是 {year}。", details={"field": field}
            )
    if year_from > 0 and year_to > 0 and year_from > year_to:
        raise CnkiError(
            "INVALID_YEAR",
            f"year_from（{year_from}）不能大于 year_to（{year_to}）。",
            details={"field": "year_from"},
        )


def _options(options: SearchOptions, candidate_default: int) -> None:
    """The options rules of the search input, in the documented order; fills every default in place."""
    options.on_verification = _choice(
        options.on_verification, POLICIES, "ask", "INVALID_POLICY", "options.on_verification"
    )
    options.sort = _choice(options.sort, SORTS, "relevance", "INVALID_SORT", "options.sort")
    for name, (default, maximum) in OPTION_RANGES.items():
        value = getattr(options, name)
        if value == 0:
            value = candidate_default if name == "candidate_target" else default
        if not 1 <= value <= maximum:
            raise CnkiError(
                "INVALID_OPTION",
                f"options.{name} 须在 1–{maximum} 之间（0 表示默认值），收到的是 {value}。",
                details={"field": f"options.{name}"},
            )
        setattr(options, name, value)
    if not 0 <= options.expand <= EXPAND_MAX:
        raise CnkiError(
            "INVALID_OPTION",
            f"options.expand 须在 0–{EXPAND_MAX} 之间（0 表示不做引文扩展），收到的是 {options.expand}。",
            details={"field": "options.expand"},
        )
    options.metadata = _choice(options.metadata, METADATA, "ranked", "INVALID_METADATA", "options.metadata")
    options.freshness = _choice(options.freshness, FRESHNESS, "prefer_cache", "INVALID_FRESHNESS", "options.freshness")


def _policy(value: str, field: str = "on_verification") -> str:
    return _choice(value, POLICIES, "ask", "INVALID_POLICY", field)


def _given(value: str) -> str:
    """A string argument trimmed; one with nothing visible in it (spaces, NUL, zero-width) counts as absent."""
    return "" if is_blank(value) else value.strip()


def _exactly_one_document(args: RelatedPapersArgs) -> None:
    args.record_ref, args.title = _given(args.record_ref), _given(args.title)
    given = [name for name, value in (("record_ref", args.record_ref), ("title", args.title)) if value]
    if len(given) != 1:
        why = "不能同时提供" if given else "须提供其一"
        raise CnkiError("INVALID_INPUT", f"record_ref 与 title 二选一，{why}。", details={"field": "record_ref"})


def _documents_given(args: ExportCitationsArgs) -> None:
    args.record_refs = [ref for ref in map(_given, args.record_refs) if ref]
    args.titles = [title for title in map(_given, args.titles) if title]
    args.search_id = _given(args.search_id)
    references_of = args.references_of = _given(args.references_of)
    if not (args.record_refs or args.titles or args.search_id or references_of):
        raise CnkiError("NO_DOCUMENTS", "请至少提供 record_refs、titles 或 search_id 之一。")


# --- per-tool rules (raw is the decoded input, for "was this given?" questions) ---------------------


def validate_search(args: SearchArgs, raw: dict[str, Any]) -> None:
    args.query = _given(args.query)
    if not 1 <= len(args.query) <= QUERY_MAX:
        raise CnkiError(
            "INVALID_QUERY", f"query 须为 1–{QUERY_MAX} 字，收到 {len(args.query)} 字。", details={"field": "query"}
        )
    args.mode = _choice(args.mode, MODES, "balanced", "INVALID_MODE", "mode")
    args.limit = _limit(args.limit)
    _years(args.year_from, args.year_to)
    _options(args.options, OPTION_RANGES["candidate_target"][0])
    if args.concept_groups:
        from cnki_mcp.research.query import validate_plan  # the rules' home: loaded with the first search

        args.concept_groups = validate_plan(args.concept_groups)


def validate_native_search(args: NativeSearchArgs, raw: dict[str, Any]) -> None:
    """Structured and expert searches; their expressions are read when the search is planned."""
    if args.options.expand:
        raise CnkiError(
            "INVALID_OPTION", "options.expand 只用于 search；structured_search 和 expert_search 保持知网自己的结果，不做引文扩展。",
            details={"field": "options.expand"},
        )
    args.limit = _limit(args.limit)
    _years(args.year_from, args.year_to)
    args.sort = _choice(args.sort, SORTS, "relevance", "INVALID_SORT", "sort")
    given = raw.get("options") or {}
    # The top-level sort applies unless options.sort was given; structured searches default to list data only.
    if not given.get("sort"):
        args.options.sort = args.sort
    if not given.get("metadata"):
        args.options.metadata = "basic"
    if not given.get("candidate_target"):
        args.options.candidate_target = 0  # 0 = take the limit, filled by _options
    _options(args.options, args.limit)
    args.sort = args.options.sort
    from cnki_mcp.site.facet_query import facet_picks

    facet_picks(args.facet_filters)  # codes that cannot narrow a listing are refused before any request


def validate_search_facets(args: SearchFacetsArgs, raw: dict[str, Any]) -> None:
    """A stored search or an expression (with years); known facets; the entries per facet."""
    args.search_id = _given(args.search_id)
    if bool(args.search_id) == bool(args.expression):
        raise CnkiError("INVALID_INPUT", "search_id 与 expression 须给出且只给出一个。", details={"field": "search_id"})
    if args.search_id and (args.year_from or args.year_to):
        raise CnkiError(
            "INVALID_INPUT", "year_from、year_to 只和 expression 一起用；search_id 沿用那次检索的年份。",
            details={"field": "year_from"},
        )
    _years(args.year_from, args.year_to)
    unknown = [name for name in args.facets if name not in FACET_NAMES]
    if unknown:
        raise CnkiError(
            "INVALID_FACET", f"未知的分组：{unknown[0]}；可选 {'、'.join(FACET_NAMES)}。", details={"facet": unknown[0]}
        )
    args.facets = list(dict.fromkeys(args.facets))
    if args.limit == 0:
        args.limit = FACET_LIMIT_DEFAULT
    if not 1 <= args.limit <= FACET_LIMIT_MAX:
        raise CnkiError(
            "INVALID_LIMIT", f"limit 须在 1–{FACET_LIMIT_MAX} 之间，收到的是 {args.limit}。", details={"field": "limit"}
        )
    args.freshness = _choice(args.freshness, FRESHNESS, "prefer_cache", "INVALID_FRESHNESS", "freshness")
    args.on_verification = _policy(args.on_verification)
    from cnki_mcp.site.facet_query import facet_picks

    facet_picks(args.facet_filters)




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


def validate_save_to_zotero(args: SaveToZoteroArgs, raw: dict[str, Any]) -> None:
    args.record_refs = [ref for ref in map(_given, args.record_refs) if ref]
    args.search_id = _given(args.search_id)
    if not (args.record_refs or args.search_id):
        raise CnkiError("NO_DOCUMENTS", "请提供 record_refs 或 search_id。")
    if len(args.record_refs) > ZOTERO_MAX:
        raise CnkiError(
            "BATCH_TOO_LARGE", f"record_refs 最多 {ZOTERO_MAX} 个，收到 {len(args.record_refs)} 个；请分批保存。",
            details={"field": "record_refs"},
        )
    args.scope = _choice(args.scope, SCOPES, "selected", "INVALID_SCOPE", "scope")
    args.collection = _given(args.collection)
    args.tags = [tag for tag in map(_given, args.tags) if tag]
    bad = [tag for tag in args.tags if "," in tag or len(tag) > TAG_CHARS]
    if bad:
        raise CnkiError(
            "INVALID_TAGS", f"标签须为 1–{TAG_CHARS} 字且不含英文逗号：{'、'.join(bad)}", details={"tags": bad}
        )


def validate_related_papers(args: RelatedPapersArgs, raw: dict[str, Any]) -> None:
    args.cursor = _given(args.cursor)
    args.record_ref, args.title = _given(args.record_ref), _given(args.title)
    if not args.cursor or args.record_ref or args.title:
        _exactly_one_document(args)
    args.relation = _choice(args.relation, RELATIONS, "references", "INVALID_RELATION", "relation")
    args.limit = _limit(args.limit)
    args.wait_seconds = _defaulted(args.wait_seconds, RELATED_WAIT_DEFAULT, STATUS_WAIT_MAX, "INVALID_WAIT", "wait_seconds", "秒")
    args.on_verification = _policy(args.on_verification)


AUTHOR_CHARS_MAX = 60
AUTHOR_OFFSET_MAX = 150  # listing pages read at most hold 200 rows


def validate_author_papers(args: AuthorPapersArgs, raw: dict[str, Any]) -> None:
    args.author, args.record_ref, args.institution = map(_given, (args.author, args.record_ref, args.institution))
    if not 1 <= len(args.author) <= AUTHOR_CHARS_MAX:
        raise CnkiError("INVALID_INPUT", f"author 须为 1–{AUTHOR_CHARS_MAX} 字的作者姓名。", details={"field": "author"})
    if args.record_ref and args.institution:
        raise CnkiError("INVALID_INPUT", "record_ref 与 institution 只能提供其一：record_ref 的详情页已给出作者单位。",
                        details={"field": "institution"})
    if len(args.institution) > AUTHOR_CHARS_MAX * 2:
        raise CnkiError("INVALID_INPUT", f"institution 最多 {AUTHOR_CHARS_MAX * 2} 字。", details={"field": "institution"})
    args.limit = _limit(args.limit)
    _offset(args.offset)
    if args.offset > AUTHOR_OFFSET_MAX:
        raise CnkiError("INVALID_OFFSET", f"offset 最多 {AUTHOR_OFFSET_MAX}，收到的是 {args.offset}。", details={"field": "offset"})
    args.on_verification = _policy(args.on_verification)


def validate_journal_issues(args: JournalIssuesArgs, raw: dict[str, Any]) -> None:
    args.journal, args.issn, args.cn, args.record_ref = map(_given, (args.journal, args.issn, args.cn, args.record_ref))
    named = [field for field, value in (("journal", args.journal), ("issn", args.issn), ("cn", args.cn),
                                        ("record_ref", args.record_ref)) if value]
    if len(named) != 1:
        why = f"只能提供其中一个，收到了 {'、'.join(named)}" if named else "须提供其中一个"
        raise CnkiError("INVALID_INPUT", f"journal、issn、cn 与 record_ref {why}。", details={"field": "journal"})
    if not 0 <= args.year <= YEAR_MAX:
        raise CnkiError("INVALID_YEAR", f"year 须在 0–{YEAR_MAX} 之间（0 表示列出年份与刊期），收到的是 {args.year}。", details={"field": "year"})
    args.issue = _given(args.issue)
    if bool(args.year) != bool(args.issue):
        raise CnkiError("INVALID_INPUT", "year 与 issue 须一起提供（读一期的目录），或都不提供（列出年份与刊期）。", details={"field": "issue"})
    args.limit = _limit(args.limit)
    _offset(args.offset)
    args.on_verification = _policy(args.on_verification)


def validate_export_citations(args: ExportCitationsArgs, raw: dict[str, Any]) -> None:
    if len(args.record_refs) > EXPORT_MAX:
        raise CnkiError(
            "BATCH_TOO_LARGE",
            f"record_refs 一次最多 {EXPORT_MAX} 个，收到 {len(args.record_refs)} 个；请分批导出。",
            details={"count": len(args.record_refs), "limit": EXPORT_MAX},
        )
    if len(args.titles) > BATCH_MAX:
        raise CnkiError(
            "BATCH_TOO_LARGE",
            f"titles 最多 {BATCH_MAX} 个，收到 {len(args.titles)} 个；请分批导出。",
            details={"count": len(args.titles)},
        )
    _documents_given(args)
    args.scope = _choice(args.scope, SCOPES, "selected", "INVALID_SCOPE", "scope")
    _offset(args.offset)
    args.format = _choice(args.format, CITATION_FORMATS, "gbt7714", "INVALID_FORMAT", "format")
    if args.format == "custom":
        if not args.template:
            raise CnkiError("INVALID_TEMPLATE", "format=custom 需要 template，例如 {authors}. {title}[J]. {journal}, {year}.", details={"field": "template"})
        from cnki_mcp.references.citations import validate_template

        validate_template(args.template)
    if args.filename:
        validate_filename(args.filename)


def validate_link_references(args: LinkReferencesArgs, raw: dict[str, Any]) -> None:
    size = len(args.text.encode("utf-8"))
    if size > TEXT_BYTES_MAX:
        raise CnkiError(
            "INPUT_TOO_LARGE",
            f"text 最大 512 KB（{TEXT_BYTES_MAX} 字节），收到 {size} 字节；请分段处理。",
            details={"bytes": size},
        )


def validate_check_references(args: CheckReferencesArgs, raw: dict[str, Any]) -> None:
    """``text`` or ``references`` (one of them); afterwards ``references`` holds the entries to check."""
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
    args.style = _choice(args.style, CHECK_STYLES, "gbt7714", "INVALID_FORMAT", "style")
    args.on_verification = _policy(args.on_verification)
