"""The research engine: the ``search`` pipeline, enrichment, and get_metadata's network path.

The engine talks to CNKI only through a :class:`SiteBackend` (the browser-driven ``site.py`` in
production, ``tests/fake_site.py`` in tests). Everything that decides *whether* to ask the site
lives here: identity merging and ``record_ref``, detail freshness (30 days), the journal cache
(7 days present / 1 day otherwise) with single flight and the 1-hour memory of identity
mismatches, relocation by exact title, the worker pool, and the resumable search state.

A search runs as phases over a :class:`SearchState` that is checkpointed into its operation, so
``operation_control continue`` (also after a crash) resumes without asking CNKI again for
anything already obtained::

    init → retrieval rounds → enrichment → feedback → feedback enrichment → finish
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Protocol

import msgspec

from cnki_mcp import settings
from cnki_mcp.arguments import SearchArgs, SearchOptions, StructuredSearchArgs
from cnki_mcp.clock import parse_utc, utc_now_iso
from cnki_mcp.errors import CnkiError, as_cnki_error
from cnki_mcp.identity import (
    REF_PREFIX,
    detail_matches,
    fingerprint,
    identity_keys,
    record_ref_for,
    same_paper,
)
from cnki_mcp.jobs import Jobs, OperationContext, kind_budget
from cnki_mcp.model import (
    PARSER_VERSION,
    Budget,
    Channel,
    Coverage,
    Hit,
    Operation,
    Paper,
    Plan,
    Problem,
    Quality,
    SearchRecord,
    public_paper,
)
from cnki_mcp.parse import GridPage
from cnki_mcp.query import (
    LEXICAL_WARNING,
    SAMPLING_MAX_TOKENS,
    SAMPLING_SYSTEM_PROMPT,
    TITLES_PER_LOCATE,
    Condition,
    compile_expression,
    feedback_channels,
    plan_explicit,
    plan_from_sampling,
    plan_lexical,
    plan_structured,
)
from cnki_mcp.rank import (
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
from cnki_mcp.store import Store, detail_is_fresh, journal_is_fresh
from cnki_mcp.text import source_key, title_key

log = logging.getLogger(__name__)

LOCATE_WORKERS = 4
MISMATCH_MEMORY_SECONDS = 3600.0
# Failures that belong to one operation, not to the journal: a waiter of a shared fetch retries itself.
_OWNER_ONLY_CODES = frozenset({"BUDGET_EXHAUSTED", "CANCELLED"})


# --- the site interface ---------------------------------------------------------------------------


class GridQuery(msgspec.Struct, frozen=True):
    """One listing: compiled branches (OR of AND groups), publication years and CNKI sort."""

    branches: list[list[Condition]]
    year_from: int = 0
    year_to: int = 0
    sort: str = "relevance"


class SiteBackend(Protocol):
    """CNKI as the engine sees it. Every method charges ``op`` and paces itself through the limiter."""

    async def grid(self, op: OperationContext, query: GridQuery, page: int) -> GridPage:
        """One page (1-based) of a listing; keeps its own paging cursor and handles challenges."""
        ...

    async def detail(self, op: OperationContext, paper: Paper) -> Paper:
        """Always fetches; the parsed detail bound to ``paper`` (same ref; the link used as locator)."""
        ...

    async def journal(self, op: OperationContext, paper: Paper) -> Quality:
        """Always fetches ``paper.source_url``; SOURCE_IDENTITY_UNCONFIRMED when the names disagree."""
        ...

    async def locate(self, op: OperationContext, titles: list[str]) -> dict[str, list[Paper]]:
        """At most 10 exact titles in one grid request; rows grouped under the given titles."""
        ...


SiteFactory = Callable[[], SiteBackend]


# --- identity index, merge and upsert (§6) --------------------------------------------------------


class PaperIndex:
    """Refs by identity key and by title key. Additive: lookups re-check the stored paper."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._keys: dict[str, set[str]] = {}
        self._titles: dict[str, set[str]] = {}
        self._refs: set[str] = set()

    def _sync(self) -> None:
        # Papers stored by other code paths (or a reopened store) are picked up by a rebuild.
        papers = self._store.data.papers
        if len(papers) == len(self._refs):
            return
        self._keys.clear()
        self._titles.clear()
        self._refs.clear()
        for paper in papers.values():
            self.add(paper)

    def add(self, paper: Paper) -> None:
        ref = paper.record_ref
        self._refs.add(ref)
        for key in identity_keys(paper):
            self._keys.setdefault(key, set()).add(ref)
        if paper.title:
            self._titles.setdefault(title_key(paper.title), set()).add(ref)

    def candidates(self, paper: Paper) -> set[str]:
        self._sync()
        found: set[str] = set()
        for key in identity_keys(paper):
            found |= self._keys.get(key, set())
        return found

    def by_title(self, title: str) -> list[str]:
        """Stored refs whose current title has this title key, sorted."""
        self._sync()
        key = title_key(title)
        papers = self._store.data.papers
        return sorted(
            ref for ref in self._titles.get(key, ()) if ref in papers and title_key(papers[ref].title) == key
        )


