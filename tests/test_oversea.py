"""The overseas site (issue 39): URLs written on the session's site, the site told by where a navigation lands,
the overseas detail markup, the site named in session_status, and the simulator's switch that plays it.

Arrange, act, then one exact assertion per line.
"""

from __future__ import annotations

import re

import msgspec
import pytest

from cnki_mcp.core.model import Config, Route, SessionState
from cnki_mcp.pages.parse import parse_detail
from cnki_mcp.pages.urls import is_oversea_host, is_site_url, landed_site, on_site
from cnki_mcp.site.remote import Routing, configured_site, setting_words, site_words
from cnki_mcp.site.route import wrdvpn_token
from cnki_mcp.site.session import session_view
from tests.kns import abroad, pages
from tests.kns.corpus import build_corpus
from tests.kns.server import KnsSimulator, Scenario

OVERSEA = "oversea.cnki.net"
DETAIL = "https://kns.cnki.net/kcms2/article/abstract?v=abc&uniplatform=NZKPT&language=CHS"
ABROAD_DETAIL = "https://oversea.cnki.net/kcms2/article/abstract?v=abc&uniplatform=OVERSEA&language=CHS"


@pytest.mark.parametrize(("url", "oversea", "expected"), [
    (DETAIL, OVERSEA, ABROAD_DETAIL),
    ("https://kns.cnki.net/kns8s/AdvSearch", OVERSEA, "https://oversea.cnki.net/kns8s/AdvSearch"),
    ("https://navi.cnki.net/knavi/journals/ZGFX/detail", OVERSEA, "https://oversea.cnki.net/knavi/journals/ZGFX/detail"),
    ("https://kns.cnki.net/kns8s/AdvSearch", "chn.oversea.cnki.net", "https://chn.oversea.cnki.net/kns8s/AdvSearch"),
    (ABROAD_DETAIL, "", DETAIL),
    ("https://oversea.cnki.net/knavi/detail?p=x&uniplatform=OVERSEA", "", "https://navi.cnki.net/knavi/detail?p=x&uniplatform=NZKPT"),
    ("https://chn.oversea.cnki.net/kns8s/AdvSearch", "", "https://kns.cnki.net/kns8s/AdvSearch"),
    ("https://bar.cnki.net/bar/download/order?id=1", OVERSEA, "https://bar.cnki.net/bar/download/order?id=1"),
    ("https://login.cnki.net/login/", OVERSEA, "https://login.cnki.net/login/"),
    ("https://example.com/kns8s/AdvSearch", OVERSEA, "https://example.com/kns8s/AdvSearch"),
    ("https://kns.cnki.net:8443/kns8s/AdvSearch", OVERSEA, "https://kns.cnki.net:8443/kns8s/AdvSearch"),
    (DETAIL, "", DETAIL),
    (ABROAD_DETAIL, OVERSEA, ABROAD_DETAIL),
])
def test_a_url_is_written_on_the_sessions_site(url: str, oversea: str, expected: str) -> None:
    assert on_site(url, oversea) == expected


def test_the_overseas_hosts_are_cnki_hosts_the_product_may_open() -> None:
    assert [is_oversea_host(h) for h in (OVERSEA, "chn.oversea.cnki.net", "kns.cnki.net", "oversea.cnki.net.evil")] == [
        True, True, False, False]
    assert is_site_url("https://chn.oversea.cnki.net/kcms2/article/abstract?v=abc")


@pytest.mark.parametrize(("url", "site"), [
    ("https://oversea.cnki.net/kns8s/AdvSearch", OVERSEA),
    ("https://chn.oversea.cnki.net/kns8s/AdvSearch", "chn.oversea.cnki.net"),
    ("https://kns.cnki.net/kns8s/AdvSearch", ""),
    ("https://navi.cnki.net/knavi", ""),
    ("https://login.cnki.net/login/", None),
    ("https://gateway.invalid/login", None),
    ("about:blank", None),
])
def test_the_page_a_navigation_lands_on_tells_the_site(url: str, site: str | None) -> None:
    assert landed_site(url) == site


def test_with_auto_the_session_follows_where_cnki_sends_it() -> None:
    routing = Routing()
    before = routing.out("https://kns.cnki.net/kns8s/AdvSearch")
    routing.landed("https://oversea.cnki.net/kns8s/AdvSearch")
    abroad_view = routing.site_view()
    after = routing.out("https://kns.cnki.net/restapi/citation-api/v1/literature/references?v=x")
    routing.landed("https://login.cnki.net/login/")  # tells nothing
    still = routing.site_view()
    routing.landed("https://kns.cnki.net/kns8s/AdvSearch")
    assert before == "https://kns.cnki.net/kns8s/AdvSearch"
    assert abroad_view == still == {"kind": "oversea", "host": OVERSEA}
    assert after == "https://oversea.cnki.net/restapi/citation-api/v1/literature/references?v=x"
    assert routing.site_view() == {"kind": "mainland"}


@pytest.mark.parametrize(("setting", "landed", "view"), [
    ("oversea", "https://kns.cnki.net/kns8s/AdvSearch", {"kind": "oversea", "host": OVERSEA}),
    ("mainland", "https://oversea.cnki.net/kns8s/AdvSearch", {"kind": "mainland"}),
])
def test_a_fixed_site_stays_whatever_the_page(setting: str, landed: str, view: dict[str, str]) -> None:
    routing = Routing(site=setting)
    routing.landed(landed)
    assert routing.site_view() == view


