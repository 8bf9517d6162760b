"""The remote-access route (cnki_mcp/site/route.py): tokens, recognition, URLs both ways, text mapping."""

from __future__ import annotations

from urllib.parse import quote

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Config, Route
from cnki_mcp.site import route
from cnki_mcp.site.route import (
    DIRECT,
    Recognition,
    inward,
    inward_text,
    outward,
    recognise,
)

IV = "77726476706e69737468656265737421"
WRDVPN = Route(kind="wrdvpn", gateway="webvpn.sim-univ.edu.cn", segment="https")
WRDVPN_PORT = Route(kind="wrdvpn", gateway="webvpn.sim-univ.edu.cn:8443", segment="https")
REWRITE = Route(kind="host_rewrite", gateway="webvpn.zju.edu.cn:8001")
REWRITE_PLAIN = Route(kind="host_rewrite", gateway="vpn2.njau.edu.cn")
PREFIX = Route(kind="prefix", gateway="zylib.nxu.edu.cn", prefix="/-----")
ROUTES = [WRDVPN, WRDVPN_PORT, REWRITE, REWRITE_PLAIN, PREFIX]


# --- the wrdvpn token: the six published tokens (real-pages-2026 §8) ------------------------------------


@pytest.mark.parametrize(
    ("host", "published_tail"),
    [
        ("www.cnki.net", "e7e056d2243e635930068cb8"),
        ("kns.cnki.net", "fbf952d2243e635930068cb8"),
        ("navi.cnki.net", "fef657956933665b774687a98c"),
        ("bar.cnki.net", "f2f653d2243e635930068cb8"),
        ("login.cnki.net", "fcf84695297e6b5e7501c7a29d41"),
        ("docdown.cnki.net", "f4f842982827661e7d0682a5d65b2621"),
    ],
)
def test_token_is_the_published_one(host: str, published_tail: str) -> None:
    token = route.wrdvpn_token(host)

    assert token == IV + published_tail
    assert route.wrdvpn_host(token) == host


def test_token_of_a_host_longer_than_one_block_decodes_back() -> None:
    host = "kns.cnki.net.library.sim-univ.edu.cn"

    token = route.wrdvpn_token(host)

    assert len(token) == 32 + 2 * len(host)
    assert route.wrdvpn_host(token) == host


@pytest.mark.parametrize("token", ["", IV, IV + "f", "00" * 16 + "fbf952d2", "zz" + IV[2:] + "fbf9"])
def test_what_is_no_token_decodes_to_none(token: str) -> None:
    assert route.wrdvpn_host(token) is None


# --- recognise ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (f"https://webvpn.hhu.edu.cn/https/{IV}fbf952d2243e635930068cb8/kns8s/AdvSearch?wrdrecordvisit=1",
         Route(kind="wrdvpn", gateway="webvpn.hhu.edu.cn", segment="https")),
        (f"https://webvpn.sim-univ.edu.cn:8443/https/{IV}e7e056d2243e635930068cb8/",
         Route(kind="wrdvpn", gateway="webvpn.sim-univ.edu.cn:8443", segment="https")),
        ("https://kns-cnki-net-s.vpn2.njau.edu.cn/kcms2/article/abstract?v=x",
         Route(kind="host_rewrite", gateway="vpn2.njau.edu.cn")),
        ("https://kns-cnki-net-s.webvpn.zju.edu.cn:8001/kns8s/AdvSearch",
         Route(kind="host_rewrite", gateway="webvpn.zju.edu.cn:8001")),
        ("https://www-cnki-net-443.webvpn.zju.edu.cn:8001/", Route(kind="host_rewrite", gateway="webvpn.zju.edu.cn:8001")),
        ("https://zylib.nxu.edu.cn/-----https://kns.cnki.net/reader/xml?invoice=a",
         Route(kind="prefix", gateway="zylib.nxu.edu.cn", prefix="/-----")),
        ("https://webvpn.sim-univ.edu.cn/login?cas_login=true", Route(kind="wrdvpn", gateway="webvpn.sim-univ.edu.cn", segment="https")),
        ("https://webvpn.sim-univ.edu.cn/wengine-vpn/failed", Route(kind="wrdvpn", gateway="webvpn.sim-univ.edu.cn", segment="https")),
    ],
)
def test_gateway_forms_are_recognised(url: str, expected: Route) -> None:
    assert recognise(url) == Recognition(route=expected, login="gateway")


