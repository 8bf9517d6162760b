"""Result listings: the search template, grid pages with their cursor, throttling, refusals and challenges.

A listing is asked for with an in-page ``fetch()`` POST of ``kns8s/brief/grid`` from the work tab,
with a form template captured once per browser from a real click on the advanced-search page (the
page's own request, whatever fields it carries), its QueryJson rewritten for each listing, page and
sort. Pages after the first carry the paging cursor (``#hidTurnPage``) and the ``Products``/``View``
that page 1's answer echoed, as the result page's own script does. Each page is an exchange
(``GridExchange``, registry entry ``registry.GRID``) the door's engine runs; the template, the cursors and
the control's answer are dropped when the door's ``pages`` or ``generation`` moves on.

CNKI's empty shell (抱歉，暂无数据，请稍后重试, bare or beside a toolbar 共找到 0 条结果) answers both a real
zero and throttling: on page 2 or later no empty answer, whatever it says, is the end of a listing; on
page 1 a control listing decides, its answer reused for a minute (``page``). A refusal is
QUERY_REJECTED; a sort the page does not mark as active is asked again the way its sort links ask,
then said beside the rows (a SORT_NOT_APPLIED problem in ``GridPage.problems``: the caller records
it); the grid's challenges (an in-page vericode form, a redirect, or the JSON
``{"code":-403,"message":"…/verify/home?…"}``) go to the person and page 1 is then asked again as a
continuation (``boolSearch=false``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import parse_qsl, urljoin

import msgspec

from cnki_mcp.core.clock import Deadline
from cnki_mcp.core.errors import CnkiError, ErrorCode
from cnki_mcp.core.identity import fingerprint
from cnki_mcp.core.model import Paper
from cnki_mcp.core.redact import endpoint_url
from cnki_mcp.core.text import title_key
from cnki_mcp.ops.jobs import OperationContext
from cnki_mcp.pages.page_state import challenge_url
from cnki_mcp.pages.parse import GridPage
from cnki_mcp.pages.urls import is_site_url
from cnki_mcp.site.browser import Tab
from cnki_mcp.site.cdp import FetchResult
from cnki_mcp.site.door import ADVANCED_SEARCH_URL, BOOTSTRAP_TIMEOUT, Door
from cnki_mcp.site.exchange import (
    AGAIN,
    BACKOFF_CODES,
    CHALLENGE_CODES,
    Again,
    Engine,
    Exchange,
    Request,
    Turn,
    note_snapshot,
)
from cnki_mcp.site.facet_query import with_facets
from cnki_mcp.site.grid_query import (
    SORT_LABELS,
    TITLES_PER_LOCATE,
    Condition,
    GridQuery,
    compile_expression,
    encode_form,
    grid_form,
    listing_url,
    rewrite_query_json,
    sort_code,
    template_query_json,
    title_expression,
    with_site_echo,
)
from cnki_mcp.site.human import refuse_if_skipping
from cnki_mcp.site.page_actions import js_call
from cnki_mcp.site.registry import GRID
from cnki_mcp.site.remote import gateway_problem

log = logging.getLogger(__name__)

CAPTURE_TIMEOUT = 30.0
GRID_ATTEMPTS = 4
CURSOR_CAP = 2000
# Waits before asking again after the bare empty shell (throttling lasts from seconds to minutes).
EMPTY_WAITS = (5.0, 15.0, 60.0)
PAUSE_POLL = 0.5
# Time kept in hand after a wait, so the request that follows still fits in the operation's budget.
WAIT_MARGIN_SECONDS = 5.0
# A listing CNKI always fills: rows there prove that an empty page 1 is a real zero.
CONTROL_EXPRESSION = {"field": "subject", "value": "研究"}
# How long the control's rows stand for the site answering: a burst of real zeros costs one control a minute.
CONTROL_REUSE_SECONDS = 60.0

_SNAPSHOT_CODES = frozenset({"PARSER_UNSUPPORTED", "QUERY_REJECTED"})
_GRID_HEADERS = {"Content-Type": "application/x-www-form-urlencoded; charset=UTF-8", "X-Requested-With": "XMLHttpRequest"}
_TEMPLATE_CODES = frozenset({"QUERY_TEMPLATE_UNAVAILABLE", "QUERY_TEMPLATE_UNSUPPORTED"})


class _Listing(msgspec.Struct):
    """What paging a listing needs from its earlier pages: the cursor and the query as the site echoed it."""

    cursor: str = ""
    products: str = ""
    view: str = ""


class Waiting(msgspec.Struct, frozen=True):
    """A step of a listing call: the site is throttling and page ``page`` is asked again after ``seconds``
    (``waited`` seconds so far); the caller shows it until the call's next step (``research.backend``)."""

    page: int
    seconds: float
    waited: float

    def progress(self) -> dict[str, Any]:
        return {"page": self.page, "wait_seconds": self.seconds, "waited_seconds": self.waited}


