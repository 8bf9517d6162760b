"""HTML full text (read_online_html), plus the detail-tab steps that downloads share.

Reading opens the record's detail page in a tab of its own, confirms it shows the requested
paper, clicks 「HTML阅读」/「在线阅读」 and follows the reader into whichever tab CNKI uses (the
same one or a popup) for up to 20 s. Challenges on the way — the reader's own slider
「滑动验证，继续阅读全文」 included — go to the person through ``Site.human_step``; sections the
catalogue lists but the page has not loaded yet are waited for.

Full texts stay in memory for 30 minutes (16 documents at most), so paging and switching sections
cost no request. Trial and incomplete texts are never kept: the next call reads again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import urlsplit

import msgspec

from cnki_mcp.browser import Browser, Tab
from cnki_mcp.errors import CnkiError
from cnki_mcp.jobs import OperationContext
from cnki_mcp.model import Paper, Section
from cnki_mcp.parse import ReaderDocument, classify_response, parse_detail, parse_reader, public_url
from cnki_mcp.redact import client_url, without_secrets
from cnki_mcp.research import Research, titles_in_store
from cnki_mcp.site import bind_detail, page_problem
from cnki_mcp.store import Store

log = logging.getLogger(__name__)

DETAIL_TAB_TIMEOUT = 15.0
SETTLE_IDLE = 1.5
SETTLE_LIMIT = 15.0
SETTLE_POLL = 0.25
ENTRY_WAIT = 2.0
UNREADABLE_DETAIL = frozenset({"PARSER_UNSUPPORTED", "CONTENT_NOT_READY", "IDENTITY_CONFLICT"})
READER_WAIT = 20.0
READER_POLL = 0.2
CACHE_SECONDS = 30 * 60.0
CACHE_ENTRIES = 16
HTML_ENTRY = r"HTML\s*阅读|在线阅读"
# The reader's slider sits below the text; visibility counts only inside the viewport, so bring it
# into view before looking (a person needs to see it there too).
_SHOW_SLIDER_JS = (
    "(() => { const box = document.querySelector('.read-btn-boxXml');"
    " if (box) box.scrollIntoView({block: 'center', behavior: 'instant'}); return !!box; })()"
)


class PageSite(Protocol):
    """What reading and downloading need from ``site.Site`` (its public page and human-step API)."""

    browser: Browser

    def request(self, op: OperationContext) -> Any: ...

    async def observe(self, tab: Tab, condition: str = "true", timeout: float = 5.0) -> Any: ...

    async def glance(self, tab: Tab) -> Any: ...

    async def wait_page(
        self, op: OperationContext, tab: Tab, accept: Callable[[Any], Any], timeout: float, *, condition: str = "true"
    ) -> Any: ...

    async def human_step(
        self, op: OperationContext, tab: Tab, reason: CnkiError, *, epoch: int | None = None
    ) -> None: ...

    async def locate(self, op: OperationContext, titles: list[str]) -> dict[str, list[Paper]]: ...

    async def snapshot(
        self, kind: str, body: str, url: str, tab: Tab | None = None, *, extension: str = "html"
    ) -> str: ...


# --------------------------------------------------------------------------------------------
# Paging, sections and the text cache


def section_key(title: str) -> str:
    """Section names match ignoring case and whitespace."""
    return re.sub(r"\s+", "", title).casefold()


def select_section(sections: list[Section], name: str) -> Section:
    """The one section called ``name``; SECTION_NOT_FOUND / SECTION_AMBIGUOUS otherwise."""
    wanted = section_key(name)
    found = [s for s in sections if section_key(s.title) == wanted]
    if not found:
        raise CnkiError(
            "SECTION_NOT_FOUND",
            f"正文中没有名为“{name}”的章节；可用的章节名见 sections。",
            details={"section": name, "available": [s.title for s in sections]},
        )
    if len(found) > 1:
        raise CnkiError(
            "SECTION_AMBIGUOUS",
            f"正文中有 {len(found)} 个名为“{name}”的章节，无法确定读哪一个。",
            details={"section": name, "offsets": [s.offset for s in found]},
        )
    return found[0]


def page_of(text: str, offset: int, max_characters: int) -> tuple[str, int | None]:
    """The page of ``text`` (code points) starting at ``offset`` and where the next page starts."""
    end = min(len(text), offset + max_characters)
    chunk = text[offset:end] if offset < len(text) else ""
    return chunk, (end if end < len(text) else None)


def complete_article(document: ReaderDocument) -> bool | None:
    """False when the text is known to be incomplete (trial, missing chapters), else unknown."""
    if document.trial or document.coverage.scope in ("trial", "partial") or document.coverage.missing_catalog_headings:
        return False
    return None


def cacheable(document: ReaderDocument) -> bool:
    return complete_article(document) is None


def reader_result(
    paper: Paper, document: ReaderDocument, *, section: str, offset: int, max_characters: int
) -> dict[str, Any]:
    """The read_online_html answer for one page of the text (or of one section and its sub-sections).

    ``sections`` always lists the whole catalogue with offsets into the whole text, so another
    section can be chosen; ``offset``/``next_offset`` page through the selected part.
    """
    text = document.text
    chosen: Section | None = None
    if section.strip():
        chosen = select_section(document.sections, section)
        text = text[chosen.offset : chosen.offset + chosen.length]
    chunk, next_offset = page_of(text, offset, max_characters)
    result: dict[str, Any] = {
        "record_ref": paper.record_ref,
        "title": paper.title or document.title,
    }
    url = public_url(paper.url) or public_url(paper.locator)
    if url:
        result["url"] = url
    if chosen is not None:
        result["section"] = msgspec.to_builtins(chosen)
    result.update(
        text=chunk,
        sections=msgspec.to_builtins(document.sections),
        offset=offset,
        next_offset=next_offset,
        total_characters=len(text),
        trial=document.trial,
        coverage=msgspec.to_builtins(document.coverage),
        complete_article=complete_article(document),
    )
    return result


class ReaderCache:
    """Full texts by record_ref for 30 minutes, at most 16; trial and incomplete texts never enter."""

    def __init__(
        self, ttl: float = CACHE_SECONDS, capacity: int = CACHE_ENTRIES, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl = ttl
        self.capacity = capacity
        self._clock = clock
        self._entries: dict[str, tuple[float, Paper, ReaderDocument]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, record_ref: str) -> tuple[Paper, ReaderDocument] | None:
        entry = self._entries.get(record_ref)
        if entry is None:
            return None
        if self._clock() - entry[0] > self.ttl:
            del self._entries[record_ref]
            return None
        return entry[1], entry[2]

    def put(self, paper: Paper, document: ReaderDocument) -> bool:
        """Keep a full text; returns False (and drops any older copy) for trial or incomplete text."""
        if not cacheable(document):
            self._entries.pop(paper.record_ref, None)
            return False
        now = self._clock()
        for ref in [ref for ref, (at, _, _) in self._entries.items() if now - at > self.ttl]:
            del self._entries[ref]
        self._entries.pop(paper.record_ref, None)
        while len(self._entries) >= self.capacity:
            oldest = min(self._entries, key=lambda ref: self._entries[ref][0])
            del self._entries[oldest]
        self._entries[paper.record_ref] = (now, paper, document)
        return True


# --------------------------------------------------------------------------------------------
# The detail page in a tab of its own (shared with download.py)


async def open_detail_tab(op: OperationContext, site: PageSite, paper: Paper) -> tuple[Tab, Paper]:
    """Open ``paper``'s detail page in a new background tab and confirm it shows that paper.

    Returns the tab (the caller closes it) and the record as the page shows it. LOCATOR_EXPIRED
    and other answers the page gives are raised after the tab is closed.
    """
    locator = paper.locator or paper.url
    if not locator:
        raise CnkiError(
            "SOURCE_LOCATOR_MISSING", f"本地记录没有《{paper.title}》的知网链接。", details={"record_ref": paper.record_ref}
        )
    browser = site.browser
    tab = await browser.new_tab()
    last: list[Any] = []
    try:
        async with site.request(op):
            nav = await browser.navigate(tab, locator, DETAIL_TAB_TIMEOUT, until="commit")
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
            if name := await site.snapshot("detail-tab", last[0].html, last[0].url, tab):
                exc.details = {**(exc.details if isinstance(exc.details, dict) else {}), "snapshot": name}
        await browser.close_tab(tab)
        raise
    return tab, bound


async def settle(site: PageSite, tab: Tab) -> None:
    """Let the page's own scripts bind their handlers: loaded and no AJAX for 1.5 s (at most 15 s)."""
    deadline = time.monotonic() + SETTLE_LIMIT
    idle_since: float | None = None
    while time.monotonic() < deadline:
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