_LIST_OR_DETAIL = ("title", "authors", "source", "publication_date")
_ALWAYS = (
    "source_url", "document_type", "doi", "dbcode", "dbname", "filename", "url", "locator",
    "abstract", "excerpt", "volume", "issue", "pages", "keywords", "institutions", "funds", "clc_codes", "online_first",
)


def _later(a: str, b: str) -> bool:
    """Whether timestamp ``a`` is later than ``b`` (an unparsable or empty one is earliest)."""
    moment_a, moment_b = parse_utc(a), parse_utc(b)
    if moment_a is None:
        return False
    return moment_b is None or moment_a > moment_b


def merge(old: Paper, fresh: Paper) -> Paper:
    """``fresh`` folded into ``old``: a listing never overrides a detail page's bibliography (§6.5)."""
    out = msgspec.structs.replace(old)
    if fresh.detail_observed_at or not old.detail_observed_at:
        for name in _LIST_OR_DETAIL:
            value = getattr(fresh, name)
            if value:
                setattr(out, name, value)
        if fresh.year > 0:
            out.year = fresh.year
    for name in _ALWAYS:
        value = getattr(fresh, name)
        if value:
            setattr(out, name, value)
    for name in ("cited", "downloaded", "quality"):
        value = getattr(fresh, name)
        if value is not None:
            setattr(out, name, value)
    if _later(fresh.listed_at, old.listed_at):
        out.listed_at = fresh.listed_at
    if _later(fresh.detail_observed_at, old.detail_observed_at):
        out.detail_observed_at = fresh.detail_observed_at
        out.detail_parser = fresh.detail_parser
    out.record_ref = old.record_ref
    return out


class _Memory:
    """Per-store engine memory: the identity index, journal flights and journal mismatches."""

    def __init__(self, store: Store) -> None:
        self.index = PaperIndex(store)
        self.flights: dict[str, asyncio.Future[Quality]] = {}
        self.mismatches: dict[str, float] = {}


_MEMORY: weakref.WeakKeyDictionary[Store, _Memory] = weakref.WeakKeyDictionary()


def _memory(store: Store) -> _Memory:
    memory = _MEMORY.get(store)
    if memory is None:
        memory = _MEMORY[store] = _Memory(store)
    return memory


def upsert(store: Store, papers: Iterable[Paper]) -> list[Paper]:
    """Store each observation, merged into the same stored paper when identity says so (§6.3)."""
    memory = _memory(store)
    stored_papers = store.data.papers
    out: list[Paper] = []
    for incoming in papers:
        candidates = memory.index.candidates(incoming)
        if incoming.record_ref:
            candidates.add(incoming.record_ref)
        match: Paper | None = None
        for ref in sorted(candidates):
            stored = stored_papers.get(ref)
            if stored is None:
                continue
            if (ref == incoming.record_ref and detail_matches(stored, incoming)) or same_paper(stored, incoming):
                match = stored
                break
        if match is not None:
            result = merge(match, incoming)
        else:
            result = msgspec.structs.replace(incoming)
            ref = incoming.record_ref or record_ref_for(incoming)
            if ref in stored_papers:
                ref = REF_PREFIX + secrets.token_hex(12)
            result.record_ref = ref
        store.put_paper(result)
        memory.index.add(result)
        out.append(result)
    return out


def titles_in_store(store: Store, title: str) -> list[str]:
    """Stored refs with exactly this title (by title key)."""
    return _memory(store).index.by_title(title)