class _EmptyShell(Exception):
    """The grid answered with no rows in a way that may be throttling (the shell on page 1, anything empty
    on a later page); body and URL are kept for a snapshot."""

    def __init__(self, body: str, url: str) -> None:
        super().__init__("empty grid answer")
        self.body = body
        self.url = url


class Template(msgspec.Struct):
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
      // As written, with the page's address: through a gateway a root-relative URL resolves against the
      // gateway's root, so it is resolved against the page's public address outside the page.
      window.__cnkiGridCaptured = {url: absolute, written: String(url), page: location.href, body: asText(body)};
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

# Shows the grid's in-page vericode form inside the search page, where a person can answer it.
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


def query_key(query: GridQuery) -> str:
    """The cursor key of a listing: its branches or expression, years and sort (never the page)."""
    branches = [[msgspec.to_builtins(c) for c in branch] for branch in query.branches]
    listing = [branches, query.year_from, query.year_to, sort_code(query.sort)]
    if query.facets:
        listing.append(msgspec.to_builtins(query.facets))
    if query.sentence is not None:
        listing.append(msgspec.to_builtins(query.sentence))
    return fingerprint([*listing, query.expert] if query.expert else listing)


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


def filter_years(page: GridPage, year_from: int, year_to: int) -> GridPage:
    """Drop rows without a year or outside the range, as well as asking the site for it."""
    if year_from <= 0 and year_to <= 0:
        return page
    rows = [
        row
        for row in page.rows
        if row.year > 0 and (year_from <= 0 or row.year >= year_from) and (year_to <= 0 or row.year <= year_to)
    ]
    return msgspec.structs.replace(page, rows=rows)


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