@pytest.mark.parametrize(
    "url",
    [
        ("https://fsso.cnki.net/Shibboleth.sso/Login?entityID=https://idp.sim-univ.edu.cn/idp/shibboleth"
         "&target=https://fsso.cnki.net/secure/default.aspx"),
        ("https://idp.sim-univ.edu.cn/idp/profile/SAML2/Unsolicited/SSO?providerId=https://fsso.cnki.net/shibboleth"
         "&target=https://www.cnki.net"),
        "https://ds.carsi.edu.cn/index.php",
    ],
)
def test_carsi_urls_are_direct_with_federated_login(url: str) -> None:
    assert recognise(url) == Recognition(route=DIRECT, login="federated")


def test_a_public_cnki_page_is_direct() -> None:
    assert recognise("https://kns.cnki.net/kns8s/AdvSearch") == Recognition(route=DIRECT, login="cnki")


def test_a_bare_portal_waits_for_its_page() -> None:
    assert recognise("https://webvpn.sim-univ.edu.cn/") == Recognition(route=None, login="gateway")


@pytest.mark.parametrize(
    ("url", "host", "shape"),
    [
        ("https://libproxy.ruc.edu.cn/rwt/CNKI/https/NNVXE/KXReader/Detail?x=1", "libproxy.ruc.edu.cn",
         "/rwt/CNKI/https/NNVXE/KXReader/Detail"),
        ("https://webvpn.sim-univ.edu.cn/s/net/cnki/kns/G.https/kcms2/article", "webvpn.sim-univ.edu.cn",
         "/s/net/cnki/kns/G.https/kcms2"),
        ("https://vpn.ctgu.edu.cn/https/YTB9XwbQ2kZpLs7E4Hn/kcms2/article/abstract?v=1", "vpn.ctgu.edu.cn",
         "/https/<token>/kcms2/article/abstract"),
        (f"https://webvpn.other.edu.cn/https/{'ab' * 16}fbf952d2243e635930068cb8/kns8s/", "webvpn.other.edu.cn",
         "/https/<token>/kns8s/"),
    ],
)
def test_unknown_gateways_are_unsupported_naming_what_was_seen(url: str, host: str, shape: str) -> None:
    with pytest.raises(CnkiError) as caught:
        recognise(url)

    assert caught.value.code == "REMOTE_ACCESS_UNSUPPORTED"
    assert caught.value.details == {"host": host, "path_shape": shape}
    assert host in caught.value.message and shape in caught.value.message
    assert "x=1" not in caught.value.message and "v=1" not in caught.value.message


@pytest.mark.parametrize("url", ["http://webvpn.sim-univ.edu.cn/", "webvpn.sim-univ.edu.cn", "", "https://",
                                 "https://user:pw@webvpn.sim-univ.edu.cn/", "https://webvpn.sim-univ.edu.cn:99999/"])
def test_what_is_no_https_url_is_invalid(url: str) -> None:
    with pytest.raises(CnkiError) as caught:
        recognise(url)

    assert caught.value.code == "INVALID_LOGIN_URL"


# --- outward / inward -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rt", "public", "gateway"),
    [
        (WRDVPN, "https://kns.cnki.net/kns8s/AdvSearch?a=1#f",
         f"https://webvpn.sim-univ.edu.cn/https/{IV}fbf952d2243e635930068cb8/kns8s/AdvSearch?a=1#f"),
        (WRDVPN, "https://bar.cnki.net/bar/download/order?id=x",
         f"https://webvpn.sim-univ.edu.cn/https/{IV}f2f653d2243e635930068cb8/bar/download/order?id=x"),
        (WRDVPN_PORT, "https://navi.cnki.net:8443/knavi/detail?p=1",
         f"https://webvpn.sim-univ.edu.cn:8443/https-8443/{IV}fef657956933665b774687a98c/knavi/detail?p=1"),
        (WRDVPN, "//kns.cnki.net/reader/xml?invoice=i",
         f"https://webvpn.sim-univ.edu.cn/https/{IV}fbf952d2243e635930068cb8/reader/xml?invoice=i"),
        (REWRITE, "https://kns.cnki.net/kcms2/article/abstract?v=1",
         "https://kns-cnki-net-s.webvpn.zju.edu.cn:8001/kcms2/article/abstract?v=1"),
        (REWRITE_PLAIN, "https://www.cnki.net/", "https://www-cnki-net-s.vpn2.njau.edu.cn/"),
        (REWRITE_PLAIN, "https://kns.cnki.net:8443/x", "https://kns-cnki-net-8443-s.vpn2.njau.edu.cn/x"),
        (PREFIX, "https://kns.cnki.net/reader/xml?invoice=a#top",
         "https://zylib.nxu.edu.cn/-----https://kns.cnki.net/reader/xml?invoice=a#top"),
    ],
)
def test_outward_and_inward(rt: Route, public: str, gateway: str) -> None:
    assert outward(rt, public) == gateway
    assert inward(rt, gateway) == ("https:" + public if public.startswith("//") else public)


