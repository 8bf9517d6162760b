"""CNKI access through the dedicated browser (spec/site.md §2, §4, §5, §8, §9).

Every read goes through ``Site``: the result grid as an in-page ``fetch()`` POST on the work tab
(with a form template captured from a real click on the advanced-search page), detail and journal
pages through Chrome's network stack with a rendered-tab fallback, and title location as one
exact-title grid request. Each request is charged to the operation first, then waits for a
limiter slot, then runs.

When a page shows a captcha or a login prompt the tab is handed to a person (``human_step``): the
limiter is held, the tab comes to the front, the operation reads ``awaiting_user``, and the step
ends after two consecutive clear observations (or ``operation_control resume``). Readers and
downloads on their own tabs reuse ``human_step`` and ``wait_page``.

A browser that died stays dead until ``recover`` (``operation_control recover``): reads then say
BROWSER_UNAVAILABLE instead of silently relaunching a window the person may have closed on purpose.
A broken connection with a live browser is recovered once per read by dropping the cached tabs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import msgspec

from cnki_mcp.browser import Browser, Tab
from cnki_mcp.page_actions import js_call
from cnki_mcp.errors import CnkiError
from cnki_mcp.identity import fingerprint
from cnki_mcp.jobs import OperationContext
from cnki_mcp.limiter import Limiter
from cnki_mcp.model import Paper, Quality
from cnki_mcp.parse import (
    LIVE_PAGE_SCRIPT,
    GridPage,
    PageState,
    challenge_url,
    check_identity,
    classify_response,
    inspect_live_page,
    is_site_url,
    parse_detail,
    parse_grid,
    parse_journal,
)
from cnki_mcp.query import (
    SORT_LABELS,
    TITLES_PER_LOCATE,
    Condition,
    compile_expression,
    encode_form,
    grid_form,
    rewrite_query_json,
    sort_code,
    template_query_json,
    title_expression,
    with_site_echo,
)
from cnki_mcp.query import GridQuery
from cnki_mcp.snapshots import save_snapshot
from cnki_mcp.text import title_key

log = logging.getLogger(__name__)

T = TypeVar("T")

ADVANCED_SEARCH_URL = "https://kns.cnki.net/kns8s/AdvSearch"

BOOTSTRAP_TIMEOUT = 20.0
CAPTURE_TIMEOUT = 30.0
GRID_ATTEMPTS = 4
RESOURCE_ATTEMPTS = 3
BACKOFF_SLEEPS = (2.0, 4.0)
RENDER_TIMEOUT = 12.0
PAGE_POLL = 0.12
HUMAN_POLL = 1.0
HUMAN_CLEAR_OBSERVATIONS = 2
HUMAN_TIMEOUT = 20 * 60.0
MINIMIZE_TIMEOUT = 2.0
CURSOR_CAP = 2000
# Waits before asking again after the bare empty shell (throttling lasts from seconds to minutes).
EMPTY_WAITS = (5.0, 15.0, 60.0)
PAUSE_POLL = 0.5
# Time kept in hand after a wait, so the request that follows still fits in the operation's budget.
WAIT_MARGIN_SECONDS = 5.0
# A listing CNKI always fills: rows there prove that an empty page 1 is a real zero.
CONTROL_EXPRESSION = {"field": "subject", "value": "研究"}

VERIFY_MESSAGE = "知网要求人工验证：请在弹出的浏览器窗口完成验证，完成后任务会自动继续"
LOGIN_MESSAGE = "知网要求登录：请在弹出的浏览器窗口登录，完成后任务会自动继续"

_CHALLENGE_CODES = frozenset({"VERIFICATION_REQUIRED", "LOGIN_REQUIRED"})
_BACKOFF_CODES = frozenset({"RATE_LIMITED", "SITE_UNAVAILABLE"})
# Parse failures that say "this is not the paper", not "this page did not render yet".
_IDENTITY_CODES = frozenset({"IDENTITY_CONFLICT", "SOURCE_IDENTITY_UNCONFIRMED"})


def _final_parse_error(exc: CnkiError) -> bool:
    """A parse failure that another look at the page cannot change (wrong paper, too large, a known
    unsupported kind of page), as opposed to a page that is not rendered yet."""
    if exc.code in _IDENTITY_CODES or exc.code == "RESPONSE_TOO_LARGE":
        return True
    return exc.code == "PARSER_UNSUPPORTED" and isinstance(exc.details, dict) and "page_kind" in exc.details
_SNAPSHOT_CODES = frozenset({"PARSER_UNSUPPORTED", "SOURCE_SCHEMA_UNSUPPORTED", "QUERY_REJECTED"})
_TEMPLATE_CODES = frozenset({"QUERY_TEMPLATE_UNAVAILABLE", "QUERY_TEMPLATE_UNSUPPORTED"})


class Observation(msgspec.Struct):
    """One look at a live tab: what the page shows (PageState) plus its load state and DOM."""

    url: str
    html: str
    ready: bool
    complete: bool
    pending: bool
    condition: bool
    page: PageState


class _Listing(msgspec.Struct):
    """What paging a listing needs from its earlier pages: the cursor and the query as the site echoed it."""

    cursor: str = ""
    products: str = ""
    view: str = ""


class _EmptyShell(Exception):
    """The grid answered with the bare ``p.no-content`` shell; body and URL are kept for a snapshot."""

    def __init__(self, error: CnkiError, body: str, url: str) -> None:
        super().__init__(error.message)
        self.error = error
        self.body = body
        self.url = url


class _Template(msgspec.Struct):
    url: str  # the grid endpoint, without its query string
    form: dict[str, str]
    query_json: dict[str, Any]
    generation: int


# --------------------------------------------------------------------------------------------
# JavaScript run in the work page

_READY_JS = (
    "document.readyState === 'complete' && !!window.cnkiSearch"
    " && typeof window.cnkiSearch.getSearchJsonInfo === 'function'"
    " && !!document.querySelector('#gradetxt input[data-tipid]')"
)

# Records the first POST to /brief/grid the page's own script sends (XHR or fetch).
_CAPTURE_JS = r"""
(() => {
  window.__cnkiGridCaptured = null;
  sessionStorage.removeItem('__cnkiGridCaptured');
  if (window.__cnkiGridHook) return true;
  window.__cnkiGridHook = true;
  const asText = (body) => {
    if (body == null) return '';
    if (typeof body === 'string') return body;
    try { return new URLSearchParams(body).toString(); } catch (e) { return ''; }
  };
  const keep = (url, method, body) => {
    try {
      const absolute = new URL(String(url), location.href).href;
      if (String(method || 'GET').toUpperCase() !== 'POST' || absolute.indexOf('/brief/grid') < 0) return;
      if (window.__cnkiGridCaptured) return;
      window.__cnkiGridCaptured = {url: absolute, body: asText(body)};
      // Kept for the tab's session too: a challenge answer may navigate the page away at once.
      sessionStorage.setItem('__cnkiGridCaptured', JSON.stringify(window.__cnkiGridCaptured));
    } catch (e) {}
  };
  const open = XMLHttpRequest.prototype.open, send = XMLHttpRequest.prototype.send;
  XMLHttpRequest.prototype.open = function (method, url) {
    this.__cnkiRequest = [method, url];
    return open.apply(this, arguments);
  };
  XMLHttpRequest.prototype.send = function (body) {
    if (this.__cnkiRequest) keep(this.__cnkiRequest[1], this.__cnkiRequest[0], body);
    return send.apply(this, arguments);
  };
  const pageFetch = window.fetch;
  window.fetch = function (input, init) {
    const url = typeof input === 'string' ? input : (input && input.url) || '';
    const method = (init && init.method) || (input && input.method) || 'GET';
    keep(url, method, init && init.body);
    return pageFetch.apply(this, arguments);
  };
  return true;
})()
"""

# The captured grid request, or where the search was turned away to (a verification or login page).
_CAPTURED_JS = r"""
(() => {
  const kept = window.__cnkiGridCaptured || JSON.parse(sessionStorage.getItem('__cnkiGridCaptured') || 'null');
  if (kept) return kept;
  const path = location.pathname.toLowerCase();
  if (path.indexOf('/verify/') >= 0 || location.hostname.indexOf('login.') === 0
      || document.querySelector('[name=vericodeForm]')) return {challenge: location.href};
  return null;
})()
"""

_FILL_JS = r"""
(anchor) => {
  const inputs = Array.from(document.querySelectorAll('#gradetxt input[data-tipid]'))
    .filter((input) => input.getBoundingClientRect().width > 0);
  if (!inputs.length) return false;
  for (const input of inputs) input.value = '';
  inputs[0].value = anchor;
  inputs[0].dispatchEvent(new Event('change', {bubbles: true}));
  const bilingual = document.querySelector('input[data-id=EN]');
  if (bilingual && bilingual.checked) bilingual.click();
  return true;
}
"""

# Shows the grid's in-page vericode form inside the search page, where a person can answer it (§2.7).
_SHOW_VERICODE_JS = r"""
(html, queryJson) => {
  const form = new DOMParser().parseFromString(html, 'text/html').querySelector('[name=vericodeForm]');
  const box = document.querySelector('#briefBox');
  if (!form || !box) return false;
  const node = document.importNode(form, true);
  box.replaceChildren(node);
  if (window.cnkiSearch && typeof window.cnkiSearch.setQueryJson === 'function') window.cnkiSearch.setQueryJson(queryJson);
  node.scrollIntoView({block: 'center', behavior: 'instant'});
  return true;
}
"""


def _observe_js(condition: str) -> str:
    return (
        "(() => ({url: location.href, ready: document.readyState !== 'loading',"
        " complete: document.readyState === 'complete',"
        " pending: !!(window.jQuery && window.jQuery.active),"
        f" condition: (() => {{ try {{ return !!({condition}); }} catch (e) {{ return false; }} }})(),"
        f" html: {LIVE_PAGE_SCRIPT.strip()}}}))()"
    )


# --------------------------------------------------------------------------------------------
# Pure helpers


def query_key(query: GridQuery) -> str:
    """The cursor key of a listing: its branches, years and sort (never the page)."""
    branches = [[msgspec.to_builtins(c) for c in branch] for branch in query.branches]
    return fingerprint([branches, query.year_from, query.year_to, sort_code(query.sort)])


def anchor_of(branches: list[list[Condition]]) -> str:
    """The term typed into the search form to capture a template: the first positive literal."""
    for branch in branches:
        for condition in branch:
            if not condition.negated and condition.value.strip():
                return condition.value.strip()
    return "知网"


def parse_form(body: str) -> dict[str, str]:
    """A captured url-encoded request body as a dict (blank values kept, last value wins)."""
    return dict(parse_qsl(body, keep_blank_values=True))


def endpoint_url(url: str) -> str:
    """A request URL without its query string or fragment."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def filter_years(page: GridPage, year_from: int, year_to: int) -> GridPage:
    """Drop rows without a year or outside the range, as well as asking the site for it (§3)."""
    if year_from <= 0 and year_to <= 0:
        return page
    rows = [
        row
        for row in page.rows
        if row.year > 0 and (year_from <= 0 or row.year >= year_from) and (year_to <= 0 or row.year <= year_to)
    ]
    return msgspec.structs.replace(page, rows=rows)


