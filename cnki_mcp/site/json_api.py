"""CNKI's JSON APIs (references, citing and similar papers), asked from inside the work tab.

An exchange (``registry.API``) run by the ``door.Door``'s engine (``Site`` owns one ``JsonApi``): every
request is charged, paced and routed by the engine, answers are classified by the registry's
``api_problem``, and challenges go to the person the way the grid's do (``listings``).
"""

from __future__ import annotations

import contextlib

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.ops.jobs import OperationContext
from cnki_mcp.pages.urls import is_site_url
from cnki_mcp.site.cdp import FetchResult
from cnki_mcp.site.door import Door
from cnki_mcp.site.exchange import Exchange, Request, verify_page
from cnki_mcp.site.human import refuse_if_skipping
from cnki_mcp.site.registry import API
from cnki_mcp.site.remote import gateway_problem

API_ATTEMPTS = 3
API_HEADERS = {"Accept": "application/json, text/plain, */*"}
CONTEXT_TIMEOUT = 12.0


class ApiExchange(Exchange[str]):
    """One GET of a JSON API; a challenge without a page of its own is shown on ``context_url``."""

    spec = API
    rounds = API_ATTEMPTS + 2
    challenges = API_ATTEMPTS

    def __init__(self, api: JsonApi, url: str, context_url: str) -> None:
        self.api = api
        self.url = url
        self.context_url = context_url

    async def build(self, op: OperationContext) -> Request:
        return Request(await self.api.door.site_tab(op), self.url, headers=API_HEADERS)

    async def challenge(
        self, op: OperationContext, problem: CnkiError, answer: FetchResult, epoch: int, final: bool
    ) -> None:
        await self.api.challenge(op, problem, answer.url, answer.text, self.context_url, epoch)


class JsonApi:
    """GETs of CNKI's JSON APIs for every operation of this process."""

    def __init__(self, door: Door) -> None:
        self.door = door

    async def get(self, op: OperationContext, url: str, context_url: str) -> str:
        """One charged, paced GET of a CNKI JSON API from inside the work tab; the answer's body.

        Challenges are handled like the grid's: the JSON ``{"code":-403,"message":<verify page>}`` (HTTP
        403 or 200) or a redirect to a verify page is shown to the person on the work tab, which comes
        back to the search page; a challenge without a page of its own is shown on ``context_url`` (the
        paper's detail page) in a tab of its own. The request is then asked again; a third challenge is
        VERIFICATION_REPEATED. Rate limits and 5xx back off; other problems (404 …) are raised.
        """
        return await self.door.exchange(op, ApiExchange(self, url, context_url))

    async def challenge(
        self, op: OperationContext, problem: CnkiError, response_url: str, body: str, context_url: str, epoch: int
    ) -> None:
        """Show an API's challenge to the person (see ``get``); returns once it is cleared."""
        refuse_if_skipping(op, problem)
        if epoch != self.door.person.epoch:
            return  # solved by someone else meanwhile
        verify = verify_page(response_url, body)
        if gateway_problem(problem):  # the gateway's own login or challenge: shown on the work tab
            await self.door.person.step(op, await self.door.work_tab(), problem, epoch=epoch)
            return
        if verify and is_site_url(verify):
            await self.door.show_verify_page(op, await self.door.work_tab(), verify, problem, epoch)
            return
        await self.show_context(op, problem, context_url, epoch)

    async def show_context(self, op: OperationContext, problem: CnkiError, url: str, epoch: int) -> None:
        """A challenge with no page of its own (a decoy answer …): ``url`` in a new tab, handed to the person."""
        refuse_if_skipping(op, problem)
        if epoch != self.door.person.epoch or not is_site_url(url):
            return
        tab = await self.door.browser.new_tab()
        try:
            async with self.door.request(op):
                await self.door.browser.navigate(tab, url, CONTEXT_TIMEOUT)
            await self.door.person.step(op, tab, problem, epoch=epoch)
        finally:
            with contextlib.suppress(CnkiError):
                await self.door.browser.close_tab(tab)