async def relocated(op: OperationContext, store: Store, site: PageSite, paper: Paper) -> Paper:
    """The record with a fresh locator, found again by its exact title (one grid request)."""
    return await Research(store, site).relocate(op, paper)  # type: ignore[arg-type]


async def open_detail(op: OperationContext, store: Store, site: PageSite, paper: Paper) -> tuple[Tab, Paper]:
    """``open_detail_tab``, retried once with a relocated link when the stored one has expired."""
    try:
        return await open_detail_tab(op, site, paper)
    except CnkiError as exc:
        if exc.code != "LOCATOR_EXPIRED":
            raise
        log.info("locator of %s expired; locating the title again", paper.record_ref)
    return await open_detail_tab(op, site, await relocated(op, store, site, paper))


# --------------------------------------------------------------------------------------------
# Which record


def local_ref(store: Store, record_ref: str, title: str) -> str:
    """The record a call names when it is known without CNKI: the ref, or a unique stored title.

    RECORD_NOT_FOUND for an unknown ref; "" when the title has to be located on CNKI.
    """
    if record_ref:
        if record_ref not in store.data.papers:
            raise CnkiError(
                "RECORD_NOT_FOUND",
                f"本地没有记录 {record_ref}；请先用 search 或 get_metadata 取得。",
                details={"record_ref": record_ref},
            )
        return record_ref
    matches = titles_in_store(store, title)
    return matches[0] if len(matches) == 1 else ""


