"""The door to CNKI every site module goes through: requests, back-off, tabs, snapshots, live pages, the person.

Every request is charged to its operation first, then waits for a limiter slot (``request``); a rate
limit or a 5xx slows the limiter and waits 2 s, then 4 s (``backoff``); a read's retry loop keeps its
spending in ``Attempts``. The work tab (listings and resources) and the render tab are cached per
browser connection; a page that cannot be handled leaves a redacted snapshot whose name goes into the
error (``note_snapshot``). Live tabs are inspected (``observe``, ``wait_page``) for challenges, login
prompts and denials, and a challenge goes to the person (``human.Person``).

``site.Site`` is the Door with listings, JSON APIs and detail pages on top; ``listings.Listings`` and
``json_api.JsonApi`` are given the Door, never the Site.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import msgspec

from cnki_mcp.core.clock import Deadline
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.redact import endpoint_url
from cnki_mcp.core.snapshots import save_snapshot
from cnki_mcp.pages.page_state import LIVE_PAGE_SCRIPT, PageState, gateway_page, inspect_live_page
from cnki_mcp.pages.urls import is_site_url
from cnki_mcp.site.browser import Browser, Tab
from cnki_mcp.site.cdp import FetchResult
from cnki_mcp.site.human import Person
from cnki_mcp.site.limiter import Limiter
from cnki_mcp.site.operation import SiteOperation
from cnki_mcp.site.remote import GATEWAY_LOGIN_URL, NoAnswer, gateway_session_ended, is_gateway_url

log = logging.getLogger(__name__)

T = TypeVar("T")

ADVANCED_SEARCH_URL = "https://kns.cnki.net/kns8s/AdvSearch"
BOOTSTRAP_TIMEOUT = 20.0  # loading the search page (also the login tab and the work tab)
BACKOFF_SLEEPS = (2.0, 4.0)
PAGE_POLL = 0.12
GATEWAY_LOOK_TIMEOUT = 10.0  # loading the page again after an in-page request got no answer through a gateway
SETTLE_TIMEOUT = 10.0  # a page coming back from the gateway's login before a request is asked again

# Answers a person clears (a challenge, a login prompt) and answers that slow down and ask again.
CHALLENGE_CODES = frozenset({"VERIFICATION_REQUIRED", "LOGIN_REQUIRED"})
BACKOFF_CODES = frozenset({"RATE_LIMITED", "SITE_UNAVAILABLE"})
# Parse failures that say "this is not the paper", not "this page did not render yet".
_IDENTITY_CODES = frozenset({"IDENTITY_CONFLICT", "SOURCE_IDENTITY_UNCONFIRMED"})


def final_parse_error(exc: CnkiError) -> bool:
    """A parse failure that another look at the page cannot change (wrong paper, too large, a known
    unsupported kind of page), as opposed to a page that is not rendered yet."""
    if exc.code in _IDENTITY_CODES or exc.code == "RESPONSE_TOO_LARGE":
        return True
    return exc.code == "PARSER_UNSUPPORTED" and isinstance(exc.details, dict) and "page_kind" in exc.details


def note_snapshot(error: CnkiError, name: str) -> CnkiError:
    """``error`` with the snapshot's file name in its details (unchanged when none could be saved)."""
    if name:
        error.details = {**(error.details if isinstance(error.details, dict) else {}), "snapshot": name}
    return error


def with_return_url(url: str, fallback: str) -> str:
    """A verify page URL that sends the browser back after success (``returnUrl`` added when missing)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    if any(key.lower() == "returnurl" for key, _ in query):
        return url
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode([*query, ("returnUrl", fallback)]), ""))


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


class Attempts:
    """What one read's retry loop has spent: its one recovery of a broken connection and its back-offs."""

    def __init__(self, door: Door) -> None:
        self.door = door
        self.recovered = False
        self.backoffs = 0

    async def recover(self, exc: CnkiError) -> bool:
        """True when ``exc`` is a broken connection with a live browser, met for the first time: the
        cached tabs are dropped and the read asks again."""
        if self.recovered or not self.door.transport_broken(exc):
            return False
        self.recovered = True
        await self.door.reset_tabs()
        return True

    async def back_off(self, problem: CnkiError) -> bool:
        """True after the wait a rate limit or a 5xx answer asks for (ask again); False for any other
        problem. The third such answer is raised."""
        if problem.code not in BACKOFF_CODES:
            return False
        await self.door.backoff(problem, self.backoffs)
        self.backoffs += 1
        return True


# --------------------------------------------------------------------------------------------


