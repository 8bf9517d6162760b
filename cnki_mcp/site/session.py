"""Login and session identity (the login and session_status tools).

Identity is read from the KNS page header only: a personal account (``.ecp_header_personalName_loginbg``
or a logout control) and institution names (``.ecp_header_unitName`` …). Cookies and passwords are
never read: a person types credentials into the browser window, never into the MCP client.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import msgspec

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Route, SessionState
from cnki_mcp.ops.jobs import OperationContext
from cnki_mcp.pages.page_state import gateway_page, parse_session
from cnki_mcp.pages.urls import is_cnki_url
from cnki_mcp.site.browser import Tab
from cnki_mcp.site.door import ADVANCED_SEARCH_URL, BOOTSTRAP_TIMEOUT, Observation
from cnki_mcp.site.human import span
from cnki_mcp.site.route import DIRECT, Recognition, discover, recognise
from cnki_mcp.site.site import Site

log = logging.getLogger(__name__)


class Stage(msgspec.Struct, frozen=True):
    """A step of a login or a status check: the stage its caller shows from now on (``research.backend``),
    with its progress (``notice``: what the person is told in the progress message)."""

    name: str
    progress: dict[str, str] | None = None


def gateway_notice(url: str) -> Stage:
    """The person is told, in Chinese, which host every request will go through before the first one does."""
    host = (urlsplit(url).hostname or "")[:100]
    return Stage("via_gateway", {
        "gateway": host,
        "notice": f"即将经由 {host} 访问知网：登录以及之后的检索、下载都会经过这台主机。"
        "只有在经它登录知网成功后才会保存这一访问方式；若不认识这台主机，请用 operation_control 的 cancel 取消。",
    })


IDENTITY_TIMEOUT = 12.0
NEGATIVE_STABLE = 0.75  # a "not logged in" header must stay settled this long
IDENTITY_POLL = 0.12
LOGIN_POLL = 1.5
LOGIN_TAB_TIMEOUT = 2.0
LOGIN_TIMEOUT = 20 * 60.0

GATEWAY_WAIT_MESSAGE = "请在弹出的浏览器窗口登录学校 VPN / 统一身份认证；登录后能看到知网入口时自动继续"
LOGIN_WAIT_MESSAGE = "请在弹出的浏览器窗口完成登录；登录成功后自动继续（机构远程入口完成后调用 operation_control resume）"
LOGIN_MESSAGES = {
    "gateway": "请在弹出的浏览器窗口登录学校 VPN / 统一身份认证；通过 VPN 打开的知网页面显示机构名后自动继续",
    "federated": "请在弹出的浏览器窗口登录学校的统一身份认证（CARSI）；回到知网并显示机构名后自动继续",
}


def session_view(
    state: SessionState, *, cached: bool = False, route: Route = DIRECT, gateway_session: str = "",
    site: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The login / session_status answer: the seed's fields, never cookies or account names; the route
    (kind and gateway host, never a ticket) and, through a gateway, whether its session was alive; the
    overseas site when the session is on it (``Routing.site_view``)."""
    data: dict[str, Any] = {"personal": state.personal, "institution": state.institution}
    if state.institution == "observed" and state.institution_evidence:
        data["institution_evidence"] = list(state.institution_evidence)
    data["permission_scope"] = "unknown"
    data["evidence_source"] = state.evidence_source
    if state.observed_at:
        data["observed_at"] = state.observed_at
    if cached:
        data["cached"] = True
    if route.kind != "direct":  # direct access answers as it always did
        data["route"] = route.view()
        if gateway_session:
            data["gateway_session"] = gateway_session
    if site is not None and site["kind"] != "mainland":  # the mainland site answers as it always did
        data["site"] = site
    return data


def advised(view: dict[str, Any]) -> dict[str, Any]:
    """session_status's answer with, when no login is known, what to do next (``next_step``)."""
    if view.get("personal") != "authenticated" and view.get("institution") != "observed":
        view["next_step"] = NONE_SEEN if view.get("observed_at") else LOOK_FIRST
    return view


# What a client does next when no login is known: look first, then log in for what needs one.
LOOK_FIRST = "还没有识别过登录状态：用 session_status（refresh=true）在后台页面识别一次；检索和题录不需要登录。"
NONE_SEEN = (
    "最近一次识别没有看到个人或机构登录：检索、题录和摘要照常可用；需要全文（阅读、下载）时用 login 登录"
    "（个人账号，或机构 IP、学校 VPN），之后 session_status 会显示登录状态。"
)


def identified(state: SessionState) -> bool:
    return state.personal == "authenticated" or state.institution == "observed"


def _signature(state: SessionState) -> tuple[str, tuple[str, ...]]:
    return state.personal, tuple(state.institution_evidence)