async def resolve_paper(op: OperationContext, store: Store, site: PageSite, record_ref: str, title: str) -> Paper:
    """The stored record for a ref, or for a full title (local unique match, else CNKI by exact title)."""
    if not record_ref:
        op.stage("locate")
        refs, problems = await Research(store, site).resolve_titles(op, [title])  # type: ignore[arg-type]
        if not refs:
            problem = problems[0] if problems else None
            if problem is None:
                raise CnkiError("DOCUMENT_NOT_FOUND", f"知网上没有找到题名为《{title}》的文献。", details={"title": title})
            raise CnkiError(problem.code, problem.message, details=problem.details)
        record_ref = refs[0]
    paper = store.data.papers.get(record_ref)
    if paper is None:
        raise CnkiError("RECORD_NOT_FOUND", details={"record_ref": record_ref})
    return paper


# --------------------------------------------------------------------------------------------
# Reading


async def _tabs(browser: Browser, opener: Tab) -> list[Tab]:
    tabs = [opener] if not opener.closed else []
    try:
        tabs += [tab for tab in await browser.popups(opener) if not tab.closed]
    except CnkiError as exc:
        if exc.code == "BROWSER_UNAVAILABLE" and not browser.running:
            raise
    return tabs


async def follow_reader(op: OperationContext, site: PageSite, opener: Tab, paper: Paper) -> ReaderDocument:
    """Poll the detail tab and its popups until one shows the reader with every catalogue section.

    The wait is 20 s and starts again after each human step. A trial reader is final at once (its
    missing chapters will not arrive). Without any reader: the last parse problem, else
    CONTENT_NOT_READY.
    """
    deadline = time.monotonic() + READER_WAIT
    reader: ReaderDocument | None = None
    last: CnkiError | None = None
    while True:
        for tab in await _tabs(site.browser, opener):
            with contextlib.suppress(CnkiError):  # a tab that cannot run it now is looked at next round
                await site.browser.evaluate(tab, _SHOW_SLIDER_JS, 2.0)
            seen = await site.glance(tab)
            if seen is None or not seen.ready:
                continue
            problem = page_problem(seen.page, seen.url)
            if problem is not None and problem.code != "ACCESS_DENIED":
                await site.human_step(op, tab, problem)
                deadline = time.monotonic() + READER_WAIT
                break
            if problem is not None:
                raise CnkiError("ACCESS_DENIED", f"知网拒绝阅读全文：{seen.page.reason}", details={"url": client_url(seen.url)})
            if tab is opener and "/kcms" in urlsplit(seen.url).path.lower():
                continue  # the detail page itself, still waiting for the reader to open
            try:
                document = parse_reader(seen.html, url=seen.url, expected_title=paper.title)
            except CnkiError as exc:
                if exc.code == "IDENTITY_CONFLICT":
                    raise
                last = exc
                continue
            if reader is None or len(document.text) >= len(reader.text):
                reader = document
            if document.trial or not document.coverage.missing_catalog_headings:
                return document
        if time.monotonic() >= deadline:
            if reader is not None:
                return reader
            raise last or CnkiError("CONTENT_NOT_READY", "阅读页未呈现正文，不能判定无权限。")
        await asyncio.sleep(READER_POLL)