def bind_detail(requested: Paper, observed: Paper, locator: str) -> Paper:
    """The parsed detail page as the requested record (§6.6): same ref, gaps filled from the request.

    Raises IDENTITY_CONFLICT when the page shows another paper.
    """
    check_identity(requested, observed)
    return msgspec.structs.replace(
        observed,
        record_ref=requested.record_ref or observed.record_ref,
        url=observed.url or requested.url,
        locator=locator,
        dbname=observed.dbname or requested.dbname,
        filename=observed.filename or requested.filename,
        dbcode=observed.dbcode or requested.dbcode,
        document_type=observed.document_type or requested.document_type,
    )


def with_return_url(url: str, fallback: str) -> str:
    """A verify page URL that sends the browser back after success (``returnUrl`` added when missing)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    if any(key.lower() == "returnurl" for key, _ in query):
        return url
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode([*query, ("returnUrl", fallback)]), ""))


def _can_wait(op: OperationContext, seconds: float) -> bool:
    """Whether the operation's time and requests leave room for a wait and the request after it."""
    time_left = op.remaining_seconds()
    requests_left = op.remaining_requests()
    if time_left is not None and time_left < seconds + WAIT_MARGIN_SECONDS:
        return False
    return requests_left is None or requests_left >= 2


def _sort_not_applied(wanted: str, shown: str) -> CnkiError:
    return CnkiError(
        "SORT_NOT_APPLIED",
        f"要求按{SORT_LABELS.get(wanted, wanted)}排序，但知网第 1 页标记的是按{SORT_LABELS.get(shown, shown)}排序；"
        "结果按知网给出的顺序返回，没有在本地重新排序。",
        details={"requested": wanted, "shown": shown},
    )