# --- the search input and its resumable state -------------------------------------------------------


class SearchInput(msgspec.Struct, omit_defaults=True):
    """The search as it runs, after defaults (structured searches: query ``structured:<hash>``)."""

    query: str
    mode: str = "balanced"
    limit: int = DEFAULT_LIMIT
    year_from: int = 0
    year_to: int = 0
    concept_groups: list[list[str]] = []
    options: SearchOptions = msgspec.field(default_factory=SearchOptions)


class SearchState(msgspec.Struct, omit_defaults=True):
    """Checkpointed state of one search; phase flags make a resumed run skip finished work."""

    search_id: str
    input: SearchInput
    plan: Plan
    cache_key: str = ""
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


def search_input(args: SearchArgs) -> SearchInput:
    return SearchInput(
        query=args.query,
        mode=args.mode,
        limit=args.limit,
        year_from=args.year_from,
        year_to=args.year_to,
        concept_groups=args.concept_groups,
        options=args.options,
    )


def structured_input(args: StructuredSearchArgs) -> SearchInput:
    """structured_search as a precise search whose query names the expression (§10.1)."""
    return SearchInput(
        query="structured:" + fingerprint(args.expression),
        mode="precise",
        limit=args.limit,
        year_from=args.year_from,
        year_to=args.year_to,
        options=args.options,
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
    ])


def search_budget(request: SearchInput) -> Budget:
    options = request.options
    return Budget(
        max_requests=options.max_requests,
        timeout_seconds=options.timeout_seconds,
        on_verification=options.on_verification,
    )


# --- concept planning at the tool entry (§3.1) ------------------------------------------------------


async def plan_search(args: SearchArgs, ctx: Any) -> Plan:
    """Explicit groups, else the client's model (sampling) when it can, else lexical splitting."""
    if args.concept_groups:
        return plan_explicit(args.concept_groups)
    plan: Plan
    if ctx is not None and getattr(ctx, "client_supports_sampling", False):
        reply = await ctx.sample(SAMPLING_SYSTEM_PROMPT, args.query, SAMPLING_MAX_TOKENS)
        plan = plan_from_sampling(reply, args.query) if reply else plan_lexical(args.query)
    else:
        plan = plan_lexical(args.query)
    if plan.method == "lexical":
        plan.warnings = [LEXICAL_WARNING]
    return plan


# --- the engine -----------------------------------------------------------------------------------


# Failures a fresh link cannot cure: no access, a skipped or unsolved challenge, a page we cannot read.
NOT_RELOCATED = frozenset(
    {"ACCESS_DENIED", "VERIFICATION_SKIPPED", "VERIFICATION_REPEATED", "PARSER_UNSUPPORTED", "QUERY_REJECTED", "SITE_TEMPORARILY_EMPTY"}
)


def _wrap(error: CnkiError, paper: Paper, stage: str) -> CnkiError:
    """A record-level failure carries the record; fatal ones pass unchanged."""
    if error.fatal:
        return error
    return CnkiError(
        error.code,
        error.message,
        retryable=error.retryable,
        details={"record_ref": paper.record_ref, "title": paper.title, "stage": stage, "cause": error.details},
    )


class _Run:
    """A search in progress: its state plus lookup structures rebuilt from it."""

    def __init__(self, state: SearchState) -> None:
        self.state = state
        self.known = set(state.refs)
        self.coverage = {c.channel: c for c in state.coverage}
        self.errors = 0