def test_through_a_gateway_the_overseas_url_goes_out_in_the_gateways_form() -> None:
    routing = Routing(Route(kind="wrdvpn", gateway="webvpn.example.edu.cn", segment="https"), "oversea")
    out = routing.out("https://kns.cnki.net/kns8s/AdvSearch")
    assert out == f"https://webvpn.example.edu.cn/https/{wrdvpn_token(OVERSEA)}/kns8s/AdvSearch"
    assert routing.back(out) == "https://oversea.cnki.net/kns8s/AdvSearch"


def test_the_site_is_named_where_a_person_reads_it() -> None:
    assert site_words({"kind": "oversea", "host": OVERSEA}) == "海外站点（oversea.cnki.net）"
    assert site_words({"kind": "mainland"}, english=True) == "the mainland site"
    assert setting_words("auto") == "自动（跟随知网的跳转）"
    assert configured_site(Config(site="oversea")) == {"kind": "oversea", "host": OVERSEA}
    assert configured_site(Config()) == {"kind": "mainland"}


def test_config_json_keeps_the_site_only_when_chosen() -> None:
    assert msgspec.json.encode(Config()) == b"{}"
    assert msgspec.json.decode(b'{"site":"oversea"}', type=Config).site == "oversea"
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"site":"moon"}', type=Config)


def test_session_status_names_the_overseas_site_and_the_mainland_answers_as_before() -> None:
    abroad_view = session_view(SessionState(), cached=True, site={"kind": "oversea", "host": OVERSEA})
    mainland = session_view(SessionState(), cached=True, site={"kind": "mainland"})
    assert abroad_view["site"] == {"kind": "oversea", "host": OVERSEA}
    assert mainland == session_view(SessionState(), cached=True)


def test_the_overseas_detail_page_gives_what_the_mainland_one_gives() -> None:
    corpus = build_corpus()
    paper = next(p for p in corpus.papers if p.resource == "JOURNAL" and p.pages)
    html = pages.detail_page(paper, Scenario(), 1)
    html = re.sub(r"(\(\d+\))\s*:\s*[\d\-—–]+", r"\1", html)  # the page range only in the summary block
    url = pages.detail_url(paper, 1)
    mainland = parse_detail(html, url)
    overseas = parse_detail(abroad.localise(html, OVERSEA), abroad.localise(url, OVERSEA))
    assert "total-inform-oversea" in abroad.localise(html, OVERSEA)
    assert overseas.pages == mainland.pages == paper.pages
    assert (overseas.title, overseas.authors, overseas.abstract, overseas.source) == (
        mainland.title, mainland.authors, mainland.abstract, mainland.source)
    assert overseas.url == on_site(mainland.url, OVERSEA)


def test_the_simulators_switch_sends_mainland_requests_abroad() -> None:
    sim = KnsSimulator()
    sim.configure(oversea=OVERSEA)
    moved = sim.handle("POST", "kns.cnki.net", "/kns8s/brief/grid?uniplatform=NZKPT", {}, b"")
    served = sim.handle("GET", OVERSEA, "/kns8s/AdvSearch", {}, b"")
    navi = sim.handle("GET", OVERSEA, "/knavi", {}, b"")
    bar = sim.handle("GET", "bar.cnki.net", "/bar/download/order?id=x", {}, b"")
    assert (moved.status, moved.headers["Location"]) == (302, "https://oversea.cnki.net/kns8s/brief/grid?uniplatform=OVERSEA")
    assert (served.status, navi.status) == (200, 200)
    assert "kns.cnki.net" not in str(served.body) and "navi.cnki.net" not in str(served.body)
    assert [r.endpoint for r in sim.requests] == ["moved", "search", "journal", "download"]
    assert bar.status == 200


def test_the_switch_is_off_by_default() -> None:
    sim = KnsSimulator()
    served = sim.handle("GET", "kns.cnki.net", "/kns8s/AdvSearch", {}, b"")
    assert Scenario().oversea == ""
    assert served.status == 200
    assert (abroad.plays("/knavi/journals/X/detail"), abroad.plays("/"), abroad.plays("/kcms2/x")) == (
        "navi.cnki.net", "www.cnki.net", "kns.cnki.net")


def test_doctor_names_a_fixed_site_beside_the_route(monkeypatch: pytest.MonkeyPatch) -> None:
    from cnki_mcp.setup.doctor import _route_check

    monkeypatch.setenv("CNKI_LANG", "zh")
    assert _route_check(Config(site="oversea")).message == "访问方式：直接访问知网；知网站点：海外站点（oversea.cnki.net）"
    assert _route_check(Config()).message == "访问方式：直接访问知网"


def test_the_field_check_names_the_overseas_site_it_toured() -> None:
    from cnki_mcp.core.model import SiteCheck
    from cnki_mcp.fieldcheck.tour import render

    abroad_line = render(SiteCheck(status="passed", started_at="2026-12-04T00:00:00Z", site=OVERSEA))[-1]
    mainland_line = render(SiteCheck(status="passed", started_at="2026-12-04T00:00:00Z"))[-1]
    assert "，海外站点 oversea.cnki.net；" in abroad_line
    assert "海外" not in mainland_line
