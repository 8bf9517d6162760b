"""The App's state and lifecycle: what every tool handler of one server process shares.

``App.call`` (here, as ``AppCore.call``) is the one entry point the MCP surface uses (``tools.dispatch``): it runs a
tool's handler with arguments already parsed and range-checked by ``tools.parse_arguments``. Nothing here starts the
store before a tool needs it, and nothing starts a browser before a tool needs CNKI.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import msgspec

from cnki_mcp.core import settings
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Budget, Config, LocalReply, OperationView, Problem, SearchRecord
from cnki_mcp.ops.jobs import Job, Jobs, ProgressSink
from cnki_mcp.store.catalog import Catalog
from cnki_mcp.store.library import KEEP_SEARCHES, Store, load_config

# Listing the tools needs this module, not what its handlers work with: each collaborator below is
# imported where a handler first needs it, so a server answers initialize and tools/list at the SDK's pace.
if TYPE_CHECKING:
    from cnki_mcp.documents.download import Downloads
    from cnki_mcp.documents.local_read import LocalFiles
    from cnki_mcp.documents.online_reader import Reader
    from cnki_mcp.pages.relation_parse import Signatures
    from cnki_mcp.references.zotero import ZoteroSaves
    from cnki_mcp.research.backend import SiteBackend
    from cnki_mcp.research.enrich import Enrichment, JournalFlights
    from cnki_mcp.research.relations import Relations
    from cnki_mcp.site.browser import Browser
    from cnki_mcp.site.session import Sessions
    from cnki_mcp.site.site import Site


log = logging.getLogger(__name__)

# A tool's answer: an operation's view, a local reply, or a plain object for what needs no operation.
Reply = OperationView | LocalReply | dict[str, Any]


class AppCore:
    """State shared by all tool calls of one server process: the store, the catalogue, the browser and the
    ``Site``, the jobs, and what the process keeps in memory. Every tool is a module of ``cnki_mcp.tools`` whose ``run`` gets this object as ``deps``."""

    owner_pid: int | None = None  # this process's id once it owns the data directory (owner.py)

    def __init__(self, data_root: Path | None = None, *, site_factory: Callable[[], SiteBackend] | None = None) -> None:
        """``site_factory`` replaces the browser-driven ``Site`` (tests give a simulated backend)."""
        self.root = data_root or settings.data_root()
        self._site_factory = site_factory
        self._catalog: Catalog | None = None
        # A broken config.json must not stop the server: tools answer CONFIG_INVALID until it is fixed.
        self.config = Config()
        self.config_error: CnkiError | None = None
        self.route_refused: CnkiError | None = None  # a stored route the gateway rules refuse: a warning in every answer
        try:
            self.config, self.route_refused = load_checked_config(self.root)
        except CnkiError as exc:
            self.config_error = exc
        self._store: Store | None = None
        self._store_error: CnkiError | None = None  # why the store last failed to open
        self._jobs: Jobs | None = None
        self._opening = asyncio.Lock()  # concurrent first calls must not open the store twice
        # A watch's name → the operation running it: one run at a time (tools/watch; cnki.lock keeps other processes out).
        self.watch_runs: dict[str, str] = {}
        self._browser: Browser | None = None
        self._site: Site | None = None
        self._sessions: Sessions | None = None

    # --- what this process keeps in memory, made on first use ---------------------------------

    @functools.cached_property
    def _journals(self) -> JournalFlights:
        from cnki_mcp.research.enrich import JournalFlights

        return JournalFlights()

    @functools.cached_property
    def _reader(self) -> Reader:
        """HTML full texts, in memory only."""
        from cnki_mcp.documents.online_reader import Reader

        return Reader()

    @functools.cached_property
    def _files(self) -> LocalFiles:
        """Downloaded files' texts, in memory only."""
        from cnki_mcp.documents.local_read import LocalFiles

        return LocalFiles()

    @functools.cached_property
    def _zotero(self) -> ZoteroSaves:
        """What this process saved to Zotero, and where."""
        from cnki_mcp.references.zotero import ZoteroSaves

        return ZoteroSaves()

    @functools.cached_property
    def _downloads(self) -> Downloads:
        from cnki_mcp.documents.download import Downloads

        return Downloads()

    @functools.cached_property
    def _signatures(self) -> Signatures:
        """First answers of recent relation lists: a decoy repeated across papers."""
        from cnki_mcp.pages.relation_parse import Signatures

        return Signatures()

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
            from cnki_mcp.site.browser import Browser

            self._browser = Browser(self.root / "browser" / "profile", config=self.config)
        return self._browser

    def site(self) -> SiteBackend:
        """CNKI access for every operation of this process, with the one request limiter."""
        if self._site_factory is not None:
            return self._site_factory()  # a simulated backend in tests
        if self._site is None:
            from cnki_mcp.site.limiter import Limiter
            from cnki_mcp.site.remote import route_keeper
            from cnki_mcp.site.session import Sessions
            from cnki_mcp.site.site import Site

            self._site = Site(self.browser(), Limiter.from_env(), self.root / "diagnostics")
            self._site.person.timeout = float(settings.verification_wait_seconds())
            self._sessions = Sessions(
                self._site, lambda names: self._store.remember_names(names) if self._store else None,
                route_keeper(self.root, self.config),
            )
        return self._site

    async def enrichment(self) -> Enrichment:
        """Details, journals and title resolution over this process's catalogue and site."""
        from cnki_mcp.research.enrich import Enrichment

        await self.store()
        assert self._catalog is not None
        return Enrichment(self._catalog, self.site(), self._journals)

    async def relations(self) -> Relations:
        """References, citing and similar papers over this process's catalogue and site."""
        from cnki_mcp.research.relations import Relations

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

    async def call(self, handler: Callable[[Self, Any, Any], Awaitable[Reply]], args: Any, ctx: Any, *, needs_config: bool = True) -> Any:
        """Run a tool's ``handler`` (a tool module's ``run(deps, args, call)``) with arguments already parsed by
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
            self.config, self.route_refused = await asyncio.to_thread(load_checked_config, self.root)
        except CnkiError as exc:
            self.config_error = exc
            return
        self.config_error = None

    async def _settled_warnings(self) -> list[Problem]:
        """The store's warnings once every change made so far is committed (or the commit failed), after the
        refused stored route's until a login keeps another route."""
        refused = [self.route_refused.problem()] if self.route_refused is not None and self.config.route.kind == "direct" else []
        if self._store is None:
            return refused
        await self._store.settle()
        return refused + self._store.warnings()

    # --- the field check ------------------------------------------------------------------

    async def start_site_check(self, budget: Budget, english: bool = False) -> Job:
        """The field check (``diagnostics`` with ``site_check``, ``doctor --site``) started as an operation;
        ``english``: its lines in English (``doctor --site`` in an English terminal)."""
        from cnki_mcp.fieldcheck import tour as site_check

        if self.config_error is not None:
            raise self.config_error
        jobs, store, enrichment = await self.jobs(), await self.store(), await self.enrichment()
        work = functools.partial(site_check.tour, site=self.site(), enrichment=enrichment, store=store, english=english)
        return jobs.start(site_check.KIND, budget, work)