def test_the_zju_port_form_reads_as_https() -> None:
    assert inward(REWRITE, "https://www-cnki-net-443.webvpn.zju.edu.cn:8001/index?x=1") == "https://www.cnki.net/index?x=1"


@pytest.mark.parametrize("rt", ROUTES)
@pytest.mark.parametrize("url", ["https://idp.sim-univ.edu.cn/login", "/kcms2/article/abstract?v=1", "about:blank", ""])
def test_outward_leaves_what_is_no_cnki_url(rt: Route, url: str) -> None:
    assert outward(rt, url) == url


def test_direct_route_changes_nothing() -> None:
    url = f"https://webvpn.sim-univ.edu.cn/https/{IV}fbf952d2243e635930068cb8/kns8s/AdvSearch"

    assert outward(DIRECT, "https://kns.cnki.net/x") == "https://kns.cnki.net/x"
    assert inward(DIRECT, url) == url
    assert inward_text(DIRECT, url) == url


@pytest.mark.parametrize(
    ("rt", "url"),
    [
        (WRDVPN, "https://webvpn.sim-univ.edu.cn/wengine-vpn/cookie?method=get&host=kns.cnki.net&scheme=https&path=/"),
        (WRDVPN, "https://webvpn.sim-univ.edu.cn/wengine-vpn/failed"),
        (WRDVPN, "https://webvpn.sim-univ.edu.cn/login?cas_login=true"),
        (WRDVPN, "https://webvpn.sim-univ.edu.cn/"),
        (REWRITE, "https://kns-cnki-net-s.webvpn.zju.edu.cn:8001/wengine-vpn/js/main.js"),
        (REWRITE, "https://webvpn.zju.edu.cn:8001/login"),
        (PREFIX, "https://zylib.nxu.edu.cn/login"),
    ],
)
def test_gateway_own_urls_are_no_cnki_urls(rt: Route, url: str) -> None:
    assert inward(rt, url) is None


@pytest.mark.parametrize("rt", ROUTES)
@pytest.mark.parametrize("url", ["https://kns.cnki.net/kcms2/x?v=1", "https://idp.sim-univ.edu.cn/idp/x", "/relative"])
def test_inward_leaves_urls_off_the_route(rt: Route, url: str) -> None:
    assert inward(rt, url) == url


_label = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=8)
_segment = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~%", min_size=1, max_size=12)
_query = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789=&%+-._~/:", max_size=30)


@st.composite
def cnki_urls(draw: st.DrawFn) -> str:
    host = draw(st.sampled_from(["kns", "www", "navi", "bar", "login", "docdown", "fsso"])) + ".cnki.net"
    if draw(st.booleans()):
        host = draw(_label) + "." + host
    port = draw(st.sampled_from(["", "", ":8443", ":8001"]))
    path = "/" + "/".join(draw(st.lists(_segment, max_size=4)))
    query = draw(_query)
    fragment = draw(st.sampled_from(["", "#top", "#a=1"]))
    return f"https://{host}{port}{path}" + (f"?{query}" if query else "") + fragment


@settings(max_examples=300, deadline=None)
@given(rt=st.sampled_from(ROUTES), url=cnki_urls())
def test_inward_undoes_outward(rt: Route, url: str) -> None:
    gateway = outward(rt, url)

    assert gateway != url
    assert inward(rt, gateway) == url


# --- text ----------------------------------------------------------------------------------------------


def test_text_mapping_wrdvpn() -> None:
    kns, bar = f"{IV}fbf952d2243e635930068cb8", f"{IV}f2f653d2243e635930068cb8"
    page = (
        f'<a href="/https/{kns}/kcms2/article/abstract?v=1&amp;uniplatform=NZKPT">题名</a>'
        f'<a href="https://webvpn.sim-univ.edu.cn/https/{bar}/bar/download/order?id=o">PDF下载</a>'
        f'{{"url":"https:\\/\\/webvpn.sim-univ.edu.cn\\/https\\/{kns}\\/kcms2\\/x"}}'
        '<script src="/wengine-vpn/js/main.js"></script>'
        '<script src="https://webvpn.sim-univ.edu.cn/wengine-vpn/js/main.js?ticket=T1"></script>'
        "document.cookie='wengine_vpn_ticketwebvpn_sim-univ_edu_cn=T2'"
    )

    mapped = inward_text(WRDVPN, page)

    assert mapped == (
        '<a href="https://kns.cnki.net/kcms2/article/abstract?v=1&amp;uniplatform=NZKPT">题名</a>'
        '<a href="https://bar.cnki.net/bar/download/order?id=o">PDF下载</a>'
        '{"url":"https:\\/\\/kns.cnki.net\\/kcms2\\/x"}'
        '<script src="/wengine-vpn/js/main.js"></script>'
        '<script src="https://gateway.invalid/wengine-vpn/js/main.js"></script>'
        "document.cookie='wengine_vpn_ticketgateway_invalid=T2'"
    )


