"""navi.cnki.net's pages and fragments through the ``door.Door``: the journal search, a journal's page,
its ``yearList`` and ``papers`` fragments.

The fragments answer POSTs from a navi page only (``X-Requested-With``, a navi Referer, the page's
``time`` token), so one tab of the dedicated browser is kept on navi.cnki.net: it is navigated to the
navi home or the journal's page when it is not already there (one charged, paced request, its challenges
handed to the person while the page is awaited), and the fragments are fetched from inside it, each an
exchange the engine runs (charged, paced, routed) with its registry entry (``registry.NAVI_SEARCH`` …);
its answer is judged by the entry's classification: a redirect away from CNKI is raised, a rate limit or
a 5xx backs off, a challenge (a verify redirect, the -403 JSON) is shown to the person on the navi tab, which then goes back to the page it was on, and the
fragment is asked again (a third challenge is VERIFICATION_REPEATED). A fragment that cannot be parsed
leaves a snapshot.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.ops.jobs import OperationContext
from cnki_mcp.pages.navi_parse import NAVI_HOME
from cnki_mcp.pages.urls import is_site_url
from cnki_mcp.site.browser import Tab
from cnki_mcp.site.cdp import FetchResult
from cnki_mcp.site.door import Door, with_return_url
from cnki_mcp.site.exchange import Exchange, Observation, Request, Spec, note_snapshot, verify_page
from cnki_mcp.site.human import refuse_if_skipping

T = TypeVar("T")

NAVI_TIMEOUT = 20.0
FRAGMENT_ATTEMPTS = 3
FRAGMENT_HEADERS = {
    "Accept": "text/html, */*; q=0.01",
    "Content-Type": "application/x-www-form-urlencoded; charset=UTF-8",
    "X-Requested-With": "XMLHttpRequest",
}


@dataclass(eq=False)
class FragmentExchange(Exchange[T]):
    """One navi fragment POSTed from the navi tab (see ``Navi.post``)."""

    rounds = FRAGMENT_ATTEMPTS + 2
    challenges = FRAGMENT_ATTEMPTS

    navi: Navi
    page_url: str
    url: str
    form: str
    parser: Callable[[str, str], T]
    spec: Spec

    async def build(self, op: OperationContext) -> Request:
        if self.page_url or not self.navi.shown:
            await self.navi.page(op, self.page_url or NAVI_HOME, lambda _html, _url: True, self.spec.name)
        self.tab = await self.navi.tab()
        return Request(self.tab, self.url, "POST", self.form, FRAGMENT_HEADERS)

    def recovered(self) -> None:
        self.navi.forget_tab()

    async def challenge(
        self, op: OperationContext, problem: CnkiError, answer: FetchResult, epoch: int, final: bool
    ) -> None:
        await self.navi.challenge(op, self.tab, problem, answer.url, answer.text, self.page_url or NAVI_HOME, epoch)

    def parse(self, answer: FetchResult) -> T:
        return self.parser(answer.text, self.navi.door.browser.routing.here(self.url))  # the session's site


class Navi:
    """The navi tab of this process and the requests asked from it."""

    def __init__(self, door: Door) -> None:
        self.door = door
        self._tab: Tab | None = None
        self._page = ""  # the page the navi tab shows, as navigated
        self._lock = asyncio.Lock()  # one navigation of the navi tab at a time

    @property
    def shown(self) -> str:
        """The page the navi tab shows, as navigated ("" when unknown)."""
        return self._page

    def forget_tab(self) -> None:
        """A broken connection was recovered: the navi tab is opened anew."""
        self._tab = None

    async def tab(self) -> Tab:
        await self.door.sync()
        tab = self._tab
        if tab is None or tab.closed or tab.crashed or tab.generation != self.door.generation:
            self._tab = await self.door.browser.new_tab()
            self._page = ""
        assert self._tab is not None
        return self._tab

    async def page(self, op: OperationContext, url: str, parse: Callable[[str, str], T], kind: str) -> T:
        """The navi page ``url`` in the navi tab (navigated unless it shows it already), parsed by ``parse``."""
        if not is_site_url(url):
            raise CnkiError("LOCATOR_EXPIRED", "期刊入口不是知网地址，未访问。", details={"kind": kind})
        async with self._lock:
            tab = await self.tab()
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
        self, op: OperationContext, page_url: str, url: str, form: str, parse: Callable[[str, str], T], spec: Spec
    ) -> T:
        """One fragment: ``form`` POSTed to ``url`` from the navi tab showing ``page_url`` (any navi page when
        it is "": the one the tab shows, else the navi home), parsed by ``parse``; ``spec`` is the fragment's
        registry entry (its classification, its snapshots' name)."""
        return await self.door.exchange(op, FragmentExchange(self, page_url, url, form, parse, spec))

    async def challenge(
        self, op: OperationContext, tab: Tab, problem: CnkiError, response_url: str, body: str, page_url: str, epoch: int
    ) -> None:
        """A fragment's challenge shown to the person on the navi tab; it then goes back to ``page_url``."""
        refuse_if_skipping(op, problem)
        if epoch != self.door.person.epoch:
            return  # solved by someone else meanwhile
        verify = verify_page(response_url, body)
        async with self._lock:
            self._page = ""
            if verify and is_site_url(verify):
                async with self.door.request(op):
                    await self.door.browser.navigate(tab, with_return_url(verify, page_url), NAVI_TIMEOUT)
        await self.door.human_step(op, tab, problem, epoch=epoch)