class Sessions:
    """The identity last observed in this process, and the login / refresh flows that observe it."""

    def __init__(
        self,
        site: Site,
        remember: Callable[[list[str]], None] | None = None,
        keep_route: Callable[[Route], Awaitable[None]] | None = None,
    ) -> None:
        """``remember`` is told the names an identity shows (the store keeps them out of reports);
        ``keep_route`` keeps a route login set (config.json)."""
        self.site = site
        self.last: SessionState | None = None
        self._remember = remember
        self._keep_route = keep_route
        self.gateway_session = ""  # alive | expired, as last seen through the route ("" not seen)

    @property
    def route(self) -> Route:
        return self.site.browser.routing.route

    async def _set_route(self, route: Route, *, keep: bool = True) -> None:
        """``route`` in force from now on; ``keep``: also in config.json (a gateway only after a login through it)."""
        changed = route != self.route
        self.site.browser.routing.route = route
        if changed:
            # The work and render tabs (and the search template captured on one) stay on the old route's
            # origin: the next listing would still go that way. New tabs open by the new route.
            await self.site.reset_tabs()
        if keep and self._keep_route is not None:
            await self._keep_route(route)

    def _view(self, state: SessionState, *, cached: bool = False) -> dict[str, Any]:
        return session_view(state, cached=cached, route=self.route, gateway_session=self.gateway_session,
                            site=self.site.browser.routing.site_view())

    def _observed(self, state: SessionState) -> None:
        self.last = state
        names = [*state.institution_evidence, *state.personal_evidence]
        if names and self._remember is not None:
            self._remember(names)

    def cached(self) -> dict[str, Any]:
        """session_status(refresh=false): the last observation, or not_checked."""
        return self._view(self.last or SessionState(), cached=True)

    async def _open(self, op: OperationContext, url: str) -> Tab:
        tab = await self.site.new_tab()
        try:
            await self.site.navigate(op, tab, url, BOOTSTRAP_TIMEOUT)
        except BaseException:
            await self.site.close_tab(tab)
            raise
        return tab

    async def _identity(self, op: OperationContext, tab: Tab) -> SessionState:
        """Wait (12 s) for the header: a positive identity at once, a negative one once settled for 750 ms."""
        settled_since: float | None = None

        def accept(seen: Observation) -> SessionState | None:
            nonlocal settled_since
            state = parse_session(seen.html)
            if identified(state):
                return state
            if seen.page.identity_ready and seen.complete and not seen.pending:
                now = time.monotonic()
                settled_since = settled_since if settled_since is not None else now
                if now - settled_since >= NEGATIVE_STABLE:
                    return state
            else:
                settled_since = None
            return None

        state = await self.site.wait_page(op, tab, accept, IDENTITY_TIMEOUT)
        self._observed(state)
        return state

    async def refresh(self, op: OperationContext) -> AsyncIterator[Stage | dict[str, Any]]:
        """session_status(refresh=true): read the header of the search page in a background tab (its
        stage, then the view)."""
        yield Stage("checking_identity")
        tab = await self._open(op, ADVANCED_SEARCH_URL)
        try:
            if not self.site.browser.routing.direct:
                seen = await self.site.observe(tab)
                self.gateway_session = "expired" if seen is not None and gateway_page(seen.url) else "alive"
                if self.gateway_session == "expired":  # a status check does not wait for a person
                    yield self._view(self.last or SessionState())
                    return
            yield self._view(await self._identity(op, tab))
        finally:
            await self.site.close_tab(tab)

    async def login(
        self, op: OperationContext, remote_access_url: str = "", force: bool = False
    ) -> AsyncIterator[Stage | dict[str, Any]]:
        """Open the login entry for a person and wait until an identity shows (or resume, or 20 minutes);
        its stages, then the view.

        A ``remote_access_url`` sets the route first (``route.recognise``; CARSI and public CNKI pages: direct,
        a portal whose scheme its URL does not tell: read from where the person lands, ``discover``);
        ``force`` without one goes back to direct access.
        """
        recognition = recognise(remote_access_url) if remote_access_url else None
        previous = self.route
        if recognition is not None and recognition.route is not None:
            await self._set_route(recognition.route, keep=False)  # for this login only, until it succeeds
        elif recognition is None and force and self.route.kind != "direct":
            await self._set_route(DIRECT)
        if recognition is not None and recognition.login == "gateway":
            yield gateway_notice(remote_access_url)  # before any request goes there
        yield Stage("opening_login")
        confirmed = False
        try:
            async for step in self._login(op, recognition, remote_access_url, force):
                confirmed = isinstance(step, dict) and identified(self.last or SessionState())
                yield step
        finally:
            if recognition is not None and recognition.login == "gateway":
                op.stage("login_ended", {})  # the notice named the host: the stored operation keeps no trace of it
            if self.route != previous and self.route.kind != "direct":
                if confirmed:
                    await self._set_route(self.route)  # CNKI's header showed through it: kept from now on
                else:
                    await self._set_route(previous, keep=False)  # a failed or cancelled login leaves no trace

    async def _login(
        self, op: OperationContext, recognition: Recognition | None, remote_access_url: str, force: bool
    ) -> AsyncIterator[Stage | dict[str, Any]]:
        tab = await self._open(op, remote_access_url or ADVANCED_SEARCH_URL)
        try:
            before: SessionState | None = None
            if recognition is not None and recognition.route is None:
                yield Stage("waiting_for_gateway")
                await self.site.person.attend(
                    op, tab, GATEWAY_WAIT_MESSAGE, self._portal_route(tab),
                    timeout=LOGIN_TIMEOUT, poll=LOGIN_POLL, expired=_login_expired,
                )
                await self.site.navigate(op, tab, ADVANCED_SEARCH_URL, BOOTSTRAP_TIMEOUT)
            if not remote_access_url:
                before = await self._identity(op, tab)
                if identified(before) and not force:
                    yield self._view(before)
                    return
            yield Stage("waiting_for_login")
            message = LOGIN_MESSAGES.get(recognition.login if recognition is not None else "cnki", LOGIN_WAIT_MESSAGE)
            await self.wait_for_login(op, tab, before if force else None, message)
            yield Stage("confirming_login")
            await self.site.navigate(op, tab, ADVANCED_SEARCH_URL, BOOTSTRAP_TIMEOUT)
            state = await self._identity(op, tab)
            if not self.site.browser.routing.direct:
                self.gateway_session = "alive"
            yield self._view(state)
        finally:
            await self.site.close_tab(tab)

    def _portal_route(self, tab: Tab) -> Callable[[], Awaitable[bool]]:
        """Whether the page the person reached after the portal's login names the route (its CNKI link,
        or a proxied CNKI page itself); the route is set once it does."""

        async def check() -> bool:
            seen = await self.site.observe(tab, "true", LOGIN_TAB_TIMEOUT)
            if seen is None:
                return False
            found = discover(seen.url, seen.html)
            if found is None:
                with contextlib.suppress(CnkiError):  # already on a proxied CNKI page
                    found = recognise(seen.url).route if not is_cnki_url(seen.url) else None
            if found is None or found.kind == "direct":
                return False
            await self._set_route(found, keep=False)  # kept once the login through it succeeds
            return True

        return check

    async def wait_for_login(
        self, op: OperationContext, tab: Tab, before: SessionState | None, message: str = LOGIN_WAIT_MESSAGE
    ) -> None:
        """The person logs in on ``tab`` (or on any CNKI tab it opens); ends once an identity shows, on
        ``operation_control resume``, or LOGIN_TIMEOUT after 20 minutes."""
        await self.site.person.attend(
            op, tab, message, self._logged_in(tab, before),
            timeout=LOGIN_TIMEOUT, poll=LOGIN_POLL, expired=_login_expired,
        )

    def _logged_in(self, tab: Tab, before: SessionState | None) -> Callable[[], Awaitable[bool]]:
        """Whether any CNKI tab now shows a personal or institution identity (2 s a tab).

        Besides the login tab, a tab counts only when its page was loaded after the wait began: a
        tab left open from before still shows the header of that time. With ``force`` (``before``
        given) only an identity different from the one before counts.
        """
        fresh = f"performance.timeOrigin >= {time.time() * 1000:.0f}"

        async def check() -> bool:
            for candidate in await self._login_tabs(tab):
                try:
                    seen = await self.site.observe(candidate, fresh, LOGIN_TAB_TIMEOUT)
                except CnkiError:
                    if candidate is tab or not self.site.browser_running:
                        raise
                    continue  # another tab closed while we looked
                if seen is None or not is_cnki_url(seen.url) or candidate is not tab and not seen.condition:
                    continue
                state = parse_session(seen.html)
                if identified(state) and (before is None or _signature(state) != _signature(before)):
                    self._observed(state)
                    return True
            return False

        return check

    async def _login_tabs(self, tab: Tab) -> list[Tab]:
        """The login tab first, then every other page of the browser: ours, the ones the login opened
        (e.g. a www.cnki.net tab after SSO) and the ones a person opened by hand."""
        others = [t for t in await self.site.page_tabs() if t is not tab]
        return [t for t in [tab, *others] if not t.closed and not t.crashed]


async def _login_expired() -> CnkiError:
    return CnkiError("LOGIN_TIMEOUT", f"等待登录超过 {span(LOGIN_TIMEOUT)}，已停止等待；登录完成后重新调用 login 即可。")

