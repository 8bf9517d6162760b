"""search_facets and journal_issues off campus, end to end: the real MCP client over stdio, ``python -m cnki_mcp
serve``, a headless Chromium and the simulator's WebVPN (tests/kns/gateway.py) in front of it.

The facet panel (``kns8s/group/result``) and the navi fragments (``yearList``, ``papers``) are in-page requests
like the grid: the gateway's session may end right before one (the person logs in at the gateway again and the
answer is the one the direct route gives: the simulator's oracle, as tests/test_e2e_facets.py and
tests/test_e2e_navi.py check it directly), or one may get no answer while the session lives (the page is looked
at and the request asked again). Every request the operation sends through the gateway is charged to it. What
else the gateway sees is not the operation's: the page its login sends the browser back to (the person's), a
page's images, and the browser sending a request the gateway closed without an answer again by itself (Chrome
does so on a reused connection).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.harness import chromium_path
from tests.kns import gateway as gw
from tests.kns import navi
from tests.kns.server import KnsSimulator, SimRequest
from tests.test_e2e_facets import FIELDS, WIDE, WIDE_ORACLE, oracle
from tests.test_e2e_navi import busiest_issue, listed_years
from tests.test_e2e_remote import gateway_login, login_through, message_of, serving

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.timeout(400),
    pytest.mark.skipif(chromium_path() is None, reason="没有可用的 Chromium"),
]

PANEL = "/kns8s/group/result"
FACETS = {"expression": WIDE, "year_from": 2014, "year_to": 2026, "freshness": "live"}
# The session ends in each way the gateway shows it to an in-page request: the login redirect followed on the
# same origin (WebVPN paths), the same redirect refused as CORS (rewritten hosts), a dropped connection.
ENDINGS = [("wrdvpn", "redirect"), ("host_rewrite", "redirect"), ("host_rewrite", "drop")]


def sent_back(log: list[gw.Proxied]) -> int:
    """Requests that came from the gateway's own page (its login sending the browser back): the person's."""
    return sum(1 for e in log if urlsplit(e.referer).hostname == gw.WEBVPN)


def operation_requests(log: list[gw.Proxied]) -> int:
    """The operation's own requests among those the gateway saw (see the module's docstring)."""
    own = [e for e in log if e.dest in ("document", "empty") and urlsplit(e.referer).hostname != gw.WEBVPN]
    return sum(1 for i, e in enumerate(own) if not (e.answer == "dropped" and i and own[i - 1] == e))


def endpoints(seen: list[SimRequest]) -> list[str]:
    return [r.endpoint for r in seen]


async def facets_through(mcp: Any, kns: KnsSimulator, kind: str) -> None:
    """Log in at the gateway, then one search_facets call: the template is captured, the route works."""
    await login_through(mcp, kns, kind)
    first = await mcp.wait(await mcp.call("search_facets", {**FACETS, "facets": ["year"]}))
    assert first["status"] == "completed", message_of(first)[:3000]


@pytest.mark.parametrize(("kind", "failure"), ENDINGS)
async def test_facets_the_gateway_session_ends_before_the_panel_and_the_person_logs_in_again(
    kind: str, failure: str, kns: KnsSimulator, isolated_data_dir: Path
) -> None:
    kns.configure(login="institution")
    kns.configure_gateway(fetch_failure=failure)
    async with serving(isolated_data_dir, kns) as mcp:
        await facets_through(mcp, kns, kind)
        kns.configure_gateway(expire_at=PANEL)  # grid page 1 passes; the panel meets the ended session
        before, logged = len(kns.requests), len(kns.gateway.log)
        view = await gateway_login(mcp, kns, await mcp.call("search_facets", FACETS))
        seen, log = kns.requests[before:], kns.gateway.log[logged:]

    assert view["status"] == "completed", message_of(view)[:3000]
    assert view["result"]["total"] == len(kns.expected(WIDE_ORACLE))
    for facet in FIELDS:
        assert view["result"]["facets"][facet] == oracle(kns, WIDE_ORACLE, facet), facet
    assert kns.gateway.counts[("own", "/do-login")] == 2  # the person logged in at the gateway twice
    assert endpoints(seen).count("group") == 1, [r.url for r in seen]  # the turned-away panel never reached CNKI
    assert sent_back(log) == 1, log
    assert view["requests"] == operation_requests(log), (view["requests"], log)


@pytest.mark.parametrize("kind", ["wrdvpn", "host_rewrite"])
async def test_facets_a_panel_request_without_an_answer_is_looked_into_and_asked_again_every_request_charged(
    kind: str, kns: KnsSimulator, isolated_data_dir: Path
) -> None:
    kns.configure(login="institution")
    async with serving(isolated_data_dir, kns) as mcp:
        await facets_through(mcp, kns, kind)  # the work tab holds the search page now
        kns.configure_gateway(drop_fetches=1, drop_only=PANEL)  # the panel is reset at the gateway; the session lives
        before, proxied_before = len(kns.requests), kns.gateway.count(kind)
        view = await mcp.wait(await mcp.call("search_facets", FACETS))
        seen = kns.requests[before:]
    proxied_now = kns.gateway.count(kind) - proxied_before

    assert view["status"] == "completed", message_of(view)[:3000]
    for facet in FIELDS:
        assert view["result"]["facets"][facet] == oracle(kns, WIDE_ORACLE, facet), facet
    assert endpoints(seen).count("search") == 1, [r.url for r in seen]  # the look at the page
    assert endpoints(seen).count("group") == 1, [r.url for r in seen]  # the second asking; the reset one never reached CNKI
    assert proxied_now == len(seen) + 1, [r.url for r in seen]
    assert view["requests"] == proxied_now, (view["requests"], [r.url for r in seen])


async def issues_through(mcp: Any, kns: KnsSimulator, kind: str) -> tuple[str, int, int]:
    """Log in at the gateway, then the busiest issue's journal's years: the navi tab shows its journal page."""
    key, year, number = busiest_issue(kns)
    await login_through(mcp, kns, kind)
    years = await mcp.wait(await mcp.call("journal_issues", {"issn": kns.corpus.journals[key].issn}))
    assert years["status"] == "completed", message_of(years)[:3000]
    assert years["result"]["years"] == listed_years(kns, key)
    return key, year, number


def issue_of(kns: KnsSimulator, key: str, year: int, number: int) -> dict[str, Any]:
    return {"journal": kns.corpus.journals[key].name, "year": year, "issue": str(number)}


@pytest.mark.parametrize(("kind", "failure"), ENDINGS)
async def test_journal_issues_the_gateway_session_ends_before_the_papers_and_the_person_logs_in_again(
    kind: str, failure: str, kns: KnsSimulator, isolated_data_dir: Path
) -> None:
    kns.configure(login="institution")
    kns.configure_gateway(fetch_failure=failure)
    async with serving(isolated_data_dir, kns) as mcp:
        key, year, number = await issues_through(mcp, kns, kind)
        kns.configure_gateway(expire_at="/papers")  # the search and yearList pass; the issue meets the ended session
        before, logged = len(kns.requests), len(kns.gateway.log)
        view = await gateway_login(mcp, kns, await mcp.call("journal_issues", issue_of(kns, key, year, number)))
        seen, log = kns.requests[before:], kns.gateway.log[logged:]

    assert view["status"] == "completed", message_of(view)[:3000]
    assert [r["title"] for r in view["result"]["records"]] == [p.title for p in navi.toc(kns.corpus, key, year, number)]
    assert kns.gateway.counts[("own", "/do-login")] == 2  # the person logged in at the gateway twice
    assert [r.path.endswith("/papers") for r in seen].count(True) == 1, [r.url for r in seen]
    assert sent_back(log) == 1, log
    assert view["requests"] == operation_requests(log), (view["requests"], log)


@pytest.mark.parametrize("kind", ["wrdvpn", "host_rewrite"])
async def test_journal_issues_a_fragment_without_an_answer_is_looked_into_and_asked_again_every_request_charged(
    kind: str, kns: KnsSimulator, isolated_data_dir: Path
) -> None:
    kns.configure(login="institution")
    async with serving(isolated_data_dir, kns) as mcp:
        key, year, number = await issues_through(mcp, kns, kind)
        kns.configure_gateway(drop_fetches=1, drop_only="/yearList")  # the session lives
        before, proxied_before = len(kns.requests), kns.gateway.count(kind)
        view = await mcp.wait(await mcp.call("journal_issues", issue_of(kns, key, year, number)))
        seen = kns.requests[before:]
    proxied_now = kns.gateway.count(kind) - proxied_before

    assert view["status"] == "completed", message_of(view)[:3000]
    assert [r["title"] for r in view["result"]["records"]] == [p.title for p in navi.toc(kns.corpus, key, year, number)]
    assert endpoints(seen).count("journal") == 1, [r.url for r in seen]  # the look at the journal page
    assert proxied_now == len(seen) + 1, [r.url for r in seen]
    assert view["requests"] == proxied_now, (view["requests"], [r.url for r in seen])