class Door:
    """Requests, tabs, snapshots, live pages and the person for every site request of this process."""

    def __init__(self, browser: Browser, limiter: Limiter, diagnostics_dir: Path) -> None:
        self.browser = browser
        self.limiter = limiter
        self.diagnostics_dir = diagnostics_dir
        self.person = Person(browser, limiter, self.observe, self.tab_snapshot, self.request)
        self._generation = 0
        self._work: Tab | None = None
        self._render: Tab | None = None
        self._tab_lock = asyncio.Lock()
        self._template_lock = asyncio.Lock()
        self._tab_replaced: list[Callable[[], None]] = []
        self._new_browser: list[Callable[[], None]] = []

    def watch(self, *, tab_replaced: Callable[[], None], new_browser: Callable[[], None]) -> None:
        """Be told when the work tab is replaced or dropped, and when a new browser connection starts
        (the listings' template and cursors belong to them)."""
        self._tab_replaced.append(tab_replaced)
        self._new_browser.append(new_browser)

    # -- state -----------------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        """Number of finished human steps; a caller that saw a challenge under an older epoch just retries."""
        return self.person.epoch

    @property
    def generation(self) -> int:
        """The browser connection the cached tabs and the listings' template belong to."""
        return self._generation

    @property
    def template_lock(self) -> asyncio.Lock:
        """Held while the search template is captured on the work tab: nothing else may navigate it meanwhile."""
        return self._template_lock

    def _replaced(self) -> None:
        for hook in self._tab_replaced:
            hook()

    def drop_pages(self) -> None:
        """Forget the work and render tabs and the template (recover, new browser generation)."""
        self._work = None
        self._render = None
        self._replaced()

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
            for hook in self._new_browser:
                hook()

    @staticmethod
    def _usable(tab: Tab | None, generation: int) -> bool:
        return tab is not None and not tab.closed and not tab.crashed and tab.generation == generation

    async def work_tab(self) -> Tab:
        """The tab listings are asked from and resources are loaded through (a new one drops the template)."""
        await self.sync()
        async with self._tab_lock:
            if not self._usable(self._work, self._generation):
                self._replaced()
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

    async def render_tab(self) -> Tab:
        """The tab pages are rendered in when reading them through the network stack is not enough."""
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
        async with self._template_lock:  # never navigate while a template capture drives the page
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
        """``async with door.request(op): <one CNKI request>`` — charge, then a limiter slot."""
        op.charge()

        def cancelled() -> None:
            if op.cancelled:
                raise CnkiError("CANCELLED")

        async with self.limiter.slot(cancelled):
            yield

    async def fetch(self, op: SiteOperation, tab: Tab, url: str, **options: Any) -> FetchResult:
        """One charged, paced ``fetch()`` from inside ``tab`` (same origin, the page's cookies).

        Through a gateway, a request that got no answer makes us look at the page: the gateway's login
        there is LOGIN_REQUIRED at the gateway, else the request is asked once more when the page has
        settled (the session may have been renewed meanwhile). The look and the second asking are
        requests of their own, charged and paced like the first."""
        try:
            async with self.request(op):
                return await self.browser.fetch_in_page(tab, url, **options)
        except NoAnswer:
            pass
        if is_gateway_url(tab.url):  # the tab shows the gateway's page already (another request's step)
            raise gateway_session_ended(GATEWAY_LOGIN_URL)
        async with self.request(op):
            ended = await self.browser.gateway_login_shown(tab, GATEWAY_LOOK_TIMEOUT)
        if ended:
            raise gateway_session_ended(GATEWAY_LOGIN_URL)
        await self.browser.settle(tab, SETTLE_TIMEOUT)
        async with self.request(op):
            return await self.browser.fetch_in_page(tab, url, **options, asked_again=True)

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
                    if final_parse_error(exc):
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

    async def show_verify_page(self, op: SiteOperation, tab: Tab, verify: str, reason: CnkiError, epoch: int) -> None:
        """A challenge that names its verify page: the work ``tab`` goes there (to come back to the search
        page once solved; never while a template capture drives it) and the person solves it."""
        async with self._template_lock:
            async with self.request(op):
                await self.browser.navigate(tab, with_return_url(verify, ADVANCED_SEARCH_URL), BOOTSTRAP_TIMEOUT)
        await self.person.step(op, tab, reason, epoch=epoch)

    async def human_step(self, op: SiteOperation, tab: Tab, reason: CnkiError, *, epoch: int | None = None) -> None:
        """``Person.step`` for ``tab``: the person clears the challenge or login prompt ``reason`` names."""
        await self.person.step(op, tab, reason, epoch=epoch)
