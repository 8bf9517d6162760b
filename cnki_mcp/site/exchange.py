"""The exchange engine: every CNKI request of the site, run one way.

A page type declares its request as an ``Exchange``: how to build it (``build``), how to classify the
answer (``classify``, by default its registry entry's, ``registry.Spec``), how to show a challenge to
the person (``challenge``) and how to parse it (``parse``, ``accept``). ``Engine.exchange`` runs every
one the same way: budget and pacing (``request``: the operation is charged, then a limiter slot), the
route (``fetch``: through a university gateway a request that got no answer makes us look at the page
and ask once more), the answer classified, a challenge to the person (one an answer shows, or one met
while asking, such as the gateway's login that look found), a rate limit or a 5xx backed off
(``Attempts``), a broken connection recovered once, the answer parsed, and a page that cannot be parsed
kept as a redacted snapshot whose name goes into the error (``note_snapshot``).

The engine is the one module that reaches ``page_io`` (in-page ``fetch()``, loads through Chrome's
network stack, scripts evaluated for their value): an import-linter contract keeps it so. ``door.Door``
(tabs, live pages, the person's steps) is the engine with the tabs it asks from.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

import msgspec

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.snapshots import save_snapshot
from cnki_mcp.ops.jobs import OperationContext
from cnki_mcp.pages.page_state import LIVE_PAGE_SCRIPT, PageState, challenge_url, inspect_live_page
from cnki_mcp.site import page_io
from cnki_mcp.site.browser import Browser, Tab
from cnki_mcp.site.cdp import FetchResult
from cnki_mcp.site.human import Person
from cnki_mcp.site.limiter import Limiter
from cnki_mcp.site.page_actions import CALL_TIMEOUT
from cnki_mcp.site.remote import GATEWAY_LOGIN_URL, NoAnswer, gateway_session_ended, is_gateway_url

log = logging.getLogger(__name__)

T = TypeVar("T")

BACKOFF_SLEEPS = (2.0, 4.0)
GATEWAY_LOOK_TIMEOUT = 10.0  # loading the page again after an in-page request got no answer through a gateway
SETTLE_TIMEOUT = 10.0  # a page coming back from the gateway's login before a request is asked again

# Answers a person clears (a challenge, a login prompt) and answers that slow down and ask again.
CHALLENGE_CODES = frozenset({"VERIFICATION_REQUIRED", "LOGIN_REQUIRED"})
BACKOFF_CODES = frozenset({"RATE_LIMITED", "SITE_UNAVAILABLE"})
# Parse failures that say "this is not the paper", not "this page did not render yet".
_IDENTITY_CODES = frozenset({"IDENTITY_CONFLICT", "SOURCE_IDENTITY_UNCONFIRMED"})


def final_parse_error(exc: CnkiError) -> bool:
    """A parse failure that another look at the page cannot change (wrong paper, too large, a known
    unsupported kind of page), as opposed to a page that is not rendered yet."""
    if exc.code in _IDENTITY_CODES or exc.code == "RESPONSE_TOO_LARGE":
        return True
    return exc.code == "PARSER_UNSUPPORTED" and isinstance(exc.details, dict) and "page_kind" in exc.details


def note_snapshot(error: CnkiError, name: str) -> CnkiError:
    """``error`` with the snapshot's file name in its details (unchanged when none could be saved)."""
    if name:
        error.details = {**(error.details if isinstance(error.details, dict) else {}), "snapshot": name}
    return error


def verify_page(response_url: str, body: str) -> str:
    """The verify page a challenge answer names (the -403 JSON's message) or was redirected to; "" when none."""
    return challenge_url(body) or (response_url if "/verify/" in response_url.lower() else "")


class Observation(msgspec.Struct):
    """One look at a live tab: what the page shows (PageState) plus its load state and DOM."""

    url: str
    html: str
    ready: bool
    complete: bool
    pending: bool
    condition: bool
    page: PageState


def _observe_js(condition: str) -> str:
    return (
        "(() => ({url: location.href, ready: document.readyState !== 'loading',"
        " complete: document.readyState === 'complete',"
        " pending: !!(window.jQuery && window.jQuery.active),"
        f" condition: (() => {{ try {{ return !!({condition}); }} catch (e) {{ return false; }} }})(),"
        f" html: {LIVE_PAGE_SCRIPT.strip()}}}))()"
    )