class Research:
    """The engine over one store and one site; cheap to create (memory is kept per store)."""

    def __init__(self, store: Store, site: SiteBackend, *, workers: int | None = None, year: int | None = None) -> None:
        self.store = store
        self.site = site
        self.workers = max(1, workers if workers is not None else settings.workers())
        self.year = year
        self._memory = _memory(store)
        self._branches: dict[str, list[list[Condition]]] = {}

    # -- the worker pool (§7.2) --

    async def parallel(
        self,
        op: OperationContext,
        items: Sequence[Any],
        stage: str,
        work: Callable[[Any], Awaitable[None]],
        workers: int | None = None,
        record_errors: bool = True,
    ) -> CnkiError | None:
        """Run ``work`` over ``items`` in index order; non-fatal errors are recorded, the first fatal returned.

        After a fatal error nothing new starts and work in flight is cancelled, except for
        BUDGET_EXHAUSTED: requests already admitted then land and are stored, so continue does
        not repeat them.
        """
        total = len(items)
        if total == 0:
            return None
        count = min(workers or self.workers, total)
        position = 0
        done = 0
        fatal: CnkiError | None = None
        tasks: list[asyncio.Task[None]] = []

        async def worker() -> None:
            nonlocal position, done, fatal
            while fatal is None and position < total:
                item = items[position]
                position += 1
                try:
                    await work(item)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - every failure is classified
                    error = as_cnki_error(exc)
                    if error.code == "OPERATION_FAILED":
                        log.exception("%s item failed", stage)
                    if not error.fatal:
                        if record_errors:
                            op.add_error(error)
                    elif fatal is None:
                        fatal = error
                        if error.code != "BUDGET_EXHAUSTED":
                            me = asyncio.current_task()
                            for task in tasks:
                                if task is not me:
                                    task.cancel()
                done += 1
                op.stage(stage, {"done": done, "total": total})

        tasks.extend(asyncio.create_task(worker()) for _ in range(count))
        try:
            await asyncio.gather(*tasks, return_exceptions=True)
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            raise
        if fatal is not None:
            return fatal
        if op.cancelled:
            return CnkiError("CANCELLED")
        return None

    # -- detail, relocation and journal --

    async def relocate(self, op: OperationContext, paper: Paper) -> Paper:
        """Find ``paper`` again by its exact title (one grid request) and store the fresh locator."""
        rows = (await self.site.locate(op, [paper.title])).get(paper.title, [])
        anonymous = not identity_keys(paper)
        accepted = [row for row in rows if anonymous or same_paper(paper, row)]
        if len(accepted) > 1:
            raise CnkiError(
                "IDENTITY_AMBIGUOUS",
                f"知网上有 {len(accepted)} 篇题名为《{paper.title}》的文献，无法确定是哪一篇。",
                details={"title": paper.title},
            )
        if not accepted or not (accepted[0].locator or accepted[0].url):
            raise CnkiError("DOCUMENT_NOT_FOUND", f"知网上没有找到《{paper.title}》。", details={"title": paper.title})
        located = merge(paper, accepted[0])
        self.store.put_paper(located)
        self._memory.index.add(located)
        return located

    async def detail(self, op: OperationContext, paper: Paper, refresh: bool = False) -> Paper:
        """The paper's detail page: none when fresh, located first without a link, relocated once on failure."""
        if not refresh and detail_is_fresh(paper):
            return paper
        if not paper.locator and not paper.url:
            paper = await self._located(op, paper)
        try:
            return await self.site.detail(op, paper)
        except Exception as exc:  # noqa: BLE001 - classified below
            error = as_cnki_error(exc)
            if error.fatal or error.code in NOT_RELOCATED:
                raise _wrap(error, paper, "detail") from None
        relocated = await self._located(op, paper)
        try:
            return await self.site.detail(op, relocated)
        except Exception as exc:  # noqa: BLE001
            raise _wrap(as_cnki_error(exc), relocated, "detail") from None

    async def _located(self, op: OperationContext, paper: Paper) -> Paper:
        try:
            return await self.relocate(op, paper)
        except Exception as exc:  # noqa: BLE001
            raise _wrap(as_cnki_error(exc), paper, "locate") from None

    async def quality(self, op: OperationContext, paper: Paper) -> Quality | None:
        """Journal evidence for a journal article: cached 7 days (present) or 1 day, one fetch per journal."""
        if "期刊" not in paper.document_type or not paper.source:
            return None
        key = source_key(paper.source)
        memory = self._memory
        while True:
            cached = self.store.data.sources.get(key)
            if cached is not None and journal_is_fresh(cached):
                return cached
            expiry = memory.mismatches.get(key)
            if expiry is not None:
                if expiry > time.monotonic():
                    raise CnkiError(
                        "SOURCE_IDENTITY_UNCONFIRMED",
                        f"期刊页面的名称与来源《{paper.source}》对不上（1 小时内不再重复读取）。",
                        details={"source": paper.source},
                    )
                del memory.mismatches[key]
            if not paper.source_url:
                raise CnkiError("SOURCE_LOCATOR_MISSING", details={"source": paper.source})
            flight = memory.flights.get(key)
            if flight is None:
                break
            try:
                return await asyncio.shield(flight)
            except CnkiError as error:
                if error.code not in _OWNER_ONLY_CODES:
                    raise
        future: asyncio.Future[Quality] = asyncio.get_running_loop().create_future()
        memory.flights[key] = future
        try:
            quality = await self.site.journal(op, paper)
        except BaseException as exc:
            error = as_cnki_error(exc)
            if error.code == "SOURCE_IDENTITY_UNCONFIRMED":
                memory.mismatches[key] = time.monotonic() + MISMATCH_MEMORY_SECONDS
            future.set_exception(error)
            future.exception()  # waiters may be none: mark it retrieved
            raise
        else:
            if not quality.observed_at:
                quality = msgspec.structs.replace(quality, observed_at=utc_now_iso())
            self.store.put_source(key, quality)
            future.set_result(quality)
            return quality
        finally:
            memory.flights.pop(key, None)

    async def enhance(self, op: OperationContext, ref: str, *, quality: bool = True, refresh: bool = False) -> None:
        """Detail page, then journal evidence, for one stored record (errors carry the record)."""
        paper = self.store.data.papers.get(ref)
        if paper is None:
            return
        detail = await self.detail(op, paper, refresh)
        current = self.store.data.papers.get(ref, paper)
        if detail.detail_observed_at != current.detail_observed_at:
            current = merge(current, detail)
            self.store.put_paper(current)
            self._memory.index.add(current)
        if not quality:
            return
        try:
            evidence = await self.quality(op, current)
        except Exception as exc:  # noqa: BLE001
            raise _wrap(as_cnki_error(exc), current, "journal") from None
        if evidence is not None:
            latest = self.store.data.papers.get(ref, current)
            if latest.quality is None or latest.quality.observed_at != evidence.observed_at:
                self.store.put_paper(msgspec.structs.replace(latest, quality=evidence))

    async def enrich(
        self,
        op: OperationContext,
        refs: Sequence[str],
        stage: str,
        *,
        quality: bool = True,
        refresh: bool = False,
        record_errors: bool = True,
    ) -> CnkiError | None:
        """Enhance ``refs`` with CNKI_WORKERS workers; returns the fatal error that stopped it, if any.

        ``record_errors=False`` drops per-record failures (export refreshes details best-effort).
        """

        async def one(ref: str) -> None:
            await self.enhance(op, ref, quality=quality, refresh=refresh)

        return await self.parallel(op, refs, stage, one, record_errors=record_errors)

    # -- title resolution (get_metadata, export_citations, link_references) --

    async def resolve_titles(self, op: OperationContext, titles: Sequence[str]) -> tuple[list[str], list[Problem]]:
        """Refs for full titles: a unique local match, else CNKI by exact title (10 per request, 4 at once).

        Per-title failures (DOCUMENT_NOT_FOUND, IDENTITY_AMBIGUOUS, a failed batch) come back as
        problems in title order; a fatal error is raised once the batches in flight have landed.
        """
        wanted: list[str] = []
        seen: set[str] = set()
        for title in titles:
            title = title.strip()
            key = title_key(title)
            if title and key not in seen:
                seen.add(key)
                wanted.append(title)
        found: dict[str, str] = {}
        failed: dict[str, Problem] = {}
        remote: list[str] = []
        for title in wanted:
            local = self._memory.index.by_title(title)
            if len(local) == 1:
                found[title] = local[0]
            else:
                remote.append(title)
        batches = [remote[i : i + TITLES_PER_LOCATE] for i in range(0, len(remote), TITLES_PER_LOCATE)]

        async def locate(batch: list[str]) -> None:
            try:
                grouped = await self.site.locate(op, batch)
            except Exception as exc:  # noqa: BLE001
                error = as_cnki_error(exc)
                if error.fatal:
                    raise
                for title in batch:
                    failed[title] = _title_problem(error, title)
                return
            for title in batch:
                # Two rows of one paper (a repeated listing) merge into one record.
                stored = list(dict.fromkeys(p.record_ref for p in upsert(self.store, grouped.get(title, []))))
                if len(stored) == 1:
                    found[title] = stored[0]
                elif not stored:
                    failed[title] = CnkiError(
                        "DOCUMENT_NOT_FOUND", f"知网上没有找到题名为《{title}》的文献。", details={"title": title}
                    ).problem()
                else:
                    failed[title] = CnkiError(
                        "IDENTITY_AMBIGUOUS",
                        f"知网上有 {len(stored)} 篇题名为《{title}》的文献，请改用 record_ref 指定。",
                        details={"title": title, "record_refs": stored},
                    ).problem()

        fatal = await self.parallel(op, batches, "locate", locate, LOCATE_WORKERS)
        if fatal is not None:
            raise fatal
        refs = [found[title] for title in wanted if title in found]
        problems = [failed[title] for title in wanted if title in failed]
        return refs, problems

    # -- the search pipeline (§4–§9) --

    async def run(self, op: OperationContext, state: SearchState) -> dict[str, Any]:
        """Run (or resume) a search; always stores a search record and returns its summary."""
        run = _Run(state)
        op.checkpoint(state)
        error: CnkiError | None = None
        try:
            await self._phases(op, run)
        except asyncio.CancelledError:
            op.checkpoint(state)
            self._finish(op, run, CnkiError("CANCELLED"))
            raise
        except Exception as exc:  # noqa: BLE001 - a phase error stops the phases, finish still runs
            error = as_cnki_error(exc)
            if error.code == "OPERATION_FAILED":
                log.exception("search %s failed", state.search_id)
        op.checkpoint(state)
        summary = self._finish(op, run, error)
        if error is not None:
            if error.code == "CANCELLED" and op.cancelled:
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
        if not state.retrieved:
            await self._retrieve(op, run)
            state.retrieved = True
            state.pool = self._pool(state, state.refs)
            op.checkpoint(state)
        if not state.enriched:
            fatal = await self._enrich(op, run, state.pool, "enrichment")
            if fatal is not None:
                raise fatal
            state.enriched = True
            op.checkpoint(state)
        if not state.feedback_done:
            if state.input.mode != "precise" and options.metadata != "basic" and state.plan.method != "structured":
                await self._feedback(op, run)
            state.feedback_done = True
            state.feedback_pool = self._pool(state, state.feedback_refs)
            op.checkpoint(state)
        if not state.finished:
            fatal = await self._enrich(op, run, state.feedback_pool, "feedback_enrichment")
            if fatal is not None:
                raise fatal
            state.finished = True

    async def _enrich(self, op: OperationContext, run: _Run, refs: list[str], stage: str) -> CnkiError | None:
        async def one(ref: str) -> None:
            try:
                await self.enhance(op, ref)
            except Exception as exc:  # noqa: BLE001
                if not as_cnki_error(exc).fatal:
                    run.errors += 1
                raise

        return await self.parallel(op, refs, stage, one)

    def _query(self, channel: Channel, request: SearchInput) -> GridQuery:
        branches = self._branches.get(channel.name)
        if branches is None:
            branches = self._branches[channel.name] = compile_expression(channel.expression)
        return GridQuery(branches, request.year_from, request.year_to, request.options.sort)

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
        request = run.state.input

        async def fetch(channel: Channel) -> GridPage:
            waiting = run.state.pending.get(channel.name)
            if waiting is not None:
                return waiting
            page = run.coverage[channel.name].pages + 1
            grid = await self.site.grid(op, self._query(channel, request), page)
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
        kept: list[tuple[int, Paper]] = []
        for index, row in enumerate(grid.rows):
            if request.year_from or request.year_to:
                if row.year <= 0 or (request.year_from and row.year < request.year_from) or (
                    request.year_to and row.year > request.year_to
                ):
                    continue
            kept.append((index, row))
        stored = upsert(self.store, [row for _, row in kept])
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
        coverage.pages += 1
        coverage.rows += len(grid.rows)
        if grid.total is not None:  # a page that does not state the total keeps the one stated before
            coverage.total = grid.total
        coverage.exhausted = grid.exhausted
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

    def _papers(self, refs: Iterable[str]) -> list[Paper]:
        papers = self.store.data.papers
        return [papers[ref] for ref in refs if ref in papers]

    def _rank(self, state: SearchState, refs: Iterable[str]) -> list[RankedPaper]:
        papers = self._papers(refs)
        if state.plan.method == "structured":
            return discovery_order(papers)
        return rank(papers, state.plan.concepts, state.hits, self.year)

    def _pool(self, state: SearchState, refs: list[str]) -> list[str]:
        metadata = state.input.options.metadata
        if metadata == "basic" or not refs:
            return []
        if metadata == "all":
            return detail_pool(refs, metadata)
        papers = self._papers(refs)
        return detail_pool(refs, metadata, rank(papers, state.plan.concepts, state.hits, self.year))

    def _finish(self, op: OperationContext, run: _Run, error: CnkiError | None) -> dict[str, Any]:
        """Rank, select, store the search record and build the summary (§9.8)."""
        state = run.state
        request = state.input
        ranked = self._rank(state, state.refs)
        selected = choose(ranked, method=state.plan.method, metadata=request.options.metadata)
        status = "partial" if error is not None or run.errors else "completed"
        record = SearchRecord(
            search_id=state.search_id,
            status=status,
            query=request.query,
            plan=state.plan,
            coverage=[msgspec.structs.replace(c) for c in state.coverage],
            entries=search_entries(ranked, selected),
            created_at=utc_now_iso(),
        )
        self.store.put_search(record, state.cache_key if status == "completed" and state.cache_key else None)
        enhanced = sum(1 for item in ranked if item.paper.abstract and item.paper.detail_observed_at)
        journals = {
            source_key(item.paper.source)
            for item in ranked
            if item.paper.quality is not None and item.paper.quality.state == "present"
        }
        summary: dict[str, Any] = {
            "search_id": state.search_id,
            "status": status,
            "candidate_count": len(ranked),
            "eligible_count": sum(1 for item in ranked if item.eligible),
            "selected_count": len(selected),
            "enhanced_count": enhanced,
            "quality_source_count": len(journals),
        }
        excluded = exclusions(ranked, selected)
        if excluded:
            summary["selection_exclusions"] = excluded
        summary["coverage"] = coverage_json(state.coverage)
        incomplete = incomplete_channels(state.coverage)
        if incomplete:
            summary["incomplete_channels"] = incomplete
        summary["plan"] = msgspec.to_builtins(state.plan)
        summary["results"] = [_title_row(item.paper) for item in selected[: request.limit or DEFAULT_LIMIT]]
        return summary

    # -- get_metadata (network path) --

    async def metadata(
        self,
        op: OperationContext,
        refs: Sequence[str],
        titles: Sequence[str],
        *,
        quality: bool,
        refresh: bool,
        fields: Sequence[str] = (),
    ) -> dict[str, Any]:
        """Resolve, enrich and return records; per-paper failures are recorded and never fail the others."""
        wanted: list[str] = []
        for ref in refs:
            ref = ref.strip()
            if not ref:
                continue
            if ref in self.store.data.papers:
                wanted.append(ref)
            else:
                op.add_error(CnkiError("RECORD_NOT_FOUND", f"本地没有记录 {ref}。", details={"record_ref": ref}))
        fatal: CnkiError | None = None
        if titles:
            try:
                resolved, problems = await self.resolve_titles(op, titles)
            except Exception as exc:  # noqa: BLE001
                fatal = as_cnki_error(exc)
            else:
                wanted += resolved
                for problem in problems:
                    op.add_error(problem)
        unique = list(dict.fromkeys(wanted))
        if fatal is None:
            fatal = await self.enrich(op, unique, "metadata", quality=quality, refresh=refresh)
        if fatal is not None:
            if fatal.code == "CANCELLED" and op.cancelled:
                raise fatal
            op.add_error(fatal)
        records = [_fields(public_paper(paper), fields) for paper in self._papers(unique)]
        return {"records": records}


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


