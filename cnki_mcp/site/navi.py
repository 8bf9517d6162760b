"""navi.cnki.net's pages and fragments through the ``door.Door``: the journal search, a journal's page,
its ``yearList`` and ``papers`` fragments.

The fragments answer POSTs from a navi page only (``X-Requested-With``, a navi Referer, the page's
``time`` token), so one tab of the dedicated browser is kept on navi.cnki.net: it is navigated to the
navi home or the journal's page when it is not already there (one charged, paced request, its challenges
handed to the person while the page is awaited), and the fragments are fetched from inside it. Every
fetch is charged and paced through ``Door.request``; its answer is judged by
``page_state.classify_response``: a rate limit or a 5xx backs off, a challenge (a verify redirect, the
-403 JSON) is shown to the person on the navi tab, which then goes back to the page it was on, and the
fragment is asked again (a third challenge is VERIFICATION_REPEATED). A fragment that cannot be parsed
leaves a snapshot.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.redact import endpoint_url
from cnki_mcp.pages.navi_parse import NAVI_HOME
from cnki_mcp.pages.page_state import challenge_url, classify_response
from cnki_mcp.pages.urls import is_site_url
from cnki_mcp.site.browser import Tab
from cnki_mcp.site.door import CHALLENGE_CODES, Attempts, Door, Observation, note_snapshot, with_return_url
from cnki_mcp.site.human import refuse_if_skipping
from cnki_mcp.site.operation import SiteOperation

T = TypeVar("T")

NAVI_TIMEOUT = 20.0
FRAGMENT_ATTEMPTS = 3
FRAGMENT_HEADERS = {
    "Accept": "text/html, */*; q=0.01",
    "Content-Type": "application/x-www-form-urlencoded; charset=UTF-8",
    "X-Requested-With": "XMLHttpRequest",
}


class Navi:
    """The navi tab of this process and the requests asked from it."""

    def __init__(self, door: Door) -> None:
        self.door = door
        self._tab: Tab | None = None
        self._page = ""  # the page the navi tab shows, as navigated
        self._lock = asyncio.Lock()  # one navigation of the navi tab at a time

    async def _navi_tab(self) -> Tab:
        await self.door.sync()
        tab = self._tab
        if tab is None or tab.closed or tab.crashed or tab.generation != self.door.generation:
            self._tab = await self.door.browser.new_tab()
            self._page = ""
        assert self._tab is not None
        return self._tab

    async def page(self, op: SiteOperation, url: str, parse: Callable[[str, str], T], kind: str) -> T:
        """The navi page ``url`` in the navi tab (navigated unless it shows it already), parsed by ``parse``."""
        if not is_site_url(url):
            raise CnkiError("LOCATOR_EXPIRED", "期刊入口不是知网地址，未访问。", details={"kind": kind})
        async with self._lock:
            tab = await self._navi_tab()
            if self._page != url:
                async with self.door.request(op):
                    await self.door.browser.navigate(tab, url, NAVI_TIMEOUT)
                self._page = url
            last_html, last_url = "", url

            def accept(seen: Observation) -> T:
                nonlocal last_html, last_url
                last_html, last_url = seen.html, seen.url
                return parse(seen.html, seen.url)

            try:
                value = await self.door.wait_page(op, tab, accept, NAVI_TIMEOUT)
            except CnkiError as exc:
                self._page = ""
                if exc.code == "PARSER_UNSUPPORTED" and last_html:
                    note_snapshot(exc, await self.door.snapshot(kind, last_html, last_url, tab))
                raise
            return value

    async def post(
        self, op: SiteOperation, page_url: str, url: str, form: str, parse: Callable[[str, str], T], kind: str
    ) -> T:
        """One fragment: ``form`` POSTed to ``url`` from the navi tab showing ``page_url`` (any navi page when
        it is "": the one the tab shows, else the navi home), parsed by ``parse``."""
        attempts = Attempts(self.door)
        challenged = 0
        last: CnkiError | None = None
        for _attempt in range(FRAGMENT_ATTEMPTS + 2):
            epoch = self.door.person.epoch
            if page_url or not self._page:
                await self.page(op, page_url or NAVI_HOME, lambda _html, _url: True, kind)
            tab = await self._navi_tab()
            try:
                async with self.door.request(op):
                    result = await self.door.browser.fetch_in_page(
                        tab, url, method="POST", body=form, headers=FRAGMENT_HEADERS
                    )
            except CnkiError as exc:
                if await attempts.recover(exc):
                    self._tab = None
                    continue
                raise
            if result.redirected and not is_site_url(result.url):
                raise CnkiError("LOGIN_REQUIRED" if "//login." in result.url.lower() else "RESOURCE_FAILED",
                                details={"url": endpoint_url(result.url)})
            problem = classify_response(result.status, result.url, result.text)
            if problem is None:
                try:
                    value = await asyncio.to_thread(parse, result.text, url)
                except CnkiError as exc:
                    if exc.code == "PARSER_UNSUPPORTED":
                        note_snapshot(exc, await self.door.snapshot(kind, result.text, url))
                    raise
                self.door.limiter.fast()
                return value
            last = problem
            if await attempts.back_off(problem):
                continue
            if problem.code not in CHALLENGE_CODES:
                raise problem
            challenged += 1
            if challenged >= FRAGMENT_ATTEMPTS:
                raise CnkiError("VERIFICATION_REPEATED", "人工处理后站点仍要求验证，已停止重试")
            await self._challenge(op, tab, problem, result.url, result.text, page_url or NAVI_HOME, epoch)
        assert last is not None
        raise last

    async def _challenge(
        self, op: SiteOperation, tab: Tab, problem: CnkiError, response_url: str, body: str, page_url: str, epoch: int
    ) -> None:
        """A fragment's challenge shown to the person on the navi tab; it then goes back to ``page_url``."""
        refuse_if_skipping(op, problem)
        if epoch != self.door.person.epoch:
            return  # solved by someone else meanwhile
        verify = challenge_url(body) or (response_url if "/verify/" in response_url.lower() else "")
        async with self._lock:
            self._page = ""
            if verify and is_site_url(verify):
                async with self.door.request(op):
                    await self.door.browser.navigate(tab, with_return_url(verify, page_url), NAVI_TIMEOUT)
        await self.door.human_step(op, tab, problem, epoch=epoch)
