"""The simulator's university gateway (tests/kns/gateway.py) and CARSI IdP, over plain HTTPS; one browser check."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import os
import re
import shutil
from typing import Any
from urllib.parse import quote

import pytest

from cnki_mcp.core.clock import within
from cnki_mcp.site import route
from tests.harness import chromium_on_cdp
from tests.kns import gateway as gw
from tests.kns.server import KnsSimulator
from tests.test_kns_simulator import fetch

KNS_TOKEN = "77726476706e69737468656265737421fbf952d2243e635930068cb8"
WRDVPN_SEARCH = f"https://{gw.WEBVPN}/https/{KNS_TOKEN}/kns8s/AdvSearch"
REWRITE_SEARCH = f"https://kns-cnki-net-s.{gw.WEBVPN}/kns8s/AdvSearch"
PREFIX_SEARCH = f"https://{gw.PREFIX_HOST}{gw.PREFIX}https://kns.cnki.net/kns8s/AdvSearch"


def ticket_cookie(kns: KnsSimulator, host: str = gw.WEBVPN) -> dict[str, str]:
    return {"Cookie": f"{gw.cookie_name(host)}={kns.gateway_login()}"}


def test_the_gateway_token_is_the_products_token() -> None:
    for host in ("www.cnki.net", "kns.cnki.net", "navi.cnki.net", "bar.cnki.net", "login.cnki.net", "docdown.cnki.net"):
        assert gw.token(host) == route.wrdvpn_token(host)
        assert gw.token_host(route.wrdvpn_token(host)) == host


@pytest.mark.parametrize(
    ("url", "cookie_host", "kind", "link_start"),
    [
        (WRDVPN_SEARCH, gw.WEBVPN, "wrdvpn", f"https://{gw.WEBVPN}/https/77726476706e69737468656265737421fcf846"),
        (REWRITE_SEARCH, gw.WEBVPN, "host_rewrite", "https://login-cnki-net-s.webvpn.sim-univ.edu.cn/"),
        (PREFIX_SEARCH, gw.PREFIX_HOST, "prefix", f"https://{gw.PREFIX_HOST}/-----https://login.cnki.net/"),
    ],
)
def test_each_kind_proxies_and_rewrites_every_cnki_url(kns: KnsSimulator, url: str, cookie_host: str, kind: str,
                                                       link_start: str) -> None:
    reply = fetch(kns, url, headers=ticket_cookie(kns, cookie_host))

    assert reply.status == 200
    assert reply.css("title")[0].text == "高级检索-中国知网"
    # no CNKI URL left outside the tunnel (the prefix form carries the public URL after its prefix)
    assert re.findall(r"(?<!-----https:)//(?:[a-z]+\.)?cnki\.net", reply.text) == []
    # the search page links to login.cnki.net only (its own URLs are root-relative or scripted)
    links = [a.get("href") for a in reply.css("a[href]") if "cnki" in a.get("href") or "sim-univ" in a.get("href")]
    assert len(links) == 3 and all(link.startswith(link_start) for link in links)
    assert kns.count("search") == 1 and kns.requests[-1].host == "kns.cnki.net"
    assert kns.gateway.count(kind, "kns.cnki.net") == 1


def test_the_login_page_sets_the_ticket_and_returns_to_the_page(kns: KnsSimulator) -> None:
    first = fetch(kns, WRDVPN_SEARCH)
    login = fetch(kns, first.headers["location"])
    posted = fetch(kns, f"https://{gw.WEBVPN}/do-login", method="POST",
                   form={"_csrf": "sim-csrf", "username": "s1", "password": "p", "service": WRDVPN_SEARCH})
    cookie = posted.headers["set-cookie"].split(";")[0]
    again = fetch(kns, posted.headers["location"], headers={"Cookie": cookie})

    assert first.status == 302
    assert first.headers["location"] == f"https://{gw.WEBVPN}/login?service={quote(WRDVPN_SEARCH, safe='')}"
    assert login.css("form#login-form")[0].get("action") == "/do-login"
    assert cookie.startswith("wengine_vpn_ticketwebvpn_sim-univ_edu_cn=sim")
    assert "Domain=webvpn.sim-univ.edu.cn" in posted.headers["set-cookie"]
    assert posted.headers["location"] == WRDVPN_SEARCH
    assert again.status == 200 and kns.count("search") == 1


def test_two_factor_comes_between_password_and_ticket(kns: KnsSimulator) -> None:
    kns.configure_gateway(two_factor=True)

    posted = fetch(kns, f"https://{gw.WEBVPN}/do-login", method="POST", form={"service": WRDVPN_SEARCH})
    page = fetch(kns, f"https://{gw.WEBVPN}{posted.headers['location']}")
    confirmed = fetch(kns, f"https://{gw.WEBVPN}/do-confirm-login", method="POST", form={"service": WRDVPN_SEARCH})

    assert "set-cookie" not in posted.headers
    assert page.css("form#confirm-form") and "二次验证" in page.text
    assert confirmed.headers["set-cookie"].startswith("wengine_vpn_ticketwebvpn_sim-univ_edu_cn=")


def test_location_headers_and_referers_are_mapped(kns: KnsSimulator) -> None:
    paper = kns.corpus.papers[0]
    order = route.outward(route.recognise(WRDVPN_SEARCH).route, kns.order_url(paper, "pdf"))  # type: ignore[arg-type]
    detail = route.outward(route.recognise(WRDVPN_SEARCH).route, kns.detail_url(paper))  # type: ignore[arg-type]
    kns.configure(login="institution")

    reply = fetch(kns, order, headers={**ticket_cookie(kns), "Referer": detail})

    bar = "77726476706e69737468656265737421f2f653d2243e635930068cb8"
    assert reply.status == 302
    assert reply.headers["location"].startswith(f"https://{gw.WEBVPN}/https/{bar}/bar/download/file?id=")
    assert kns.requests[-1].referer == kns.detail_url(paper)


def test_an_expired_session_sends_pages_to_login_and_can_drop_fetches(kns: KnsSimulator) -> None:
    kns.configure_gateway(expire_after=2)
    cookie = ticket_cookie(kns)

    served = [fetch(kns, WRDVPN_SEARCH, headers=cookie).status for _ in range(3)]
    rewrite = fetch(kns, REWRITE_SEARCH, headers={**cookie, "Sec-Fetch-Mode": "cors"})
    kns.configure_gateway(fetch_failure="drop")
    with pytest.raises((ConnectionError, OSError)):
        fetch(kns, REWRITE_SEARCH, headers={**cookie, "Sec-Fetch-Mode": "cors"})

    assert served == [200, 200, 302]
    assert rewrite.status == 302 and rewrite.headers["location"].startswith(f"https://{gw.WEBVPN}/login?service=")
    assert "access-control-allow-origin" not in rewrite.headers
    assert kns.count("search") == 2


def test_drop_fetches_resets_in_page_requests_mid_answer_while_the_session_lives(kns: KnsSimulator) -> None:
    kns.configure_gateway(drop_fetches=1)
    cookie = ticket_cookie(kns)

    with pytest.raises(http.client.IncompleteRead):  # the answer began, then the connection ended
        fetch(kns, REWRITE_SEARCH, headers={**cookie, "Sec-Fetch-Mode": "cors"})
    again = fetch(kns, REWRITE_SEARCH, headers={**cookie, "Sec-Fetch-Mode": "cors"})

    assert again.status == 200
    assert kns.count("search") == 1  # the reset request never reached CNKI
    assert kns.gateway.count("host_rewrite") == 2


def test_expire_at_and_drop_only_put_the_faults_at_one_request(kns: KnsSimulator) -> None:
    kns.configure_gateway(expire_at="/kns8s/defaultresult/", drop_fetches=1, drop_only="/kns8s/group/result")
    cookie = ticket_cookie(kns)
    results = REWRITE_SEARCH.replace("/kns8s/AdvSearch", "/kns8s/defaultresult/index?korder=SU&kw=" + quote("研究"))
    panel = REWRITE_SEARCH.replace("/kns8s/AdvSearch", "/kns8s/group/result")

    first = fetch(kns, REWRITE_SEARCH, headers={**cookie, "Sec-Fetch-Mode": "cors"})  # no fault falls here
    ended = fetch(kns, results, headers=cookie)
    after = fetch(kns, REWRITE_SEARCH, headers=cookie)
    fresh = ticket_cookie(kns)
    again = fetch(kns, results, headers=fresh)  # the session ended once: a new ticket is served there
    with pytest.raises(http.client.IncompleteRead):
        fetch(kns, panel, "POST", form={"queryJson": "{}"}, headers={**fresh, "Sec-Fetch-Mode": "cors"})

    assert first.status == 200
    assert ended.status == 302 and ended.headers["location"].startswith(f"https://{gw.WEBVPN}/login?service=")
    assert after.status == 302
    assert again.status == 200
    assert kns.gateway.drop_fetches == 0
    assert kns.count("group") == 0  # the reset request never reached CNKI
    assert [(e.path, e.answer) for e in kns.gateway.log] == [
        ("/kns8s/AdvSearch", "served"), ("/kns8s/defaultresult/index", "login"), ("/kns8s/AdvSearch", "login"),
        ("/kns8s/defaultresult/index", "served"), ("/kns8s/group/result", "reset")]


def test_expire_now_ends_every_ticket(kns: KnsSimulator) -> None:
    cookie = ticket_cookie(kns)
    before = fetch(kns, PREFIX_SEARCH, headers=ticket_cookie(kns, gw.PREFIX_HOST)).status

    kns.gateway.expire()

    assert before == 200
    assert fetch(kns, WRDVPN_SEARCH, headers=cookie).status == 302


@pytest.mark.parametrize(("url", "verify_root"), [(WRDVPN_SEARCH, f"https://{gw.WEBVPN}"),
                                                  (REWRITE_SEARCH, f"https://kns-cnki-net-s.{gw.WEBVPN}")])
def test_a_challenge_at_the_gateway_root_until_solved(kns: KnsSimulator, url: str, verify_root: str) -> None:
    kns.configure_gateway(challenge="blockPuzzle", challenge_after=1)
    cookie = ticket_cookie(kns)

    first, second = fetch(kns, url, headers=cookie), fetch(kns, url, headers=cookie)
    page = fetch(kns, second.headers["location"], headers=cookie)
    status = fetch(kns, f"{verify_root}/verify/status?kind=captcha", headers=cookie)
    fetch(kns, f"{verify_root}/verify/solve", method="POST", form={}, headers=cookie)
    after = fetch(kns, url, headers=cookie)

    assert first.status == 200 and second.status == 302
    assert second.headers["location"] == f"{verify_root}/verify/home?captchaType=blockPuzzle&returnUrl={quote(url, safe='')}"
    assert page.css("title")[0].text == "安全验证"
    assert status.text == '{"pending": true, "solves": 0}'
    assert after.status == 200 and kns.solves == 1


def test_wrdrecordvisit_required_on_a_hosts_first_request(kns: KnsSimulator) -> None:
    kns.configure_gateway(require_visit=True)
    cookie = ticket_cookie(kns)

    bare = fetch(kns, WRDVPN_SEARCH, headers=cookie)
    visited = fetch(kns, WRDVPN_SEARCH + "?wrdrecordvisit=1764633600000", headers=cookie)
    later = fetch(kns, WRDVPN_SEARCH, headers=cookie)

    assert bare.status == 302 and bare.headers["location"].endswith("/wengine-vpn/failed?reason=DNS_RECORD_NOT_FOUND")
    assert visited.status == 200 and later.status == 200


def test_root_relative_requests_follow_the_referers_host(kns: KnsSimulator) -> None:
    reply = fetch(kns, f"https://{gw.WEBVPN}/verify/status?kind=captcha", headers=ticket_cookie(kns))
    grid = fetch(kns, f"https://{gw.WEBVPN}/kns8s/brief/grid", method="POST", form={"QueryJson": ""},
                 headers={**ticket_cookie(kns), "Referer": WRDVPN_SEARCH})

    assert reply.status == 200 and kns.count("verify") == 0  # the gateway's own /verify, not CNKI's
    assert grid.status == 200 and kns.count("grid") == 1 and kns.requests[-1].host == "kns.cnki.net"


def test_gateway_own_paths_are_not_proxied(kns: KnsSimulator) -> None:
    cookie = fetch(kns, f"https://{gw.WEBVPN}/wengine-vpn/cookie?method=get&host=kns.cnki.net&scheme=https&path=/",
                   headers=ticket_cookie(kns))
    portal = fetch(kns, f"https://{gw.WEBVPN}/", headers=ticket_cookie(kns))

    assert cookie.headers["content-type"].startswith("text/plain") and "LID=" in cookie.text
    assert route.discover(f"https://{gw.WEBVPN}/", portal.text) == route.Route(kind="wrdvpn", gateway=gw.WEBVPN, segment="https")
    assert kns.requests == []


def test_carsi_sp_initiated_logs_cnki_in_as_the_university(kns: KnsSimulator) -> None:
    start = (f"https://{gw.FSSO}/Shibboleth.sso/Login?entityID=https://{gw.IDP}/idp/shibboleth"
             f"&target={quote('https://fsso.cnki.net/secure/default.aspx', safe='')}")

    to_idp = fetch(kns, start)
    idp = fetch(kns, to_idp.headers["location"])
    relay = idp.css("input[name=RelayState]")[0].get("value")
    assertion = fetch(kns, f"https://{gw.IDP}/idp/login", method="POST", form={"RelayState": relay, "j_username": "s1"})
    back = fetch(kns, f"https://{gw.FSSO}/Shibboleth.sso/SAML2/POST", method="POST",
                 form={"SAMLResponse": "sim-assertion", "RelayState": relay})
    secure = fetch(kns, back.headers["location"])

    assert to_idp.headers["location"].startswith(f"https://{gw.IDP}/idp/profile/SAML2/Redirect/SSO?")
    assert idp.css("form#idp-form") and relay == "https://fsso.cnki.net/secure/default.aspx"
    assert assertion.css("form#saml")[0].get("action") == f"https://{gw.FSSO}/Shibboleth.sso/SAML2/POST"
    assert secure.headers["location"] == "https://www.cnki.net/"
    assert (kns.scenario.login, kns.scenario.institution_name) == ("institution", gw.UNIVERSITY)


def test_carsi_idp_initiated_shows_the_form(kns: KnsSimulator) -> None:
    reply = fetch(kns, f"https://{gw.IDP}/idp/profile/SAML2/Unsolicited/SSO?providerId=https://fsso.cnki.net/shibboleth"
                       "&target=https://www.cnki.net")

    assert reply.css("input[name=RelayState]")[0].get("value") == "https://www.cnki.net"
    assert kns.scenario.login == "none"


def test_unknown_gateway_switches_are_refused(kns: KnsSimulator) -> None:
    with pytest.raises(TypeError):
        kns.configure_gateway(ticket_lifetime=3)
    with pytest.raises(ValueError):
        kns.configure_gateway(fetch_failure="cors")


# ---------------------------------------------------------------- one real browser


@pytest.mark.browser
async def test_chromium_loads_a_proxied_search_page(kns: KnsSimulator) -> None:
    exe = shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(exe):
        pytest.skip("chromium not installed")
    import nodriver as uc
    from nodriver import cdp

    async with chromium_on_cdp(exe, kns.browser_arg_list, "kns-gw-profile-") as port:
        browser = await uc.start(host="127.0.0.1", port=port, browser_executable_path=exe)
        tab = await browser.get(WRDVPN_SEARCH)

        async def js(expr: str) -> Any:
            ro, exc = await within(
                tab.send(cdp.runtime.evaluate(expression=expr, await_promise=True, return_by_value=True)), 10)
            assert exc is None, exc
            return ro.value

        async def until(expr: str) -> Any:
            for _ in range(200):
                value = await js(expr)
                if value:
                    return value
                await asyncio.sleep(0.05)
            raise AssertionError(f"timed out waiting for {expr}")

        await until("document.readyState === 'complete' && !!document.querySelector('#login-form')")
        await js("document.querySelector('#login-form button').click(), true")
        await until("document.readyState === 'complete' && typeof cnkiSearch === 'object' && location.pathname.startsWith('/https/')")
        await js("""(() => { const i = document.querySelector('#gradetxt input[data-tipid]');
                    i.value = '大语言模型'; i.dispatchEvent(new Event('change', {bubbles: true}));
                    document.querySelector('input.btn-search').click(); return true; })()""")
        rows = await until("document.querySelectorAll('#briefBox table.result-table-list tbody tr').length")
        href = await js("document.querySelector('#briefBox td.name a').href")

        assert rows == 20
        assert href.startswith(f"https://{gw.WEBVPN}/https/{KNS_TOKEN}/kcms2/article/abstract?")
        assert await js("location.href") == WRDVPN_SEARCH
        # through the gateway: the first visit (sent to login), the page after login, the grid POST; what the browser
        # fetches on its own when it gets round to it (an icon) is no part of the page
        pages = [(entry.kind, entry.path, entry.dest) for entry in kns.gateway.log
                 if entry.host == "kns.cnki.net" and entry.dest in ("document", "empty")]
        assert kns.count("grid") == 1
        assert pages == [("wrdvpn", "/kns8s/AdvSearch", "document")] * 2 + [("wrdvpn", "/kns8s/brief/grid", "empty")]
        # the connection drops while Chromium closes; proc.wait below is the check
        with contextlib.suppress(Exception):
            await within(tab.send(cdp.browser.close()), 5)
