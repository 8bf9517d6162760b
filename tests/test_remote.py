"""The route at the browser's doors (site/remote.py), the gateway's pages as page_state reads them, and the
redaction of WebVPN tokens and tickets: pure rules, no browser."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from unittest import mock

import msgspec
import pytest

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Config, Route
from cnki_mcp.core.redact import client_url, redact_markup, redact_url
from cnki_mcp.ops.jobs import OperationContext
from cnki_mcp.pages.page_state import classify_response, gateway_page, inspect_live_page
from cnki_mcp.site import page_io
from cnki_mcp.site.cdp import FetchResult
from cnki_mcp.site.door import Door
from cnki_mcp.site.exchange import Exchange, Request, Spec
from cnki_mcp.site.limiter import Limiter
from cnki_mcp.site.remote import (
    GATEWAY_LOGIN_URL,
    NoAnswer,
    Routing,
    gateway_problem,
    kept,
    route_of,
    route_words,
    show_gateway,
)
from cnki_mcp.site.route import wrdvpn_token

WRDVPN = Route(kind="wrdvpn", gateway="webvpn.example.edu.cn", segment="https")
REWRITE = Route(kind="host_rewrite", gateway="webvpn.example.edu.cn:8001")
KNS = wrdvpn_token("kns.cnki.net")
DETAIL = "https://kns.cnki.net/kcms2/article/abstract?v=abc&uniplatform=NZKPT"


def test_direct_routing_changes_nothing() -> None:
    routing = Routing()
    assert routing.direct
    assert routing.out(DETAIL) == DETAIL
    assert routing.back("https://webvpn.example.edu.cn/login") == "https://webvpn.example.edu.cn/login"
    assert routing.text("<a href='https://webvpn.example.edu.cn/'>") == "<a href='https://webvpn.example.edu.cn/'>"
    assert not routing.gateway_body('<form action="/do-login">')


def test_urls_go_out_in_the_gateway_form_and_come_back_public() -> None:
    routing = Routing(WRDVPN)
    gateway = f"https://webvpn.example.edu.cn/https/{KNS}/kcms2/article/abstract?v=abc&uniplatform=NZKPT"
    assert routing.out(DETAIL) == gateway
    assert routing.back(gateway) == DETAIL
    assert routing.out("https://idp.example.edu.cn/login") == "https://idp.example.edu.cn/login"
    # The gateway's own pages come back on the placeholder host, without their query (it may carry a ticket).
    assert routing.back("https://webvpn.example.edu.cn/login?service=https%3A%2F%2Fx&ticket=T") == GATEWAY_LOGIN_URL
    assert routing.back("https://webvpn.example.edu.cn/wengine-vpn/failed?reason=X") == "https://gateway.invalid/wengine-vpn/failed"
    text = routing.text(f'{{"url": "https:\\/\\/webvpn.example.edu.cn\\/https\\/{KNS}\\/kns8s\\/brief\\/grid"}}')
    assert text == '{"url": "https:\\/\\/kns.cnki.net\\/kns8s\\/brief\\/grid"}'


def test_host_rewriting_tabs_and_ports() -> None:
    routing = Routing(REWRITE)
    assert routing.out(DETAIL) == "https://kns-cnki-net-s.webvpn.example.edu.cn:8001/kcms2/article/abstract?v=abc&uniplatform=NZKPT"
    assert routing.back("https://kns-cnki-net-s.webvpn.example.edu.cn:8001/kns8s/AdvSearch") == "https://kns.cnki.net/kns8s/AdvSearch"


def test_a_gateway_login_body_is_told_apart_from_cnki_pages() -> None:
    routing = Routing(WRDVPN)
    assert routing.gateway_body('<form id="login-form" method="post" action="/do-login">')
    assert routing.gateway_body("<title>统一身份认证 - WebVPN</title>")
    assert routing.gateway_body('<a href="/wengine-vpn/failed?reason=DNS_RECORD_NOT_FOUND">')
    assert not routing.gateway_body('<div class="wx-tit"><h1>论文</h1></div><a href="//login.cnki.net/">登录</a>')


def test_page_state_reads_the_gateway_placeholder_as_the_gateway() -> None:
    assert gateway_page("https://gateway.invalid/login") == "login"
    assert gateway_page("https://gateway.invalid/verify/home") == "challenge"
    assert gateway_page("https://kns.cnki.net/verify/home") == ""
    login = classify_response(200, "https://gateway.invalid/login", "<html></html>")
    assert login is not None and login.code == "LOGIN_REQUIRED" and gateway_problem(login)
    challenge = classify_response(200, "https://gateway.invalid/verify/home", "")
    assert challenge is not None and challenge.code == "VERIFICATION_REQUIRED" and gateway_problem(challenge)
    cnki = classify_response(200, "https://kns.cnki.net/verify/home?captchaType=x", "")
    assert cnki is not None and cnki.code == "VERIFICATION_REQUIRED" and not gateway_problem(cnki)
    state = inspect_live_page("<html><body><form><input type=password></form></body></html>", "https://gateway.invalid/login")
    assert (state.state, state.reason) == ("login", "学校 VPN / 统一身份认证登录页")
    state = inspect_live_page("<html><title>安全验证</title></html>", "https://gateway.invalid/verify/home")
    assert (state.state, state.reason) == ("challenge", "学校 VPN 安全验证")


def test_redaction_hides_wrdvpn_tokens_and_ticket_cookies() -> None:
    url = f"https://webvpn.example.edu.cn/https-8080/{KNS}/kns8s/AdvSearch?wengine_vpn_ticket=abc"
    assert redact_url(url) == "https://webvpn.example.edu.cn/https-8080/REDACTED/kns8s/AdvSearch?wengine_vpn_ticket=REDACTED"
    assert client_url(url) == "https://webvpn.example.edu.cn/https-8080/REDACTED/kns8s/AdvSearch"
    markup = f'<a href="/https/{KNS}/x">x</a> wengine_vpn_ticketwebvpn_example_edu_cn=0a1b2c; Path=/'
    assert redact_markup(markup) == '<a href="/https/REDACTED/x">x</a> wengine_vpn_ticketwebvpn_example_edu_cn=REDACTED; Path=/'


def test_the_route_as_kept_and_named() -> None:
    assert Route().view() == {"kind": "direct"}
    assert WRDVPN.view() == {"kind": "wrdvpn", "gateway": "webvpn.example.edu.cn"}
    assert route_words(REWRITE) == "改写主机名的学校代理（webvpn.example.edu.cn:8001）"
    assert route_words(Route()) == "直接访问知网"
    assert msgspec.json.encode(Config(browser_path="c", route=kept(Route(kind="direct")))) == b'{"browser_path":"c"}'
    assert kept(WRDVPN) is WRDVPN


def test_setup_reads_gateway_pages_and_refuses_portals() -> None:
    assert route_of(f"https://webvpn.example.edu.cn/https/{KNS}/kns8s/AdvSearch") == WRDVPN
    assert route_of("https://fsso.cnki.net/Shibboleth.sso/Login?entityID=x") == Route()
    with pytest.raises(CnkiError) as caught:
        route_of("https://vpn.example.edu.cn/portal")
    assert caught.value.code == "REMOTE_ACCESS_UNSUPPORTED" and caught.value.details == {
        "host": "vpn.example.edu.cn", "path_shape": "portal"}


# --- Door.fetch: the look at the page and the second asking are requests of their own ---------------


class CountingOp:
    """The operation as the site sees it, counting what is charged."""

    operation_id = "op-1"
    on_verification = "ask"
    cancelled = False

    def __init__(self) -> None:
        self.requests = 0

    def charge(self) -> None:
        self.requests += 1


class UnansweredBrowser:
    """A browser whose first in-page request through a gateway gets no answer; it logs every request."""

    def __init__(self, *, login_shown: bool) -> None:
        self.login_shown = login_shown
        self.calls: list[str] = []

    async def fetch_in_page(self, tab: object, url: str, *, asked_again: bool = False, **options: object) -> FetchResult:
        self.calls.append("fetch again" if asked_again else "fetch")
        if not asked_again:
            raise NoAnswer(url, "TypeError: Failed to fetch")
        return FetchResult(status=200, url=url, text="{}")

    async def gateway_login_shown(self, tab: object, timeout: float) -> bool:
        self.calls.append("look")
        return self.login_shown

    async def settle(self, tab: object, timeout: float) -> None:
        self.calls.append("settle")


class GatewayTab:
    def __init__(self, url: str) -> None:
        self.url = url


GRID = "https://kns.cnki.net/kns8s/brief/grid"


async def door_fetch(browser: UnansweredBrowser, tab_url: str) -> tuple[CountingOp, FetchResult | CnkiError]:
    door = Door(browser, Limiter(interval_ms=0), Path("unused"))  # type: ignore[arg-type]
    op = CountingOp()
    # The in-page primitives are page_io's functions over the browser: here they are the fake's.
    with (
        mock.patch.object(page_io, "fetch_in_page", lambda _browser, *a, **k: browser.fetch_in_page(*a, **k)),
        mock.patch.object(page_io, "gateway_login_shown", lambda _browser, *a: browser.gateway_login_shown(*a)),
        mock.patch.object(page_io, "settle", lambda _browser, *a: browser.settle(*a)),
    ):
        try:
            return op, await door.fetch(op, GatewayTab(tab_url), GRID, method="POST")  # type: ignore[arg-type]
        except CnkiError as exc:
            return op, exc


async def test_an_unanswered_request_whose_page_is_fine_is_asked_again_and_all_three_are_charged() -> None:
    browser = UnansweredBrowser(login_shown=False)
    op, answer = await door_fetch(browser, "https://kns.cnki.net/kns8s/AdvSearch")
    assert isinstance(answer, FetchResult) and answer.status == 200
    assert browser.calls == ["fetch", "look", "settle", "fetch again"]
    assert op.requests == 3  # the request, the look at the page, the second asking


async def test_an_unanswered_request_whose_page_is_the_gateway_login_is_login_required_at_the_gateway() -> None:
    browser = UnansweredBrowser(login_shown=True)
    op, answer = await door_fetch(browser, "https://kns.cnki.net/kns8s/AdvSearch")
    assert isinstance(answer, CnkiError) and answer.code == "LOGIN_REQUIRED" and gateway_problem(answer)
    assert browser.calls == ["fetch", "look"]
    assert op.requests == 2


async def test_a_tab_already_on_the_gateway_page_needs_no_look() -> None:
    browser = UnansweredBrowser(login_shown=False)
    op, answer = await door_fetch(browser, GATEWAY_LOGIN_URL)
    assert isinstance(answer, CnkiError) and answer.code == "LOGIN_REQUIRED" and gateway_problem(answer)
    assert browser.calls == ["fetch"]
    assert op.requests == 1


class ShownExchange(Exchange[str]):
    """A request from a CNKI page that got no answer once; it records the challenges it is asked to show."""

    spec = Spec("shown", "shown", classify=lambda answer: None, parse=lambda text, url: text)

    def __init__(self) -> None:
        self.shown: list[tuple[str, str, str]] = []

    async def build(self, op: OperationContext) -> Request:
        return Request(GatewayTab("https://navi.cnki.net/knavi/journals/ABCD/detail"), GRID, "POST")  # type: ignore[arg-type]

    async def challenge(
        self, op: OperationContext, problem: CnkiError, answer: FetchResult, epoch: int, final: bool
    ) -> None:
        self.shown.append((problem.code, answer.url, answer.text))


async def test_the_gateway_login_met_while_asking_is_shown_by_the_exchange_and_the_request_asked_again() -> None:
    # Every exchange alike (a navi fragment has no turned_away of its own): the look found the gateway's login.
    browser = UnansweredBrowser(login_shown=True)
    asked = 0

    async def fetch_in_page(tab: object, url: str, **options: object) -> FetchResult:
        nonlocal asked
        asked += 1
        if asked == 1:
            return await browser.fetch_in_page(tab, url)
        return FetchResult(status=200, url=url, text="answer")

    door = Door(browser, Limiter(interval_ms=0), Path("unused"))  # type: ignore[arg-type]
    op, exchange = CountingOp(), ShownExchange()
    with (
        mock.patch.object(page_io, "fetch_in_page", lambda _browser, *a, **k: fetch_in_page(*a, **k)),
        mock.patch.object(page_io, "gateway_login_shown", lambda _browser, *a: browser.gateway_login_shown(*a)),
    ):
        answer = await door.exchange(op, exchange)  # type: ignore[arg-type]
    assert answer == "answer"
    assert exchange.shown == [("LOGIN_REQUIRED", GATEWAY_LOGIN_URL, "")]
    assert op.requests == 3  # the request, the look at the page, the request asked again


def test_no_answer_elsewhere_is_resource_failed() -> None:
    problem = NoAnswer(GRID, "TypeError: Failed to fetch")
    assert problem.code == "RESOURCE_FAILED" and problem.details == {"url": GRID, "error": "TypeError: Failed to fetch"}


class NavigatingBrowser:
    def __init__(self) -> None:
        self.navigated: list[str] = []

    async def navigate(self, tab: object, url: str, timeout: float) -> None:
        self.navigated.append(url)


async def test_loading_the_page_again_for_the_gateway_login_is_a_charged_request() -> None:
    charged: list[str] = []

    @contextlib.asynccontextmanager
    async def request() -> AsyncIterator[None]:
        charged.append("request")
        yield

    browser = NavigatingBrowser()
    await show_gateway(browser, GatewayTab("https://kns.cnki.net/kns8s/AdvSearch"), request)
    assert browser.navigated == ["https://kns.cnki.net/kns8s/AdvSearch"] and charged == ["request"]
    await show_gateway(browser, GatewayTab(GATEWAY_LOGIN_URL), request)  # on the gateway's page already
    assert browser.navigated == ["https://kns.cnki.net/kns8s/AdvSearch"] and charged == ["request"]
