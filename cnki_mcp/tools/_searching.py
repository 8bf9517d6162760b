"""What the search tools share: their options, the facet filters, the fields of the searches that keep CNKI's
own order (structured_search, expert_search), and starting or continuing a search operation.

``start_search`` and ``search_work`` live here rather than on ``AppCore``: search, structured_search,
expert_search and operation_control's continue are their only users, and a search is a tool's flow, not
state of the composition root.

Pure at import: the research layer is imported inside the functions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

import msgspec
from msgspec import Meta

from cnki_mcp.app.core import AppCore
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import LocalReply, OperationView, SearchSummary
from cnki_mcp.core.tool_args import FACETS, LIMIT_DEFAULT, OPTION_RANGES, ToolArgs
from cnki_mcp.tools._fields import Limit, OnVerification, Sort, SortField, YearFrom, YearTo, choice, years_in_order

if TYPE_CHECKING:
    from cnki_mcp.ops.jobs import OperationContext, Work
    from cnki_mcp.research.pipeline import SearchInput, SearchState
    from cnki_mcp.research.query import Query

Metadata = Literal["ranked", "all", "basic"]
Freshness = Literal["prefer_cache", "live"]
FreshnessRule = Annotated[Freshness, choice("INVALID_FRESHNESS")]
METADATA: tuple[str, ...] = get_args(Metadata)
FRESHNESS: tuple[str, ...] = get_args(Freshness)
SORTS: tuple[str, ...] = get_args(Sort)
EXPAND_MAX = 20  # search options.expand: the top selected papers whose references and citing papers are read

_CANDIDATES_DEFAULT, _CANDIDATES_MAX = OPTION_RANGES["candidate_target"]
_PAGES_DEFAULT, _PAGES_MAX = OPTION_RANGES["max_pages"]
_REQUESTS_DEFAULT, _REQUESTS_MAX = OPTION_RANGES["max_requests"]
_SECONDS_DEFAULT, _SECONDS_MAX = OPTION_RANGES["timeout_seconds"]


# An integer option: 0 means the default, else 1..its maximum. The options are left undescribed in the schema (their
# names say what they bound): how they work, their ranges and defaults, is said once, in cnki://guide.
_OPTION = {"code": "INVALID_OPTION", "empty_means_default": True, "message": "{field} 须在 1–{le} 之间（0 表示默认值），收到的是 {value}。"}
_METADATA = choice("INVALID_METADATA")
_EXPAND = f"引文扩展的篇数，0–{EXPAND_MAX}"
_EXPAND_RULE = {"code": "INVALID_OPTION", "message": "{field} 须在 {ge}–{le} 之间（0 表示不做引文扩展），收到的是 {value}。"}


class SearchOptions(ToolArgs, kw_only=True):
    """search's options; the field order is the order their rules are checked in (expand before metadata and
    freshness, as documented)."""

    on_verification: OnVerification = "ask"
    sort: SortField = "relevance"
    candidate_target: Annotated[int, Meta(ge=1, le=_CANDIDATES_MAX, extra=_OPTION)] = _CANDIDATES_DEFAULT
    max_pages: Annotated[int, Meta(ge=1, le=_PAGES_MAX, extra=_OPTION)] = _PAGES_DEFAULT
    max_requests: Annotated[int, Meta(ge=1, le=_REQUESTS_MAX, extra=_OPTION)] = _REQUESTS_DEFAULT
    timeout_seconds: Annotated[int, Meta(ge=1, le=_SECONDS_MAX, extra=_OPTION)] = _SECONDS_DEFAULT
    expand: Annotated[int, Meta(ge=0, le=EXPAND_MAX, description=_EXPAND, extra=_EXPAND_RULE)] = 0
    metadata: Annotated[Metadata, _METADATA] = "ranked"
    freshness: FreshnessRule = "prefer_cache"


class NativeOptions(SearchOptions, kw_only=True):
    """The options of the searches that keep CNKI's own results: candidates default to the limit (0 here,
    filled by ``validate_native``), list data only by default, no citation expansion (refused, not listed)."""

    candidate_target: Annotated[
        int, Meta(ge=0, le=_CANDIDATES_MAX, extra={"code": "INVALID_OPTION", "message": _OPTION["message"]})
    ] = 0
    metadata: Annotated[Metadata, _METADATA] = "basic"
    expand: Annotated[int, Meta(extra={"unlisted": True})] = 0  # refused by validate_native_first


class FacetFilters(msgspec.Struct, forbid_unknown_fields=False, kw_only=True):
    """One list of codes per facet of CNKI's left panel (``core.tool_args.FACETS``). An unknown facet passes
    the conversion so that ``facet_picks`` refuses it with INVALID_FACET; an empty list given is refused as
    INVALID_FACET_FILTER."""

    year: list[str] = []
    subject: list[str] = []
    topic: list[str] = []
    source: list[str] = []
    source_category: list[str] = []
    author: list[str] = []
    institution: list[str] = []
    fund: list[str] = []
    doc_type: list[str] = []

    def picked(self) -> dict[str, list[str]]:
        """The facets given, name → codes (after validation a given list is never empty)."""
        return {name: codes for name in FACETS if (codes := getattr(self, name))}




def check_facet_filters(raw: dict[str, Any]) -> None:
    """The facet filters as given (unknown facets and empty lists included): codes that cannot narrow a
    listing are refused before any request."""
    from cnki_mcp.site.facet_query import facet_picks

    facet_picks(raw.get("facet_filters") or {})




def check_source_categories(args: Any, raw: dict[str, Any]) -> None:
    """``source_categories`` read into the known names, each once (INVALID_INPUT naming the known ones);
    not together with ``facet_filters.source_category``, which narrows the same group."""
    from cnki_mcp.site.facet_query import source_category

    args.source_categories = list(dict.fromkeys(source_category(name) for name in args.source_categories))
    if args.source_categories and ((raw.get("facet_filters") or {}).get("source_category")):
        raise CnkiError(
            "INVALID_INPUT", "source_categories 与 facet_filters.source_category 筛选的是同一分组，只用其一。",
            details={"field": "source_categories"},
        )


class NativeSearchArgs(ToolArgs):
    """What structured_search and expert_search share beside their expressions (the field order is the order
    of the rules)."""

    limit: Limit = LIMIT_DEFAULT
    year_from: YearFrom = 0
    year_to: YearTo = 0
    # After parse: the effective sort, equal to options.sort.
    sort: SortField = "relevance"
    options: NativeOptions = msgspec.field(default_factory=NativeOptions)
    facet_filters: FacetFilters = msgspec.field(default_factory=FacetFilters)
    source_categories: list[str] = []

    def asked(self) -> Query:
        """The expression read once, by each search's own ``Args``: a bad one is reported before anything else."""
        raise NotImplementedError