def load_checked_config(root: Path) -> tuple[Config, CnkiError | None]:
    """config.json (CONFIG_INVALID as load_config raises it), its stored route held to the gateway rules
    (site/route.py): one they refuse (an older version's, a hand edit) is not used, direct access instead, and
    CONFIG_ROUTE_REFUSED says what to do. The file is left as it is: a later login or ``setup --remote-access``
    replaces the route."""
    config = load_config(root)
    if config.route.kind == "direct":
        return config, None
    from cnki_mcp.site.route import stored_route_problem  # the AES and the rules load only for a stored route

    refused = stored_route_problem(config.route)
    if refused is not None:
        log.warning("config.json's route to %s is refused: direct access", config.route.gateway[:100])
        config.route = Config().route
    return config, refused


def stored_search(store: Store, search_id: str) -> SearchRecord:
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
        f"没有找到检索 {search_id}：这个编号不存在，或检索结束时服务器异常退出、结果没来得及保存而丢失。"
        f"请用同样的条件重新检索（本地只保留最近 {KEEP_SEARCHES} 次检索）。",
    )


def stored_refs(store: Store, search_id: str, scope: str, offset: int, limit: int) -> list[str]:
    """The record_refs of a stored search's ``scope``, ``limit`` of them from ``offset``."""
    return [e.record_ref for e in scoped(stored_search(store, search_id), scope)[offset : offset + limit]]


def scoped(record: SearchRecord, scope: str) -> list[Any]:
    if scope == "candidates":
        return list(record.entries)
    if scope == "eligible":
        return [e for e in record.entries if e.eligible]
    return [e for e in record.entries if e.selected]


def progress_of(call: ToolCall | None) -> ProgressSink | None:
    return call.report_progress if call is not None else None


def _with_warnings(reply: Reply, warnings: list[Problem]) -> Reply:
    """``reply`` as a new object with ``warnings`` added (the reply itself may be stored: never changed)."""
    if not warnings:
        return reply
    data = dict(reply) if isinstance(reply, dict) else msgspec.to_builtins(reply)
    data["warnings"] = [*data.get("warnings", []), *warnings]
    return data


