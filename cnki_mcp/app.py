"""Tool implementations: checks that need state, title resolution, and orchestration of operations.

``App.call`` is the one entry point the MCP surface uses (``tools.dispatch``): it runs a tool's handler, one
of the methods below, with arguments already parsed and range-checked by ``tools.parse_arguments``. Nothing here starts the store before a tool needs it, and
nothing starts a browser before a tool needs CNKI.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import platform
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import psutil

from cnki_mcp import __version__
from cnki_mcp.core import settings, tool_args
from cnki_mcp.core.call import ToolCall, seconds_since
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.files import refuse_existing, remove_empty_folders
from cnki_mcp.core.model import (
    Budget,
    Config,
    DownloadResult,
    LocalReply,
    Operation,
    OperationView,
    Paper,
    Plan,
    Problem,
    ReadResult,
    SearchRecord,
    SearchSummary,
    SessionState,
    TitleRow,
    public_paper,
)
from cnki_mcp.documents import batch
from cnki_mcp.documents.download import Downloads, prior
from cnki_mcp.documents.download_files import DownloadRequest, check_names, check_target
from cnki_mcp.documents.local_read import LocalFiles
from cnki_mcp.documents.online_reader import Reader, TextWindow
from cnki_mcp.fieldcheck import tour as site_check
from cnki_mcp.ops.jobs import CONTINUABLE, Job, Jobs, OperationContext, ProgressSink, Work, kind_budget
from cnki_mcp.pages.relation_parse import Signatures
from cnki_mcp.references import refcheck
from cnki_mcp.references.exports import ExportPart, write_export
from cnki_mcp.references.links import MAX_REFERENCES, Match, find_spans, render
from cnki_mcp.references.zotero import ZoteroSaves
from cnki_mcp.research.backend import SiteBackend
from cnki_mcp.research.detail_tab import local_ref, resolve_paper
from cnki_mcp.research.enrich import Enrichment, JournalFlights, select_fields
from cnki_mcp.research.expert import plan_expert
from cnki_mcp.research.pipeline import (
    SearchInput,
    SearchState,
    cache_key,
    cached_reply,
    plan_search,
    run_search,
    search_budget,
    search_input,
)
from cnki_mcp.research.query import plan_structured
from cnki_mcp.research.relations import Relations, stored_references
from cnki_mcp.site.browser import Browser
from cnki_mcp.site.limiter import Limiter
from cnki_mcp.site.session import Sessions, session_view
from cnki_mcp.site.site import Site
from cnki_mcp.store.catalog import Catalog
from cnki_mcp.store.library import KEEP_SEARCHES, Store, load_config

log = logging.getLogger(__name__)

# A tool's answer: an operation's view, a local reply, or a plain object for what needs no operation.
Reply = OperationView | LocalReply | dict[str, Any]

# export_citations reads at most this many entries of a stored search.

GO_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
COMPACT_FIELDS = ("record_ref", "title", "authors", "year", "source", "abstract")


def _platform() -> str:
    system = {"darwin": "darwin", "win32": "windows"}.get(sys.platform, sys.platform)
    machine = platform.machine().lower()
    return f"{system}/{GO_ARCH.get(machine, machine)}"


class App:
    """State shared by all tool calls of one server process."""

    owner_pid: int | None = None  # this process's id once it owns the data directory (owner.py)

    def __init__(self, data_root: Path | None = None, *, site_factory: Callable[[], SiteBackend] | None = None) -> None:
        """``site_factory`` replaces the browser-driven ``Site`` (tests give a simulated backend)."""
        self.root = data_root or settings.data_root()
        self._site_factory = site_factory
        self._catalog: Catalog | None = None
        self._journals = JournalFlights()
        # A broken config.json must not stop the server: tools answer CONFIG_INVALID until it is fixed.
        self.config = Config()
        self.config_error: CnkiError | None = None
        try:
            self.config = load_config(self.root)
        except CnkiError as exc:
            self.config_error = exc
        self._store: Store | None = None
        self._store_error: CnkiError | None = None  # why the store last failed to open
        self._jobs: Jobs | None = None
        self._opening = asyncio.Lock()  # concurrent first calls must not open the store twice
        self._browser: Browser | None = None
        self._site: Site | None = None
        self._sessions: Sessions | None = None
        self._reader = Reader()  # HTML full texts, in memory only
        self._files = LocalFiles()  # downloaded files' texts, in memory only
        self._zotero = ZoteroSaves()  # what this process saved to Zotero, and where
        self._downloads = Downloads()
        self._signatures = Signatures()  # first answers of recent relation lists: a decoy repeated across papers

    # --- lifecycle ------------------------------------------------------------------------

    async def store(self) -> Store:
        async with self._opening:
            if self._store is None:
                # Opening checks research.db (and migrates research.json once): keep the event loop free meanwhile.
                try:
                    store = await asyncio.to_thread(Store.open, self.root)
                except CnkiError as exc:
                    self._store_error = exc
                    raise
                self._store_error = None
                await store.start()
                self._store = store
                self._jobs = Jobs(store)
                self._catalog = Catalog(store)
        return self._store

    async def jobs(self) -> Jobs:
        await self.store()
        assert self._jobs is not None
        return self._jobs

    def browser(self) -> Browser:
        """The dedicated browser object; the browser itself launches on the first CNKI request."""
        if self._browser is None:
            self._browser = Browser(self.root / "browser" / "profile", config=self.config)
        return self._browser

    def site(self) -> SiteBackend:
        """CNKI access for every operation of this process, with the one request limiter."""
        if self._site_factory is not None:
            return self._site_factory()  # a simulated backend in tests
        if self._site is None:
            self._site = Site(self.browser(), Limiter.from_env(), self.root / "diagnostics")
            self._site.person.timeout = float(settings.verification_wait_seconds())
            self._sessions = Sessions(self._site, lambda names: self._store.remember_names(names) if self._store else None)
        return self._site

    async def enrichment(self) -> Enrichment:
        """Details, journals and title resolution over this process's catalogue and site."""
        await self.store()
        assert self._catalog is not None
        return Enrichment(self._catalog, self.site(), self._journals)

    async def relations(self) -> Relations:
        """References, citing and similar papers over this process's catalogue and site."""
        return Relations(await self.enrichment(), self.site(), self._signatures)

    async def catalog(self) -> Catalog:
        await self.store()
        assert self._catalog is not None
        return self._catalog

    def sessions(self) -> Sessions:
        self.site()
        assert self._sessions is not None
        return self._sessions

    async def close(self) -> None:
        if self._jobs is not None:
            await self._jobs.shutdown()
        if self._browser is not None:
            # Shielded: a server torn down by cancellation must still end the browser's process tree.
            await asyncio.shield(self._browser.close())
        if self._store is not None:
            await self._store.close()
            self._store = None

    # --- dispatch -------------------------------------------------------------------------

    async def call(self, handler: Callable[[App, Any, Any], Awaitable[Reply]], args: Any, ctx: Any, *, needs_config: bool = True) -> Any:
        """Run a tool's ``handler`` (one of the methods below) with arguments already parsed by
        ``tools.parse_arguments``; with ``needs_config`` a config.json that cannot be read fails the call.

        Every answer, failures included, goes once the changes it reports are committed, and carries the
        store's warnings (changes not saved, entries left out when it was read) in ``warnings``.
        """
        try:
            await self._reload_config()
            if self.config_error is not None and needs_config:
                raise self.config_error
            reply = await handler(self, args, ctx)
        except CnkiError as exc:
            exc.warnings = await self._settled_warnings()
            raise
        return _with_warnings(reply, await self._settled_warnings())

    async def _reload_config(self) -> None:
        """Read again a config.json that failed to parse, so fixing it needs no restart."""
        if self.config_error is None:
            return
        try:
            self.config = await asyncio.to_thread(load_config, self.root)
        except CnkiError as exc:
            self.config_error = exc
            return
        self.config_error = None

    async def _settled_warnings(self) -> list[Problem]:
        """The store's warnings once every change made so far is committed (or the commit failed)."""
        if self._store is None:
            return []
        await self._store.settle()
        return self._store.warnings()

    # --- local tools ----------------------------------------------------------------------

    async def start_site_check(self) -> Job:
        """The field check (``diagnostics`` with ``site_check``, ``doctor --site``) started as an operation."""
        if self.config_error is not None:
            raise self.config_error
        jobs, store, enrichment = await self.jobs(), await self.store(), await self.enrichment()
        work = functools.partial(site_check.tour, site=self.site(), enrichment=enrichment, store=store)
        return jobs.start(site_check.KIND, kind_budget(site_check.KIND), work)

    async def diagnostics(self, args: Any, ctx: ToolCall | None) -> Reply:
        if args is not None and args.site_check:
            jobs = await self.jobs()
            return await jobs.inline(await self.start_site_check(), ctx)
        report = _runtime_report(self.root, os.environ.get("CNKI_BROWSER_PATH") or self.config.browser_path, self.owner_pid)
        if self.config_error is not None:
            report["config_error"] = self.config_error.problem()
        if self._store is None and self._store_error is not None:
            report["store_error"] = self._store_error.problem()
        if self._store is not None and self._jobs is not None:
            report["store"] = self._store.stats()
            report["downloads_today"] = self._store.downloads_on()
            report["daily_download_limit"] = settings.daily_download_limit(self.config.daily_download_limit)
            browser = self._browser
            report["browser"] = {"running": False} if browser is None else {
                "running": browser.running,
                "process_id": browser.process_id,
                "profile_directory": str(browser.profile_directory),
                "connection_generation": browser.connection_generation,
            }
            active = self._jobs.live_jobs()
            if active:
                report["active_operations"] = [self._jobs.view(job) for job in active]
        return report

    async def operation_status(self, args: tool_args.OperationStatusArgs, ctx: ToolCall | None) -> Reply:
        jobs = await self.jobs()
        return await jobs.status(args.operation_id, args.wait_seconds, _progress(ctx))

    async def operation_control(self, args: tool_args.OperationControlArgs, ctx: ToolCall | None) -> Reply:
        jobs = await self.jobs()
        if args.action == "cancel":
            return await jobs.cancel(args.operation_id)
        if args.action == "resume":
            return await jobs.resume(args.operation_id)
        if args.action == "continue":
            if not args.operation_id:
                raise CnkiError("INVALID_INPUT", "continue 需要 operation_id。")
            prior, budget = jobs.continuation(args.operation_id, args.additional_requests, args.additional_seconds, CONTINUABLE | {batch.KIND})
            if prior.kind == batch.KIND:
                return await self._start_batch(None, budget, ctx, prior)
            return await jobs.inline(jobs.start("search", budget, self._search_work(None), resume_from=prior), ctx)
        if args.action == "show":
            if self._site is None:
                raise CnkiError("VERIFICATION_NOT_FOUND")
            return await self._site.person.show(args.operation_id or None)
        if self._site is not None:
            await self._site.recover()
        return {"status": "completed", "message": "浏览器将在下一次需要访问知网时重新启动；登录状态保存在浏览器配置中，不受影响。"}

    async def session_status(self, args: tool_args.SessionStatusArgs, ctx: ToolCall | None) -> Reply:
        if not args.refresh:
            return self._sessions.cached() if self._sessions is not None else session_view(SessionState(), cached=True)
        jobs = await self.jobs()
        job = jobs.start("session", kind_budget("session"), self.sessions().refresh)
        return await jobs.inline(job, ctx)

    async def login(self, args: tool_args.LoginArgs, ctx: ToolCall | None) -> Reply:
        jobs = await self.jobs()
        sessions = self.sessions()

        async def work(op: OperationContext) -> dict[str, Any]:
            return await sessions.login(op, args.remote_access_url, args.force)

        job = jobs.start("login", kind_budget("login"), work)
        return await jobs.inline(job, ctx)

    async def search_results(self, args: tool_args.SearchResultsArgs, ctx: ToolCall | None) -> Reply:
        store = await self.store()
        record = _search(store, args.search_id)
        entries = _scoped(record, args.scope)
        page = entries[args.offset : args.offset + args.limit]
        end = args.offset + len(page)
        return {
            "search_id": record.search_id,
            "status": record.status,
            "scope": args.scope,
            "total": len(entries),
            "offset": args.offset,
            "next_offset": end if end < len(entries) else None,
            "results": [_result_row(store.data.papers.get(e.record_ref), e, args.view) for e in page],
        }

    async def get_metadata(self, args: tool_args.GetMetadataArgs, ctx: ToolCall | None) -> Reply:
        store = await self.store()
        if not args.local_only:
            refs = list(args.record_refs)
            if args.search_id:
                refs += _search_refs(store, args.search_id, args.scope, args.offset, args.limit)
            quality = args.quality or "quality" in args.fields

            async def work(op: OperationContext) -> dict[str, Any]:
                engine = await self.enrichment()
                return await engine.metadata(op, refs, args.titles, quality=quality, refresh=args.refresh, fields=args.fields)

            jobs = await self.jobs()
            return await jobs.inline(jobs.start("metadata", kind_budget("metadata"), work), ctx)
        refs, problems = (await self.catalog()).resolve_local(args.record_refs or [], args.titles or [])
        if args.search_id:
            refs += _search_refs(store, args.search_id, args.scope, args.offset, args.limit)
        records = []
        seen: set[str] = set()
        for ref in refs:
            paper = store.data.papers.get(ref)
            if paper is None or ref in seen:
                continue
            seen.add(ref)
            records.append(select_fields(public_paper(paper), args.fields))
        found: dict[str, Any] = {"records": records}
        if problems:
            found["errors"] = problems
        return LocalReply(source="local", result=found)

    async def search(self, args: tool_args.SearchArgs, ctx: ToolCall | None) -> Reply:
        plan = await plan_search(args, ctx)
        return await self._start_search(search_input(args), plan, ctx)

    async def structured_search(self, args: tool_args.StructuredSearchArgs, ctx: ToolCall | None) -> Reply:
        plan = plan_structured(args.expression)  # a bad tree is reported before anything else
        return await self._start_search(search_input(args), plan, ctx)

    async def expert_search(self, args: tool_args.ExpertSearchArgs, ctx: ToolCall | None) -> Reply:
        plan = plan_expert(args.expression)  # a bad expression is reported before anything else
        return await self._start_search(search_input(args), plan, ctx)

    async def _start_search(self, request: SearchInput, plan: Plan, ctx: ToolCall | None) -> Reply:
        """A search after validation and planning: the prefer_cache answer, or a new operation."""
        store = await self.store()
        key = cache_key(request, plan)
        if request.options.freshness == "prefer_cache":
            hit = cached_reply(store, key, request.limit)
            if hit is not None:
                return hit
        state = SearchState(search_id="", input=request, plan=plan, cache_key=key)
        jobs = await self.jobs()
        return await jobs.inline(jobs.start("search", search_budget(request), self._search_work(state)), ctx)

    def _search_work(self, fresh: SearchState | None) -> Work:
        """The operation body of a search: ``fresh`` for a new one, None to resume from the checkpoint."""

        async def work(op: OperationContext) -> SearchSummary:
            relations = await self.relations()
            return await run_search(op, relations.engine, fresh, relations)

        return work

    async def link_references(self, args: tool_args.LinkReferencesArgs, ctx: ToolCall | None) -> Reply:
        spans = find_spans(args.text)
        if len(spans) > MAX_REFERENCES:
            raise CnkiError("TOO_MANY_REFERENCES", f"文本中有 {len(spans)} 个《题名》，一次最多处理 {MAX_REFERENCES} 个。")
        store = await self.store()
        catalog = await self.catalog()

        def lookup(title: str) -> list[Match]:
            return [Match(record_ref=ref, url=store.data.papers[ref].url) for ref in catalog.by_title(title)]

        def linked() -> dict[str, Any]:
            text, references = render(args.text, spans, lookup)
            return {"status": "completed", "text": text, "references": msgspec.to_builtins(references)}

        missing = [span.title for span in spans if not lookup(span.title)]
        if not (args.lookup_missing and missing):
            return linked()

        async def work(op: OperationContext) -> dict[str, Any]:
            op.stage("locate")
            _, problems = await (await self.enrichment()).resolve_titles(op, missing)
            for problem in problems:
                op.add_error(problem)
            return linked()

        jobs = await self.jobs()
        return await jobs.inline(jobs.start("links", kind_budget("links"), work), ctx)

    async def check_references(self, args: tool_args.CheckReferencesArgs, ctx: ToolCall | None) -> Reply:
        jobs, engine = await self.jobs(), await self.enrichment()
        work = functools.partial(
            refcheck.check, engine=engine, texts=args.references, style=args.style, pasted=args.text
        )
        return await jobs.inline(jobs.start("references", kind_budget("references", args.on_verification), work), ctx)

    async def export_citations(self, args: tool_args.ExportCitationsArgs, ctx: ToolCall | None) -> Reply:
        store = await self.store()
        refs = list(args.record_refs)
        part: ExportPart | None = None
        unlinked: list[str] = []
        if args.references_of:
            listed, unlinked = stored_references(store, args.references_of)
            refs += listed
        if args.search_id:
            entries = _scoped(_search(store, args.search_id), args.scope)
            part = ExportPart(args.search_id, args.offset, min(args.offset + tool_args.EXPORT_MAX, len(entries)), len(entries))
            refs += [e.record_ref for e in entries[part.start : part.end]]
        if args.filename:
            refuse_existing(store.exports_dir / args.filename, "请换一个文件名")
        if not args.titles:
            return await write_export(self.root, store, refs, args, part, unlinked)

        async def work(op: OperationContext) -> dict[str, Any]:
            engine = await self.enrichment()
            op.stage("locate")
            found, problems = await engine.resolve_titles(op, args.titles)
            for problem in problems:
                op.add_error(problem)
            # Details make the citation complete (volume, issue, pages, DOI); a failed one is still cited.
            fatal = await engine.enrich(op, found, "metadata", quality=False, record_errors=False)
            if fatal is not None:
                raise fatal
            return await write_export(self.root, store, refs + found, args, part, unlinked)

        jobs = await self.jobs()
        return await jobs.inline(jobs.start("export", kind_budget("export"), work), ctx)

    async def read_online_html(self, args: tool_args.ReadOnlineHtmlArgs, ctx: ToolCall | None) -> Reply:
        ref = local_ref(await self.catalog(), args.record_ref, args.title)
        window = TextWindow(args.section, args.offset, args.max_characters)
        local = await self._files.read(await self.store(), ref, args.source, window) if args.source != "online" else None
        hit = local or (self._reader.cached(ref, window) if ref else None)
        if hit is not None:
            return hit

        async def work(op: OperationContext) -> ReadResult:
            engine = await self.enrichment()
            paper = await resolve_paper(op, engine, ref, args.title)
            return await self._reader.read(op, engine, self.site(), paper, window)

        jobs = await self.jobs()
        job = jobs.start("read", kind_budget("read", args.on_verification), work)
        return await jobs.inline(job, ctx)

    async def related_papers(self, args: tool_args.RelatedPapersArgs, ctx: ToolCall | None) -> Reply:
        relations = await self.relations()
        asked = relations.request(args.record_ref, args.title, args.cursor, args.relation)
        hit = None if args.refresh else relations.cached(asked, args.limit)
        if hit is not None:
            return hit
        jobs = await self.jobs()
        job = jobs.start("related", kind_budget("related", args.on_verification), relations.work(asked, args.limit, args.refresh))
        return await jobs.wait(job, args.wait_seconds - seconds_since(ctx), _progress(ctx))

    async def save_to_zotero(self, args: tool_args.SaveToZoteroArgs, ctx: ToolCall | None) -> Reply:
        store = await self.store()
        refs = list(args.record_refs)
        if args.search_id:
            refs += [e.record_ref for e in _scoped(_search(store, args.search_id), args.scope)]
        return await self._zotero.save(store, refs, collection=args.collection, attach=args.attach, tags=args.tags)

    async def download_paper(self, args: tool_args.DownloadPaperArgs, ctx: ToolCall | None) -> Reply:
        store = await self.store()
        ref = local_ref(await self.catalog(), args.record_ref, args.title)
        request = DownloadRequest(
            format=args.format, filename=args.filename, subdirectory=args.subdirectory,
            wait_seconds=args.wait_seconds, retry=args.retry,
        )
        title = store.data.papers[ref].title if ref else ""
        # The name and folder first: a bad one is refused even for a paper downloaded before.
        await asyncio.to_thread(check_names, store.downloads_dir, request)
        if ref:
            earlier = await prior(store, ref, request)
            if earlier is not None:
                return earlier
        await asyncio.to_thread(check_target, store.downloads_dir, request, title, ref)

        async def work(op: OperationContext) -> DownloadResult:
            try:
                engine = await self.enrichment()
                paper = await resolve_paper(op, engine, ref, args.title)
                return await self._downloads.download(op, engine, self.site(), paper, request)
            except BaseException:
                # The caller's folder was made before the attempt; an empty one must not stay behind.
                await asyncio.to_thread(remove_empty_folders, store.downloads_dir, request.subdirectory)
                raise

        jobs = await self.jobs()
        job = jobs.start("download", kind_budget("download", args.on_verification), work)
        return await jobs.inline(job, ctx)

    async def download_papers(self, args: tool_args.DownloadPapersArgs, ctx: ToolCall | None) -> Reply:
        store = await self.store()
        refs = list(args.record_refs)
        if args.search_id:
            refs += _search_refs(store, args.search_id, args.scope, args.offset, args.limit)
        state = await batch.plan(store, refs, args)
        return await self._start_batch(state, batch.budget(state, args.on_verification), ctx)

    async def _start_batch(self, fresh: batch.BatchState | None, budget: Budget, ctx: ToolCall | None, prior: Operation | None = None) -> Reply:
        """A batch download: ``fresh`` for a new one, None to go on from ``prior``'s checkpoint."""
        jobs, engine = await self.jobs(), await self.enrichment()
        limit = settings.daily_download_limit(self.config.daily_download_limit)
        work = functools.partial(batch.run, engine=engine, site=self.site(), downloads=self._downloads, fresh=fresh, daily_limit=limit)
        return await jobs.inline(jobs.start(batch.KIND, budget, work, resume_from=prior), ctx)