def coverage_json(coverage: Iterable[Coverage]) -> list[dict[str, Any]]:
    """Coverage as clients see it: pages, rows, total (null when unknown) and exhausted always present."""
    out = []
    for entry in coverage:
        row: dict[str, Any] = {
            "channel": entry.channel,
            "pages": entry.pages,
            "rows": entry.rows,
            "total": entry.total,
            "exhausted": entry.exhausted,
        }
        if entry.total == 0 and entry.zero:
            row["zero_confirmed_by"] = "page" if entry.zero == "stated" else "control_query"
        if entry.failed:
            row["failed"] = True
        if entry.error:
            row["error"] = entry.error
        if entry.error_code:
            row["error_code"] = entry.error_code
        out.append(row)
    return out


def _title_problem(error: CnkiError, title: str) -> Problem:
    return CnkiError(
        error.code,
        error.message,
        retryable=error.retryable,
        details={"title": title, "stage": "locate", "cause": error.details},
    ).problem()


def _title_row(paper: Paper) -> dict[str, Any]:
    row = {"record_ref": paper.record_ref, "title": paper.title}
    if paper.url:
        row["url"] = paper.url
    return row


def _fields(data: dict[str, Any], fields: Sequence[str]) -> dict[str, Any]:
    if not fields:
        return data
    keep = set(fields) | {"record_ref", "title"}
    return {key: value for key, value in data.items() if key in keep}


