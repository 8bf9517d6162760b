"""CNKI access through the dedicated browser: the one door every module reaches CNKI by.

Every read is charged to its operation first, then waits for a limiter slot, then runs (``request``).
Result listings are ``listings.Listings``; detail and journal pages are read through Chrome's network
stack from the work tab (first-party cookies go along), with a rendered-tab fallback; a page that
cannot be parsed leaves a redacted snapshot. Live tabs are inspected (``observe``, ``wait_page``) for
challenges, login prompts and denials, and a challenge goes to the person (``human.Person``). The
reader, downloads and login open and drive their own tabs through the tab operations at the end.

A browser that died stays dead until ``recover`` (``operation_control recover``): reads then say
BROWSER_UNAVAILABLE instead of silently relaunching a window the person may have closed on purpose.
A broken connection with a live browser is recovered once per read by dropping the cached tabs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from cnki_mcp.core.clock import Deadline
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Paper, Quality
from cnki_mcp.core.redact import endpoint_url
from cnki_mcp.core.snapshots import save_snapshot
from cnki_mcp.site.operation import SiteOperation
from cnki_mcp.pages.page_state import (
    LIVE_PAGE_SCRIPT,
    PageState,
    classify_response,
    gateway_page,
    inspect_live_page,
)
from cnki_mcp.pages.parse import (
    GridPage,
    check_identity,
    is_site_url,
    parse_detail,
    parse_journal,
)
from cnki_mcp.site.browser import Browser, DownloadEvent, Tab
from cnki_mcp.site.cdp import FetchResult, NavigationResult
from cnki_mcp.site.grid_query import GridQuery
from cnki_mcp.site.human import Person
from cnki_mcp.site.json_api import JsonApi
from cnki_mcp.site.limiter import Limiter
from cnki_mcp.site.listings import ADVANCED_SEARCH_URL, BOOTSTRAP_TIMEOUT, Listings
from cnki_mcp.site.page_actions import CALL_TIMEOUT

log = logging.getLogger(__name__)

T = TypeVar("T")

RESOURCE_ATTEMPTS = 3
BACKOFF_SLEEPS = (2.0, 4.0)
RENDER_TIMEOUT = 12.0
PAGE_POLL = 0.12

CHALLENGE_CODES = frozenset({"VERIFICATION_REQUIRED", "LOGIN_REQUIRED"})
_BACKOFF_CODES = frozenset({"RATE_LIMITED", "SITE_UNAVAILABLE"})
# Parse failures that say "this is not the paper", not "this page did not render yet".
_IDENTITY_CODES = frozenset({"IDENTITY_CONFLICT", "SOURCE_IDENTITY_UNCONFIRMED"})
_SNAPSHOT_CODES = frozenset({"PARSER_UNSUPPORTED", "SOURCE_SCHEMA_UNSUPPORTED"})


def _final_parse_error(exc: CnkiError) -> bool:
    """A parse failure that another look at the page cannot change (wrong paper, too large, a known
    unsupported kind of page), as opposed to a page that is not rendered yet."""
    if exc.code in _IDENTITY_CODES or exc.code == "RESPONSE_TOO_LARGE":
        return True
    return exc.code == "PARSER_UNSUPPORTED" and isinstance(exc.details, dict) and "page_kind" in exc.details


class Observation(msgspec.Struct):
    """One look at a live tab: what the page shows (PageState) plus its load state and DOM."""

    url: str
    html: str
    ready: bool
    complete: bool
    pending: bool
    condition: bool
    page: PageState


def _observe_js(condition: str) -> str:
    return (
        "(() => ({url: location.href, ready: document.readyState !== 'loading',"
        " complete: document.readyState === 'complete',"
        " pending: !!(window.jQuery && window.jQuery.active),"
        f" condition: (() => {{ try {{ return !!({condition}); }} catch (e) {{ return false; }} }})(),"
        f" html: {LIVE_PAGE_SCRIPT.strip()}}}))()"
    )


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


def page_problem(page: PageState, url: str) -> CnkiError | None:
    """The problem a live tab shows, as the code a response would have given (no query in details)."""
    url = endpoint_url(url)
    via = {"via": "gateway"} if gateway_page(url) else {}
    if page.state == "challenge":
        return CnkiError("VERIFICATION_REQUIRED", "知网要求人工验证", details={"url": url, "reason": page.reason, **via})
    if page.state == "login":
        return CnkiError("LOGIN_REQUIRED", "当前资源要求登录", details={"url": url, **via})
    if page.state == "denied":
        return CnkiError("ACCESS_DENIED", f"站点拒绝当前资源访问：{page.reason}", details={"url": url})
    return None


# --------------------------------------------------------------------------------------------


class Site:
    """CNKI access for every operation of this process (one per App)."""

    def __init__(self, browser: Browser, limiter: Limiter, diagnostics_dir: Path) -> None:
        self.browser = browser
        self.limiter = limiter
        self.diagnostics_dir = diagnostics_dir
        self.person = Person(browser, limiter, self.observe, self.tab_snapshot)
        self.listings = Listings(self)
        self.api = JsonApi(self)
        self._generation = 0
        self._work: Tab | None = None
        self._render: Tab | None = None
        self._tab_lock = asyncio.Lock()
        self._render_lock = asyncio.Lock()

    # -- state -----------------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        """Number of finished human steps; a caller that saw a challenge under an older epoch just retries."""
        return self.person.epoch

    @property
    def generation(self) -> int:
        """The browser connection the cached tabs and the listings' template belong to."""
        return self._generation

    def drop_pages(self) -> None:
        """Forget the work and render tabs and the template (recover, new browser generation)."""
        self._work = None
        self._render = None
        self.listings.forget_template()

    async def reset_tabs(self) -> None:
        """Drop the cached tabs and close them if the browser still has them."""
        tabs = [tab for tab in (self._work, self._render) if tab is not None]
        self.drop_pages()
        for tab in tabs:
            with contextlib.suppress(CnkiError):
                await self.browser.close_tab(tab)

    async def recover(self) -> None:
        """``operation_control recover``: drop cached pages; reset the browser if it does not answer in 2 s."""
        await self.reset_tabs()
        if not await self.browser.probe(2.0):
            await self.browser.reset()

    async def sync(self) -> None:
        """Make sure a browser runs and per-browser state belongs to it."""
        await self.browser.ensure()
        generation = self.browser.connection_generation
        if generation != self._generation:
            self._generation = generation
            self.drop_pages()
            self.listings.forget()

    @staticmethod
    def _usable(tab: Tab | None, generation: int) -> bool:
        return tab is not None and not tab.closed and not tab.crashed and tab.generation == generation

    async def work_tab(self) -> Tab:
        """The tab listings are asked from and resources are loaded through (a new one drops the template)."""
        await self.sync()
        async with self._tab_lock:
            if not self._usable(self._work, self._generation):
                self.listings.forget_template()
                self._work = await self.browser.new_tab()
            assert self._work is not None
            return self._work

    @property
    def has_work_tab(self) -> bool:
        return self._work is not None

    def work_tab_now(self) -> Tab:
        """The current work tab, without a check (for a snapshot of what it shows)."""
        assert self._work is not None
        return self._work

    async def _render_tab(self) -> Tab:
        await self.sync()
        async with self._tab_lock:
            if not self._usable(self._render, self._generation):
                self._render = await self.browser.new_tab()
            assert self._render is not None
            return self._render

    async def site_tab(self, op: SiteOperation) -> Tab:
        """The work tab on a CNKI page, so resource loads carry the site's first-party cookies."""
        tab = await self.work_tab()
        if is_site_url(tab.url):
            return tab
        async with self.listings.template_lock:  # never navigate while a template capture drives the page
            tab = await self.work_tab()
            if not is_site_url(tab.url):
                async with self.request(op):
                    await self.browser.navigate(tab, ADVANCED_SEARCH_URL, BOOTSTRAP_TIMEOUT)
            return tab

    def transport_broken(self, exc: CnkiError) -> bool:
        """A failed CDP call while the browser process itself still runs: new tabs may fix it."""
        return exc.code == "BROWSER_UNAVAILABLE" and self.browser.running

    # -- requests --------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def request(self, op: SiteOperation) -> AsyncIterator[None]:
        """``async with site.request(op): <one CNKI request>`` — charge, then a limiter slot."""
        op.charge()

        def cancelled() -> None:
            if op.cancelled:
                raise CnkiError("CANCELLED")

        async with self.limiter.slot(cancelled):
            yield

    async def backoff(self, problem: CnkiError, done: int) -> None:
        """Slow the limiter; sleep 2 s, then 4 s; a third rate-limit or 5xx answer is final."""
        self.limiter.slow()
        if done >= len(BACKOFF_SLEEPS):
            raise problem
        await asyncio.sleep(BACKOFF_SLEEPS[done])

    async def snapshot(
        self, kind: str, body: str, url: str, tab: Tab | None = None, *, extension: str = "html"
    ) -> str:
        """Save a page that could not be handled (redacted; a screenshot when ``tab`` is given).

        Returns the snapshot's file name for the error's details, or "" when it could not be saved.
        """
        screenshot = None
        if tab is not None and not tab.closed:
            try:
                screenshot = await self.browser.screenshot(tab, 5.0)
            except CnkiError as exc:
                log.debug("no screenshot for the snapshot: %s", exc)
        try:
            path = await asyncio.to_thread(
                save_snapshot, self.diagnostics_dir, kind, body, url, screenshot, extension=extension
            )
        except OSError as exc:
            log.warning("could not save a page snapshot: %s", exc)
            return ""
        return path.name

    async def tab_snapshot(self, kind: str, tab: Tab) -> str:
        """``snapshot`` of what a live tab shows now (its DOM and a screenshot); "" when it cannot answer."""
        try:
            html = await self.browser.page_html(tab, 5.0)
        except CnkiError as exc:
            log.debug("no page for the snapshot: %s", exc)
            return ""
        return await self.snapshot(kind, html, tab.url, tab)

    # -- live pages ------------------------------------------------------------------------

    async def observe(self, tab: Tab, condition: str = "true", timeout: float = 5.0) -> Observation | None:
        """Inspect a live tab. None while it cannot answer (navigating); a dead browser raises."""
        try:
            data = await self.browser.evaluate(tab, _observe_js(condition), timeout)
        except CnkiError as exc:
            if not self.browser.running or tab.closed or tab.crashed:
                raise
            log.debug("tab %s did not answer an inspection: %s", tab.target_id[:8], exc.message)
            return None
        if not isinstance(data, dict):
            return None
        url = str(data.get("url") or "")
        html = str(data.get("html") or "")
        return Observation(
            url=url,
            html=html,
            ready=bool(data.get("ready")),
            complete=bool(data.get("complete")),
            pending=bool(data.get("pending")),
            condition=bool(data.get("condition")),
            page=await asyncio.to_thread(inspect_live_page, html, url),
        )

    async def glance(self, tab: Tab) -> Observation | None:
        """``observe`` for polling several tabs: one that is closed or cannot answer now is None; only a
        dead browser raises."""
        try:
            return await self.observe(tab)
        except CnkiError as exc:
            if exc.code == "BROWSER_UNAVAILABLE" and not self.browser.running:
                raise
            return None

    async def wait_page(
        self,
        op: SiteOperation,
        tab: Tab,
        accept: Callable[[Observation], T | None],
        timeout: float,
        *,
        condition: str = "true",
    ) -> T:
        """Poll a tab until ``accept`` returns a value.

        Challenges and login prompts go to a person, after which the deadline restarts; a denial is
        ACCESS_DENIED. ``accept`` may raise to stop; errors it raises with an identity code stop at
        once, others are remembered and raised at the timeout (else CONTENT_NOT_READY).
        """
        deadline = Deadline(timeout)
        last: CnkiError | None = None
        while True:
            epoch = self.person.epoch
            seen = await self.observe(tab, condition)
            if seen is not None and seen.ready:
                if await self.hand_over(op, tab, seen, epoch=epoch):
                    deadline.restart()
                    continue
                problem = page_problem(seen.page, seen.url)
                if problem is not None:
                    raise problem
                try:
                    value = accept(seen)
                except CnkiError as exc:
                    if _final_parse_error(exc):
                        raise
                    last = exc
                else:
                    if value is not None:
                        return value
            if deadline.passed:
                raise last or CnkiError(
                    "CONTENT_NOT_READY",
                    "页面未呈现预期内容，不能判定正文不存在或无权限",
                    details={"url": endpoint_url(tab.url)},
                )
            await asyncio.sleep(PAGE_POLL)

    async def hand_over(self, op: SiteOperation, tab: Tab, seen: Observation, *, epoch: int | None = None) -> bool:
        """Hand ``tab`` to the person when ``seen`` shows a challenge or a login prompt (True once done)."""
        problem = page_problem(seen.page, seen.url)
        if problem is None or problem.code not in CHALLENGE_CODES:
            return False
        await self.person.step(op, tab, problem, epoch=epoch)
        return True

    async def human_step(self, op: SiteOperation, tab: Tab, reason: CnkiError, *, epoch: int | None = None) -> None:
        """``Person.step`` for ``tab``: the person clears the challenge or login prompt ``reason`` names."""
        await self.person.step(op, tab, reason, epoch=epoch)

    # -- listings ----------------------------------------------------------------------------

    async def grid(self, op: SiteOperation, query: GridQuery, page: int) -> GridPage:
        """One page (1-based) of a listing; see ``listings.Listings.page``."""
        return await self.listings.page(op, query, page)

    async def locate(
        self, op: SiteOperation, titles: list[str], related: Callable[[str, str], bool] | None = None
    ) -> dict[str, list[Paper]]:
        """Up to 10 titles in one exact-title grid request; see ``listings.Listings.locate``."""
        return await self.listings.locate(op, titles, related)

    # -- detail and journal pages -------------------------------------------------------------

    async def detail(self, op: SiteOperation, paper: Paper) -> Paper:
        """The paper's detail page at its locator, parsed and bound to it; always fetched.

        Locating a paper without a link, and relocating once after a failed load, is the caller's
        part (research.py does both and stores the fresh locator).
        """
        locator = paper.locator or paper.url
        if not locator:
            raise CnkiError("DOCUMENT_NOT_FOUND", "这条记录没有知网入口，需要先按题名定位。", details={"title": paper.title})
        return await self._detail_at(op, paper, locator)

    async def _detail_at(self, op: SiteOperation, paper: Paper, locator: str) -> Paper:
        def parse(html: str, url: str) -> Paper:
            return bind_detail(paper, parse_detail(html, url), url)

        return await self._load(op, locator, parse, "detail")

    async def journal(self, op: SiteOperation, paper: Paper) -> Quality:
        """Quality evidence from the paper's journal page (``paper.source_url``), bound to its source."""
        if not paper.source_url:
            raise CnkiError("SOURCE_LOCATOR_MISSING", "详情页没有期刊链接", details={"source": paper.source})
        return await self._load(op, paper.source_url, lambda html, url: parse_journal(html, url, paper.source), "journal")

    async def read(self, op: SiteOperation, url: str, parse: Callable[[str, str], T], kind: str) -> T:
        """Any CNKI page read the way detail and journal pages are, with the caller's ``parse(html, url)``
        (the field check keeps what it saw)."""
        return await self._load(op, url, parse, kind)

    async def browser_version(self) -> str:
        """What the dedicated browser reports itself as (``Chrome/131.0…``); "" when it cannot say."""
        return await self.browser.version()

    async def _load(self, op: SiteOperation, url: str, parse: Callable[[str, str], T], kind: str) -> T:
        """Read a page through Chrome's network stack; render it in a tab when that is not enough."""
        if not is_site_url(url):
            raise CnkiError("LOCATOR_EXPIRED", "文献入口不是知网地址，未访问。", details={"kind": kind})
        backoffs = 0
        recovered = False
        for _attempt in range(RESOURCE_ATTEMPTS):
            try:
                tab = await self.site_tab(op)
                async with self.request(op):
                    result = await self.browser.load_resource(tab, url)
            except CnkiError as exc:
                if self.transport_broken(exc) and not recovered:
                    recovered = True
                    await self.reset_tabs()
                    continue
                if exc.code == "RESOURCE_FAILED":
                    break
                raise
            problem = classify_response(result.status, url, result.text)
            if problem is not None:
                if problem.code in _BACKOFF_CODES:
                    await self.backoff(problem, backoffs)
                    backoffs += 1
                    continue
                if problem.code in CHALLENGE_CODES:
                    break
                raise problem
            try:
                value = await asyncio.to_thread(parse, result.text, url)
            except CnkiError as exc:
                if _final_parse_error(exc):
                    raise
                log.debug("%s page needs rendering: %s", kind, exc.message)
                break
            self.limiter.fast()
            return value
        return await self._render_page(op, url, parse, kind)

    async def _render_page(self, op: SiteOperation, url: str, parse: Callable[[str, str], T], kind: str) -> T:
        """The render fallback: load in the shared render tab and parse the live DOM until it works."""
        async with self._render_lock:
            tab = await self._render_tab()
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
                    if name := await self.snapshot(kind, last_html, last_url, tab):
                        exc.details = {**(exc.details if isinstance(exc.details, dict) else {}), "snapshot": name}
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
        self, op: SiteOperation, tab: Tab, url: str, timeout: float, *, until: str = "ready"
    ) -> NavigationResult:
        """One charged, paced navigation of ``tab``."""
        async with self.request(op):
            return await self.browser.navigate(tab, url, timeout, until=until)

    async def click(self, op: SiteOperation, tab: Tab, selector: str, timeout: float, *, text: str | None = None) -> bool:
        """One charged, paced click on the first visible ``selector`` (whose text matches ``text``)."""
        async with self.request(op):
            return await self.browser.click(tab, selector, timeout, text=text)

    async def fetch(self, op: SiteOperation, tab: Tab, url: str, **options: Any) -> FetchResult:
        """One charged, paced ``fetch()`` from inside ``tab`` (same origin, the page's cookies)."""
        async with self.request(op):
            return await self.browser.fetch_in_page(tab, url, **options)

    async def evaluate(self, tab: Tab, expression: str, timeout: float = CALL_TIMEOUT) -> Any:
        """A script run in ``tab`` (no request to CNKI)."""
        return await self.browser.evaluate(tab, expression, timeout)

    async def popups(self, opener: Tab) -> list[Tab]:
        return await self.browser.popups(opener)

    async def page_tabs(self) -> list[Tab]:
        """Every page of the browser, also the ones a person opened."""
        return await self.browser.page_tabs()

    async def set_download_dir(self, path: Path) -> None:
        await self.browser.set_download_dir(path)

    async def wait_download(self, guid: str | None = None, timeout: float = 1.0) -> DownloadEvent | None:
        return await self.browser.wait_download(guid, timeout)