def _search(store: Store, search_id: str) -> SearchRecord:
    record = store.data.searches.get(search_id)
    if record is not None:
        return record
    if store.was_retired("searches", search_id):
        raise CnkiError(
            "SEARCH_NOT_FOUND",
            f"检索 {search_id} 已被自动删除：本地只保留最近 {KEEP_SEARCHES} 次检索。请重新检索。",
            details={"search_id": search_id, "reason": "retention"},
        )
    raise CnkiError(
        "SEARCH_NOT_FOUND",
        f"没有找到检索 {search_id}；检索完成或中断后才能读取结果（本地只保留最近 {KEEP_SEARCHES} 次检索）。",
    )


def _search_refs(store: Store, search_id: str, scope: str, offset: int, limit: int) -> list[str]:
    """The record_refs of a stored search's ``scope``, ``limit`` of them from ``offset``."""
    return [e.record_ref for e in _scoped(_search(store, search_id), scope)[offset : offset + limit]]


def _runtime_report(root: Path, browser_path: str, owner_pid: int | None) -> dict[str, Any]:
    """diagnostics' account of this process: version, platform, data directory, memory and pacing settings."""
    return {
        "status": "completed",
        "version": __version__,
        "runtime": f"Python {platform.python_version()}",
        "platform": _platform(),
        "browser_configured": bool(browser_path),
        "data_dir": str(root),
        "process_id": os.getpid(),
        "owner_pid": owner_pid,
        "heap_bytes": psutil.Process().memory_info().rss,
        "request_interval_ms": settings.request_interval_ms(),
        "max_inflight": settings.max_inflight(),
        "workers": settings.workers(),
        "inline_wait_seconds": settings.inline_wait_seconds(),
    }


