"""The door to CNKI every site module goes through: the exchange engine with the tabs it asks from.

``Door`` is ``exchange.Engine`` (budget, pacing, route, classification, the person, back-off, parsing,
snapshots) with the tabs: the work tab (listings and resources) and the render tab are cached per
browser connection; a new work tab or a new browser moves ``pages`` or ``generation`` on, which the
listings read to drop their template and cursors (nothing calls back into them). Live tabs are watched
(``wait_page``) for challenges, login prompts and denials, and a challenge goes to the person
(``human.Person``).

``site.Site`` is the Door with listings, JSON APIs and detail pages on top; ``listings.Listings`` and
``json_api.JsonApi`` are given the Door, never the Site.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from cnki_mcp.core.clock import Deadline
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.redact import endpoint_url
from cnki_mcp.ops.jobs import OperationContext
from cnki_mcp.pages.page_state import PageState, gateway_page
from cnki_mcp.pages.urls import is_site_url
from cnki_mcp.site.browser import Browser, Tab
from cnki_mcp.site.exchange import CHALLENGE_CODES, Engine, Observation, final_parse_error
from cnki_mcp.site.limiter import Limiter

log = logging.getLogger(__name__)

T = TypeVar("T")

ADVANCED_SEARCH_URL = "https://kns.cnki.net/kns8s/AdvSearch"
BOOTSTRAP_TIMEOUT = 20.0  # loading the search page (also the login tab and the work tab)
PAGE_POLL = 0.12


def with_return_url(url: str, fallback: str) -> str:
    """A verify page URL that sends the browser back after success (``returnUrl`` added when missing)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    if any(key.lower() == "returnurl" for key, _ in query):
        return url
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode([*query, ("returnUrl", fallback)]), ""))


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


class Door(Engine):
    """The engine with its tabs and live pages, for every site request of this process."""

    def __init__(self, browser: Browser, limiter: Limiter, diagnostics_dir: Path) -> None:
        super().__init__(browser, limiter, diagnostics_dir)
        self._generation = 0
        self._pages = 0
        self._work: Tab | None = None
        self._render: Tab | None = None
        self._tab_lock = asyncio.Lock()
        self._template_lock = asyncio.Lock()

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
    def pages(self) -> int:
        """How often the work tab was replaced or dropped: the listings' template belongs to one value."""
        return self._pages

    @property
    def template_lock(self) -> asyncio.Lock:
        """Held while the search template is captured on the work tab: nothing else may navigate it meanwhile."""
        return self._template_lock

    def _replaced(self) -> None:
        self._pages += 1

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

    async def site_tab(self, op: OperationContext) -> Tab:
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

    async def wait_page(
        self,
        op: OperationContext,
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

    async def hand_over(self, op: OperationContext, tab: Tab, seen: Observation, *, epoch: int | None = None) -> bool:
        """Hand ``tab`` to the person when ``seen`` shows a challenge or a login prompt (True once done)."""
        problem = page_problem(seen.page, seen.url)
        if problem is None or problem.code not in CHALLENGE_CODES:
            return False
        await self.person.step(op, tab, problem, epoch=epoch)
        return True

    async def show_verify_page(self, op: OperationContext, tab: Tab, verify: str, reason: CnkiError, epoch: int) -> None:
        """A challenge that names its verify page: the work ``tab`` goes there (to come back to the search
        page once solved; never while a template capture drives it) and the person solves it."""
        async with self._template_lock:
            async with self.request(op):
                await self.browser.navigate(tab, self.verify_target(verify), BOOTSTRAP_TIMEOUT)
        await self.person.step(op, tab, reason, epoch=epoch)

    def verify_target(self, verify: str) -> str:
        """``verify`` sending the browser back to the search page on the session's site once solved (abroad
        the overseas one: links name the site the session is on)."""
        return with_return_url(verify, self.browser.routing.here(ADVANCED_SEARCH_URL))

    async def human_step(self, op: OperationContext, tab: Tab, reason: CnkiError, *, epoch: int | None = None) -> None:
        """``Person.step`` for ``tab``: the person clears the challenge or login prompt ``reason`` names."""
        await self.person.step(op, tab, reason, epoch=epoch)
