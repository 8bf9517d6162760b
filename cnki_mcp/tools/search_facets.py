"""search_facets: how a search's listing spreads over CNKI's left panel (years, subjects, sources …), with a chart."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Annotated, Any, Literal

import msgspec
from msgspec import Meta

from cnki_mcp.app.core import AppCore
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import LocalReply, OperationView, SearchRecord
from cnki_mcp.core.tool_args import FACET_NAMES, FACETS_BY_DEFAULT, ToolArgs
from cnki_mcp.tools import Budget
from cnki_mcp.tools._fields import OnVerification, YearFrom, YearTo, given, years_in_order
from cnki_mcp.tools._searching import FacetFilters, FreshnessRule, check_facet_filters

if TYPE_CHECKING:
    from cnki_mcp.research.facets import FacetsRequest

LIMIT_DEFAULT = 10  # entries per facet
LIMIT_MAX = 50
_LIMIT_RULE = {"code": "INVALID_LIMIT", "empty_means_default": True}
Facet = Literal["year", "subject", "topic", "source", "author", "institution", "fund", "doc_type", "source_category"]  # FACETS' names


class Args(ToolArgs):
    search_id: Annotated[str, Meta(description="与 expression 二选一")] = ""
    expression: Annotated[
        dict[str, Any], Meta(description="写法同 structured_search 的 expression")
    ] = {}
    year_from: YearFrom = 0
    year_to: YearTo = 0
    facet_filters: FacetFilters = msgspec.field(default_factory=FacetFilters)
    facets: Annotated[
        list[Facet], Meta(description="默认 source_category 以外的全部")
    ] = []  # empty = every facet but source_category
    limit: Annotated[int, Meta(ge=1, le=LIMIT_MAX, description=f"每组项数，1–{LIMIT_MAX}", extra=_LIMIT_RULE)] = LIMIT_DEFAULT
    chart: Annotated[bool, Meta(description="附 PNG 图，数字在 chart_table")] = False
    freshness: FreshnessRule = "prefer_cache"
    on_verification: OnVerification = "ask"


TITLE = "检索分组分布"
DESCRIPTION = (
    "一个检索在知网左侧分组（年度、学科、来源、作者、机构等）的分布；看逐年增长、谁在研究、哪些期刊在发时使用。"
)
READ_ONLY = True
OPEN_WORLD = True
BUDGET = Budget(requests=30, seconds=600)  # grid page 1, the panel, a group asked again alone, challenges


def validate_first(args: Any, raw: dict[str, Any]) -> None:
    """A stored search or an expression (years only with an expression), before any other rule."""
    args.search_id = given(args.search_id)
    if bool(args.search_id) == bool(args.expression):
        raise CnkiError("INVALID_INPUT", "search_id 与 expression 须给出且只给出一个。", details={"field": "search_id"})
    if args.search_id and (args.year_from or args.year_to):
        raise CnkiError(
            "INVALID_INPUT", "year_from、year_to 只和 expression 一起用；search_id 沿用那次检索的年份。",
            details={"field": "year_from"},
        )


def _known_facets(args: Any, raw: dict[str, Any]) -> None:
    """Known facets, each once, right after the facets' own rule."""
    unknown = [name for name in args.facets if name not in FACET_NAMES]
    if unknown:
        raise CnkiError(
            "INVALID_FACET", f"未知的分组：{unknown[0]}；可选 {'、'.join(FACET_NAMES)}。", details={"facet": unknown[0]}
        )
    args.facets = list(dict.fromkeys(args.facets))


AFTER = {"year_to": years_in_order, "facets": _known_facets}


def validate(args: Args, raw: dict[str, Any]) -> None:
    """The facet filters."""
    check_facet_filters(raw)


Result = OperationView | LocalReply


async def run(deps: AppCore, args: Args, call: ToolCall | None) -> Result:
    from cnki_mcp.app.core import stored_search
    from cnki_mcp.research import facets

    store = await deps.store()
    request = _request(args, stored_search(store, args.search_id) if args.search_id else None)
    hit = await facets.cached_reply(store, request)
    if hit is not None:
        return hit
    work = functools.partial(facets.run, site=deps.site(), store=store, request=request)
    jobs = await deps.jobs()
    return await jobs.inline(jobs.start(facets.KIND, BUDGET.of(args.on_verification), work, a_list=True), call)


def _request(args: Args, record: SearchRecord | None) -> FacetsRequest:
    """The listing ``args`` name: ``record``'s first channel (its years, its facet filters under the given
    ones), or the expression with the given years."""
    from cnki_mcp.core.model import Channel
    from cnki_mcp.research.facets import FacetsRequest, channel_query

    wanted: list[str] = [*args.facets] or list(FACETS_BY_DEFAULT)
    filters = args.facet_filters.picked()
    if record is not None:
        if not record.plan.channels:
            raise CnkiError("SEARCH_NOT_FOUND", f"检索 {record.search_id} 没有可复用的知网检索条件。")
        filters = {**record.facet_filters, **filters}
        query = channel_query(record.plan.channels[0], record.year_from, record.year_to, filters)
        search_id = record.search_id
    else:
        query = channel_query(Channel(name="q1", expression=args.expression), args.year_from, args.year_to, filters)
        search_id = ""
    return FacetsRequest(
        query=query, search_id=search_id, facet_filters=filters, facets=wanted, limit=args.limit,
        chart=args.chart, freshness=args.freshness,
    )