def validate_native_first(args: Any, raw: dict[str, Any]) -> None:
    """options.expand, refused before any other rule."""
    if args.options.expand:
        raise CnkiError(
            "INVALID_OPTION", "options.expand 只用于 search；structured_search 和 expert_search 保持知网自己的结果，不做引文扩展。",
            details={"field": "options.expand"},
        )


NATIVE_AFTER = {"year_to": years_in_order}


def validate_native(args: NativeSearchArgs, raw: dict[str, Any]) -> None:
    """The top-level sort applies unless options.sort was given; candidates default to the limit; the facet
    filters. The expression itself is read when the search starts."""
    if not (raw.get("options") or {}).get("sort"):
        args.options.sort = args.sort
    args.options.candidate_target = args.options.candidate_target or args.limit
    args.sort = args.options.sort
    check_facet_filters(raw)
    check_source_categories(args, raw)


NativeResult = OperationView | LocalReply


async def run_native(deps: AppCore, args: NativeSearchArgs, call: ToolCall | None) -> NativeResult:
    """A structured or expert search: a precise search whose name is its expression's fingerprint."""
    from cnki_mcp.research.pipeline import SearchSettings, search_input
    from cnki_mcp.research.query import SentenceQuery

    query = args.asked()
    if args.source_categories and isinstance(query, SentenceQuery):
        raise CnkiError(
            "INVALID_INPUT", "句子检索没有知网的来源类别分组，不能与 source_categories 一起用。", details={"field": "source_categories"}
        )
    request = search_input(
        query, limit=args.limit, year_from=args.year_from, year_to=args.year_to,
        options=SearchSettings.of(args.options), facet_filters=args.facet_filters.picked(),
        source_categories=args.source_categories,
    )
    return await start_search(deps, request, query, call)


async def start_search(deps: AppCore, request: SearchInput, query: Query, call: ToolCall | None) -> OperationView | LocalReply:
    """A search after validation: planned, then the prefer_cache answer or a new operation."""
    from cnki_mcp.research.pipeline import SearchState, cache_key, cached_reply, plan_search, search_budget

    plan = await plan_search(query, call)
    store = await deps.store()
    key = cache_key(request, plan)
    if request.options.freshness == "prefer_cache":
        hit = cached_reply(store, key, request.limit)
        if hit is not None:
            return hit
    state = SearchState(search_id="", input=request, plan=plan, cache_key=key, query=query)
    jobs = await deps.jobs()
    return await jobs.inline(jobs.start("search", search_budget(request), search_work(deps, state)), call)


def search_work(deps: AppCore, fresh: SearchState | None) -> Work:
    """The operation body of a search: ``fresh`` for a new one, None to resume from the checkpoint."""

    async def work(op: OperationContext) -> SearchSummary:
        from cnki_mcp.research.pipeline import run_search

        relations = await deps.relations()
        return await run_search(op, relations.engine, fresh, relations)

    return work