def _refuse_if_skipping(op: OperationContext, reason: CnkiError) -> None:
    if op.on_verification == "skip":
        raise CnkiError(
            "VERIFICATION_SKIPPED",
            "按 on_verification=skip 跳过了需要人工处理的资源（这不代表没有访问权限）。",
            details={"reason": reason.code},
        )


def _human_message(reason: CnkiError) -> str:
    return LOGIN_MESSAGE if reason.code == "LOGIN_REQUIRED" else VERIFY_MESSAGE


def _span(seconds: float) -> str:
    return f"{seconds / 60:g} 分钟" if seconds >= 60 and seconds % 60 == 0 else f"{seconds:g} 秒"


def page_problem(page: PageState, url: str) -> CnkiError | None:
    """The problem a live tab shows, as the code a response would have given (no query in details)."""
    url = endpoint_url(url)
    if page.state == "challenge":
        return CnkiError("VERIFICATION_REQUIRED", "知网要求人工验证", details={"url": url, "reason": page.reason})
    if page.state == "login":
        return CnkiError("LOGIN_REQUIRED", "当前资源要求登录", details={"url": url})
    if page.state == "denied":
        return CnkiError("ACCESS_DENIED", f"站点拒绝当前资源访问：{page.reason}", details={"url": url})
    return None


# --------------------------------------------------------------------------------------------