class GridExchange(Exchange[GridPage]):
    """One grid page: template, form and in-page POST; challenges shown in the search page and asked again
    as a continuation, a sort the page does not mark asked again the way its sort links ask."""

    spec = GRID
    rounds = challenges = GRID_ATTEMPTS

    def __init__(self, listings: Listings, query: GridQuery, page: int, key: str) -> None:
        self.listings = listings
        self.query = query
        self.page = page
        self.key = key
        self.anchor = query.sentence.value if query.sentence is not None else anchor_of(query.branches)
        self.wanted_sort = sort_code(query.sort)
        self.solved = False  # after a person's step the page is asked as a continuation (boolSearch=false)
        self.sort_asked = False
        self.tab: Tab | None = None
        self.template: Template | None = None
        self.query_json: dict[str, Any] = {}

    async def build(self, op: OperationContext) -> Request:
        listings, query, page = self.listings, self.query, self.page
        listing = listings._listings.get(self.key)
        self.tab = await listings.door.work_tab()  # first: a replaced work tab drops the template
        self.template = template = await listings._ensure_template(op, self.anchor)
        query_json = rewrite_query_json(
            template.query_json, query.branches, year_from=query.year_from, year_to=query.year_to, page=page,
            sort_request=self.sort_asked, expert=query.expert, sentence=query.sentence,
        )
        query_json = with_facets(query_json, query.facets)
        if page > 1 and listing is not None:
            query_json = with_site_echo(query_json, listing.products, listing.view)
        self.query_json = query_json
        form = grid_form(
            template.form, query_json, page=page, sort=query.sort,
            cursor=listing.cursor if page > 1 and listing is not None else "",
            new_search=not self.solved, sort_request=self.sort_asked, expert=query.expert,
            sentence=query.sentence is not None,
        )
        return Request(self.tab, listing_url(template.url, query), "POST", encode_form(form), _GRID_HEADERS)

    async def turned_away(self, op: OperationContext, exc: CnkiError, epoch: int, final: bool) -> Turn | None:
        if final or self.tab is None:
            return None
        door = self.listings.door
        if exc.code in CHALLENGE_CODES:
            # Turned away while the template was captured: the person answers on the work tab.
            await door.person.step(op, self.tab, exc, epoch=epoch)
            self.solved = True
            return "challenge"
        if exc.code == "PAGE_NAVIGATED":
            # The search page's own script moved it (often to a verification page) under our request:
            # let it settle, hand any challenge to the person, then ask again.
            await door.wait_page(op, self.tab, lambda seen: True, BOOTSTRAP_TIMEOUT)
            self.solved = True
            return "again"
        return None

    def heard(self, answer: FetchResult) -> None:
        self.listings.last_answer = (answer.text, answer.url)

    def noted(self, problem: CnkiError) -> None:
        if problem.code in BACKOFF_CODES:
            self.listings._throttled()

    async def challenge(
        self, op: OperationContext, problem: CnkiError, answer: FetchResult, epoch: int, final: bool
    ) -> None:
        if final:
            raise problem  # no retry would follow the person's work
        assert self.template is not None
        await self.listings._grid_challenge(op, problem, answer.url, answer.text, self.template, self.query_json, epoch)
        # Asked again as a continuation (boolSearch=false): a new search straight after a solved
        # challenge is reported to be challenged again, in a loop.
        self.solved = True

    def parse(self, answer: FetchResult) -> GridPage:
        parsed = super().parse(answer)
        if self.page > 1 and not parsed.rows:
            # A later page of a listing whose page 1 had rows: even a stated zero here is no end.
            raise _EmptyShell(answer.text, answer.url)
        return parsed

    async def unparsed(self, engine: Engine, exc: CnkiError, answer: FetchResult, final: bool) -> bool:
        shell = isinstance(exc.details, dict) and bool(exc.details.get("shell"))
        if exc.code == "SITE_TEMPORARILY_EMPTY" and (shell or self.page > 1):
            raise _EmptyShell(answer.text, answer.url) from None
        if exc.code == "SITE_TEMPORARILY_EMPTY" and not final:
            return True  # a busy notice of another shape: ask again once more
        if exc.code in _SNAPSHOT_CODES:
            note_snapshot(exc, await engine.snapshot("grid", answer.text, answer.url))
        return False

    def accept(self, op: OperationContext, value: GridPage) -> GridPage | Again:
        page, shown = self.page, value.sort_shown
        if page == 1 and shown and shown != self.wanted_sort and not self.sort_asked:
            self.sort_asked = True  # ask the way the page's own sort links do
            return AGAIN
        if value.rows or value.cursor:
            self.listings._remember(self.key, value)
        if value.page > 0 and value.page != page:
            raise CnkiError(
                "PAGINATION_MISMATCH",
                f"请求第 {page} 页，知网返回了第 {value.page} 页。",
                details={"requested": page, "returned": value.page},
            )
        kept = filter_years(value, self.query.year_from, self.query.year_to)
        if page == 1 and shown and shown != self.wanted_sort:
            return msgspec.structs.replace(kept, problems=[_sort_not_applied(self.wanted_sort, shown).problem()])
        return kept