# --------------------------------------------------------------------------------------------
# What an exchange declares


class Request(msgspec.Struct):
    """One request as an exchange built it: from ``tab``, an in-page ``fetch()`` or (``load``) a load
    through Chrome's network stack for the tab's frame."""

    tab: Tab
    url: str
    method: str = "GET"
    body: str | None = None
    headers: dict[str, str] | None = None
    load: bool = False


class Fallback(Exception):
    """Raised by an exchange's hook: stop asking and give the exchange's ``fallback`` the answer."""


class Again:
    """Returned by ``Exchange.accept``: the answer asks for the request to be made once more."""


AGAIN = Again()

# What an exchange makes of a request that raised: ask again (after a person's step: "challenge", which
# counts toward VERIFICATION_REPEATED), go to its fallback, or None: the error stands.
Turn = Literal["again", "challenge", "fallback"]


class Sample(msgspec.Struct, frozen=True):
    """A recorded answer under ``tests/`` and what the exchange makes of it: "data", or the error code
    its classification or parse gives."""

    path: str
    url: str
    expect: str = "data"
    status: int = 200


class Spec(msgspec.Struct, frozen=True):
    """A registry entry: the exchange's name, how its answers are classified and parsed, and the recorded
    sample answers it is tested on (``registry``)."""

    name: str
    label: str  # what a person reads in the field check
    classify: Callable[[FetchResult], CnkiError | None]
    parse: Callable[[str, str], Any]
    samples: tuple[Sample, ...] = ()


class Exchange(abc.ABC, Generic[T]):
    """One request of a page type, with everything the engine needs to run it (see the module doc).

    ``rounds`` is how many times it is asked at most; the ``challenges``-th challenge is
    VERIFICATION_REPEATED."""

    spec: Spec
    rounds = 3
    challenges = 3

    @abc.abstractmethod
    async def build(self, op: OperationContext) -> Request:
        """The request for this round (its tab made ready first)."""

    def recovered(self) -> None:
        """The engine dropped the cached tabs after a broken connection."""

    async def turned_away(self, op: OperationContext, exc: CnkiError, epoch: int, final: bool) -> Turn | None:
        """A request (or building it) raised ``exc``: what to do (None: it is raised, or, a challenge,
        shown by ``challenge`` like one an answer shows)."""
        return None

    def heard(self, answer: FetchResult) -> None:
        """Every answer, before it is classified (the field check keeps the latest)."""

    def classify(self, answer: FetchResult) -> CnkiError | None:
        """The answer's problem (None: it is the data); may raise a problem no retry changes."""
        return self.spec.classify(answer)

    def noted(self, problem: CnkiError) -> None:
        """A problem that is not a challenge, before it is backed off from or raised."""

    async def challenge(
        self, op: OperationContext, problem: CnkiError, answer: FetchResult, epoch: int, final: bool
    ) -> None:
        """Show a challenge in ``answer`` to the person; returns once it is cleared (then asked again).
        For one met while asking, ``answer`` is the page the problem names, without a body."""
        raise problem

    def parse(self, answer: FetchResult) -> T:
        """The data of an answer classified as data (run off the event loop): by default its registry
        entry's parser, the one its samples are tested with."""
        value: T = self.spec.parse(answer.text, answer.url)
        return value

    async def unparsed(self, engine: Engine, exc: CnkiError, answer: FetchResult, final: bool) -> bool:
        """``parse`` raised ``exc``: True to ask again; else it is raised, with a snapshot when unknown."""
        if exc.code == "PARSER_UNSUPPORTED":
            note_snapshot(exc, await engine.snapshot(self.spec.name, answer.text, answer.url))
        return False

    def accept(self, op: OperationContext, value: T) -> T | Again:
        """The parsed value as the exchange's result, or ``AGAIN``."""
        return value

    async def fallback(self, op: OperationContext, last: CnkiError | None) -> T:
        """Where a ``Fallback`` or the last round leads: by default the last problem stands."""
        assert last is not None
        raise last


# --------------------------------------------------------------------------------------------


def _met(problem: CnkiError) -> FetchResult:
    """A challenge raised while asking as the answer ``Exchange.challenge`` reads: the page its details
    name (the gateway's login …), no body."""
    url = problem.details.get("url") if isinstance(problem.details, dict) else None
    return FetchResult(status=0, url=str(url or ""), text="")


