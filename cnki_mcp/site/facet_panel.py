"""The left facet panel of a listing: ``POST kns8s/group/result`` from the work tab, an exchange (``registry.FACETS``).

The request starts from the listings' captured search template (its QueryJson rewritten for the listing,
narrowed by any facet picks, as the grid's), so it goes out charged, paced and routed like a grid page; the
grid's challenges go to the person the same way and the request is asked again. An answer of an unknown
shape is PARSER_UNSUPPORTED with a snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.ops.jobs import OperationContext
from cnki_mcp.pages.facet_parse import FacetGroup
from cnki_mcp.site.cdp import FetchResult, Tab
from cnki_mcp.site.door import Door
from cnki_mcp.site.exchange import CHALLENGE_CODES, Exchange, Request, Turn
from cnki_mcp.site.facet_query import group_form, group_url, with_facets
from cnki_mcp.site.grid_query import GridQuery, encode_form, rewrite_query_json
from cnki_mcp.site.listings import Listings, Template
from cnki_mcp.site.registry import FACETS

PANEL_ATTEMPTS = 4
_HEADERS = {"Content-Type": "application/x-www-form-urlencoded; charset=UTF-8", "X-Requested-With": "XMLHttpRequest"}


class PanelExchange(Exchange[dict[str, FacetGroup]]):
    """One facet panel request: the groups ``idents`` of the listing ``query``."""

    spec = FACETS
    rounds = challenges = PANEL_ATTEMPTS

    def __init__(self, panel: FacetPanel, query: GridQuery, idents: Sequence[str]) -> None:
        self.panel = panel
        self.query = query
        self.idents = idents
        self.tab: Tab | None = None
        self.template: Template | None = None
        self.query_json: dict[str, Any] = {}

    async def build(self, op: OperationContext) -> Request:
        door, query = self.panel.door, self.query
        self.tab = await door.work_tab()
        self.template = template = await self.panel.listings.template_for(op, query)
        self.query_json = with_facets(
            rewrite_query_json(
                template.query_json, query.branches, year_from=query.year_from, year_to=query.year_to,
                expert=query.expert,
            ),
            query.facets,
        )
        form = group_form(template.form, self.query_json, self.idents)
        return Request(self.tab, group_url(template.url), "POST", encode_form(form), _HEADERS)

    async def turned_away(self, op: OperationContext, exc: CnkiError, epoch: int, final: bool) -> Turn | None:
        if exc.code not in CHALLENGE_CODES or final:
            return None
        # Turned away while the template was captured: the person answers on the work tab.
        assert self.tab is not None
        await self.panel.door.person.step(op, self.tab, exc, epoch=epoch)
        return "challenge"

    def heard(self, answer: FetchResult) -> None:
        self.panel.last_answer = (answer.text, answer.url)

    async def challenge(
        self, op: OperationContext, problem: CnkiError, answer: FetchResult, epoch: int, final: bool
    ) -> None:
        if final:
            raise problem
        assert self.template is not None
        await self.panel.listings.show_challenge(
            op, problem, answer.url, answer.text, self.template, self.query_json, epoch
        )


class FacetPanel:
    """The facet panel of listings, asked with the template of ``listings``."""

    def __init__(self, door: Door, listings: Listings) -> None:
        self.door = door
        self.listings = listings
        self.last_answer: tuple[str, str] = ("", "")

    async def groups(self, op: OperationContext, query: GridQuery, idents: Sequence[str]) -> dict[str, FacetGroup]:
        """The panel's groups ``idents`` of the listing ``query`` (its facet picks included)."""
        return await self.door.exchange(op, PanelExchange(self, query, idents))
