"""HTML full text (read_online_html).

Reading opens the record's detail page in a tab of its own, confirms it shows the requested
paper, clicks 「HTML阅读」/「在线阅读」 and follows the reader into whichever tab CNKI uses (the
same one or a popup) for up to 20 s. The 2026 reader (``reader/xml?invoice=…``) is read from the
JSON its page feeds on, asked for once from inside the reader tab with the page's own invoice;
its rendered page is read when that JSON cannot be had. The nzkhtml reader is read from its page,
or from the same-origin frame that holds its text. Challenges on the way — the nzkhtml reader's
own slider 「滑动验证，继续阅读全文」 included — go to the person (``SiteBackend.hand_over``);
sections the catalogue lists but the page has not loaded yet are waited for. A refusal
(``ErrorMsg.html``, 只收录题录 …) ends the read at once with the site's words; every failed read
leaves a redacted snapshot.

Texts stay in memory (16 documents at most): a full text (or one with nothing to judge it by) for
30 minutes, for every call; a trial or incomplete text for 10 minutes, and only for calls that
continue it (a later page or a section): a call from the start reads it again, since a login or
the missing chapters may have arrived since.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import msgspec

from cnki_mcp.core.clock import Deadline
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import LocalReply, Paper, ReadResult, Section
from cnki_mcp.core.redact import client_url, without_secrets
from cnki_mcp.ops.jobs import OperationContext
from cnki_mcp.pages.page_state import LIVE_PAGE_SCRIPT, parse_download_refusal, refusal_in_url
from cnki_mcp.pages.reader import (
    ReaderDocument,
    is_reader_app,
    page_notice,
    parse_reader,
    parse_reader_data,
    reader_data_url,
    with_notice,
)
from cnki_mcp.pages.urls import is_site_url, public_url
from cnki_mcp.research.backend import SiteBackend
from cnki_mcp.research.detail_tab import ENTRY_WAIT, open_detail, settle
from cnki_mcp.research.enrich import Enrichment
from cnki_mcp.site.browser import Tab

log = logging.getLogger(__name__)

READER_WAIT = 20.0
READER_POLL = 0.2
RENDER_GRACE = 3.0
STABLE_SECONDS = 1.5
CACHE_SECONDS = 30 * 60.0
INCOMPLETE_CACHE_SECONDS = 10 * 60.0
CACHE_ENTRIES = 16
HTML_ENTRY = r"HTML\s*阅读|在线阅读"
# The reader entry: an ``li.btn-html a`` with a ``style`` attribute is a greyed stand-in the page
# keeps, so it is skipped; any other link with the entry's text will do.
HTML_ENTRY_LINKS = "li.btn-html a:not([style]), a:not(li.btn-html a)"
# Failures that are not about a page (nothing worth a snapshot).
_NOT_PAGE_FAILURES = frozenset(
    {"CANCELLED", "BROWSER_UNAVAILABLE", "BUDGET_EXHAUSTED", "VERIFICATION_SKIPPED", "VERIFICATION_TIMEOUT", "LOGIN_TIMEOUT"}
)
# Failures of the in-page data request after which the rendered page is read instead.
_DATA_FALLBACK_CODES = frozenset({"RESOURCE_FAILED", "RESPONSE_TOO_LARGE", "OPERATION_FAILED"})
# The reader's slider sits below the text; visibility counts only inside the viewport, so bring it
# into view before looking (a person needs to see it there too).
_SHOW_SLIDER_JS = (
    "(() => { const box = document.querySelector('.read-btn-boxXml');"
    " if (box) box.scrollIntoView({block: 'center', behavior: 'instant'}); return !!box; })()"
)


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
    """True for a text judged whole, False when it is known to be incomplete (trial, missing
    chapters), None when nothing tells (no catalogue to compare with)."""
    coverage = document.coverage
    if document.trial or coverage.scope in ("trial", "partial") or coverage.missing_catalog_headings:
        return False
    return True if coverage.scope == "full" else None


def continues(section: str, offset: int) -> bool:
    """Whether a call goes on with a text already read (a later page, or a section of it)."""
    return offset > 0 or bool(section.strip())


def reader_result(
    paper: Paper, document: ReaderDocument, *, section: str, offset: int, max_characters: int
) -> ReadResult:
    """The read_online_html answer for one page of the text (or of one section and its sub-sections)."""
    text = document.text
    chosen: Section | None = None
    if section.strip():
        chosen = select_section(document.sections, section)
        text = text[chosen.offset : chosen.offset + chosen.length]
    chunk, next_offset = page_of(text, offset, max_characters)
    return ReadResult(
        record_ref=paper.record_ref,
        title=paper.title or document.title,
        url=public_url(paper.url) or public_url(paper.locator),
        section=chosen,
        text=chunk,
        sections=document.sections,
        offset=offset,
        next_offset=next_offset,
        total_characters=len(text),
        trial=document.trial,
        coverage=document.coverage,
        complete_article=complete_article(document),
    )


class ReaderCache:
    """Reader texts by record_ref, 16 at most (the oldest goes first).

    A full text, or one nothing tells to be incomplete, serves every call for 30 minutes. A trial or
    incomplete text serves only calls that continue it (``continues``) and for 10 minutes: paging
    through it costs no request, while a call from the start reads it again.
    """

    def __init__(
        self,
        ttl: float = CACHE_SECONDS,
        capacity: int = CACHE_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
        incomplete_ttl: float = INCOMPLETE_CACHE_SECONDS,
    ) -> None:
        self.ttl = ttl
        self.incomplete_ttl = incomplete_ttl
        self.capacity = capacity
        self._clock = clock
        self._entries: dict[str, tuple[float, Paper, ReaderDocument]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def _expired(self, at: float, document: ReaderDocument, now: float) -> bool:
        ttl = self.incomplete_ttl if complete_article(document) is False else self.ttl
        return now - at > ttl

    def get(self, record_ref: str, *, resume: bool) -> tuple[Paper, ReaderDocument] | None:
        """The cached text for a call; ``resume``: the call continues a text already read."""
        entry = self._entries.get(record_ref)
        if entry is None:
            return None
        at, paper, document = entry
        if self._expired(at, document, self._clock()):
            del self._entries[record_ref]
            return None
        if complete_article(document) is False and not resume:
            return None
        return paper, document

    def put(self, paper: Paper, document: ReaderDocument) -> None:
        """Keep the text just read, in place of any older copy."""
        now = self._clock()
        for ref in [ref for ref, (at, _, doc) in self._entries.items() if self._expired(at, doc, now)]:
            del self._entries[ref]
        self._entries.pop(paper.record_ref, None)
        while len(self._entries) >= self.capacity:
            oldest = min(self._entries, key=lambda ref: self._entries[ref][0])
            del self._entries[oldest]
        self._entries[paper.record_ref] = (now, paper, document)


# --------------------------------------------------------------------------------------------
# Reading

# The 2026 reader's data requests the page itself made (their parameters are the site's own).
_DATA_REQUESTS_JS = (
    "performance.getEntriesByType('resource').map((entry) => entry.name)"
    ".filter((name) => name.indexOf('/kreader-api/') >= 0)"
)
# The same-origin frames of a page, marked like a live page (``LIVE_PAGE_SCRIPT`` run in each).
_FRAMES_JS = """(() => Array.from(document.querySelectorAll('iframe')).map((frame) => {
  try {
    const win = frame.contentWindow, doc = frame.contentDocument;
    if (!doc || !doc.documentElement || doc.readyState === 'loading') return null;
    let html;
    try { html = win.eval(LIVE_PAGE); } catch (e) { html = doc.documentElement.outerHTML; }
    return {url: win.location.href, html: String(html || '')};
  } catch (e) { return null; }
}).filter(Boolean))()""".replace("LIVE_PAGE", json.dumps(LIVE_PAGE_SCRIPT))


async def _tabs(site: SiteBackend, opener: Tab) -> list[Tab]:
    tabs = [opener] if not opener.closed else []
    try:
        tabs += [tab for tab in await site.popups(opener) if not tab.closed]
    except CnkiError as exc:
        if exc.code == "BROWSER_UNAVAILABLE" and not site.browser_running:
            raise
    return tabs


def _refused(words: str, url: str) -> CnkiError:
    return CnkiError(
        "READER_REFUSED",
        f"知网不提供这篇文献的在线阅读，答复是：“{words}”。可以用 get_metadata 查看题录和摘要。",
        details={"url": client_url(url)},
    )


def _with_details(exc: CnkiError, **extra: str) -> CnkiError:
    details = exc.details if isinstance(exc.details, dict) else ({"detail": exc.details} if exc.details else {})
    exc.details = {**details, **{key: value for key, value in extra.items() if value}}
    return exc


class ReaderWatch:
    """Follows one click on 「HTML阅读」: polls the detail tab and its popups until a reader text is
    final, keeping what a failure needs (the last reader page seen, for its snapshot)."""

    def __init__(self, op: OperationContext, site: SiteBackend, opener: Tab, paper: Paper) -> None:
        self.op = op
        self.site = site
        self.opener = opener
        self.paper = paper
        self.deadline = Deadline(READER_WAIT)
        self.best: ReaderDocument | None = None
        self.problem: CnkiError | None = None
        self.last_page: tuple[Tab, str, str] | None = None  # (tab, url, html) of the last reader page
        self.data: dict[str, ReaderDocument | None] = {}  # 2026 reader URL -> its data's text (None: failed)
        self.first_seen: dict[str, float] = {}  # 2026 reader URL -> when its page was first ready
        self.fallback_reason = ""
        self.data_snapshot = ""
        self._growth = (-1, 0.0)  # (text length, since when) of the last provisional text

    async def run(self) -> ReaderDocument:
        """The wait is 20 s and starts again after each human step. Without any reader text at the
        end: the last parse problem, else CONTENT_NOT_READY."""
        while True:
            for tab in await _tabs(self.site, self.opener):
                document = await self._look(tab)
                if document is not None:
                    return document
            if self.deadline.passed:
                if self.best is not None:
                    return self.best
                raise self.problem or CnkiError("CONTENT_NOT_READY", "阅读页未呈现正文，不能判定无权限。")
            await asyncio.sleep(READER_POLL)

    async def _look(self, tab: Tab) -> ReaderDocument | None:
        with contextlib.suppress(CnkiError):  # a tab that cannot run it now is looked at next round
            await self.site.evaluate(tab, _SHOW_SLIDER_JS, 2.0)
        seen = await self.site.glance(tab)
        if seen is None or not seen.ready:
            return None
        words = refusal_in_url(seen.url)
        if words:
            self.last_page = (tab, seen.url, seen.html)
            raise _refused(words, seen.url)
        if await self.site.hand_over(self.op, tab, seen):
            self.deadline.restart()
            return None
        if tab is self.opener and "/kcms" in urlsplit(seen.url).path.lower():
            return None  # the detail page itself, still waiting for the reader to open
        self.last_page = (tab, seen.url, seen.html)
        document = await self._page_text(tab, seen.url, seen.html)
        if document is None:  # refusals and denials count only where no reader text shows
            words = await asyncio.to_thread(parse_download_refusal, seen.html)
            if words:
                raise _refused(words, seen.url)
            if seen.page.state == "denied":
                raise CnkiError("ACCESS_DENIED", f"知网拒绝阅读全文：{seen.page.reason}", details={"url": client_url(seen.url)})
        if is_reader_app(seen.url):
            return await self._app_text(tab, seen.url, seen.html, document)
        return self._verdict(document) if document is not None else None

    async def _page_text(self, tab: Tab, url: str, html: str) -> ReaderDocument | None:
        """The reader text of a page, or of its same-origin frame; None (problem kept) when neither has one."""
        try:
            return await asyncio.to_thread(parse_reader, html, url=url, expected_title=self.paper.title)
        except CnkiError as exc:
            if exc.code in ("IDENTITY_CONFLICT", "RESPONSE_TOO_LARGE"):
                raise
            self.problem = exc
        return await self._frame_text(tab) if "<iframe" in html else None

    async def _frame_text(self, tab: Tab) -> ReaderDocument | None:
        try:
            frames = await self.site.evaluate(tab, _FRAMES_JS, 5.0)
        except CnkiError:
            return None
        for frame in frames if isinstance(frames, list) else []:
            url, html = str(frame.get("url") or ""), str(frame.get("html") or "")
            try:
                document = await asyncio.to_thread(parse_reader, html, url=url, expected_title=self.paper.title)
            except CnkiError as exc:
                if exc.code == "IDENTITY_CONFLICT":
                    raise
                self.problem = exc
                continue
            self.last_page = (tab, url, html)
            coverage = msgspec.structs.replace(document.coverage, container=f"iframe {document.coverage.container}")
            return msgspec.structs.replace(document, coverage=coverage)
        return None

    async def _app_text(self, tab: Tab, url: str, html: str, page: ReaderDocument | None) -> ReaderDocument | None:
        """The 2026 reader: its data once the page has rendered (the page uses its invoice first; a
        page that shows no text for 3 s gets its data asked for anyway), else the rendered page."""
        since = self.first_seen.setdefault(url, time.monotonic())
        if url not in self.data:
            if page is None and time.monotonic() - since < RENDER_GRACE:
                return None
            self.data[url] = await self._data(tab, url)
        data = self.data[url]
        if data is not None:
            return with_notice(data, await asyncio.to_thread(page_notice, html))
        if page is None:
            return None
        coverage = msgspec.structs.replace(page.coverage, fallback_reason=self.fallback_reason)
        return self._verdict(msgspec.structs.replace(page, coverage=coverage))

    async def _data(self, tab: Tab, reader_url: str) -> ReaderDocument | None:
        """Ask for the 2026 reader's JSON from inside its tab (one charged request); None when it
        cannot be had or read (the reason, and a snapshot of the answer, kept for the result)."""
        requested: Any = None
        with contextlib.suppress(CnkiError):
            requested = await self.site.evaluate(tab, _DATA_REQUESTS_JS, 2.0)
        url = reader_data_url(reader_url, [str(item) for item in requested] if isinstance(requested, list) else [])
        if not is_site_url(url):
            self.fallback_reason = "阅读器数据地址不是知网地址，未请求"
            return None
        try:
            answer = await self.site.fetch(self.op, tab, url, headers={"Accept": "application/json, text/plain, */*"})
        except CnkiError as exc:
            if exc.code not in _DATA_FALLBACK_CODES:
                raise
            self.fallback_reason = f"阅读器数据请求失败：{exc.message}"
            return None
        try:
            if answer.status != 200:
                raise CnkiError("READER_UNSUPPORTED", f"阅读器数据接口答复 HTTP {answer.status}")
            return await asyncio.to_thread(parse_reader_data, answer.text, expected_title=self.paper.title)
        except CnkiError as exc:
            if exc.code == "IDENTITY_CONFLICT":
                raise
            self.data_snapshot = await self.site.snapshot("reader-data", answer.text, answer.url, extension="json")
            where = f"（快照 {self.data_snapshot}）" if self.data_snapshot else ""
            self.fallback_reason = f"{exc.message}{where}，改读阅读页"
            return None

    def _verdict(self, document: ReaderDocument) -> ReaderDocument | None:
        """A page's text is final unless it is provisional (it stops where its catalogue goes on and
        nothing else says why): then a trial is final once the text stops growing for 1.5 s, and
        anything else waits for the missing chapters until the deadline."""
        if self.best is None or len(document.text) >= len(self.best.text):
            self.best = document
        if not document.provisional:
            return document
        now = time.monotonic()
        if len(document.text) != self._growth[0]:
            self._growth = (len(document.text), now)
        if document.trial and now - self._growth[1] >= STABLE_SECONDS:
            return document
        return None

    async def failed(self, exc: CnkiError) -> CnkiError:
        """``exc`` with the redacted snapshot of the page it is about (the last reader page, else the
        detail page) and of the reader data that could not be read."""
        if exc.code in _NOT_PAGE_FAILURES:
            return exc
        page = self.last_page
        if page is None:
            with contextlib.suppress(CnkiError):
                seen = await self.site.glance(self.opener)
                page = (self.opener, seen.url, seen.html) if seen is not None else None
        name = await self.site.snapshot("reader", page[2], page[1], page[0]) if page is not None else ""
        return _with_details(exc, snapshot=name, data_snapshot=self.data_snapshot)


async def read_document(op: OperationContext, engine: Enrichment, site: SiteBackend, paper: Paper) -> tuple[Paper, ReaderDocument]:
    """Detail page → 「HTML阅读」 → reader text (one click); the tabs are closed afterwards."""
    op.stage("detail")
    tab, bound = await open_detail(op, engine, site, paper)
    watch = ReaderWatch(op, site, tab, bound)
    try:
        await settle(site, tab)
        op.stage("opening_reader")
        clicked = await site.click(op, tab, HTML_ENTRY_LINKS, ENTRY_WAIT, text=HTML_ENTRY)
        if not clicked:
            raise CnkiError(
                "HTML_ENTRY_NOT_FOUND",
                "详情页没有可见的“HTML阅读”或“在线阅读”入口；可以改用 download_paper 下载 PDF/CAJ。",
                details={"record_ref": paper.record_ref},
            )
        op.stage("reading")
        document = await watch.run()
    except CnkiError as exc:
        raise without_secrets(await watch.failed(exc)) from None
    finally:
        await site.close_tab(tab)
    return bound, document


def _missing_warning(document: ReaderDocument) -> CnkiError:
    missing = document.coverage.missing_catalog_headings
    return CnkiError(
        "CONTENT_PARTIAL",
        f"阅读页有 {len(missing)} 个目录章节没有加载出正文，返回的是已有部分。",
        details={"missing_catalog_headings": missing},
    )


class TextWindow(msgspec.Struct, frozen=True):
    """What part of a text a read_online_html call asks for: a section (empty: the whole text), the offset
    in it and at most this many characters."""

    section: str
    offset: int
    max_characters: int


class Reader:
    """read_online_html for one process: the text cache and the operation body."""

    def __init__(self, cache: ReaderCache | None = None) -> None:
        self.cache = cache or ReaderCache()

    def cached(self, record_ref: str, window: TextWindow) -> LocalReply | None:
        """The local answer when the cache holds the text for this call (no operation, no request)."""
        hit = self.cache.get(record_ref, resume=continues(window.section, window.offset))
        if hit is None:
            return None
        paper, document = hit
        result = reader_result(paper, document, **msgspec.structs.asdict(window))
        return LocalReply(source="cache", requests=0, result=result)

    async def read(
        self,
        op: OperationContext,
        engine: Enrichment,
        site: SiteBackend,
        paper: Paper,
        window: TextWindow,
    ) -> ReadResult:
        hit = self.cache.get(paper.record_ref, resume=continues(window.section, window.offset))
        if hit is not None:
            bound, document = hit
        else:
            bound, document = await read_document(op, engine, site, paper)
            if not document.trial and document.coverage.missing_catalog_headings:
                op.add_error(_missing_warning(document))
            self.cache.put(bound, document)
        return reader_result(bound, document, **msgspec.structs.asdict(window))
