"""The route at the browser's doors (site/remote.py), the gateway's pages as page_state reads them, and the
redaction of WebVPN tokens and tickets: pure rules, no browser."""

from __future__ import annotations

import msgspec
import pytest

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Config, Route
from cnki_mcp.core.redact import client_url, redact_markup, redact_url
from cnki_mcp.pages.page_state import classify_response, gateway_page, inspect_live_page
from cnki_mcp.site.remote import (
    GATEWAY_LOGIN_URL,
    Routing,
    gateway_problem,
    kept,
    route_of,
    route_view,
    route_words,
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
    assert route_view(Route()) == {"kind": "direct"}
    assert route_view(WRDVPN) == {"kind": "wrdvpn", "gateway": "webvpn.example.edu.cn"}
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
