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

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.harness import McpSession, chromium_path
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


Ready = tuple[dict[str, Any], Any]  # the arguments of the call the test watches, the answer it must give


async def facets_ready(mcp: McpSession, kns: KnsSimulator) -> Ready:
    """One search_facets call first: the template is captured (the watched call asks grid page 1, the panel)."""
    first = await mcp.wait(await mcp.call("search_facets", {**FACETS, "facets": ["year"]}))
    assert first["status"] == "completed", message_of(first)[:3000]
    return FACETS, (len(kns.expected(WIDE_ORACLE)), {facet: oracle(kns, WIDE_ORACLE, facet) for facet in FIELDS})


def facets_answer(view: dict[str, Any]) -> Any:
    return view["result"]["total"], {facet: view["result"]["facets"][facet] for facet in FIELDS}


async def issues_ready(mcp: McpSession, kns: KnsSimulator) -> Ready:
    """The busiest issue's journal's years first: the navi tab shows its journal page (the watched call asks
    the journal search, yearList up to the year, the issue's papers)."""
    key, year, number = busiest_issue(kns)
    years = await mcp.wait(await mcp.call("journal_issues", {"issn": kns.corpus.journals[key].issn}))
    assert years["status"] == "completed", message_of(years)[:3000]
    assert years["result"]["years"] == listed_years(kns, key)
    arguments = {"journal": kns.corpus.journals[key].name, "year": year, "issue": str(number)}
    return arguments, [p.title for p in navi.toc(kns.corpus, key, year, number)]


def issues_answer(view: dict[str, Any]) -> Any:
    return [r["title"] for r in view["result"]["records"]]


@dataclass(frozen=True)
class Case:
    """A tool through the gateway: the request its session ends before, the one reset, the page looked at."""

    tool: str
    ready: Callable[[McpSession, KnsSimulator], Awaitable[Ready]]
    answer: Callable[[dict[str, Any]], Any]
    ends_before: str  # a piece of the path (the gateway's expire_at)
    reset: str  # drop_only
    look: str  # the simulator's endpoint of the page the tab shows


CASES = [
    Case("search_facets", facets_ready, facets_answer, "/kns8s/group/result", "/kns8s/group/result", "search"),
    Case("journal_issues", issues_ready, issues_answer, "/papers", "/yearList", "journal"),
]


async def watched(
    mcp: McpSession, kns: KnsSimulator, case: Case, kind: str, *, person: bool
) -> tuple[Any, dict[str, Any], list[SimRequest], list[gw.Proxied]]:
    """Log in at the gateway, get ``case`` ready, set the fault, then the call: (the answer it must give, its
    final view, what reached CNKI meanwhile, what the gateway saw meanwhile). ``person``: the person is asked
    to log in at the gateway again and does."""
    await login_through(mcp, kns, kind)
    arguments, expected = await case.ready(mcp, kns)
    if person:
        kns.configure_gateway(expire_at=case.ends_before)
    else:
        kns.configure_gateway(drop_fetches=1, drop_only=case.reset)  # the session lives
    before, logged = len(kns.requests), len(kns.gateway.log)
    view = await mcp.call(case.tool, arguments)
    view = await (gateway_login(mcp, kns, view) if person else mcp.wait(view))
    return expected, view, kns.requests[before:], kns.gateway.log[logged:]


@pytest.mark.parametrize(("kind", "failure"), ENDINGS)
@pytest.mark.parametrize("case", CASES, ids=[c.tool for c in CASES])
async def test_the_gateway_session_ends_before_a_fragment_and_the_person_logs_in_again(
    case: Case, kind: str, failure: str, kns: KnsSimulator, isolated_data_dir: Path
) -> None:
    kns.configure(login="institution")
    kns.configure_gateway(fetch_failure=failure)
    async with serving(isolated_data_dir, kns) as mcp:
        expected, view, seen, log = await watched(mcp, kns, case, kind, person=True)

    assert view["status"] == "completed", message_of(view)[:3000]
    assert case.answer(view) == expected
    assert kns.gateway.counts[("own", "/do-login")] == 2  # the person logged in at the gateway twice
    assert [case.ends_before in r.path for r in seen].count(True) == 1, [r.url for r in seen]  # asked again once
    assert sent_back(log) == 1, log
    assert view["requests"] == operation_requests(log), (view["requests"], log)


@pytest.mark.parametrize("kind", ["wrdvpn", "host_rewrite"])
@pytest.mark.parametrize("case", CASES, ids=[c.tool for c in CASES])
async def test_a_fragment_without_an_answer_is_looked_into_and_asked_again_every_request_charged(
    case: Case, kind: str, kns: KnsSimulator, isolated_data_dir: Path
) -> None:
    kns.configure(login="institution")
    async with serving(isolated_data_dir, kns) as mcp:
        expected, view, seen, log = await watched(mcp, kns, case, kind, person=False)

    # The gateway saw every request the call made (the reset one never reached CNKI); the look at the page and
    # the second asking are charged like every other request.
    assert view["status"] == "completed", message_of(view)[:3000]
    assert case.answer(view) == expected
    assert [r.endpoint for r in seen].count(case.look) == 1, [r.url for r in seen]  # the look at the page
    assert [case.reset in r.path for r in seen].count(True) == 1, [r.url for r in seen]  # the second asking
    assert len(log) == len(seen) + 1, [r.url for r in seen]
    assert view["requests"] == len(log), (view["requests"], [r.url for r in seen])