class Attempts:
    """What one read's retry loop has spent: its one recovery of a broken connection, its back-offs and
    the challenges shown to the person."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.recovered = False
        self.backoffs = 0
        self.challenges = 0

    async def challenge(
        self, op: OperationContext, ex: Exchange[Any], problem: CnkiError, answer: FetchResult, epoch: int, final: bool
    ) -> None:
        """``ex`` shows the challenge ``problem`` to the person (then it is asked again); its
        ``challenges``-th is VERIFICATION_REPEATED."""
        self.challenges += 1
        if self.challenges >= ex.challenges:
            raise CnkiError("VERIFICATION_REPEATED", "人工处理后站点仍要求验证，已停止重试")
        await ex.challenge(op, problem, answer, epoch, final)

    async def recover(self, exc: CnkiError) -> bool:
        """True when ``exc`` is a broken connection with a live browser, met for the first time: the
        cached tabs are dropped and the read asks again."""
        if self.recovered or not self.engine.transport_broken(exc):
            return False
        self.recovered = True
        await self.engine.reset_tabs()
        return True

    async def back_off(self, problem: CnkiError) -> bool:
        """True after the wait a rate limit or a 5xx answer asks for (ask again); False for any other
        problem. The third such answer is raised."""
        if problem.code not in BACKOFF_CODES:
            return False
        await self.engine.backoff(problem, self.backoffs)
        self.backoffs += 1
        return True


class Engine(abc.ABC):
    """Budget, pacing, route, classification, the person, back-off, parsing and snapshots for every CNKI
    request of this process; ``door.Door`` adds the tabs."""

    def __init__(self, browser: Browser, limiter: Limiter, diagnostics_dir: Path) -> None:
        self.browser = browser
        self.limiter = limiter
        self.diagnostics_dir = diagnostics_dir
        self.person = Person(browser, limiter, self.observe, self.tab_snapshot, self.request)

    @abc.abstractmethod
    async def reset_tabs(self) -> None:
        """Drop the cached tabs (a broken connection is recovered once per exchange)."""

    def transport_broken(self, exc: CnkiError) -> bool:
        """A failed CDP call while the browser process itself still runs: new tabs may fix it."""
        return exc.code == "BROWSER_UNAVAILABLE" and self.browser.running

    # -- one exchange ------------------------------------------------------------------------

    async def exchange(self, op: OperationContext, ex: Exchange[T]) -> T:
        """Run ``ex``: build → fetch → classify → the person / back-off → parse → accept (see the module doc)."""
        attempts = Attempts(self)
        last: CnkiError | None = None
        try:
            for round_ in range(ex.rounds):
                final = round_ == ex.rounds - 1
                epoch = self.person.epoch
                try:
                    answer = await self._send(op, await ex.build(op))
                except CnkiError as exc:
                    if await attempts.recover(exc):
                        ex.recovered()
                        last = exc
                        continue
                    turn = await ex.turned_away(op, exc, epoch, final)
                    if turn is None and exc.code in CHALLENGE_CODES:
                        # Met while asking (the gateway's login ``fetch`` found): the person clears it as
                        # one an answer shows.
                        last = exc
                        await attempts.challenge(op, ex, exc, _met(exc), epoch, final)
                        continue
                    if turn is None:
                        raise
                    if turn == "fallback":
                        raise Fallback from None
                    attempts.challenges += turn == "challenge"
                    last = exc
                    continue
                ex.heard(answer)
                problem = ex.classify(answer)
                if problem is not None:
                    last = problem
                    if problem.code in CHALLENGE_CODES:
                        await attempts.challenge(op, ex, problem, answer, epoch, final)
                        continue
                    ex.noted(problem)
                    if await attempts.back_off(problem):
                        continue
                    raise problem
                try:
                    # A large page takes tens of milliseconds to parse: keep the event loop free meanwhile.
                    value = await asyncio.to_thread(ex.parse, answer)
                except CnkiError as exc:
                    if await ex.unparsed(self, exc, answer, final):
                        last = exc
                        continue
                    raise
                self.limiter.fast()
                accepted = ex.accept(op, value)
                if not isinstance(accepted, Again):
                    return accepted
        except Fallback:
            pass
        return await ex.fallback(op, last)

    async def _send(self, op: OperationContext, asked: Request) -> FetchResult:
        if asked.load:
            async with self.request(op):
                return await page_io.load_resource(self.browser, asked.tab, asked.url)
        return await self.fetch(
            op, asked.tab, asked.url, method=asked.method, body=asked.body, headers=asked.headers
        )

    # -- budget, pacing, route -------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def request(self, op: OperationContext) -> AsyncIterator[None]:
        """``async with engine.request(op): <one CNKI request>`` — charge, then a limiter slot."""
        op.charge()

        def cancelled() -> None:
            if op.cancelled:
                raise CnkiError("CANCELLED")

        async with self.limiter.slot(cancelled):
            yield

    async def fetch(self, op: OperationContext, tab: Tab, url: str, **options: Any) -> FetchResult:
        """One charged, paced ``fetch()`` from inside ``tab`` (same origin, the page's cookies).

        Through a gateway, a request that got no answer makes us look at the page: the gateway's login
        there is LOGIN_REQUIRED at the gateway, else the request is asked once more when the page has
        settled (the session may have been renewed meanwhile). The look and the second asking are
        requests of their own, charged and paced like the first."""
        try:
            async with self.request(op):
                return await page_io.fetch_in_page(self.browser, tab, url, **options)
        except NoAnswer:
            pass
        if is_gateway_url(tab.url):  # the tab shows the gateway's page already (another request's step)
            raise gateway_session_ended(GATEWAY_LOGIN_URL)
        async with self.request(op):
            ended = await page_io.gateway_login_shown(self.browser, tab, GATEWAY_LOOK_TIMEOUT)
        if ended:
            raise gateway_session_ended(GATEWAY_LOGIN_URL)
        await page_io.settle(self.browser, tab, SETTLE_TIMEOUT)
        async with self.request(op):
            return await page_io.fetch_in_page(self.browser, tab, url, **options, asked_again=True)

    async def backoff(self, problem: CnkiError, done: int) -> None:
        """Slow the limiter; sleep 2 s, then 4 s; a third rate-limit or 5xx answer is final."""
        self.limiter.slow()
        if done >= len(BACKOFF_SLEEPS):
            raise problem
        await asyncio.sleep(BACKOFF_SLEEPS[done])

    # -- scripts in pages (no request to CNKI) ----------------------------------------------

    async def evaluate(self, tab: Tab, expression: str, timeout: float = CALL_TIMEOUT) -> Any:
        """A script run in ``tab`` for its value."""
        return await page_io.evaluate(self.browser, tab, expression, timeout)

    async def wait_for(self, tab: Tab, js_predicate: str, timeout: float) -> Any:
        """Poll a script in ``tab`` until it is truthy; its value (CONTENT_NOT_READY on timeout)."""
        return await page_io.wait_for(self.browser, tab, js_predicate, timeout)

    async def observe(self, tab: Tab, condition: str = "true", timeout: float = 5.0) -> Observation | None:
        """Inspect a live tab. None while it cannot answer (navigating); a dead browser raises."""
        try:
            data = await page_io.evaluate(self.browser, tab, _observe_js(condition), timeout)
        except CnkiError as exc:
            if not self.browser.running or tab.closed or tab.crashed:
                raise
            log.debug("tab %s did not answer an inspection: %s", tab.target_id[:8], exc.message)
            return None
        if not isinstance(data, dict):
            return None
        url = str(data.get("url") or "")
        html = str(data.get("html") or "")
        seen = Observation(
            url=url,
            html=html,
            ready=bool(data.get("ready")),
            complete=bool(data.get("complete")),
            pending=bool(data.get("pending")),
            condition=bool(data.get("condition")),
            page=await asyncio.to_thread(inspect_live_page, html, url),
        )
        page = seen.page
        if page.identity_ready and page.state == "ready":
            signed_in = page.personal or bool(page.institutions)
            if signed_in or (seen.complete and not seen.pending):  # a header still loading is no "none"
                self.person.signed_in = signed_in
        return seen

    async def glance(self, tab: Tab) -> Observation | None:
        """``observe`` for polling several tabs: one that is closed or cannot answer now is None; only a
        dead browser raises."""
        try:
            return await self.observe(tab)
        except CnkiError as exc:
            if exc.code == "BROWSER_UNAVAILABLE" and not self.browser.running:
                raise
            return None

    # -- snapshots -------------------------------------------------------------------------

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
