"""``search_facets``: how a listing spreads over years, subjects, topics, sources, authors, institutions,
funds and document types, as CNKI's left panel counts it; the chart; the year trend of a search.

The listing is a stored search's first channel (its years and facet filters too) or an expression with
years. Page 1 of the grid gives the total (a real zero asks no panel); one ``group/result`` request asks
for every wanted group; a group the answer leaves out or folded is asked alone once more, and one still
without entries is named in ``notes`` (never an empty list said to be the answer). The answer is kept in
the store under the listing's key and reused for ``prefer_cache`` like a search (10 minutes).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import datetime

import msgspec

from cnki_mcp.core import tool_args
from cnki_mcp.core.clock import utc_now, utc_now_iso
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.files import safe_folder, write_new_file
from cnki_mcp.core.identity import fingerprint
from cnki_mcp.core.model import (
    PARSER_VERSION,
    Channel,
    ChartInfo,
    FacetRecord,
    FacetsResult,
    FacetValue,
    LocalReply,
    SearchRecord,
    YearTrend,
)
from cnki_mcp.ops.jobs import OperationContext
from cnki_mcp.pages.facet_parse import FacetGroup
from cnki_mcp.research import chart
from cnki_mcp.research.backend import SiteBackend, grid_page
from cnki_mcp.site.facet_query import facet_code, facet_of_group, facet_picks, group_ids
from cnki_mcp.site.grid_query import CompiledQuery, GridQuery, compile_channel
from cnki_mcp.site.listings import query_key
from cnki_mcp.store.library import Store

KIND = "facets"
CHARTS_FOLDER = "charts"
TREND_MAX_AGE = 86400.0  # a search's summary uses a facet answer of its listing at most a day old
TREND_YEARS = 10  # years the trend sentence looks back over
_NOT_GIVEN = "知网分组面板没有给出这个分组（该检索可能没有这类信息）。"
_FOLDED = "知网分组面板的这个分组没有条目（再单独请求一次后仍为空）。"


class FacetsRequest(msgspec.Struct, kw_only=True):
    """One search_facets call after its arguments are read: the listing and what to answer."""

    query: GridQuery
    search_id: str = ""
    facet_filters: dict[str, list[str]] = {}
    facets: list[str]
    limit: int
    chart: bool
    freshness: str


def channel_query(
    channel: Channel, year_from: int, year_to: int, filters: Mapping[str, Sequence[str]], compiled: CompiledQuery | None = None
) -> GridQuery:
    """The listing of one search channel (``compiled``: the channel as already compiled), in CNKI's relevance
    order (facet counts do not depend on order)."""
    if compiled is None:
        compiled = compile_channel(channel)
    # The panel's request has no 句子检索 form: a sentence search's listing here is its (empty) branches.
    return GridQuery(compiled.branches, year_from, year_to, expert=compiled.expert, facets=facet_picks(filters))


def facet_key(query: GridQuery) -> str:
    """The store key of a listing's facet answer: the listing without its sort."""
    return fingerprint(["facets", query_key(msgspec.structs.replace(query, sort="relevance")), PARSER_VERSION])


def cached(store: Store, request: FacetsRequest) -> FacetRecord | None:
    """A stored answer holding every wanted facet, fresh enough for prefer_cache; None otherwise."""
    if request.freshness == "live":
        return None
    record = store.cached_facets(facet_key(request.query))
    if record is None or any(name not in record.facets for name in request.facets):
        return None
    return record


def _values(facet: str, groups: Sequence[FacetGroup]) -> list[FacetValue]:
    values = [
        FacetValue(value=entry.name, code=facet_code(entry.field, entry.value), count=entry.count, approximate=entry.approximate)
        for group in groups
        for entry in group.entries
    ]
    if facet == "year":
        values.sort(key=lambda value: (_year(value.value), value.value))
    return values


def _year(text: str) -> int:
    digits = "".join(ch for ch in text if ch.isdigit())
    return int(digits) if digits else 0


def _by_facet(groups: Mapping[str, FacetGroup], wanted: Sequence[str]) -> dict[str, list[FacetGroup]]:
    found: dict[str, list[FacetGroup]] = {}
    for ident, group in groups.items():
        facet = facet_of_group(ident)
        if facet is not None and facet in wanted:
            found.setdefault(facet, []).append(group)
    return found


async def read_facets(op: OperationContext, site: SiteBackend, query: GridQuery, wanted: Sequence[str]) -> FacetRecord:
    """The listing's total and the wanted facets, from the grid's page 1 and the panel."""
    op.stage("listing")
    page = await grid_page(site, op, query, 1)
    record = FacetRecord(key=facet_key(query), observed_at=utc_now_iso(), total=page.total)
    if page.total == 0 and not page.rows:
        record.facets = {name: [] for name in wanted}  # a real zero (stated or confirmed): no panel to ask
        return record
    op.stage("facets", {"facets": len(wanted)})
    found = _by_facet(await site.facet_panel(op, query, [group_ids(name)[0] for name in wanted]), wanted)
    for name in wanted:
        groups = found.get(name, [])
        if not groups or all(group.folded for group in groups):
            op.stage("facets", {"facets": len(wanted), "asked_again": name})
            groups = _by_facet(await site.facet_panel(op, query, [group_ids(name)[0]]), [name]).get(name, [])
        values = _values(name, groups)
        record.facets[name] = values
        if not values:
            record.notes[name] = _FOLDED if groups else _NOT_GIVEN
    return record