class Site:
    """CNKI access for every operation of this process (one per App)."""

    def __init__(self, browser: Browser, limiter: Limiter, diagnostics_dir: Path) -> None:
        self.browser = browser
        self.limiter = limiter
        self.diagnostics_dir = diagnostics_dir
        self.human_timeout = HUMAN_TIMEOUT
        self.human_poll = HUMAN_POLL
        self._generation = 0
        self._work: Tab | None = None
        self._render: Tab | None = None
        self._template: _Template | None = None
        self._listings: dict[str, _Listing] = {}
        self.empty_waits = EMPTY_WAITS
        self._tab_lock = asyncio.Lock()
        self._template_lock = asyncio.Lock()
        self._render_lock = asyncio.Lock()
        self._human_lock = asyncio.Lock()
        self._epoch = 0
        self._human_pages: dict[str, Tab] = {}

    # -- state -----------------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        """Number of finished human steps; a caller that saw a challenge under an older epoch just retries."""
        return self._epoch

    def drop_pages(self) -> None:
        """Forget the work and render tabs and the template (recover, new browser generation)."""
        self._work = None
        self._render = None
        self._template = None

    async def _reset_tabs(self) -> None:
        """Drop the cached tabs and close them if the browser still has them."""
        tabs = [tab for tab in (self._work, self._render) if tab is not None]
        self.drop_pages()
        for tab in tabs:
            with contextlib.suppress(CnkiError):
                await self.browser.close_tab(tab)

    async def recover(self) -> None:
        """``operation_control recover``: drop cached pages; reset the browser if it does not answer in 2 s."""
        await self._reset_tabs()
        if not await self.browser.probe(2.0):
            await self.browser.reset()

    async def _sync(self) -> None:
        """Make sure a browser runs and per-browser state belongs to it."""
        await self.browser.ensure()
        generation = self.browser.connection_generation
        if generation != self._generation:
            self._generation = generation
            self.drop_pages()
            self._listings.clear()

    @staticmethod
    def _usable(tab: Tab | None, generation: int) -> bool:
        return tab is not None and not tab.closed and not tab.crashed and tab.generation == generation

    async def _work_tab(self) -> Tab:
        await self._sync()
        async with self._tab_lock:
            if not self._usable(self._work, self._generation):
                self._template = None
                self._work = await self.browser.new_tab()
            assert self._work is not None
            return self._work

    async def _render_tab(self) -> Tab:
        await self._sync()
        async with self._tab_lock:
            if not self._usable(self._render, self._generation):
                self._render = await self.browser.new_tab()
            assert self._render is not None
            return self._render

    async def _site_tab(self, op: OperationContext) -> Tab:
        """The work tab on a CNKI page, so resource loads carry the site's first-party cookies."""
        tab = await self._work_tab()
        if is_site_url(tab.url):
            return tab
        async with self._template_lock:  # never navigate while a template capture drives the page
            tab = await self._work_tab()
            if not is_site_url(tab.url):
                async with self.request(op):
                    await self.browser.navigate(tab, ADVANCED_SEARCH_URL, BOOTSTRAP_TIMEOUT)
            return tab

    def _transport_broken(self, exc: CnkiError) -> bool:
        """A failed CDP call while the browser process itself still runs: new tabs may fix it."""
        return exc.code == "BROWSER_UNAVAILABLE" and self.browser.running

    # -- requests --------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def request(self, op: OperationContext) -> AsyncIterator[None]:
        """``async with site.request(op): <one CNKI request>`` — charge, then a limiter slot (§12.4)."""
        op.charge()

        def cancelled() -> None:
            if op.cancelled:
                raise CnkiError("CANCELLED")

        async with self.limiter.slot(cancelled):
            yield

    async def _backoff(self, problem: CnkiError, done: int) -> None:
        """Slow the limiter; sleep 2 s, then 4 s; a third rate-limit or 5xx answer is final."""
        self.limiter.slow()
        if done >= len(BACKOFF_SLEEPS):
            raise problem
        await asyncio.sleep(BACKOFF_SLEEPS[done])

    async def snapshot(
        self, kind: str, body: str, url: str, tab: Tab | None = None, *, extension: str = "html"
    ) -> str:
        """Save a page that could not be handled (redacted; a screenshot when ``tab`` is given).

        Returns the snapshot's file name for the error's details, or "" when it could not be saved.
        """
        screenshot = None
        if tab is not None and not tab.closed:
            try:
                screenshot = await self.browser.screenshot(tab, 5.0)
            except CnkiError as exc:
                log.debug("no screenshot for the snapshot: %s", exc)
        try:
            path = await asyncio.to_thread(
                save_snapshot, self.diagnostics_dir, kind, body, url, screenshot, extension=extension
            )
        except OSError as exc:
            log.warning("could not save a page snapshot: %s", exc)
            return ""
        return path.name

    async def tab_snapshot(self, kind: str, tab: Tab) -> str:
        """``snapshot`` of what a live tab shows now (its DOM and a screenshot); "" when it cannot answer."""
        try:
            html = await self.browser.page_html(tab, 5.0)
        except CnkiError as exc:
            log.debug("no page for the snapshot: %s", exc)
            return ""
        return await self.snapshot(kind, html, tab.url, tab)

    # -- live pages ------------------------------------------------------------------------

    async def observe(self, tab: Tab, condition: str = "true", timeout: float = 5.0) -> Observation | None:
        """Inspect a live tab (§8.2). None while it cannot answer (navigating); a dead browser raises."""
        try:
            data = await self.browser.evaluate(tab, _observe_js(condition), timeout)
        except CnkiError as exc:
            if not self.browser.running or tab.closed or tab.crashed:
                raise
            log.debug("tab %s did not answer an inspection: %s", tab.target_id[:8], exc.message)
            return None
        if not isinstance(data, dict):
            return None
        url = str(data.get("url") or "")
        html = str(data.get("html") or "")
        return Observation(
            url=url,
            html=html,
            ready=bool(data.get("ready")),
            complete=bool(data.get("complete")),
            pending=bool(data.get("pending")),
            condition=bool(data.get("condition")),
            page=await asyncio.to_thread(inspect_live_page, html, url),
        )

    async def glance(self, tab: Tab) -> Observation | None:
        """``observe`` for polling several tabs: one that is closed or cannot answer now is None; only a
        dead browser raises."""
        try:
            return await self.observe(tab)
        except CnkiError as exc:
            if exc.code == "BROWSER_UNAVAILABLE" and not self.browser.running:
                raise
            return None

    async def wait_page(
        self,
        op: OperationContext,
        tab: Tab,
        accept: Callable[[Observation], T | None],
        timeout: float,
        *,
        condition: str = "true",
    ) -> T:
        """Poll a tab until ``accept`` returns a value (§8.2 waitPage).

        Challenges and login prompts go to a person, after which the deadline restarts; a denial is
        ACCESS_DENIED. ``accept`` may raise to stop; errors it raises with an identity code stop at
        once, others are remembered and raised at the timeout (else CONTENT_NOT_READY).
        """
        deadline = time.monotonic() + timeout
        last: CnkiError | None = None
        while True:
            epoch = self._epoch
            seen = await self.observe(tab, condition)
            if seen is not None and seen.ready:
                problem = page_problem(seen.page, seen.url)
                if problem is not None and problem.code in _CHALLENGE_CODES:
                    await self.human_step(op, tab, problem, epoch=epoch)
                    deadline = time.monotonic() + timeout
                    continue
                if problem is not None:
                    raise problem
                try:
                    value = accept(seen)
                except CnkiError as exc:
                    if _final_parse_error(exc):
                        raise
                    last = exc
                else:
                    if value is not None:
                        return value
            if time.monotonic() >= deadline:
                raise last or CnkiError(
                    "CONTENT_NOT_READY",
                    "页面未呈现预期内容，不能判定正文不存在或无权限",
                    details={"url": endpoint_url(tab.url)},
                )
            await asyncio.sleep(PAGE_POLL)

    # -- the human step (§8.3) ---------------------------------------------------------------

    def human_page(self, operation_id: str | None = None) -> Tab | None:
        """The tab currently handed to a person: this operation's, or any when no id is given."""
        if operation_id:
            return self._human_pages.get(operation_id)
        return next(iter(self._human_pages.values()), None)

    async def show(self, operation_id: str | None = None) -> dict[str, Any]:
        """``operation_control show``: bring the page waiting for a person to the front again."""
        tab = self.human_page(operation_id)
        if tab is None:
            raise CnkiError("VERIFICATION_NOT_FOUND")
        await self.browser.bring_to_front(tab)
        return {"status": "shown"}

    async def present(self, tab: Tab) -> None:
        """Bring a tab to a person; headless or unconfirmed windows are logged, not fatal."""
        try:
            shown = await self.browser.bring_to_front(tab)
        except CnkiError as exc:
            if exc.code != "WINDOW_STATE_UNCONFIRMED":
                raise
            log.warning("the window for a person did not confirm its state: %s", exc.message)
            return
        if not shown:
            log.info("headless browser: the page for a person cannot be shown on screen")

    async def hide(self, tab: Tab) -> None:
        try:
            await asyncio.wait_for(self.browser.minimize(tab), MINIMIZE_TIMEOUT)
        except (CnkiError, TimeoutError) as exc:
            log.debug("minimising after a human step failed: %s", exc)

    @contextlib.contextmanager
    def handed_to_person(self, op: OperationContext, tab: Tab) -> Iterator[None]:
        """Record ``tab`` as the page ``show`` brings back while a person works on it."""
        self._human_pages[op.operation_id] = tab
        try:
            yield
        finally:
            if self._human_pages.get(op.operation_id) is tab:
                del self._human_pages[op.operation_id]

    async def human_step(self, op: OperationContext, tab: Tab, reason: CnkiError, *, epoch: int | None = None) -> None:
        """Hand ``tab`` to a person until the challenge or login prompt on it is gone.

        ``reason`` is the VERIFICATION_REQUIRED or LOGIN_REQUIRED problem that was met. Pass the
        ``epoch`` read before the failed request: when another step finished meanwhile, this returns
        at once so the caller simply retries. Raises VERIFICATION_SKIPPED (``on_verification=skip``),
        VERIFICATION_TIMEOUT (20 minutes), CANCELLED, or BROWSER_UNAVAILABLE. Usable from any tab
        (reader, download): the caller retries its own request afterwards.
        """
        _refuse_if_skipping(op, reason)
        async with self._human_lock:
            if epoch is not None and epoch != self._epoch:
                return
            self.limiter.hold()
            try:
                with self.handed_to_person(op, tab):
                    try:
                        await self.present(tab)
                        resume = op.await_user(_human_message(reason))
                        await self._wait_for_person(op, tab, resume)
                    finally:
                        op.user_done()
                        self._epoch += 1
                        self.limiter.slow()
                        await self.hide(tab)
            finally:
                self.limiter.release()

    async def _wait_for_person(self, op: OperationContext, tab: Tab, resume: asyncio.Event) -> None:
        deadline = time.monotonic() + self.human_timeout
        clear = 0
        while True:
            if op.cancelled:
                raise CnkiError("CANCELLED")
            if resume.is_set():
                return
            seen = await self.observe(tab)
            if seen is not None and seen.ready and seen.page.state in ("ready", "denied"):
                clear += 1
                if clear >= HUMAN_CLEAR_OBSERVATIONS:
                    return
            else:
                clear = 0
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CnkiError(
                    "VERIFICATION_TIMEOUT",
                    f"等待人工验证超过 {_span(self.human_timeout)}，已停止等待；处理好浏览器窗口里的验证后重新调用即可。",
                    details={"url": endpoint_url(tab.url), "snapshot": await self.tab_snapshot("challenge", tab)},
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(resume.wait(), min(self.human_poll, remaining))

    # -- the search template (§2.1) ----------------------------------------------------------

    async def _ensure_template(self, op: OperationContext, anchor: str) -> _Template:
        template = self._template
        if template is not None and template.generation == self.browser.connection_generation:
            return template
        async with self._template_lock:
            await self._sync()
            if self._template is not None and self._template.generation == self._generation:
                return self._template
            try:
                self._template = await self._capture(op, anchor)
            except CnkiError as exc:
                if exc.code in _TEMPLATE_CODES and self._work is not None:
                    exc.details = {**(exc.details or {}), "snapshot": await self.tab_snapshot("template", self._work)}
                raise
            return self._template

    async def _capture(self, op: OperationContext, anchor: str) -> _Template:
        tab = await self._work_tab()
        async with self.request(op):
            await self.browser.navigate(tab, ADVANCED_SEARCH_URL, BOOTSTRAP_TIMEOUT)
        await self.wait_page(
            op, tab, lambda seen: True if seen.condition else None, BOOTSTRAP_TIMEOUT, condition=_READY_JS
        )
        await self.browser.evaluate(tab, _CAPTURE_JS)
        where = {"url": endpoint_url(tab.url)}
        if not await self.browser.evaluate(tab, js_call(_FILL_JS, anchor)):
            raise CnkiError("QUERY_TEMPLATE_UNAVAILABLE", "高级检索页没有可见的检索输入框。", details=where)
        async with self.request(op):
            try:
                clicked = await self.browser.click(tab, "input.btn-search,button.btn-search", 5.0)
            except CnkiError as exc:
                if exc.code != "PAGE_NAVIGATED":
                    raise
                clicked = True  # the page navigated under the click: the search did start
        if not clicked:
            raise CnkiError("QUERY_TEMPLATE_UNAVAILABLE", "高级检索页没有可点击的检索按钮。", details=where)
        try:
            captured = await self.browser.wait_for(tab, _CAPTURED_JS, CAPTURE_TIMEOUT)
        except CnkiError as exc:
            if exc.code != "CONTENT_NOT_READY":
                raise
            raise CnkiError(
                "QUERY_TEMPLATE_UNAVAILABLE", f"{CAPTURE_TIMEOUT:.0f} 秒内没有捕获到检索请求。", details=where
            ) from None
        # The page's request left tens of milliseconds into the click's slot (the click waits for a
        # steady button first): an empty slot now spaces the next request from when it really went out.
        async with self.limiter.slot():
            pass
        if "challenge" in captured:
            page = endpoint_url(str(captured["challenge"]))
            code = "LOGIN_REQUIRED" if "//login." in page else "VERIFICATION_REQUIRED"
            raise CnkiError(code, details={"url": page, "stage": "template"})
        url = endpoint_url(str(captured.get("url") or ""))
        if not is_site_url(url):
            raise CnkiError("QUERY_TEMPLATE_UNSUPPORTED", "检索请求没有发往知网。", details={"url": url})
        form = parse_form(str(captured.get("body") or ""))
        return _Template(url=url, form=form, query_json=template_query_json(form), generation=self._generation)

    # -- the result grid ------------------------------------------------------------------------

    async def grid(self, op: OperationContext, query: GridQuery, page: int) -> GridPage:
        """One page of a listing. Pages after the first need page 1's cursor: fetched first when missing."""
        if page < 1:
            raise ValueError("pages start at 1")
        key = query_key(query)
        if page > 1 and key not in self._listings:
            await self._grid_page(op, query, 1, key)
            if key not in self._listings:
                raise CnkiError(
                    "PAGINATION_MISMATCH", "知网第 1 页没有给出翻页标记，无法读取后面的页。", details={"page": page}
                )
        return await self._grid_page(op, query, page, key)

    def _remember(self, key: str, page: GridPage) -> None:
        known = self._listings.get(key)
        if known is None and len(self._listings) >= CURSOR_CAP:
            self._listings.clear()
        self._listings[key] = _Listing(
            cursor=page.cursor or (known.cursor if known else ""),
            products=page.products or (known.products if known else ""),
            view=page.view or (known.view if known else ""),
        )

    async def _grid_page(self, op: OperationContext, query: GridQuery, page: int, key: str) -> GridPage:
        """One page, with CNKI's bare empty shell (抱歉，暂无数据，请稍后重试) told apart from a real zero.

        The site answers both a real zero and throttling with that shell. On page 2 or later it is never
        the end of a listing whose earlier pages had rows: ask again after growing waits. On page 1 ask
        again after a wait; when the shell is still there, a control listing decides: rows there mean the
        site is answering and the zero is real, the shell there too means throttling, so keep waiting.
        When the waits, the operation's time or its requests run out: SITE_TEMPORARILY_EMPTY.
        """
        waits = list(self.empty_waits)
        waited = 0.0
        while True:
            try:
                return await self._grid_request(op, query, page, key)
            except _EmptyShell as shell:
                if page == 1 and waited and await self._site_answers(op):
                    return GridPage(rows=[], total=0, exhausted=True, zero="control")
                if not waits or not _can_wait(op, waits[0]):
                    raise await self._still_empty(shell, page, waited) from None
            wait = waits.pop(0)
            await self._pause(op, wait, {"page": page, "wait_seconds": wait, "waited_seconds": waited})
            waited += wait

    async def _site_answers(self, op: OperationContext) -> bool:
        """Whether CNKI lists rows for a query that always has some (the control of an empty page 1)."""
        query = GridQuery(branches=compile_expression(CONTROL_EXPRESSION))
        try:
            control = await self._grid_request(op, query, 1, query_key(query))
        except _EmptyShell:
            return False
        return bool(control.rows)

    async def _pause(self, op: OperationContext, seconds: float, progress: dict[str, Any]) -> None:
        """Wait out a throttled site, shown as its own stage; a cancel ends the wait at once."""
        self.limiter.slow()
        with op.stage_while("waiting_for_site", progress):
            deadline = time.monotonic() + seconds
            while (left := deadline - time.monotonic()) > 0:
                if op.cancelled:
                    raise CnkiError("CANCELLED")
                await asyncio.sleep(min(PAUSE_POLL, left))

    async def _still_empty(self, shell: _EmptyShell, page: int, waited: float) -> CnkiError:
        snapshot = await self.snapshot("grid-empty", shell.body, shell.url)
        details: dict[str, Any] = {"page": page, "waited_seconds": round(waited), "snapshot": snapshot}
        return CnkiError(
            "SITE_TEMPORARILY_EMPTY",
            f"知网第 {page} 页在 {waited:.0f} 秒的等待后仍只返回空白结果（抱歉，暂无数据，请稍后重试），"
            "通常是访问过于频繁被限流，这不代表没有文献；稍后用 operation_control 的 continue 继续即可补上。",
            details=details,
        )

    async def _grid_request(self, op: OperationContext, query: GridQuery, page: int, key: str) -> GridPage:
        """Ask for one grid page: template, form and in-page POST, with challenges, back-off and recovery.

        The bare empty shell is raised as ``_EmptyShell`` for ``_grid_page`` to judge.
        """
        anchor = anchor_of(query.branches)
        challenged = backoffs = 0
        recovered = solved = sort_asked = False
        wanted_sort = sort_code(query.sort)
        last: CnkiError | None = None
        for attempt in range(GRID_ATTEMPTS):
            epoch = self._epoch
            listing = self._listings.get(key)
            try:
                tab = await self._work_tab()  # first: a replaced work tab drops the template
                template = await self._ensure_template(op, anchor)
                query_json = rewrite_query_json(
                    template.query_json, query.branches, year_from=query.year_from, year_to=query.year_to, page=page,
                    sort_request=sort_asked,
                )
                if page > 1 and listing is not None:
                    query_json = with_site_echo(query_json, listing.products, listing.view)
                form = grid_form(
                    template.form, query_json, page=page, sort=query.sort,
                    cursor=listing.cursor if page > 1 and listing is not None else "",
                    new_search=not solved, sort_request=sort_asked,
                )
                async with self.request(op):
                    result = await self.browser.fetch_in_page(
                        tab,
                        template.url,
                        method="POST",
                        body=encode_form(form),
                        headers={
                            "Content-Type": "application/x-www-form-urlencoded; charset=UTF-8",
                            "X-Requested-With": "XMLHttpRequest",
                        },
                    )
            except CnkiError as exc:
                if self._transport_broken(exc) and not recovered:
                    recovered = True
                    await self._reset_tabs()
                    last = exc
                    continue
                if exc.code in _CHALLENGE_CODES and attempt < GRID_ATTEMPTS - 1:
                    # Turned away while the template was captured: the person answers on the work tab.
                    challenged += 1
                    last = exc
                    await self.human_step(op, tab, exc, epoch=epoch)
                    solved = True
                    continue
                if exc.code == "PAGE_NAVIGATED" and attempt < GRID_ATTEMPTS - 1:
                    # The search page's own script moved it (often to a verification page) under our
                    # request: let it settle, hand any challenge to the person, then ask again.
                    last = exc
                    await self.wait_page(op, tab, lambda seen: True, BOOTSTRAP_TIMEOUT)
                    solved = True
                    continue
                raise
            problem = classify_response(result.status, result.url, result.text)
            if problem is not None and problem.code != "SITE_TEMPORARILY_EMPTY":  # the parser tells which kind
                last = problem
                if problem.code in _CHALLENGE_CODES:
                    challenged += 1
                    if attempt == GRID_ATTEMPTS - 1:
                        break  # no retry would follow the person's work
                    await self._grid_challenge(op, problem, result.url, result.text, template, query_json, epoch)
                    # Asked again as a continuation (boolSearch=false): a new search straight after a
                    # solved challenge is reported to be challenged again, in a loop.
                    solved = True
                    continue
                if problem.code in _BACKOFF_CODES:
                    await self._backoff(problem, backoffs)
                    backoffs += 1
                    continue
                raise problem
            try:
                # A 50-row page takes tens of milliseconds to parse: keep the event loop free meanwhile.
                parsed = await asyncio.to_thread(parse_grid, result.text, result.url)
            except CnkiError as exc:
                if exc.code == "SITE_TEMPORARILY_EMPTY" and isinstance(exc.details, dict) and exc.details.get("no_content"):
                    raise _EmptyShell(exc, result.text, result.url) from None
                if exc.code == "SITE_TEMPORARILY_EMPTY" and attempt < GRID_ATTEMPTS - 1:
                    last = exc  # a busy notice of another shape: ask again once more
                    continue
                if exc.code in _SNAPSHOT_CODES:
                    exc.details = {**(exc.details or {}), "snapshot": await self.snapshot("grid", result.text, result.url)}
                raise
            self.limiter.fast()
            if page == 1 and parsed.sort_shown and parsed.sort_shown != wanted_sort and not sort_asked:
                sort_asked = True  # ask the way the page's own sort links do
                continue
            if parsed.rows or parsed.cursor:
                self._remember(key, parsed)
            if parsed.page > 0 and parsed.page != page:
                raise CnkiError(
                    "PAGINATION_MISMATCH",
                    f"请求第 {page} 页，知网返回了第 {parsed.page} 页。",
                    details={"requested": page, "returned": parsed.page},
                )
            if page == 1 and parsed.sort_shown and parsed.sort_shown != wanted_sort:
                op.add_error(_sort_not_applied(wanted_sort, parsed.sort_shown))
            return filter_years(parsed, query.year_from, query.year_to)
        if challenged >= GRID_ATTEMPTS:
            raise CnkiError("VERIFICATION_REPEATED", "人工处理后站点仍要求验证，已停止重试")
        assert last is not None
        raise last

    async def _grid_challenge(
        self,
        op: OperationContext,
        problem: CnkiError,
        response_url: str,
        body: str,
        template: _Template,
        query_json: dict[str, Any],
        epoch: int,
    ) -> None:
        """Show the grid's challenge to a person: in the search page, the verify page the answer names, or
        where the site redirected."""
        _refuse_if_skipping(op, problem)
        if epoch != self._epoch:
            return  # solved by someone else meanwhile
        tab = await self._work_tab()
        if "vericodeForm" in body:
            shown = await self.browser.evaluate(
                tab, js_call(_SHOW_VERICODE_JS, body, json.dumps(query_json, ensure_ascii=False))
            )
            if not shown:
                raise await self._no_context(response_url, body, problem)
            await self.human_step(op, tab, problem, epoch=epoch)
            return
        verify = challenge_url(body)
        if verify:
            # {"code":-403,"message":"https://kns.cnki.net/verify/home?captchaType=blockPuzzle&…"}: the person
            # solves it on the work tab, which comes back to the search page; the template stays valid.
            async with self.request(op):
                await self.browser.navigate(tab, with_return_url(verify, ADVANCED_SEARCH_URL), BOOTSTRAP_TIMEOUT)
            await self.human_step(op, tab, problem, epoch=epoch)
            return
        # The work page leaves the search page: the template must be captured again afterwards.
        self._template = None
        if endpoint_url(response_url) == template.url or not is_site_url(response_url):
            raise await self._no_context(response_url, body, problem)
        async with self.request(op):
            await self.browser.navigate(tab, response_url, BOOTSTRAP_TIMEOUT)
        await self.human_step(op, tab, problem, epoch=epoch)

    async def _no_context(self, response_url: str, body: str, problem: CnkiError) -> CnkiError:
        snapshot = await self.snapshot("grid-challenge", body, response_url)
        return CnkiError(
            "VERIFICATION_CONTEXT_UNAVAILABLE",
            "知网要求验证，但没有可以显示给你处理的页面；请稍后重试。",
            details={"url": endpoint_url(response_url), "reason": problem.code, "snapshot": snapshot},
        )

    # -- detail and journal pages (§4.1, §5) --------------------------------------------------

    async def detail(self, op: OperationContext, paper: Paper) -> Paper:
        """The paper's detail page at its locator, parsed and bound to it (§4.1, §6.6); always fetched.

        Locating a paper without a link, and relocating once after a failed load, is the caller's
        part (research.py does both and stores the fresh locator).
        """
        locator = paper.locator or paper.url
        if not locator:
            raise CnkiError("DOCUMENT_NOT_FOUND", "这条记录没有知网入口，需要先按题名定位。", details={"title": paper.title})
        return await self._detail_at(op, paper, locator)

    async def _detail_at(self, op: OperationContext, paper: Paper, locator: str) -> Paper:
        def parse(html: str, url: str) -> Paper:
            return bind_detail(paper, parse_detail(html, url), url)

        return await self._load(op, locator, parse, "detail")

    async def journal(self, op: OperationContext, paper: Paper) -> Quality:
        """Quality evidence from the paper's journal page (``paper.source_url``), bound to its source."""
        if not paper.source_url:
            raise CnkiError("SOURCE_LOCATOR_MISSING", "详情页没有期刊链接", details={"source": paper.source})
        return await self._load(op, paper.source_url, lambda html, url: parse_journal(html, url, paper.source), "journal")

    async def _load(self, op: OperationContext, url: str, parse: Callable[[str, str], T], kind: str) -> T:
        """Read a page through Chrome's network stack; render it in a tab when that is not enough."""
        if not is_site_url(url):
            raise CnkiError("LOCATOR_EXPIRED", "文献入口不是知网地址，未访问。", details={"kind": kind})
        backoffs = 0
        recovered = False
        for _attempt in range(RESOURCE_ATTEMPTS):
            try:
                tab = await self._site_tab(op)
                async with self.request(op):
                    result = await self.browser.load_resource(tab, url)
            except CnkiError as exc:
                if self._transport_broken(exc) and not recovered:
                    recovered = True
                    await self._reset_tabs()
                    continue
                if exc.code == "RESOURCE_FAILED":
                    break
                raise
            problem = classify_response(result.status, url, result.text)
            if problem is not None:
                if problem.code in _BACKOFF_CODES:
                    await self._backoff(problem, backoffs)
                    backoffs += 1
                    continue
                if problem.code in _CHALLENGE_CODES:
                    break
                raise problem
            try:
                value = await asyncio.to_thread(parse, result.text, url)
            except CnkiError as exc:
                if _final_parse_error(exc):
                    raise
                log.debug("%s page needs rendering: %s", kind, exc.message)
                break
            self.limiter.fast()
            return value
        return await self._render_page(op, url, parse, kind)

    async def _render_page(self, op: OperationContext, url: str, parse: Callable[[str, str], T], kind: str) -> T:
        """The render fallback: load in the shared render tab and parse the live DOM until it works."""
        async with self._render_lock:
            tab = await self._render_tab()
            async with self.request(op):
                await self.browser.navigate(tab, url, RENDER_TIMEOUT)
            last_html = ""
            last_url = url

            def accept(seen: Observation) -> T:
                nonlocal last_html, last_url
                last_html, last_url = seen.html, seen.url
                return parse(seen.html, seen.url)

            try:
                value = await self.wait_page(op, tab, accept, RENDER_TIMEOUT)
            except CnkiError as exc:
                if exc.code in _SNAPSHOT_CODES and last_html:
                    await self.snapshot(kind, last_html, last_url, tab)
                raise
            self.limiter.fast()
            return value

    # -- title location (§2.8) ---------------------------------------------------------------

    async def locate(self, op: OperationContext, titles: list[str]) -> dict[str, list[Paper]]:
        """Up to 10 full titles in one exact-title grid request; rows grouped under the given titles.

        A row belongs to every given title with the same title key (§4.6); other rows are dropped.
        """
        if not 1 <= len(titles) <= TITLES_PER_LOCATE:
            raise ValueError(f"locate takes 1–{TITLES_PER_LOCATE} titles")
        groups: dict[str, list[Paper]] = {title: [] for title in titles}
        query = GridQuery(branches=compile_expression(title_expression(titles)))
        page = await self._grid_page(op, query, 1, query_key(query))
        for row in page.rows:
            key = title_key(row.title)
            for title, bucket in groups.items():
                if title_key(title) == key:
                    bucket.append(row)
        return groups