class Listings:
    """The result listings asked through one ``Door``: its search template, and page 1's cursor and echo
    per listing."""

    def __init__(self, door: Door) -> None:
        self.door = door
        self.empty_waits = EMPTY_WAITS
        self.control_reuse = CONTROL_REUSE_SECONDS
        self._kept: Template | None = None
        self._kept_pages = door.pages  # the work tab the kept template was captured on
        self._cursors: dict[str, _Listing] = {}
        self._generation = door.generation  # the browser the cursors and the control's answer belong to
        self._control_lock = asyncio.Lock()
        self._answered: float | None = None  # monotonic time of the control's last rows
        self.last_answer: tuple[str, str] = ("", "")  # the latest grid answer (text, URL), for the field check

    # The template belongs to the work tab it was captured on, the cursors and the control's answer to the
    # browser: read from the door's counters, so the door never calls back into the listings.

    @property
    def _template(self) -> Template | None:
        return self._kept if self._kept_pages == self.door.pages else None

    @_template.setter
    def _template(self, template: Template | None) -> None:
        self._kept, self._kept_pages = template, self.door.pages

    def _browser_state(self) -> None:
        if self._generation != self.door.generation:
            self._generation = self.door.generation
            self._cursors.clear()
            self._answered = None

    @property
    def _listings(self) -> dict[str, _Listing]:
        self._browser_state()
        return self._cursors

    @property
    def _control_answered(self) -> float | None:
        self._browser_state()
        return self._answered

    @_control_answered.setter
    def _control_answered(self, answered: float | None) -> None:
        self._browser_state()
        self._answered = answered

    def forget(self) -> None:
        """Neither the template nor any cursor nor the control's answer is valid any more."""
        self._template = None
        self._cursors.clear()
        self._answered = None

    # -- the search template -----------------------------------------------------------------

    async def _ensure_template(self, op: OperationContext, anchor: str) -> Template:
        template = self._template
        if template is not None and template.generation == self.door.browser.connection_generation:
            return template
        async with self.door.template_lock:
            await self.door.sync()
            if self._template is not None and self._template.generation == self.door.generation:
                return self._template
            try:
                self._template = await self._capture(op, anchor)
            except CnkiError as exc:
                if exc.code in _TEMPLATE_CODES and self.door.has_work_tab:
                    note_snapshot(exc, await self.door.tab_snapshot("template", self.door.work_tab_now()))
                raise
            return self._template

    async def _capture(self, op: OperationContext, anchor: str) -> Template:
        tab = await self.door.work_tab()
        async with self.door.request(op):
            await self.door.browser.navigate(tab, ADVANCED_SEARCH_URL, BOOTSTRAP_TIMEOUT)
        await self.door.wait_page(
            op, tab, lambda seen: True if seen.condition else None, BOOTSTRAP_TIMEOUT, condition=_READY_JS
        )
        await self.door.evaluate(tab, _CAPTURE_JS)
        where = {"url": endpoint_url(tab.url)}
        if not await self.door.evaluate(tab, js_call(_FILL_JS, anchor)):
            raise CnkiError("QUERY_TEMPLATE_UNAVAILABLE", "高级检索页没有可见的检索输入框。", details=where)
        async with self.door.request(op):
            try:
                clicked = await self.door.browser.click(tab, "input.btn-search,button.btn-search", 5.0)
            except CnkiError as exc:
                if exc.code != "PAGE_NAVIGATED":
                    raise
                clicked = True  # the page navigated under the click: the search did start
        if not clicked:
            raise CnkiError("QUERY_TEMPLATE_UNAVAILABLE", "高级检索页没有可点击的检索按钮。", details=where)
        try:
            captured = await self.door.wait_for(tab, _CAPTURED_JS, CAPTURE_TIMEOUT)
        except CnkiError as exc:
            if exc.code != "CONTENT_NOT_READY":
                raise
            raise CnkiError(
                "QUERY_TEMPLATE_UNAVAILABLE", f"{CAPTURE_TIMEOUT:.0f} 秒内没有捕获到检索请求。", details=where
            ) from None
        # The page's request left tens of milliseconds into the click's slot (the click waits for a
        # steady button first): an empty slot now spaces the next request from when it really went out.
        async with self.door.limiter.slot():
            pass
        if "challenge" in captured:
            page = endpoint_url(str(captured["challenge"]))
            code: ErrorCode = "LOGIN_REQUIRED" if "//login." in page else "VERIFICATION_REQUIRED"
            raise CnkiError(code, details={"url": page, "stage": "template"})
        url = endpoint_url(urljoin(str(captured.get("page") or ""), str(captured.get("written") or captured.get("url") or "")))
        if not is_site_url(url):
            raise CnkiError("QUERY_TEMPLATE_UNSUPPORTED", "检索请求没有发往知网。", details={"url": url})
        form = parse_form(str(captured.get("body") or ""))
        return Template(url=url, form=form, query_json=template_query_json(form), generation=self.door.generation)

    async def fresh_template(self, op: OperationContext, anchor: str) -> dict[str, Any]:
        """The search template captured anew from the advanced-search page (the field check): where it
        posts, its form fields and the QueryJson keys the page sent."""
        self._template = None
        template = await self._ensure_template(op, anchor)
        return {"url": template.url, "fields": sorted(template.form), "query_json": sorted(template.query_json)}

    async def template_for(self, op: OperationContext, query: GridQuery) -> Template:
        """The search template a request for ``query`` starts from (captured when there is none): the
        facet panel posts beside the grid with it."""
        return await self._ensure_template(op, anchor_of(query.branches))

    async def show_challenge(
        self, op: OperationContext, problem: CnkiError, response_url: str, body: str, template: Template,
        query_json: dict[str, Any], epoch: int,
    ) -> None:
        """A challenge in an answer to a request posted beside the grid, shown to the person as the grid's are."""
        await self._grid_challenge(op, problem, response_url, body, template, query_json, epoch)

    # -- the result grid ------------------------------------------------------------------------

    async def page(self, op: OperationContext, query: GridQuery, page: int) -> AsyncIterator[Waiting | GridPage]:
        """One page of a listing: its waits for a throttled site, then the page. Pages after the first
        need page 1's cursor: fetched first when missing."""
        if page < 1:
            raise ValueError("pages start at 1")
        key = query_key(query)
        if page > 1 and key not in self._listings:
            async for step in self._grid_page(op, query, 1, key):
                if isinstance(step, Waiting):
                    yield step
            if key not in self._listings:
                raise CnkiError(
                    "PAGINATION_MISMATCH", "知网第 1 页没有给出翻页标记，无法读取后面的页。", details={"page": page}
                )
        async for step in self._grid_page(op, query, page, key):
            yield step

    def _remember(self, key: str, page: GridPage) -> None:
        known = self._listings.get(key)
        if known is None and len(self._listings) >= CURSOR_CAP:
            self._listings.clear()
        self._listings[key] = _Listing(
            cursor=page.cursor or (known.cursor if known else ""),
            products=page.products or (known.products if known else ""),
            view=page.view or (known.view if known else ""),
        )

    async def _grid_page(
        self, op: OperationContext, query: GridQuery, page: int, key: str
    ) -> AsyncIterator[Waiting | GridPage]:
        """One page (its waits first), with CNKI's empty shell (抱歉，暂无数据，请稍后重试) told apart from a real zero.

        The site answers both a real zero and throttling with that shell, also beside a toolbar 共找到 0
        条结果. On page 2 or later no empty answer is the end of a listing whose earlier pages had rows:
        ask again after growing waits. On page 1 a control listing decides: rows there (asked now, or
        within the last minute with no throttling seen since) mean the site is answering and the zero is
        real; the shell there too means throttling, so wait and ask again. When the waits, the operation's
        time or its requests run out: SITE_TEMPORARILY_EMPTY.
        """
        waits = list(self.empty_waits)
        waited = 0.0
        while True:
            try:
                yield await self._grid_request(op, query, page, key)
                return
            except _EmptyShell as shell:
                if page == 1 and await self._site_answers(op):
                    yield GridPage(rows=[], total=0, exhausted=True, zero="control")
                    return
                self._throttled()
                if not waits or not _can_wait(op, waits[0]):
                    raise await self._still_empty(shell, page, waited) from None
            wait = waits.pop(0)
            yield Waiting(page, wait, waited)
            await self._pause(op, wait)
            waited += wait

    async def _site_answers(self, op: OperationContext) -> bool:
        """Whether CNKI lists rows for a query that always has some (the control of an empty page 1).

        One control answer stands for ``control_reuse`` seconds; listings asking at once share one request.
        """
        async with self._control_lock:
            answered = self._control_answered
            if answered is not None and time.monotonic() - answered < self.control_reuse:
                return True
            query = GridQuery(branches=compile_expression(CONTROL_EXPRESSION))
            try:
                control = await self._grid_request(op, query, 1, query_key(query))
            except _EmptyShell:
                control = GridPage()
            self._control_answered = time.monotonic() if control.rows else None
            return bool(control.rows)

    def _throttled(self) -> None:
        """The site was seen throttling: an earlier control answer no longer says it is answering."""
        self._control_answered = None

    async def _pause(self, op: OperationContext, seconds: float) -> None:
        """Wait out a throttled site; a cancel ends the wait at once."""
        self.door.limiter.slow()
        deadline = Deadline(seconds)
        while not deadline.passed:
            if op.cancelled:
                raise CnkiError("CANCELLED")
            await asyncio.sleep(min(PAUSE_POLL, deadline.remaining()))

    async def _still_empty(self, shell: _EmptyShell, page: int, waited: float) -> CnkiError:
        snapshot = await self.door.snapshot("grid-empty", shell.body, shell.url)
        details: dict[str, Any] = {"page": page, "waited_seconds": round(waited), "snapshot": snapshot}
        return CnkiError(
            "SITE_TEMPORARILY_EMPTY",
            f"知网第 {page} 页在 {waited:.0f} 秒的等待后仍只返回空白结果（抱歉，暂无数据，请稍后重试），"
            "通常是访问过于频繁被限流，这不代表没有文献；稍后即可补上：检索任务用 operation_control 的 continue 继续，"
            "其他工具再调用一次。",
            details=details,
        )

    async def _grid_request(self, op: OperationContext, query: GridQuery, page: int, key: str) -> GridPage:
        """Ask for one grid page (``GridExchange``); the bare empty shell is raised as ``_EmptyShell`` for
        ``_grid_page`` to judge."""
        return await self.door.exchange(op, GridExchange(self, query, page, key))

    async def _grid_challenge(
        self,
        op: OperationContext,
        problem: CnkiError,
        response_url: str,
        body: str,
        template: Template,
        query_json: dict[str, Any],
        epoch: int,
    ) -> None:
        """Show the grid's challenge to a person: in the search page, the verify page the answer names, or
        where the site redirected."""
        refuse_if_skipping(op, problem)
        if epoch != self.door.person.epoch:
            return  # solved by someone else meanwhile
        tab = await self.door.work_tab()
        if gateway_problem(problem):  # the gateway's own login or challenge: the person answers on the work tab
            await self.door.person.step(op, tab, problem, epoch=epoch)
            return
        if "vericodeForm" in body:
            shown = await self.door.evaluate(
                tab, js_call(_SHOW_VERICODE_JS, body, json.dumps(query_json, ensure_ascii=False))
            )
            if not shown:
                raise await self._no_context(response_url, body, problem)
            await self.door.person.step(op, tab, problem, epoch=epoch)
            return
        verify = challenge_url(body)
        if verify:
            # {"code":-403,"message":"https://kns.cnki.net/verify/home?captchaType=blockPuzzle&…"}: the person
            # solves it on the work tab, which comes back to the search page; the template stays valid.
            await self.door.show_verify_page(op, tab, verify, problem, epoch)
            return
        # The work page leaves the search page: the template must be captured again afterwards.
        self._template = None
        if endpoint_url(response_url) == template.url or not is_site_url(response_url):
            raise await self._no_context(response_url, body, problem)
        async with self.door.request(op):
            try:
                await self.door.browser.navigate(tab, response_url, BOOTSTRAP_TIMEOUT)
            except CnkiError as exc:
                # Another channel's challenge on the same tab moved it meanwhile (net::ERR_ABORTED): the
                # step below waits for that one and returns at once when it is done.
                if exc.code != "RESOURCE_FAILED" or "ERR_ABORTED" not in str((exc.details or {}).get("net_error")):
                    raise
        await self.door.person.step(op, tab, problem, epoch=epoch)

    async def _no_context(self, response_url: str, body: str, problem: CnkiError) -> CnkiError:
        snapshot = await self.door.snapshot("grid-challenge", body, response_url)
        return CnkiError(
            "VERIFICATION_CONTEXT_UNAVAILABLE",
            "知网要求验证，但没有可以显示给你处理的页面；请稍后重试。",
            details={"url": endpoint_url(response_url), "reason": problem.code, "snapshot": snapshot},
        )

    # -- title location ------------------------------------------------------------------------

    async def locate(
        self, op: OperationContext, titles: list[str], related: Callable[[str, str], bool] | None = None
    ) -> AsyncIterator[Waiting | dict[str, list[Paper]]]:
        """Up to 10 titles in one exact-title grid request (its waits for a throttled site first); rows
        grouped under the given titles.

        CNKI's exact 篇名 match finds the phrase inside a title. A row belongs to every given title with
        the same title key, or, with ``related``, to every given title for which ``related(title, row
        title)`` holds; other rows are dropped.
        """
        if not 1 <= len(titles) <= TITLES_PER_LOCATE:
            raise ValueError(f"locate takes 1–{TITLES_PER_LOCATE} titles")
        groups: dict[str, list[Paper]] = {title: [] for title in titles}
        query = GridQuery(branches=compile_expression(title_expression(titles)))
        page = GridPage()
        async for step in self._grid_page(op, query, 1, query_key(query)):
            if isinstance(step, Waiting):
                yield step
            else:
                page = step
        for row in page.rows:
            key = title_key(row.title)
            for title, bucket in groups.items():
                belongs = related(title, row.title) if related is not None else title_key(title) == key
                if belongs:
                    bucket.append(row)
        yield groups