def test_a_gateway_url_percent_encoded_in_a_return_url_keeps_no_token() -> None:
    kns = f"{IV}fbf952d2243e635930068cb8"
    inner = quote(f"https://webvpn.sim-univ.edu.cn/https/{kns}/kns8s/defaultresult/index?kw=a&p=1", safe="")
    page = f"https://webvpn.sim-univ.edu.cn/https/{kns}/verify/home?captchaType=blockPuzzle&returnUrl={inner}"

    mapped = inward_text(WRDVPN, page)

    assert mapped == (
        "https://kns.cnki.net/verify/home?captchaType=blockPuzzle&returnUrl="
        + quote("https://kns.cnki.net/kns8s/defaultresult/index?kw=a&p=1", safe="")
    )


def test_text_mapping_host_rewrite() -> None:
    page = ('<a href="https://kns-cnki-net-s.webvpn.zju.edu.cn:8001/kcms2/a?v=1">a</a> '
            "//navi-cnki-net-s.webvpn.zju.edu.cn:8001/knavi/detail?p=2 domain=kns-cnki-net-s.webvpn.zju.edu.cn "
            "portal https://webvpn.zju.edu.cn:8001/login?ticket=T")

    assert inward_text(REWRITE, page) == (
        '<a href="https://kns.cnki.net/kcms2/a?v=1">a</a> https://navi.cnki.net/knavi/detail?p=2 '
        "domain=kns.cnki.net portal https://gateway.invalid/login"
    )


def test_text_mapping_prefix() -> None:
    page = ('<a href="/-----https://kns.cnki.net/kcms2/a?v=1">a</a> '
            "https://zylib.nxu.edu.cn/-----https://bar.cnki.net/bar/download/order?id=1 and https://zylib.nxu.edu.cn/login")

    assert inward_text(PREFIX, page) == (
        '<a href="https://kns.cnki.net/kcms2/a?v=1">a</a> https://bar.cnki.net/bar/download/order?id=1 '
        "and https://gateway.invalid/login"
    )


def test_text_mapping_hides_only_the_gateway_host_itself() -> None:
    text = "evilwebvpn.sim-univ.edu.cn static.webvpn.sim-univ.edu.cn webvpn.sim-univ.edu.cn:8443"

    assert inward_text(WRDVPN, text) == "evilwebvpn.sim-univ.edu.cn static.gateway.invalid gateway.invalid:8443"


@pytest.mark.parametrize("rt", ROUTES)
def test_text_mapping_keeps_public_text(rt: Route) -> None:
    text = '<a href="https://kns.cnki.net/kcms2/a?v=1">人工智能 https://idp.sim-univ.edu.cn/</a>'

    assert inward_text(rt, text) == text


# --- hosts, discovery, config ---------------------------------------------------------------------------


def test_route_hosts() -> None:
    assert route.is_route_host(WRDVPN, "webvpn.sim-univ.edu.cn")
    assert route.is_route_host(WRDVPN_PORT, "webvpn.sim-univ.edu.cn:8443")
    assert not route.is_route_host(WRDVPN, "kns.cnki.net")
    assert route.is_route_host(REWRITE, "kns-cnki-net-s.webvpn.zju.edu.cn")
    assert route.is_route_host(REWRITE, "webvpn.zju.edu.cn")
    assert not route.is_route_host(REWRITE, "a.b.webvpn.zju.edu.cn")
    assert not route.is_route_host(REWRITE, "evilwebvpn.zju.edu.cn")
    assert not route.is_route_host(DIRECT, "webvpn.sim-univ.edu.cn")


