"""The ``search`` pipeline: its input, its resumable state, its phases and its summary.

A search runs as phases over a ``SearchState`` that is checkpointed into its operation, so
``operation_control continue`` (also after a crash) resumes without asking CNKI again for
anything already obtained::

    retrieval rounds → enrichment → feedback → feedback enrichment → expansion → expansion enrichment → finish

Retrieval lists each channel's pages in rounds (every active channel one page at a time, the
candidate target checked only when the round is level); enrichment reads details and journals
through ``enrich.Enrichment``; feedback adds channels from the keywords the best candidates share;
expansion (``options.expand``) adds the references and citing papers of the top selected papers as
the channel ``citation`` (``relations.Relations``);
``finish`` ranks, selects and stores the search record and builds the summary.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

import msgspec

from cnki_mcp.core import settings
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.clock import utc_now_iso
from cnki_mcp.core.errors import CnkiError, as_cnki_error, for_its_tool, unreached_with_nothing
from cnki_mcp.core.identity import fingerprint
from cnki_mcp.core.model import (
    PARSER_VERSION,
    SITE_ORDER_METHODS,
    Budget,
    Channel,
    Coverage,
    CoverageView,
    Hit,
    LocalReply,
    Plan,
    SearchRecord,
    SearchSummary,
    TitleRow,
)
from cnki_mcp.core.source_filters import SourceCategories
from cnki_mcp.core.text import source_key
from cnki_mcp.ops.jobs import OperationContext
from cnki_mcp.pages.parse import GridPage
from cnki_mcp.research.backend import grid_page
from cnki_mcp.research.enrich import Enrichment
from cnki_mcp.research.expert import plan_expression
from cnki_mcp.research.facets import year_trend
from cnki_mcp.research.query import (
    LEXICAL_WARNING,
    SAMPLING_MAX_TOKENS,
    SAMPLING_SYSTEM_PROMPT,
    SAMPLING_UNUSABLE_WARNING,
    ConceptQuery,
    ExpertQuery,
    Query,
    compiled_of,
    feedback_channels,
    plan_explicit,
    plan_from_sampling,
    plan_lexical,
    plan_of,
    sampling_timeout_warning,
)
from cnki_mcp.research.rank import (
    DEFAULT_LIMIT,
    RankedPaper,
    choose,
    detail_pool,
    discovery_order,
    exclusions,
    feedback_keywords,
    rank,
    search_entries,
)
from cnki_mcp.research.relations import Relations
from cnki_mcp.research.sources import (
    CATEGORY_GROUP,
    OTHER_SOURCES_SHOWN,
    categories_applied,
    category_filters,
    confirm_categories,
    from_named,
    named_sources,
)
from cnki_mcp.site.facet_query import FacetPick, facet_picks
from cnki_mcp.site.grid_query import CompiledQuery, GridQuery, compile_channel, in_years, sentence_of
from cnki_mcp.store.library import Store

log = logging.getLogger(__name__)

CITATION_CHANNEL = "citation"  # candidates from the citation graph (options.expand)
CITATION_WEIGHT = 0.8


# --- the search input and its resumable state -------------------------------------------------------


class SearchSettings(msgspec.Struct, kw_only=True):
    """The options a search runs with, as its checkpoint keeps them (the tool fills every default).

    Its own Struct, not the tool's argument Struct: a new optional argument must not change what
    is stored, and a checkpoint written by another version must still load (unknown names pass).
    """

    on_verification: str
    sort: str
    candidate_target: int
    max_pages: int
    max_requests: int
    timeout_seconds: int
    metadata: str
    freshness: str
    expand: int = 0

    @classmethod
    def of(cls, options: msgspec.Struct) -> SearchSettings:
        """The settings from a search tool's options (the tool's Struct holds every name here)."""
        return cls(**{name: getattr(options, name) for name in cls.__struct_fields__})


class SearchInput(msgspec.Struct, omit_defaults=True, kw_only=True):
    """The search as it runs, after defaults (structured searches: query ``structured:<hash>``)."""

    query: str
    mode: str = "balanced"
    limit: int = DEFAULT_LIMIT
    year_from: int = 0
    year_to: int = 0
    concept_groups: list[list[str]] = []
    options: SearchSettings
    facet_filters: dict[str, list[str]] = {}  # structured and expert searches: the left panel's picks
    source_categories: list[str] = []  # 来源类别 names (facet_query.SOURCE_CATEGORIES), applied by CNKI's panel
    # A watch's run (tools/watch): the papers it already knew. A listing (sorted newest first) stops at the page
    # that shows one of them, and only the others get their details. None: an ordinary search.
    seen: list[str] | None = None
    told: list[str] = []  # a watch's papers told after a gap (Watch.told): no details again, but they end no listing


class SearchState(msgspec.Struct, omit_defaults=True):
    """Checkpointed state of one search; phase flags make a resumed run skip finished work."""

    search_id: str
    input: SearchInput
    plan: Plan
    cache_key: str = ""
    # What the tool was asked, as read and compiled at its entry; None in a checkpoint from before it was
    # kept (the run then compiles the plan's channels).
    query: Query | None = None
    refs: list[str] = []
    hits: dict[str, list[Hit]] = {}
    coverage: list[Coverage] = []
    retrieved: bool = False
    pool: list[str] = []
    enriched: bool = False
    feedback: list[Channel] | None = None
    feedback_done: bool = False
    feedback_refs: list[str] = []
    feedback_pool: list[str] = []
    finished: bool = False
    # Pages that answered during a round that was not yet collected: a continue uses them instead of
    # asking CNKI again, while collection still happens in channel order.
    pending: dict[str, GridPage] = {}
    # options.expand: the selected papers whose references and citing papers are read, the lists read so far
    # ("<ref>|<relation>"), the candidates the graph added and, per candidate, the seeds it is linked to.
    seeds: list[str] = []
    expand_lists: list[str] = []
    expand_refs: list[str] = []
    expand_pool: list[str] = []
    links: dict[str, list[str]] = {}
    expanded: bool = False
    expand_enriched: bool = False
    # source_categories: as the first listing's panel offered them (None until asked), and rows of sources the
    # caller did not name (sources.from_named): how many were dropped, the first names
    categories: SourceCategories | None = None
    excluded_other_sources: int = 0
    other_sources: list[str] = []


def search_input(
    query: Query,
    *,
    limit: int,
    year_from: int,
    year_to: int,
    options: SearchSettings,
    mode: str = "precise",
    facet_filters: dict[str, list[str]] | None = None,
    source_categories: list[str] | None = None,
) -> SearchInput:
    """The search as it will run; structured and expert searches are precise searches whose query names
    the expression (``mode`` is the concept search's)."""
    groups: list[list[str]] = []
    if isinstance(query, ConceptQuery):
        name, groups = query.text, query.groups
    else:
        kind = "expert" if isinstance(query, ExpertQuery) else "structured"
        name, mode = f"{kind}:{fingerprint(query.expression)}", "precise"
    return SearchInput(
        query=name, mode=mode, limit=limit, concept_groups=groups, options=options, facet_filters=facet_filters or {},
        year_from=year_from, year_to=year_to, source_categories=source_categories or [],
    )


def cache_key(request: SearchInput, plan: Plan) -> str:
    """The prefer_cache key: everything that changes the search, nothing that only shapes the reply."""
    options = request.options
    return fingerprint([
        request.query,
        request.mode,
        request.year_from,
        request.year_to,
        options.candidate_target,
        options.max_pages,
        options.metadata,
        options.sort,
        msgspec.to_builtins(plan.channels),
        PARSER_VERSION,
        *([f"expand={options.expand}"] if options.expand else []),
        *([["facets", request.facet_filters]] if request.facet_filters else []),
        *([["source_categories", request.source_categories]] if request.source_categories else []),
    ])


def search_budget(request: SearchInput) -> Budget:
    options = request.options
    return Budget(
        max_requests=options.max_requests,
        timeout_seconds=options.timeout_seconds,
        on_verification=options.on_verification,
    )


# --- planning at the tool entry ---------------------------------------------------------------


async def plan_search(query: Query, call: ToolCall | None) -> Plan:
    """The plan of what a search tool asks: an expression's one channel; for concepts, the explicit groups,
    else the client's model (sampling) when it answers in time, else lexical splitting."""
    if not isinstance(query, ConceptQuery):
        return plan_of(query)
    if query.groups:
        return plan_explicit(query.groups)
    if call is None or not call.client_supports_sampling:
        return _lexical(query.text)
    seconds = settings.sampling_wait_seconds()
    try:
        reply = await call.sample(SAMPLING_SYSTEM_PROMPT, query.text, SAMPLING_MAX_TOKENS, seconds)
    except TimeoutError:
        return _lexical(query.text, sampling_timeout_warning(seconds))
    plan = plan_from_sampling(reply) if reply else None
    return plan if plan is not None else _lexical(query.text, SAMPLING_UNUSABLE_WARNING)


def _lexical(query: str, *why: str) -> Plan:
    plan = plan_lexical(query)
    plan.warnings = [*why, LEXICAL_WARNING]
    return plan


class _Run:
    """A search in progress: its state plus lookup structures rebuilt from it."""

    def __init__(self, state: SearchState) -> None:
        self.state = state
        self.known = set(state.refs)
        self.coverage = {c.channel: c for c in state.coverage}
        self.errors = 0


class Research:
    """One search over an ``Enrichment`` (its catalogue, site and journal flights); cheap to create.

    ``relations`` reads the citation graph for ``options.expand`` (without it a search does not expand).
    """

    def __init__(self, enrichment: Enrichment, *, year: int | None = None, relations: Relations | None = None) -> None:
        self.enrichment = enrichment
        self.relations = relations
        self.catalog = enrichment.catalog
        self.store = enrichment.store
        self.year = year
        self._compiled: dict[str, CompiledQuery] = {}  # per channel, compiled once per run
        self._picks: tuple[FacetPick, ...] | None = None
        self._named: frozenset[str] | None = None  # the sources the caller named exactly (sources.named_sources)
        self._seen: frozenset[str] = frozenset()  # a watch's known papers (SearchInput.seen)
        self._told: frozenset[str] = frozenset()  # and those it told: no details for either

    async def run(self, op: OperationContext, state: SearchState) -> SearchSummary:
        """Run (or resume) a search; always stores a search record and returns its summary."""
        run = _Run(state)
        self._seen = frozenset(state.input.seen or ())
        self._told = self._seen.union(state.input.told)
        listing = compiled_of(state.query) if state.query is not None else None
        if listing is not None:  # the one channel of a query that keeps CNKI's order, compiled at the entry
            self._compiled[state.plan.channels[0].name] = listing
        self._named = named_sources(listing)
        op.checkpoint(state)
        error: CnkiError | None = None
        try:
            await self._phases(op, run)
        except asyncio.CancelledError:
            op.checkpoint(state)
            self._finish(op, run, CnkiError("CANCELLED"))
            raise
        except Exception as exc:  # noqa: BLE001 - a phase error stops the phases, finish still runs
            error = for_its_tool(as_cnki_error(exc), a_list=True, resumable="检索")
            if error.code == "OPERATION_FAILED":
                log.exception("search %s failed", state.search_id)
        op.checkpoint(state)
        summary = self._finish(op, run, error)
        if error is not None:
            if error.code == "CANCELLED" and op.cancelled or unreached_with_nothing(error, summary.candidate_count):
                raise error
            op.add_error(error)
        return summary

    async def _phases(self, op: OperationContext, run: _Run) -> None:
        state = run.state
        options = state.input.options
        _reopen_temporary_failures(state)
        if not state.coverage:
            state.coverage = [Coverage(channel=channel.name) for channel in state.plan.channels]
            run.coverage = {c.channel: c for c in state.coverage}

        async def retrieve() -> None:
            if state.input.source_categories and state.categories is None:
                await self._categories(op, state)
            await self._retrieve(op, run)
            state.pool = self._pool(state, state.refs)

        async def feedback() -> None:
            if state.input.mode != "precise" and options.metadata != "basic" and state.plan.method not in SITE_ORDER_METHODS:
                await self._feedback(op, run)
            state.feedback_pool = self._pool(state, state.feedback_refs)

        async def expand() -> None:
            if options.expand and self.relations is not None and state.plan.method != "structured":
                await self._expand(op, run)
            state.expand_pool = self._pool(state, state.expand_refs)

        phases: tuple[tuple[str, Callable[[], Awaitable[None]]], ...] = (
            ("retrieved", retrieve),
            ("enriched", lambda: self._enrich(op, run, state.pool, "enrichment")),
            ("feedback_done", feedback),
            ("finished", lambda: self._enrich(op, run, state.feedback_pool, "feedback_enrichment")),
            ("expanded", expand),
            ("expand_enriched", lambda: self._enrich(op, run, state.expand_pool, "expansion_enrichment")),
        )
        for done, phase in phases:  # each phase's flag makes a resumed run skip it once finished
            if not getattr(state, done):
                await phase()
                setattr(state, done, True)
                op.checkpoint(state)

    async def _enrich(self, op: OperationContext, run: _Run, refs: list[str], stage: str) -> None:
        """Details for every ref; raises the first fatal error (Enrichment.parallel says what stops)."""

        async def one(ref: str) -> None:
            try:
                await self.enrichment.enhance(op, ref)
            except Exception as exc:  # noqa: BLE001
                if not as_cnki_error(exc).fatal:
                    run.errors += 1
                raise

        fatal = await self.enrichment.parallel(op, refs, stage, one)
        if fatal is not None:
            raise fatal

    def _query(self, channel: Channel, state: SearchState) -> GridQuery:
        request = state.input
        if self._picks is None:
            self._picks = facet_picks(category_filters(request.facet_filters, state.categories))
        return GridQuery.of(self._listing(channel), request.year_from, request.year_to, request.options.sort, self._picks)

    async def _categories(self, op: OperationContext, state: SearchState) -> None:
        """The 来源类别 of the first listing (the panel, one request) read into the categories to apply."""
        request = state.input
        op.stage("source_categories", {"categories": len(request.source_categories)})
        first = GridQuery.of(
            self._listing(state.plan.channels[0]), request.year_from, request.year_to,
            facets=facet_picks(request.facet_filters),
        )
        groups = await self.enrichment.site.facet_panel(op, first, [CATEGORY_GROUP])
        state.categories = categories_applied(request.source_categories, groups)
        self._picks = None
        op.checkpoint(state)

    def _listing(self, channel: Channel) -> CompiledQuery:
        """The channel compiled, once per run (the query's own channel was compiled at the tool's entry)."""
        compiled = self._compiled.get(channel.name)
        if compiled is None:
            compiled = self._compiled[channel.name] = compile_channel(channel)
        return compiled

    async def _retrieve(self, op: OperationContext, run: _Run) -> None:
        state = run.state
        options = state.input.options
        while True:
            active = [
                channel for channel in state.plan.channels
                if not run.coverage[channel.name].exhausted and not run.coverage[channel.name].failed
            ]
            if not active:
                return
            pages = [run.coverage[channel.name].pages for channel in active]
            low, high = min(pages), max(pages)
            if low >= options.max_pages:
                return
            # The target counts only after a complete round, when every active channel is level.
            if low > 0 and low == high and len(state.refs) >= options.candidate_target:
                return
            op.stage("retrieval", {"round": low + 1, "candidates": len(state.refs)})
            lagging = [channel for channel in active if run.coverage[channel.name].pages == low]
            fatal = await self._round(op, run, lagging, feedback=False)
            op.checkpoint(state)
            if fatal is not None:
                raise fatal

    async def _round(self, op: OperationContext, run: _Run, channels: list[Channel], *, feedback: bool) -> CnkiError | None:
        """One page of each channel at once, collected in channel order; returns the first fatal error."""
        first = run.state.plan.channels[0]

        async def fetch(channel: Channel) -> GridPage:
            waiting = run.state.pending.get(channel.name)
            if waiting is not None:
                return waiting
            page = run.coverage[channel.name].pages + 1
            grid = await grid_page(self.enrichment.site, op, self._query(channel, run.state), page)
            categories = run.state.categories
            if categories is not None and not categories.confirmed and not categories.note and channel is first:
                confirm_categories(categories, grid.total)  # the first narrowed page, before any row is kept
            run.state.pending[channel.name] = grid
            op.checkpoint(run.state)
            return grid

        results = await asyncio.gather(*(fetch(channel) for channel in channels), return_exceptions=True)
        fatal: CnkiError | None = None
        for channel, result in zip(channels, results):
            if isinstance(result, GridPage):
                self._collect(run, channel, result, feedback)
                run.state.pending.pop(channel.name, None)
                continue
            if isinstance(result, asyncio.CancelledError):
                raise result
            error = as_cnki_error(result)
            if error.fatal:
                fatal = fatal or error
                continue
            coverage = run.coverage[channel.name]
            coverage.failed = True
            coverage.error = error.message
            coverage.error_code = error.code
            op.add_error(CnkiError(error.code, error.message, retryable=error.retryable,
                                   details={"channel": channel.name, "cause": error.details}))
            run.errors += 1
        return fatal

    def _collect(self, run: _Run, channel: Channel, grid: GridPage, feedback: bool) -> None:
        state = run.state
        request = state.input
        coverage = run.coverage[channel.name]
        # The one place the years and the named sources narrow a search's rows: positions still count every
        # row CNKI listed.
        kept = [(index, row) for index, row in enumerate(grid.rows) if in_years(row.year, request.year_from, request.year_to)]
        others = [row.source for _, row in kept if not from_named(row.source, self._named)]
        if others:
            kept = [(index, row) for index, row in kept if from_named(row.source, self._named)]
            state.excluded_other_sources += len(others)
            for name in others:
                if name not in state.other_sources and len(state.other_sources) < OTHER_SOURCES_SHOWN:
                    state.other_sources.append(name)
        stored = self.catalog.upsert([row for _, row in kept])
        # A watch's listing is newest first: from a paper it already knew on, the rest is known too.
        met_seen = not self._seen.isdisjoint(paper.record_ref for paper in stored)
        for (index, _), paper in zip(kept, stored):
            ref = paper.record_ref
            if ref not in run.known:
                run.known.add(ref)
                state.refs.append(ref)
                if feedback:
                    state.feedback_refs.append(ref)
            hits = state.hits.setdefault(ref, [])
            if not any(hit.channel == channel.name for hit in hits):
                hits.append(Hit(channel=channel.name, position=coverage.rows + index + 1, weight=channel.weight))
        # Page 1's total stands (a later page never lowers the promise); one that states none takes the next.
        if grid.total is not None and (coverage.pages == 0 or coverage.total is None):
            coverage.total = grid.total
        coverage.pages += 1
        coverage.rows += len(grid.rows)
        coverage.exhausted = grid.exhausted or met_seen
        coverage.zero = grid.zero

    async def _feedback(self, op: OperationContext, run: _Run) -> None:
        state = run.state
        if state.feedback is None:
            keywords = feedback_keywords(self._rank(state, state.refs), state.plan.concepts)
            state.feedback = feedback_channels(state.plan.concepts, keywords)
            for channel in state.feedback:
                coverage = Coverage(channel=channel.name)
                state.coverage.append(coverage)
                run.coverage[channel.name] = coverage
        todo = [
            channel for channel in state.feedback
            if run.coverage[channel.name].pages == 0 and not run.coverage[channel.name].failed
        ]
        if not todo:
            return
        op.stage("feedback", {"channels": len(todo)})
        fatal = await self._round(op, run, todo, feedback=True)
        if fatal is not None:
            raise fatal

    async def _expand(self, op: OperationContext, run: _Run) -> None:
        """Snowballing: the references and citing papers of the top selected papers become candidates of
        the channel ``citation``. Each list read is recorded, so a continue never asks for it again."""
        state = run.state
        options = state.input.options
        if CITATION_CHANNEL not in run.coverage:
            coverage = Coverage(channel=CITATION_CHANNEL)
            state.coverage.append(coverage)
            run.coverage[CITATION_CHANNEL] = coverage
        if not state.seeds:
            selected = choose(self._rank(state, state.refs), method=state.plan.method, metadata=options.metadata)
            state.seeds = [item.record_ref for item in selected[: options.expand]]
            op.checkpoint(state)
        coverage = run.coverage[CITATION_CHANNEL]
        assert self.relations is not None
        for number, (seed, relation) in enumerate((s, r) for s in state.seeds for r in ("references", "citing")):
            key = f"{seed}|{relation}"
            paper = self.store.data.papers.get(seed)
            if key in state.expand_lists or paper is None:
                continue
            op.stage("expansion", {"papers": len(state.seeds), "lists": number, "candidates": len(state.expand_refs)})
            try:
                refs = await self.relations.edges(op, paper, relation, live=options.freshness == "live")
            except Exception as exc:  # noqa: BLE001 - classified: a fatal one stops the phase
                error = as_cnki_error(exc)
                if error.fatal:
                    raise error from None
                op.add_error(CnkiError(error.code, error.message, retryable=error.retryable,
                                       details={"channel": CITATION_CHANNEL, "record_ref": seed, "relation": relation}))
                run.errors += 1
                refs = []
            self._link(run, seed, refs)
            coverage.pages += 1
            coverage.rows += len(refs)
            state.expand_lists.append(key)
            op.checkpoint(state)
        coverage.exhausted = True

    def _link(self, run: _Run, seed: str, refs: list[str]) -> None:
        """Candidates from one list of a seed: new ones join the search, every one is linked to the seed."""
        state = run.state
        coverage = run.coverage[CITATION_CHANNEL]
        for ref in refs:
            if ref == seed or ref not in self.store.data.papers:
                continue
            if ref not in run.known:
                run.known.add(ref)
                state.refs.append(ref)
                state.expand_refs.append(ref)
                coverage.added += 1
            seeds = state.links.setdefault(ref, [])
            if seed not in seeds:
                seeds.append(seed)
            hits = state.hits.setdefault(ref, [])
            if not any(hit.channel == CITATION_CHANNEL for hit in hits):
                hits.append(Hit(channel=CITATION_CHANNEL, position=len(state.links), weight=CITATION_WEIGHT))

    def _rank(self, state: SearchState, refs: Iterable[str]) -> list[RankedPaper]:
        papers = self.catalog.papers(refs)
        if state.plan.method in SITE_ORDER_METHODS:
            return discovery_order(papers)
        links = {ref: len(seeds) for ref, seeds in state.links.items()}
        return rank(papers, state.plan.concepts, state.hits, self.year, links)

    def _pool(self, state: SearchState, refs: list[str]) -> list[str]:
        metadata = state.input.options.metadata
        if state.input.seen is not None:
            refs = [ref for ref in refs if ref not in self._told]
        if metadata == "basic" or not refs:
            return []
        if metadata == "all":
            return detail_pool(refs, metadata)
        papers = self.catalog.papers(refs)
        return detail_pool(refs, metadata, rank(papers, state.plan.concepts, state.hits, self.year))

    def _finish(self, op: OperationContext, run: _Run, error: CnkiError | None) -> SearchSummary:
        """Rank, select, store the search record and build the summary."""
        state = run.state
        request = state.input
        ranked = self._rank(state, state.refs)
        selected = choose(ranked, method=state.plan.method, metadata=request.options.metadata)
        status = "partial" if error is not None or run.errors else "completed"
        # The record says what the operation will: a site never reached with nothing found is a failure.
        failed = unreached_with_nothing(error, len(ranked))
        record = SearchRecord(
            search_id=state.search_id,
            status="failed" if failed else status,
            errors=[*op.errors, *([error.problem()] if error is not None else [])],
            query=request.query,
            plan=state.plan,
            coverage=[msgspec.structs.replace(c) for c in state.coverage],
            entries=search_entries(ranked, selected),
            created_at=utc_now_iso(),
            year_from=request.year_from,
            year_to=request.year_to,
            facet_filters=category_filters(request.facet_filters, state.categories),
            source_categories=state.categories,
            excluded_other_sources=state.excluded_other_sources,
            other_sources=state.other_sources,
        )
        self.store.put_search(record, state.cache_key if status == "completed" and state.cache_key else None)
        enhanced = sum(1 for item in ranked if item.paper.abstract and item.paper.detail_observed_at)
        journals = {
            source_key(item.paper.source)
            for item in ranked
            if item.paper.quality is not None and item.paper.quality.state == "present"
        }
        sentences = sentence_plan(state.plan)
        # The first channel as this run compiled it; None when it did not (the summary's helpers then compile it).
        first = self._compiled.get(state.plan.channels[0].name) if state.plan.channels else None
        return SearchSummary(
            search_id=state.search_id,
            status=status,
            candidate_count=len(ranked),
            eligible_count=sum(1 for item in ranked if item.eligible),
            selected_count=len(selected),
            enhanced_count=enhanced,
            quality_source_count=len(journals),
            selection_exclusions=exclusions(ranked, selected),
            coverage=[CoverageView.of(entry) for entry in state.coverage],
            incomplete_channels=incomplete_channels(state.coverage),
            plan=state.plan,
            results=[TitleRow.of(item.paper, sentence=sentences) for item in selected[: request.limit or DEFAULT_LIMIT]],
            expert_expression=plan_expression(state.plan, first),
            year_trend=year_trend(self.store, record, compiled=first),
            source_categories=state.categories,
            excluded_other_sources=state.excluded_other_sources,
            other_sources=state.other_sources,
        )

    # -- get_metadata (network path) --


def sentence_plan(plan: Plan) -> bool:
    """Whether a plan is a 句子检索 (its rows carry the matching sentence)."""
    return plan.method == "structured" and bool(plan.channels) and sentence_of(plan.channels[0].expression) is not None


# Failures of a listing that asking again later can cure: a continue retries those channels.
_TEMPORARY_CHANNEL_CODES = frozenset({"SITE_TEMPORARILY_EMPTY", "RATE_LIMITED", "SITE_UNAVAILABLE", "RESOURCE_FAILED"})


def _reopen_temporary_failures(state: SearchState) -> None:
    """On continue, channels stopped by a temporary failure are listed again; later phases run again
    too (records already enriched cost no request: their details are fresh)."""
    reopened = [c for c in state.coverage if c.failed and c.error_code in _TEMPORARY_CHANNEL_CODES]
    if not reopened:
        return
    feedback = {channel.name for channel in state.feedback or ()}
    for coverage in reopened:
        coverage.failed = False
        coverage.error = coverage.error_code = ""
    state.retrieved = state.enriched = state.finished = False
    if any(coverage.channel in feedback for coverage in reopened):
        state.feedback_done = False


def incomplete_channels(coverage: Iterable[Coverage]) -> list[str]:
    """Listings that stopped before their end because of a failure (their candidates are missing)."""
    return [entry.channel for entry in coverage if entry.failed and not entry.exhausted]


async def run_search(
    op: OperationContext, engine: Enrichment, fresh: SearchState | None, relations: Relations | None = None
) -> SearchSummary:
    """The body of a search operation: ``fresh`` for a new search, None to resume from the checkpoint;
    ``relations`` reads the citation graph for ``options.expand``."""
    if fresh is not None:
        state = msgspec.structs.replace(fresh, search_id=op.operation_id)
    else:
        state = msgspec.convert(op.restored_checkpoint, SearchState)
    return await Research(engine, relations=relations).run(op, state)


def cached_reply(store: Store, key: str, limit: int) -> LocalReply | None:
    """The prefer_cache answer rebuilt from a completed search of the last 10 minutes, or None."""
    record = store.cached_search(key)
    if record is None:
        return None
    papers = store.data.papers
    selected = [entry for entry in record.entries if entry.selected]
    results = []
    for entry in selected[: limit or DEFAULT_LIMIT]:
        paper = papers.get(entry.record_ref)
        results.append(TitleRow.of(paper, sentence=sentence_plan(record.plan)) if paper is not None
                       else TitleRow(record_ref=entry.record_ref))
    summary = SearchSummary(
        search_id=record.search_id,
        status=record.status,
        candidate_count=len(record.entries),
        eligible_count=sum(1 for entry in record.entries if entry.eligible),
        selected_count=len(selected),
        enhanced_count=0,
        quality_source_count=0,
        coverage=[CoverageView.of(entry) for entry in record.coverage],
        plan=record.plan,
        results=results,
        expert_expression=plan_expression(record.plan),
        year_trend=year_trend(store, record),
        source_categories=record.source_categories,
        excluded_other_sources=record.excluded_other_sources,
        other_sources=record.other_sources,
    )
    return LocalReply(source="cache", requests=0, result=summary)