def _progress(call: ToolCall | None) -> ProgressSink | None:
    return call.report_progress if call is not None else None


def _with_warnings(reply: Reply, warnings: list[Problem]) -> Reply:
    """``reply`` as a new object with ``warnings`` added (the reply itself may be stored: never changed)."""
    if not warnings:
        return reply
    data = dict(reply) if isinstance(reply, dict) else msgspec.to_builtins(reply)
    data["warnings"] = [*data.get("warnings", []), *warnings]
    return data


def _scoped(record: SearchRecord, scope: str) -> list[Any]:
    if scope == "candidates":
        return list(record.entries)
    if scope == "eligible":
        return [e for e in record.entries if e.eligible]
    return [e for e in record.entries if e.selected]


def _result_row(paper: Paper | None, entry: Any, view: str) -> dict[str, Any] | TitleRow:
    if view == "titles":
        return TitleRow.of(paper) if paper is not None else TitleRow(record_ref=entry.record_ref)
    data = public_paper(paper) if paper is not None else {"record_ref": entry.record_ref}
    if view == "compact":
        row = {k: data[k] for k in COMPACT_FIELDS if k in data}
        row.update(score=round(entry.score, 4), eligible=entry.eligible)
        return row
    return {"record": data, "score": round(entry.score, 4), "eligible": entry.eligible, "evidence": msgspec.to_builtins(entry.evidence)}