@pytest.mark.parametrize(
    ("page_url", "html", "expected"),
    [
        ("https://webvpn.sim-univ.edu.cn/", f'<a href="/https/{IV}fbf952d2243e635930068cb8/kns8s/AdvSearch">知网</a>', WRDVPN),
        ("https://webvpn.zju.edu.cn:8001/", '<a href="https://kns-cnki-net-s.webvpn.zju.edu.cn:8001/">知网</a>', REWRITE),
        ("https://zylib.nxu.edu.cn/", '<a href="/-----https://kns.cnki.net/kns8s/">知网</a>', PREFIX),
        ("https://webvpn.sim-univ.edu.cn/", '<a href="https://kns.cnki.net/">知网</a><a href="/https/abc/x">x</a>', None),
        ("https://webvpn.sim-univ.edu.cn/", '<a href="https://kns-cnki-net-s.other.edu.cn/">知网</a>', None),
    ],
)
def test_discover_reads_the_portal_links(page_url: str, html: str, expected: Route | None) -> None:
    assert route.discover(page_url, html) == expected


def test_config_keeps_the_route_and_older_files_load() -> None:
    saved = msgspec.json.encode(Config(browser_path="/usr/bin/chromium", route=REWRITE))

    assert msgspec.json.decode(saved, type=Config).route == REWRITE
    assert b"ticket" not in saved and b"?" not in saved
    assert msgspec.json.decode(b'{"browser_path": "/usr/bin/chromium"}', type=Config).route == DIRECT
    assert msgspec.json.encode(Config()) == b"{}"


@pytest.mark.parametrize(
    "url",
    ["https://evil.example/", "https://vpn.example.com/login", "https://127.0.0.1/login", "https://2130706433/",
     f"https://0x7f.1/https/{IV}fbf952d2243e635930068cb8/kns8s/AdvSearch", "https://[::1]/wengine-vpn/",
     "https://xn--wbvpn-4ra.hhu.edu.cn/", "https://webvpn.hhü.edu.cn/", "https://localhost/login",
     "https://webvpn.hhu.edu.cn/" + "a" * 100_000],
)
def test_what_is_no_gateway_is_refused_naming_its_host(url: str) -> None:
    with pytest.raises(CnkiError) as caught:
        recognise(url)

    assert caught.value.code == "INVALID_LOGIN_URL" and "学校 VPN" in caught.value.message
    assert len(caught.value.message) < 400


def test_a_ticket_in_a_prefix_is_never_a_route() -> None:
    with pytest.raises(CnkiError) as caught:
        recognise("https://zylib.nxu.edu.cn/ticket-9f8e7d6c5b4a39281706/-----https://kns.cnki.net/kns8s/AdvSearch")

    assert caught.value.code == "REMOTE_ACCESS_UNSUPPORTED"
    assert "9f8e7d6c" not in caught.value.message


def test_a_gateway_form_on_any_named_host_waits_for_the_login_to_prove_it() -> None:
    found = recognise(f"https://vpn.example.com/https/{IV}fbf952d2243e635930068cb8/kns8s/AdvSearch")
    assert found == Recognition(route=Route(kind="wrdvpn", gateway="vpn.example.com", segment="https"), login="gateway")


# --- a route read from config.json: held to the same rules -------------------------------------------


def test_every_route_a_login_keeps_passes_the_stored_route_check() -> None:
    assert all(route.stored_route_problem(kept) is None for kept in [DIRECT, *ROUTES])


@pytest.mark.parametrize(("stored", "rule"), [
    (Route(kind="wrdvpn", gateway="127.0.0.1", segment="https"), "INVALID_LOGIN_URL"),
    (Route(kind="prefix", gateway="2130706433", prefix="/-----"), "INVALID_LOGIN_URL"),
    (Route(kind="wrdvpn", gateway="0x7f.1:8443", segment="https"), "INVALID_LOGIN_URL"),
    (Route(kind="host_rewrite", gateway="xn--webvpn-9g4f.example.edu.cn"), "INVALID_LOGIN_URL"),
    (Route(kind="host_rewrite", gateway="localhost"), "REMOTE_ACCESS_UNSUPPORTED"),
    (Route(kind="prefix", gateway="lib.example.edu.cn", prefix="/" + "a" * 3000 + "/-----"), "INVALID_LOGIN_URL"),
    (Route(kind="prefix", gateway="lib.example.edu.cn", prefix="/ticket-ST-1234567890abcdef/-----"), "REMOTE_ACCESS_UNSUPPORTED"),
    (Route(kind="wrdvpn", gateway="evil.example.com/@webvpn.example.edu.cn", segment="https"), "REMOTE_ACCESS_UNSUPPORTED"),
])
def test_a_stored_route_the_rules_refuse_is_named(stored: Route, rule: str) -> None:
    refused = route.stored_route_problem(stored)
    assert refused is not None and refused.code == "CONFIG_ROUTE_REFUSED"
    assert refused.details == {"host": stored.gateway[:100], "kind": stored.kind, "rule": rule}
    assert "cnki-mcp setup --remote-access" in refused.message