def answer(record: FacetRecord, request: FacetsRequest) -> FacetsResult:
    """The answer to ``request`` from a facet record: the wanted facets, ``limit`` entries each."""
    return FacetsResult(
        total=record.total,
        facets={name: _first(name, record.facets.get(name, []), request.limit) for name in request.facets},
        notes={name: note for name, note in record.notes.items() if name in request.facets},
        search_id=request.search_id,
        facet_filters=request.facet_filters,
    )


def _first(facet: str, values: list[FacetValue], limit: int) -> list[FacetValue]:
    """The first ``limit`` entries in CNKI's order; for years the newest ``limit``, still ascending."""
    return values[-limit:] if facet == "year" else values[:limit]


def merged(old: FacetRecord | None, new: FacetRecord) -> FacetRecord:
    """A newer answer over the facets an older one of the same listing held (other facets kept)."""
    if old is None or old.key != new.key:
        return new
    facets = {**old.facets, **new.facets}
    notes = {name: note for name, note in {**old.notes, **new.notes}.items() if not facets.get(name)}
    return msgspec.structs.replace(new, facets=facets, notes=notes)


async def with_chart(result: FacetsResult, store: Store) -> FacetsResult:
    """The result with its chart drawn (off the event loop), written under ``charts/``, and its table."""
    font, warning = await asyncio.to_thread(chart.find_cjk_font)
    drawn = await asyncio.to_thread(chart.render, result.facets, tool_args.CHART_BARS, font)
    stamp = utc_now().strftime("%Y%m%d-%H%M%S-%f")
    name = f"facets-{stamp}.png"
    folder = await asyncio.to_thread(safe_folder, store.root, CHARTS_FOLDER)
    written = await asyncio.to_thread(write_new_file, folder, name, drawn.png)
    info = ChartInfo(
        path=written.path, width=drawn.width, height=drawn.height, bytes=written.bytes,
        render_ms=drawn.render_ms, font=drawn.font, font_warning=warning,
    )
    return msgspec.structs.replace(result, chart=info, chart_table=drawn.table)


async def cached_reply(store: Store, request: FacetsRequest) -> LocalReply | None:
    """The prefer_cache answer (the chart drawn anew when asked), or None when CNKI must be asked."""
    record = cached(store, request)
    if record is None:
        return None
    result = answer(record, request)
    if request.chart:
        result = await with_chart(result, store)
    return LocalReply(source="cache", requests=0, result=result)


async def run(op: OperationContext, site: SiteBackend, store: Store, request: FacetsRequest) -> FacetsResult:
    """The body of a search_facets operation."""
    key = facet_key(request.query)
    record = merged(store.data.facets.get(key), await read_facets(op, site, request.query, request.facets))
    store.put_facets(record)
    result = answer(record, request)
    return await with_chart(result, store) if request.chart else result


# --- the year trend of a search's summary ----------------------------------------------------------


def trend_sentence(years: Sequence[FacetValue]) -> str:
    """How the field grew, in one Chinese sentence, over the last ``TREND_YEARS`` years listed."""
    counted = [value for value in years if _year(value.value) > 0]
    if not counted:
        return ""
    recent = counted[-TREND_YEARS:]
    first, last = recent[0], recent[-1]
    peak = max(recent, key=lambda value: (value.count, _year(value.value)))
    if len(recent) == 1:
        return f"{first.value} 年 {first.count} 篇。"
    change = last.count - first.count
    if first.count > 0:
        ratio = f"（{'增长' if change >= 0 else '下降'} {abs(change) / first.count:.0%}）"
    else:
        ratio = ""
    return (
        f"{first.value}–{last.value} 年发文量由 {first.count} 篇变为 {last.count} 篇{ratio}，"
        f"最多的是 {peak.value} 年（{peak.count} 篇）。"
    )


def year_trend(
    store: Store, record: SearchRecord, now: datetime | None = None, compiled: CompiledQuery | None = None
) -> YearTrend | None:
    """Publications per year of the search's first listing (``compiled``: that listing as the search compiled
    it), when a facet answer for it is in the store."""
    if not record.plan.channels:
        return None
    channel = record.plan.channels[0]
    try:
        query = channel_query(channel, record.year_from, record.year_to, record.facet_filters, compiled)
    except CnkiError:
        return None
    facets = store.cached_facets(facet_key(query), TREND_MAX_AGE, now)
    years = facets.facets.get("year") if facets is not None else None
    if not years:
        return None
    return YearTrend(years=years, summary=trend_sentence(years), channel=channel.name)
