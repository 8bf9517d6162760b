"""CNKI access through the dedicated browser: the one door every module reaches CNKI by.

``Site`` is the ``door.Door`` (the exchange engine: requests charged, paced and routed, answers classified,
the person, back-off, snapshots; with the tabs and live pages) with what is read through it on top: result
listings (``listings.Listings``), facet panels, CNKI's JSON APIs (``json_api.JsonApi``), navi pages, and
detail and journal pages (``PageExchange``), read through Chrome's network stack from the work tab
(first-party cookies go along), with a rendered-tab fallback; a page that cannot be parsed leaves a
redacted snapshot. The reader, downloads and login open and drive their own tabs through the
tab operations at the end.

A browser that died stays dead until ``recover`` (``operation_control recover``): reads then say
BROWSER_UNAVAILABLE instead of silently relaunching a window the person may have closed on purpose.
A broken connection with a live browser is recovered once per read by dropping the cached tabs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TypeVar

import msgspec

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Paper, Quality
from cnki_mcp.ops.jobs import OperationContext
from cnki_mcp.pages.facet_parse import FacetGroup
from cnki_mcp.pages.parse import GridPage, check_identity, parse_detail, parse_journal
from cnki_mcp.pages.urls import is_site_url
from cnki_mcp.site.browser import Browser, DownloadEvent, Tab
from cnki_mcp.site.cdp import FetchResult, NavigationResult
from cnki_mcp.site.door import Door
from cnki_mcp.site.exchange import (
    Engine,
    Exchange,
    Fallback,
    Observation,
    Request,
    Turn,
    final_parse_error,
    note_snapshot,
)
from cnki_mcp.site.facet_panel import FacetPanel
from cnki_mcp.site.grid_query import GridQuery
from cnki_mcp.site.json_api import JsonApi
from cnki_mcp.site.limiter import Limiter
from cnki_mcp.site.listings import Listings, Waiting
from cnki_mcp.site.navi import Navi
from cnki_mcp.site.registry import DETAIL, REGISTRY

log = logging.getLogger(__name__)

T = TypeVar("T")

RESOURCE_ATTEMPTS = 3
RENDER_TIMEOUT = 12.0

_SNAPSHOT_CODES = frozenset({"PARSER_UNSUPPORTED", "SOURCE_SCHEMA_UNSUPPORTED"})
_RENDER_AGAIN_CODES = frozenset({"RESOURCE_FAILED", "NETWORK_UNREACHABLE"})


def bind_detail(requested: Paper, observed: Paper, locator: str) -> Paper:
    """The parsed detail page as the requested record: same ref, gaps filled from the request.

    Raises IDENTITY_CONFLICT when the page shows another paper.
    """
    check_identity(requested, observed)
    return msgspec.structs.replace(
        observed,
        record_ref=requested.record_ref or observed.record_ref,
        url=observed.url or requested.url,
        locator=locator,
        dbname=observed.dbname or requested.dbname,
        filename=observed.filename or requested.filename,
        dbcode=observed.dbcode or requested.dbcode,
        document_type=observed.document_type or requested.document_type,
    )


class PageExchange(Exchange[T]):
    """A detail, journal or other CNKI page loaded through Chrome's network stack from the work tab; a
    challenge, a network failure or a page that needs its scripts goes to the rendered tab instead."""

    rounds = RESOURCE_ATTEMPTS
    challenges = RESOURCE_ATTEMPTS + 1  # never: a challenge is shown in the rendered tab

    def __init__(self, site: Site, url: str, parse: Callable[[str, str], T], kind: str) -> None:
        self.site = site
        self.url = url
        self.parser = parse
        self.kind = kind
        self.spec = REGISTRY.get(kind, DETAIL)

    async def build(self, op: OperationContext) -> Request:
        return Request(await self.site.site_tab(op), self.url, load=True)

    async def turned_away(self, op: OperationContext, exc: CnkiError, epoch: int, final: bool) -> Turn | None:
        # The rendered tab is one more try before a network failure stands.
        return "fallback" if exc.code in _RENDER_AGAIN_CODES else None

    def classify(self, answer: FetchResult) -> CnkiError | None:
        # Judged at the URL asked for: a load shows no redirect, only a gateway's login changes its URL.
        return self.spec.classify(msgspec.structs.replace(answer, url=self.url))

    async def challenge(
        self, op: OperationContext, problem: CnkiError, answer: FetchResult, epoch: int, final: bool
    ) -> None:
        raise Fallback

    def parse(self, answer: FetchResult) -> T:
        return self.parser(answer.text, self.url)

    async def unparsed(self, engine: Engine, exc: CnkiError, answer: FetchResult, final: bool) -> bool:
        if final_parse_error(exc):
            return False
        log.debug("%s page needs rendering: %s", self.kind, exc.message)
        raise Fallback

    async def fallback(self, op: OperationContext, last: CnkiError | None) -> T:
        return await self.site.render_page(op, self.url, self.parser, self.kind)


# --------------------------------------------------------------------------------------------


class Site(Door):
    """CNKI access for every operation of this process (one per App)."""

    def __init__(self, browser: Browser, limiter: Limiter, diagnostics_dir: Path) -> None:
        super().__init__(browser, limiter, diagnostics_dir)
        self.listings = Listings(self)
        self.panel = FacetPanel(self, self.listings)
        self.api = JsonApi(self)
        self.navi = Navi(self)
        self._render_lock = asyncio.Lock()

    # -- listings ----------------------------------------------------------------------------

    def grid(self, op: OperationContext, query: GridQuery, page: int) -> AsyncIterator[Waiting | GridPage]:
        """One page (1-based) of a listing, its waits first; see ``listings.Listings.page``."""
        return self.listings.page(op, query, page)

    def locate(
        self, op: OperationContext, titles: list[str], related: Callable[[str, str], bool] | None = None
    ) -> AsyncIterator[Waiting | dict[str, list[Paper]]]:
        """Up to 10 titles in one exact-title grid request, its waits first; see ``listings.Listings.locate``."""
        return self.listings.locate(op, titles, related)

    async def facet_panel(self, op: OperationContext, query: GridQuery, idents: list[str]) -> dict[str, FacetGroup]:
        """The left facet panel's groups ``idents`` of a listing; see ``facet_panel.FacetPanel.groups``."""
        return await self.panel.groups(op, query, idents)

    # -- JSON APIs -------------------------------------------------------------------------------

    async def api_get(self, op: OperationContext, url: str, context_url: str) -> str:
        """One GET of a CNKI JSON API from inside the work tab; see ``json_api.JsonApi.get``."""
        return await self.api.get(op, url, context_url)

    async def show_decoy(self, op: OperationContext, problem: CnkiError, context_url: str, epoch: int) -> None:
        """An API answer that cannot be the paper's data (a decoy): slow down, and show the person
        ``context_url`` (the paper's detail page) in a tab of its own; see ``JsonApi.show_context``."""
        self.limiter.slow()
        await self.api.show_context(op, problem, context_url, epoch)

    # -- detail and journal pages -------------------------------------------------------------

    async def detail(self, op: OperationContext, paper: Paper) -> Paper:
        """The paper's detail page at its locator, parsed and bound to it; always fetched.

        Locating a paper without a link, and relocating once after a failed load, is the caller's
        part (research.py does both and stores the fresh locator).
        """
        locator = paper.locator or paper.url
        if not locator:
            raise CnkiError("DOCUMENT_NOT_FOUND", "这条记录没有知网入口，需要先按题名定位。", details={"title": paper.title})
        return await self._detail_at(op, paper, locator)

    async def _detail_at(self, op: OperationContext, paper: Paper, locator: str) -> Paper:
        def parse(html: str, url: str) -> Paper:
            return bind_detail(paper, parse_detail(html, url), url)

        return await self._load(op, locator, parse, "detail")

    async def journal(self, op: OperationContext, paper: Paper) -> Quality:
        """Quality evidence from the paper's journal page (``paper.source_url``), bound to its source."""
        if not paper.source_url:
            raise CnkiError("SOURCE_LOCATOR_MISSING", "详情页没有期刊链接", details={"source": paper.source})
        return await self._load(op, paper.source_url, lambda html, url: parse_journal(html, url, paper.source), "journal")

    async def read(self, op: OperationContext, url: str, parse: Callable[[str, str], T], kind: str) -> T:
        """Any CNKI page read the way detail and journal pages are, with the caller's ``parse(html, url)``
        (the field check keeps what it saw)."""
        return await self._load(op, url, parse, kind)

    async def navi_page(self, op: OperationContext, url: str, parse: Callable[[str, str], T], kind: str) -> T:
        """A navi.cnki.net page shown in the navi tab, parsed; see ``navi.Navi.page``."""
        return await self.navi.page(op, url, parse, kind)

    async def navi_post(
        self, op: OperationContext, page_url: str, url: str, form: str, parse: Callable[[str, str], T], kind: str
    ) -> T:
        """A navi fragment POSTed from the navi tab on ``page_url``, parsed; see ``navi.Navi.post``. ``kind``
        names its registry entry (``registry.NAVI_YEARS`` …)."""
        return await self.navi.post(op, page_url, url, form, parse, REGISTRY[kind])

    def site_view(self) -> dict[str, str]:
        """The CNKI site the session is on (``remote.Routing.site_view``)."""
        return self.browser.routing.site_view()

    async def browser_version(self) -> str:
        """What the dedicated browser reports itself as (``Chrome/131.0…``); "" when it cannot say."""
        return await self.browser.version()

    async def _load(self, op: OperationContext, url: str, parse: Callable[[str, str], T], kind: str) -> T:
        """Read a page through Chrome's network stack; render it in a tab when that is not enough."""
        if not is_site_url(url):
            raise CnkiError("LOCATOR_EXPIRED", "文献入口不是知网地址，未访问。", details={"kind": kind})
        # Parsed as the page it is: on the session's site, so its links and the paper's url name that site.
        return await self.exchange(op, PageExchange(self, self.browser.routing.here(url), parse, kind))

    async def render_page(self, op: OperationContext, url: str, parse: Callable[[str, str], T], kind: str) -> T:
        """The render fallback: load in the shared render tab and parse the live DOM until it works."""
        async with self._render_lock:
            tab = await self.render_tab()
            async with self.request(op):
                await self.browser.navigate(tab, url, RENDER_TIMEOUT)
            last_html = ""
            last_url = url

            def accept(seen: Observation) -> T:
                nonlocal last_html, last_url
                last_html, last_url = seen.html, seen.url
                return parse(seen.html, seen.url)

            try:
                value = await self.wait_page(op, tab, accept, RENDER_TIMEOUT)
            except CnkiError as exc:
                if exc.code in _SNAPSHOT_CODES and last_html:
                    note_snapshot(exc, await self.snapshot(kind, last_html, last_url, tab))
                raise
            self.limiter.fast()
            return value

    # -- tab operations for the reader, downloads and login ----------------------------------

    @property
    def browser_running(self) -> bool:
        return self.browser.running

    async def new_tab(self) -> Tab:
        """A new background tab of the dedicated browser (started when it is not)."""
        return await self.browser.new_tab()

    async def close_tab(self, tab: Tab, *, with_popups: bool = True) -> None:
        await self.browser.close_tab(tab, with_popups=with_popups)

    async def navigate(
        self, op: OperationContext, tab: Tab, url: str, timeout: float, *, until: str = "ready"
    ) -> NavigationResult:
        """One charged, paced navigation of ``tab``."""
        async with self.request(op):
            return await self.browser.navigate(tab, url, timeout, until=until)

    async def click(self, op: OperationContext, tab: Tab, selector: str, timeout: float, *, text: str | None = None) -> bool:
        """One charged, paced click on the first visible ``selector`` (whose text matches ``text``)."""
        async with self.request(op):
            return await self.browser.click(tab, selector, timeout, text=text)

    async def popups(self, opener: Tab) -> list[Tab]:
        return await self.browser.popups(opener)

    async def page_tabs(self) -> list[Tab]:
        """Every page of the browser, also the ones a person opened."""
        return await self.browser.page_tabs()

    async def set_download_dir(self, path: Path) -> None:
        await self.browser.set_download_dir(path)

    async def wait_download(self, guid: str | None = None, timeout: float = 1.0) -> DownloadEvent | None:
        return await self.browser.wait_download(guid, timeout)

    async def cancel_download(self, guid: str) -> None:
        await self.browser.cancel_download(guid)
