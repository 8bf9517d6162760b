"""CNKI as the modules above the site layer use it: the ``SiteBackend`` Protocol.

``site.Site`` is the implementation; ``tests/fake_site.py`` gives the listing part (grid, detail,
journal, locate) to tests of the engine. Enrichment, relations, the detail tab, the reader, downloads
and the field check hold a ``SiteBackend`` and use nothing else of the site.

The site reports through what it returns, never into the operation: a listing call yields its waits for a
throttled site (``Waiting``) before its result, a login or a status check its stages (``Stage``), and a
grid page carries what the site said beside its rows (``GridPage.problems``); ``followed`` and
``grid_page`` show and record them on the operation.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Paper, Quality
from cnki_mcp.ops.jobs import OperationContext
from cnki_mcp.pages.facet_parse import FacetGroup
from cnki_mcp.pages.parse import GridPage
from cnki_mcp.site.browser import DownloadEvent, Tab
from cnki_mcp.site.cdp import FetchResult, NavigationResult
from cnki_mcp.site.door import Observation
from cnki_mcp.site.grid_query import GridQuery
from cnki_mcp.site.listings import Listings, Waiting
from cnki_mcp.site.page_actions import CALL_TIMEOUT
from cnki_mcp.site.session import Stage

T = TypeVar("T")


class SiteBackend(Protocol):
    """CNKI through the dedicated browser. Every method that takes ``op`` charges it and paces itself
    through the limiter; challenges and login prompts go to the person."""

    # -- listings, detail and journal pages (the engine) ------------------------------------

    def grid(self, op: OperationContext, query: GridQuery, page: int) -> AsyncIterator[Waiting | GridPage]:
        """One page (1-based) of a listing; keeps its own paging cursor and handles challenges. Its steps
        are the waits for a throttled site, then the page; what the site says beside the rows is in its
        ``problems`` (``grid_page`` shows the waits and records the problems)."""
        ...

    async def detail(self, op: OperationContext, paper: Paper) -> Paper:
        """Always fetches; the parsed detail bound to ``paper`` (same ref; the link used as locator)."""
        ...

    async def journal(self, op: OperationContext, paper: Paper) -> Quality:
        """Always fetches ``paper.source_url``; SOURCE_IDENTITY_UNCONFIRMED when the names disagree."""
        ...

    def locate(
        self, op: OperationContext, titles: list[str], related: Callable[[str, str], bool] | None = None
    ) -> AsyncIterator[Waiting | dict[str, list[Paper]]]:
        """At most 10 exact titles in one grid request (its waits for a throttled site first, see
        ``followed``); rows grouped under the given titles (by title key, or where ``related(title, row
        title)`` holds)."""
        ...

    async def facet_panel(self, op: OperationContext, query: GridQuery, idents: list[str]) -> dict[str, FacetGroup]:
        """The left facet panel's groups ``idents`` of a listing (kns8s/group/result), by groupid."""
        ...

    async def read(self, op: OperationContext, url: str, parse: Callable[[str, str], T], kind: str) -> T:
        """Any CNKI page read the way detail pages are, with the caller's ``parse(html, url)``."""
        ...

    async def navi_page(self, op: OperationContext, url: str, parse: Callable[[str, str], T], kind: str) -> T:
        """A navi.cnki.net page (the journal search home, a journal's page) shown in the navi tab, parsed."""
        ...

    async def navi_post(
        self, op: OperationContext, page_url: str, url: str, form: str, parse: Callable[[str, str], T], kind: str
    ) -> T:
        """A navi fragment (journal search, yearList, papers) POSTed from the navi tab showing ``page_url``."""
        ...

    @property
    def listings(self) -> Listings:
        """The listings' search template and latest answer (the field check)."""
        ...

    # -- JSON APIs (relations) ----------------------------------------------------------------

    @property
    def epoch(self) -> int:
        """Number of finished human steps; a challenge seen under an older epoch is just asked again."""
        ...

    async def api_get(self, op: OperationContext, url: str, context_url: str) -> str:
        """One GET of a CNKI JSON API from inside the work tab; the answer's body."""
        ...

    async def show_decoy(self, op: OperationContext, problem: CnkiError, context_url: str, epoch: int) -> None:
        """An API answer that cannot be the paper's data: slow down, show the person ``context_url``."""
        ...

    # -- tabs (the detail tab, the reader, downloads, the field check) -------------------------

    @property
    def browser_running(self) -> bool: ...

    async def browser_version(self) -> str: ...

    def site_view(self) -> dict[str, str]: ...

    @property
    def has_work_tab(self) -> bool: ...

    async def work_tab(self) -> Tab: ...

    def work_tab_now(self) -> Tab: ...

    async def new_tab(self) -> Tab: ...

    async def close_tab(self, tab: Tab, *, with_popups: bool = True) -> None: ...

    async def popups(self, opener: Tab) -> list[Tab]: ...

    async def navigate(
        self, op: OperationContext, tab: Tab, url: str, timeout: float, *, until: str = "ready"
    ) -> NavigationResult: ...

    async def click(
        self, op: OperationContext, tab: Tab, selector: str, timeout: float, *, text: str | None = None
    ) -> bool: ...

    async def fetch(self, op: OperationContext, tab: Tab, url: str, **options: Any) -> FetchResult: ...

    async def evaluate(self, tab: Tab, expression: str, timeout: float = CALL_TIMEOUT) -> Any: ...

    async def set_download_dir(self, path: Path) -> None: ...

    async def wait_download(self, guid: str | None = None, timeout: float = 1.0) -> DownloadEvent | None: ...

    async def cancel_download(self, guid: str) -> None: ...

    # -- live pages and the person -------------------------------------------------------------

    async def observe(self, tab: Tab, condition: str = "true", timeout: float = 5.0) -> Observation | None: ...

    async def glance(self, tab: Tab) -> Observation | None: ...

    async def wait_page(
        self, op: OperationContext, tab: Tab, accept: Callable[[Observation], T | None], timeout: float, *, condition: str = "true"
    ) -> T: ...

    async def hand_over(self, op: OperationContext, tab: Tab, seen: Observation, *, epoch: int | None = None) -> bool: ...

    async def human_step(
        self, op: OperationContext, tab: Tab, reason: CnkiError, *, epoch: int | None = None
    ) -> None: ...

    async def snapshot(
        self, kind: str, body: str, url: str, tab: Tab | None = None, *, extension: str = "html"
    ) -> str: ...

    async def tab_snapshot(self, kind: str, tab: Tab) -> str: ...


async def followed(op: OperationContext, steps: AsyncIterator[Waiting | Stage | T]) -> T:
    """The result of a site call that reports its steps, shown on ``op``: a wait for a throttled site as
    the ``waiting_for_site`` stage until the call's next step, a login's or a status check's ``Stage``
    from then on."""
    found: list[T] = []
    with contextlib.ExitStack() as shown:
        async for step in steps:
            shown.close()
            if isinstance(step, Waiting):
                shown.enter_context(op.stage_while("waiting_for_site", step.progress()))
            elif isinstance(step, Stage):
                op.stage(step.name, step.progress)
            else:
                found.append(step)
    (result,) = found
    return result


async def grid_page(site: SiteBackend, op: OperationContext, query: GridQuery, page: int) -> GridPage:
    """``site.grid`` waited out, with what the site said beside the rows (a sort it did not apply)
    recorded on ``op``."""
    grid = await followed(op, site.grid(op, query, page))
    for problem in grid.problems:
        op.add_error(problem)
    return grid
