"""What reading and downloading share: which record a call names, and its detail page in a tab of its own.

A call names a record by ``record_ref`` or by its full title (a unique stored match, else CNKI by
exact title). The detail page is opened in a new background tab, confirmed to show that paper (a
stale link is located again by title once), and left to settle so its scripts bind their handlers
before anything is clicked. A detail page that cannot be read leaves a snapshot.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from cnki_mcp.core.clock import Deadline
from cnki_mcp.core.errors import CnkiError, error_from
from cnki_mcp.core.model import Paper
from cnki_mcp.ops.jobs import OperationContext
from cnki_mcp.pages.page_state import classify_response
from cnki_mcp.pages.parse import parse_detail
from cnki_mcp.research.backend import SiteBackend
from cnki_mcp.research.enrich import Enrichment
from cnki_mcp.site.browser import Tab
from cnki_mcp.site.exchange import note_snapshot
from cnki_mcp.site.site import bind_detail
from cnki_mcp.store.catalog import Catalog

log = logging.getLogger(__name__)

DETAIL_TAB_TIMEOUT = 15.0
SETTLE_IDLE = 1.5
SETTLE_LIMIT = 15.0
SETTLE_POLL = 0.25
ENTRY_WAIT = 2.0
UNREADABLE_DETAIL = frozenset({"PARSER_UNSUPPORTED", "CONTENT_NOT_READY", "IDENTITY_CONFLICT"})


# --------------------------------------------------------------------------------------------
# The detail page in a tab of its own


async def open_detail_tab(op: OperationContext, site: SiteBackend, paper: Paper) -> tuple[Tab, Paper]:
    """Open ``paper``'s detail page in a new background tab and confirm it shows that paper.

    Returns the tab (the caller closes it) and the record as the page shows it. LOCATOR_EXPIRED
    and other answers the page gives are raised after the tab is closed.
    """
    locator = paper.locator or paper.url
    if not locator:
        raise CnkiError(
            "SOURCE_LOCATOR_MISSING", f"本地记录没有《{paper.title}》的知网链接。", details={"record_ref": paper.record_ref}
        )
    tab = await site.new_tab()
    last: list[Any] = []
    try:
        nav = await site.navigate(op, tab, locator, DETAIL_TAB_TIMEOUT, until="commit")
        if nav.status >= 400:
            problem = classify_response(nav.status, nav.url, "")
            if problem is not None and problem.code not in ("VERIFICATION_REQUIRED", "LOGIN_REQUIRED"):
                raise problem

        def accept(seen: Any) -> Paper:
            last[:] = [seen]
            return bind_detail(paper, parse_detail(seen.html, seen.url), locator)

        bound = await site.wait_page(op, tab, accept, DETAIL_TAB_TIMEOUT)
    except BaseException as exc:
        if isinstance(exc, CnkiError) and exc.code in UNREADABLE_DETAIL and last:
            # The page as it was when reading gave up, for a report (the error names the file).
            note_snapshot(exc, await site.snapshot("detail-tab", last[0].html, last[0].url, tab))
        await site.close_tab(tab)
        raise
    return tab, bound


async def settle(site: SiteBackend, tab: Tab) -> None:
    """Let the page's own scripts bind their handlers: loaded and no AJAX for 1.5 s (at most 15 s)."""
    deadline = Deadline(SETTLE_LIMIT)
    idle_since: float | None = None
    while not deadline.passed:
        seen = await site.observe(tab)
        now = time.monotonic()
        if seen is not None and seen.complete and not seen.pending:
            idle_since = idle_since if idle_since is not None else now
            if now - idle_since >= SETTLE_IDLE:
                return
        else:
            idle_since = None
        await asyncio.sleep(SETTLE_POLL)
    log.debug("page did not settle within %.0f s; going on", SETTLE_LIMIT)


async def open_detail(op: OperationContext, engine: Enrichment, site: SiteBackend, paper: Paper) -> tuple[Tab, Paper]:
    """``open_detail_tab``, retried once with a relocated link when the stored one has expired."""
    try:
        return await open_detail_tab(op, site, paper)
    except CnkiError as exc:
        if exc.code != "LOCATOR_EXPIRED":
            raise
        log.info("locator of %s expired; locating the title again", paper.record_ref)
    return await open_detail_tab(op, site, await engine.relocate(op, paper))


# --------------------------------------------------------------------------------------------
# Which record


def local_ref(catalog: Catalog, record_ref: str, title: str) -> str:
    """The record a call names when it is known without CNKI: the ref, or a unique stored title.

    RECORD_NOT_FOUND for an unknown ref; "" when the title has to be located on CNKI.
    """
    if record_ref:
        if record_ref not in catalog.store.data.papers:
            raise CnkiError(
                "RECORD_NOT_FOUND",
                f"本地没有记录 {record_ref}；请先用 search 或 get_metadata 取得。",
                details={"record_ref": record_ref},
            )
        return record_ref
    matches = catalog.by_title(title)
    return matches[0] if len(matches) == 1 else ""


async def resolve_paper(op: OperationContext, engine: Enrichment, record_ref: str, title: str) -> Paper:
    """The stored record for a ref, or for a full title (local unique match, else CNKI by exact title)."""
    if not record_ref:
        op.stage("locate")
        refs, problems = await engine.resolve_titles(op, [title])
        if not refs:
            problem = problems[0] if problems else None
            if problem is None:
                raise CnkiError("DOCUMENT_NOT_FOUND", f"知网上没有找到题名为《{title}》的文献。", details={"title": title})
            raise error_from(problem)
        record_ref = refs[0]
    paper = engine.store.data.papers.get(record_ref)
    if paper is None:
        raise CnkiError("RECORD_NOT_FOUND", details={"record_ref": record_ref})
    return paper