async def read_document(op: OperationContext, store: Store, site: PageSite, paper: Paper) -> tuple[Paper, ReaderDocument]:
    """Detail page → 「HTML阅读」 → reader text (one click); the tabs are closed afterwards."""
    op.stage("detail")
    tab, bound = await open_detail(op, store, site, paper)
    try:
        await settle(site, tab)
        op.stage("opening_reader")
        async with site.request(op):
            clicked = await site.browser.click(tab, "a", ENTRY_WAIT, text=HTML_ENTRY)
        if not clicked:
            raise CnkiError(
                "HTML_ENTRY_NOT_FOUND",
                "详情页没有可见的“HTML阅读”或“在线阅读”入口；可以改用 download_paper 下载 PDF/CAJ。",
                details={"record_ref": paper.record_ref},
            )
        op.stage("reading")
        document = await follow_reader(op, site, tab, bound)
    except CnkiError as exc:
        raise without_secrets(exc) from None
    finally:
        await site.browser.close_tab(tab)
    return bound, document


def _missing_warning(document: ReaderDocument) -> CnkiError:
    missing = document.coverage.missing_catalog_headings
    return CnkiError(
        "CONTENT_PARTIAL",
        f"阅读页有 {len(missing)} 个目录章节没有加载出正文，返回的是已有部分。",
        details={"missing_catalog_headings": missing},
    )


class Reader:
    """read_online_html for one process: the text cache and the operation body."""

    def __init__(self, cache: ReaderCache | None = None) -> None:
        self.cache = cache or ReaderCache()

    def cached(self, record_ref: str, *, section: str, offset: int, max_characters: int) -> dict[str, Any] | None:
        """The local answer when the full text is still cached (no operation, no request)."""
        hit = self.cache.get(record_ref)
        if hit is None:
            return None
        paper, document = hit
        result = reader_result(paper, document, section=section, offset=offset, max_characters=max_characters)
        return {"status": "completed", "source": "cache", "requests": 0, "result": result}

    async def read(
        self,
        op: OperationContext,
        store: Store,
        site: PageSite,
        paper: Paper,
        *,
        section: str,
        offset: int,
        max_characters: int,
    ) -> dict[str, Any]:
        hit = self.cache.get(paper.record_ref)
        if hit is not None:
            bound, document = hit
        else:
            bound, document = await read_document(op, store, site, paper)
            if not document.trial and document.coverage.missing_catalog_headings:
                op.add_error(_missing_warning(document))
            self.cache.put(bound, document)
        return reader_result(bound, document, section=section, offset=offset, max_characters=max_characters)