# --- operations: search, continue, cache hit, get_metadata (what app.py calls) ----------------------


def cached_reply(store: Store, key: str, limit: int) -> dict[str, Any] | None:
    """The prefer_cache answer rebuilt from a completed search of the last 10 minutes, or None."""
    record = store.cached_search(key)
    if record is None:
        return None
    papers = store.data.papers
    selected = [entry for entry in record.entries if entry.selected]
    results = []
    for entry in selected[: limit or DEFAULT_LIMIT]:
        paper = papers.get(entry.record_ref)
        results.append(_title_row(paper) if paper is not None else {"record_ref": entry.record_ref})
    summary = {
        "search_id": record.search_id,
        "status": record.status,
        "candidate_count": len(record.entries),
        "eligible_count": sum(1 for entry in record.entries if entry.eligible),
        "selected_count": len(selected),
        "enhanced_count": 0,
        "quality_source_count": 0,
        "coverage": coverage_json(record.coverage),
        "plan": msgspec.to_builtins(record.plan),
        "results": results,
    }
    return {"status": "completed", "source": "cache", "requests": 0, "result": summary}


def search_work(store: Store, site: SiteFactory, fresh: SearchState | None) -> Callable[[OperationContext], Awaitable[Any]]:
    """The operation body of a search: ``fresh`` for a new one, None to resume from the checkpoint."""
    async def work(op: OperationContext) -> dict[str, Any]:
        if fresh is not None:
            state = msgspec.structs.replace(fresh, search_id=op.operation_id)
        else:
            state = msgspec.convert(op.restored_checkpoint, SearchState)
        return await Research(store, site()).run(op, state)

    return work


