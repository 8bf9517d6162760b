"""The left facet panel of a listing asked through the ``Door``: ``POST kns8s/group/result`` from the work tab.

The request starts from the listings' captured search template (its QueryJson rewritten for the listing,
narrowed by any facet picks, as the grid's), so it goes out charged and paced like a grid page; the grid's
challenges go to the person the same way and the request is asked again. An answer of an unknown shape is
PARSER_UNSUPPORTED with a snapshot.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.pages.facet_parse import FacetGroup, parse_facet_panel
from cnki_mcp.pages.page_state import classify_response
from cnki_mcp.site.door import CHALLENGE_CODES, Attempts, Door, note_snapshot
from cnki_mcp.site.facet_query import group_form, group_url, with_facets
from cnki_mcp.site.grid_query import GridQuery, encode_form, rewrite_query_json
from cnki_mcp.site.listings import Listings
from cnki_mcp.site.operation import SiteOperation

PANEL_ATTEMPTS = 4
_HEADERS = {"Content-Type": "application/x-www-form-urlencoded; charset=UTF-8", "X-Requested-With": "XMLHttpRequest"}


class FacetPanel:
    """The facet panel of listings, asked with the template of ``listings``."""

    def __init__(self, door: Door, listings: Listings) -> None:
        self.door = door
        self.listings = listings
        self.last_answer: tuple[str, str] = ("", "")

    async def groups(self, op: SiteOperation, query: GridQuery, idents: Sequence[str]) -> dict[str, FacetGroup]:
        """The panel's groups ``idents`` of the listing ``query`` (its facet picks included)."""
        attempts = Attempts(self.door)
        challenged = 0
        last: CnkiError | None = None
        for attempt in range(PANEL_ATTEMPTS):
            epoch = self.door.person.epoch
            try:
                tab = await self.door.work_tab()
                template = await self.listings.template_for(op, query)
                query_json = with_facets(
                    rewrite_query_json(
                        template.query_json, query.branches, year_from=query.year_from, year_to=query.year_to,
                        expert=query.expert,
                    ),
                    query.facets,
                )
                form = group_form(template.form, query_json, idents)
                async with self.door.request(op):
                    result = await self.door.browser.fetch_in_page(
                        tab, group_url(template.url), method="POST", body=encode_form(form), headers=_HEADERS
                    )
            except CnkiError as exc:
                if await attempts.recover(exc):
                    last = exc
                    continue
                if exc.code in CHALLENGE_CODES and attempt < PANEL_ATTEMPTS - 1:
                    challenged += 1
                    last = exc
                    await self.door.person.step(op, tab, exc, epoch=epoch)
                    continue
                raise
            self.last_answer = (result.text, result.url)
            problem = classify_response(result.status, result.url, result.text)
            if problem is not None:
                last = problem
                if problem.code in CHALLENGE_CODES:
                    challenged += 1
                    if attempt == PANEL_ATTEMPTS - 1:
                        break
                    await self.listings.show_challenge(op, problem, result.url, result.text, template, query_json, epoch)
                    continue
                if await attempts.back_off(problem):
                    continue
                raise problem
            try:
                groups = await asyncio.to_thread(parse_facet_panel, result.text)
            except CnkiError as exc:
                if exc.code == "PARSER_UNSUPPORTED":
                    note_snapshot(exc, await self.door.snapshot("facets", result.text, result.url))
                raise
            self.door.limiter.fast()
            return groups
        if challenged >= PANEL_ATTEMPTS:
            raise CnkiError("VERIFICATION_REPEATED", "人工处理后站点仍要求验证，已停止重试")
        assert last is not None
        raise last
