"""CNKI's JSON APIs (references, citing and similar papers), asked from inside the work tab.

Asked through the ``door.Door`` (``Site`` owns one ``JsonApi``): every request is charged and paced
through ``Door.request``, answers are judged by ``page_state.classify_response``, and challenges go
to the person the way the grid's do (``listings``).
"""

from __future__ import annotations

import contextlib
import json

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.redact import endpoint_url
from cnki_mcp.pages.page_state import challenge_url, classify_response, gateway_page
from cnki_mcp.pages.urls import is_site_url
from cnki_mcp.site.door import CHALLENGE_CODES, Attempts, Door
from cnki_mcp.site.human import refuse_if_skipping
from cnki_mcp.site.operation import SiteOperation
from cnki_mcp.site.remote import gateway_problem

API_ATTEMPTS = 3
API_HEADERS = {"Accept": "application/json, text/plain, */*"}
CONTEXT_TIMEOUT = 12.0


def plain_data(status: int, url: str, body: str) -> bool:
    """An answer that is the API's data: HTTP 200, JSON with ``data``, no challenge code or verify page."""
    if status != 200 or "/verify/" in url.lower() or challenge_url(body):
        return False
    try:
        answer = json.loads(body)
    except ValueError:
        return False
    return isinstance(answer, dict) and "data" in answer and str(answer.get("code")) not in ("-403", "403")


class JsonApi:
    """GETs of CNKI's JSON APIs for every operation of this process."""

    def __init__(self, door: Door) -> None:
        self.door = door

    async def get(self, op: SiteOperation, url: str, context_url: str) -> str:
        """One charged, paced GET of a CNKI JSON API from inside the work tab; the answer's body.

        Challenges are handled like the grid's: the JSON ``{"code":-403,"message":<verify page>}`` (HTTP
        403 or 200) or a redirect to a verify page is shown to the person on the work tab, which comes
        back to the search page; a challenge without a page of its own is shown on ``context_url`` (the
        paper's detail page) in a tab of its own. The request is then asked again; a third challenge is
        VERIFICATION_REPEATED. Rate limits and 5xx back off; other problems (404 …) are raised.
        """
        attempts = Attempts(self.door)
        challenged = 0
        last: CnkiError | None = None
        for _attempt in range(API_ATTEMPTS + 2):
            epoch = self.door.person.epoch
            try:
                tab = await self.door.site_tab(op)
                result = await self.door.fetch(op, tab, url, headers=API_HEADERS)
            except CnkiError as exc:
                if await attempts.recover(exc):
                    continue
                raise
            if result.redirected and not is_site_url(result.url) and not gateway_page(result.url):
                raise CnkiError("LOGIN_REQUIRED" if "//login." in result.url.lower() else "RESOURCE_FAILED",
                                details={"url": endpoint_url(result.url)})
            problem = classify_response(result.status, result.url, result.text)
            if problem is not None and problem.code == "VERIFICATION_REQUIRED" and plain_data(result.status, result.url, result.text):
                problem = None  # a small list whose titles happen to hold the words of a challenge
            if problem is None:
                self.door.limiter.fast()
                return result.text
            last = problem
            if await attempts.back_off(problem):
                continue
            if problem.code not in CHALLENGE_CODES:
                raise problem
            challenged += 1
            if challenged >= API_ATTEMPTS:
                raise CnkiError("VERIFICATION_REPEATED", "人工处理后站点仍要求验证，已停止重试")
            await self.challenge(op, problem, result.url, result.text, context_url, epoch)
        assert last is not None
        raise last

    async def challenge(
        self, op: SiteOperation, problem: CnkiError, response_url: str, body: str, context_url: str, epoch: int
    ) -> None:
        """Show an API's challenge to the person (see ``get``); returns once it is cleared."""
        refuse_if_skipping(op, problem)
        if epoch != self.door.person.epoch:
            return  # solved by someone else meanwhile
        verify = challenge_url(body) or (response_url if "/verify/" in response_url.lower() else "")
        if gateway_problem(problem):  # the gateway's own login or challenge: shown on the work tab
            await self.door.person.step(op, await self.door.work_tab(), problem, epoch=epoch)
            return
        if verify and is_site_url(verify):
            await self.door.show_verify_page(op, await self.door.work_tab(), verify, problem, epoch)
            return
        await self.show_context(op, problem, context_url, epoch)

    async def show_context(self, op: SiteOperation, problem: CnkiError, url: str, epoch: int) -> None:
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