async def start_search(
    store: Store, jobs: Jobs, site: SiteFactory, request: SearchInput, plan: Plan, ctx: Any
) -> dict[str, Any]:
    """The search/structured_search tool after validation and planning: cache hit, or a new operation."""
    key = cache_key(request, plan)
    if request.options.freshness == "prefer_cache":
        hit = cached_reply(store, key, request.limit)
        if hit is not None:
            return hit
    state = SearchState(search_id="", input=request, plan=plan, cache_key=key)
    job = jobs.start("search", search_budget(request), search_work(store, site, state))
    return await jobs.inline(job, ctx)


async def continue_search(
    store: Store, jobs: Jobs, site: SiteFactory, prior: Operation, budget: Budget, ctx: Any
) -> dict[str, Any]:
    """Restart a stored search under its own id from its checkpoint (after Jobs.continuation)."""
    job = jobs.start("search", budget, search_work(store, site, None), resume_from=prior)
    return await jobs.inline(job, ctx)


async def start_metadata(
    store: Store,
    jobs: Jobs,
    site: SiteFactory,
    refs: Sequence[str],
    titles: Sequence[str],
    *,
    quality: bool,
    refresh: bool,
    fields: Sequence[str],
    ctx: Any,
) -> dict[str, Any]:
    """get_metadata's network path as a ``metadata`` operation (600 requests / 900 s)."""

    async def work(op: OperationContext) -> dict[str, Any]:
        return await Research(store, site()).metadata(
            op, refs, titles, quality=quality, refresh=refresh, fields=fields
        )

    job = jobs.start("metadata", kind_budget("metadata"), work)
    return await jobs.inline(job, ctx)


def structured_plan(args: StructuredSearchArgs) -> Plan:
    return plan_structured(args.expression)
