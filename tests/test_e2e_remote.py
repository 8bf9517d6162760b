"""Off campus end to end: the real MCP client over stdio, ``python -m cnki_mcp serve``, a headless Chromium and
the simulator's university gateway (tests/kns/gateway.py) in front of it: WebVPN tokens, host rewriting and a
prefix proxy, the gateway's own login and challenge pages handed to the person, CARSI, and nothing of the
gateway (ticket, token, host) in what the product answers or keeps.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.harness import AWAITING, McpSession, chromium_path, serve_params
from tests.kns import gateway as gw
from tests.kns import pages as sim_pages
from tests.kns.server import KnsSimulator
from tests.store_faults import persisted_raw
from tests.test_e2e_documents import journal_papers, seed
from tests.test_e2e_relations import expected, richest, same, seen

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.timeout(400),
    pytest.mark.skipif(chromium_path() is None, reason="没有可用的 Chromium"),
]

SEARCH = {"query": "研究", "options": {"freshness": "live", "metadata": "basic", "max_pages": 1}}
ROUTES = {
    "wrdvpn": {"kind": "wrdvpn", "gateway": gw.WEBVPN},
    "host_rewrite": {"kind": "host_rewrite", "gateway": gw.WEBVPN},
    "prefix": {"kind": "prefix", "gateway": gw.PREFIX_HOST},
}
# What must never be in a tool result or a data file: the tickets' form, the wrdvpn token prefix, gateway hosts.
LEAKS = ("a9c1f7e2", "wengine_vpn_ticket", "77726476706e69737468656265737421", "sim-univ", "webvpn", "zylib")


@asynccontextmanager
async def serving(data: Path, kns: KnsSimulator) -> AsyncIterator[McpSession]:
    params = serve_params(data, kns.browser_args, CNKI_REQUEST_INTERVAL_MS="20")
    async with McpSession.serving(params) as session:
        yield session


def entry(kind: str) -> str:
    """The gateway form of CNKI's advanced search, as the person copies it from the address bar."""
    return gw.Gateway.base(kind, "kns.cnki.net") + "/kns8s/AdvSearch"


def message_of(view: dict[str, Any]) -> str:
    return json.dumps(view, ensure_ascii=False)


async def gateway_login(mcp: McpSession, kns: KnsSimulator, view: dict[str, Any]) -> dict[str, Any]:
    """The operation asks the person at the gateway; the person logs in there; the operation goes on."""
    waiting = await mcp.wait(view, until=AWAITING)
    assert waiting["status"] == "awaiting_user", message_of(waiting)[:3000]
    assert "学校 VPN" in message_of(waiting), waiting
    kns.gateway_login()
    return await mcp.wait(waiting)


def proxied(kns: KnsSimulator, kind: str) -> int:
    return sum(n for (k, _host), n in kns.gateway.counts.items() if k == kind)


@pytest.mark.parametrize("kind", ["wrdvpn", "host_rewrite", "prefix"])
async def test_login_search_metadata_read_and_download_through_each_gateway(
    kind: str, kns: KnsSimulator, isolated_data_dir: Path
) -> None:
    paper = journal_papers(kns, 1)[0]
    (ref,) = seed(isolated_data_dir, kns, [paper])  # a public detail URL, as a direct search kept it
    kns.configure(login="institution", download="ok")
    async with serving(isolated_data_dir, kns) as mcp:
        logged = await gateway_login(mcp, kns, await mcp.call("login", {"remote_access_url": entry(kind)}))
        assert logged["status"] == "completed", logged
        assert logged["result"]["route"] == ROUTES[kind]
        assert logged["result"]["institution_evidence"] == ["示例大学图书馆"]  # read inside the proxied page

        found = await mcp.wait(await mcp.call("search", SEARCH))
        assert found["status"] == "completed", found
        assert found["result"]["results"] and all(
            r["url"].startswith("https://kns.cnki.net/kcms2/") for r in found["result"]["results"])
        meta = await mcp.wait(await mcp.call("get_metadata", {"record_refs": [ref], "fields": ["abstract"]}))
        assert meta["status"] == "completed", meta
        assert kns.count("detail") >= 1
        read = await mcp.wait(await mcp.call("read_online_html", {"record_ref": ref}))
        assert read["status"] == "completed", read
        assert paper.sections[0].title in message_of(read)
        got = await mcp.wait(await mcp.call("download_paper", {"record_ref": ref}))
        assert got["status"] == "completed", got
        assert Path(got["result"]["path"]).read_bytes() == sim_pages.pdf_bytes(paper)
    # Every CNKI request went through the gateway: the simulator saw none the gateway did not send on.
    assert proxied(kns, kind) >= len(kns.requests) > 0
    assert not any(r.host.endswith("sim-univ.edu.cn") for r in kns.requests)


async def login_through(mcp: McpSession, kns: KnsSimulator, kind: str) -> None:
    logged = await gateway_login(mcp, kns, await mcp.call("login", {"remote_access_url": entry(kind)}))
    assert logged["status"] == "completed", logged


@pytest.mark.parametrize(("kind", "failure"), [("wrdvpn", "redirect"), ("host_rewrite", "redirect"),
                                               ("host_rewrite", "drop"), ("prefix", "redirect")])
async def test_the_gateway_session_ends_mid_search_and_the_person_logs_in_again(
    kind: str, failure: str, kns: KnsSimulator, isolated_data_dir: Path
) -> None:
    kns.configure(login="institution")
    kns.configure_gateway(fetch_failure=failure)
    async with serving(isolated_data_dir, kns) as mcp:
        await login_through(mcp, kns, kind)
        first = await mcp.wait(await mcp.call("search", SEARCH))
        assert first["status"] == "completed", first
        kns.gateway.expire()  # the gateway's session ends between two searches' grid requests
        again = await gateway_login(mcp, kns, await mcp.call("search", {**SEARCH, "query": "模型"}))
        assert again["status"] == "completed", message_of(again.get("result", {}).get("coverage", again))
        assert again["result"]["candidate_count"] > 0, again
        assert kns.gateway.counts[("own", "/do-login")] == 2  # the person logged in at the gateway twice


@pytest.mark.parametrize("kind", ["wrdvpn", "host_rewrite"])
async def test_a_challenge_at_the_gateway_mid_search_goes_to_the_person(
    kind: str, kns: KnsSimulator, isolated_data_dir: Path
) -> None:
    kns.configure(login="institution")
    async with serving(isolated_data_dir, kns) as mcp:
        await login_through(mcp, kns, kind)
        kns.configure_gateway(challenge="blockPuzzle", challenge_after=2)
        waiting = await mcp.wait(await mcp.call("search", SEARCH), until=AWAITING)
        assert waiting["status"] == "awaiting_user", waiting
        assert kns.gateway.challenged
        kns.solve()
        done = await mcp.wait(waiting)
        assert done["status"] == "completed", message_of(done)[:3000]
        assert done["result"]["candidate_count"] > 0, done


@pytest.mark.parametrize("kind", ["wrdvpn", "host_rewrite"])
async def test_a_request_without_an_answer_is_looked_into_and_asked_again_every_request_charged(
    kind: str, kns: KnsSimulator, isolated_data_dir: Path
) -> None:
    kns.configure(login="institution")
    async with serving(isolated_data_dir, kns) as mcp:
        await login_through(mcp, kns, kind)
        first = await mcp.wait(await mcp.call("search", SEARCH))  # the work tab holds the search page now
        assert first["status"] == "completed", first
        kns.configure_gateway(drop_fetches=1)  # the next in-page request is reset at the gateway; the session lives
        before, proxied_before = len(kns.requests), kns.gateway.count(kind)
        found = await mcp.wait(await mcp.call("search", {**SEARCH, "query": "模型"}))
        assert found["status"] == "completed", message_of(found)[:3000]
        assert found["result"]["candidate_count"] > 0, found
        seen = kns.requests[before:]
    # The gateway saw every request the search made (the reset one never reached CNKI); the look at the search
    # page and the second asking are charged like every other request.
    proxied_now = kns.gateway.count(kind) - proxied_before
    assert [r.endpoint for r in seen].count("search") == 1, [r.url for r in seen]  # the look at the page
    assert proxied_now == len(seen) + 1, [r.url for r in seen]
    assert found["requests"] == proxied_now, (found["requests"], [r.url for r in seen])


def scan(text: str) -> list[str]:
    return [leak for leak in LEAKS if leak in text.lower()]


def without_route(value: Any) -> Any:
    """An answer without the route's own description (kind and gateway host: where it is named on purpose)."""
    if isinstance(value, dict):
        return {k: without_route(v) for k, v in value.items() if k != "route"}
    if isinstance(value, list):
        return [without_route(v) for v in value]
    return value


async def test_the_route_survives_a_restart_and_force_goes_back_to_direct_without_a_leak(
    kns: KnsSimulator, isolated_data_dir: Path
) -> None:
    paper = journal_papers(kns, 1)[0]
    (ref,) = seed(isolated_data_dir, kns, [paper])
    kns.configure(login="institution", download="ok")
    answers: list[str] = []
    async with serving(isolated_data_dir, kns) as mcp:
        await login_through(mcp, kns, "wrdvpn")
        answers.append(message_of(await mcp.wait(await mcp.call("search", SEARCH))))
    config = json.loads((isolated_data_dir / "config.json").read_text(encoding="utf-8"))
    assert config["route"] == {"kind": "wrdvpn", "gateway": gw.WEBVPN, "segment": "https"}  # never a ticket

    before = proxied(kns, "wrdvpn")
    async with serving(isolated_data_dir, kns) as mcp:  # a new server: the same route, the browser's ticket
        status = await mcp.call("session_status", {})
        assert status["route"] == ROUTES["wrdvpn"], status
        diagnostics = await mcp.call("diagnostics", {})
        assert diagnostics["route"] == ROUTES["wrdvpn"], diagnostics
        for tool, arguments in (("get_metadata", {"record_refs": [ref], "fields": ["abstract"]}),
                                ("read_online_html", {"record_ref": ref}), ("download_paper", {"record_ref": ref}),
                                ("export_citations", {"record_refs": [ref], "format": "bibtex"}),
                                ("session_status", {"refresh": True})):
            got = await mcp.wait(await mcp.call(tool, arguments))
            assert got.get("status", "completed") == "completed", got
            answers.append(message_of(without_route(got)))
        assert proxied(kns, "wrdvpn") > before
        assert got["result"]["gateway_session"] == "alive"

        kns.configure(login="none")
        direct = await mcp.wait(await mcp.call("login", {"force": True}), until=AWAITING)
        assert direct["status"] == "awaiting_user", direct  # the usual CNKI login, now directly
        kns.configure(login="institution")
        direct = await mcp.wait(await mcp.call("operation_control", {"action": "resume", "operation_id": direct["operation_id"]}))
        assert direct["status"] == "completed" and "route" not in direct["result"], direct
        through = proxied(kns, "wrdvpn")
        again = await mcp.wait(await mcp.call("search", {**SEARCH, "query": "模型"}))
        assert again["status"] == "completed", again
        assert proxied(kns, "wrdvpn") == through  # direct again: nothing through the gateway
        answers.append(message_of(again))
    assert "route" not in json.loads((isolated_data_dir / "config.json").read_text(encoding="utf-8"))  # direct

    # Nothing of the gateway in any answer (the route's own description aside) or any data file (profile aside).
    assert [(scan(a), a[:300]) for a in answers if scan(a)] == []
    for path in sorted(isolated_data_dir.rglob("*")):
        if path.is_file() and "browser" not in path.relative_to(isolated_data_dir).parts:
            if path.name in ("research.db-wal", "research.db-shm"):
                continue  # pages of research.db (compressed rows): read through the database below
            text = path.read_bytes().decode("utf-8", "replace")
            if path.name == "research.db":  # decoded; login and session_status answers kept with their operations
                text = message_of(without_route(persisted_raw(isolated_data_dir)))
            assert scan(text) == [], path


async def test_carsi_login_confirms_the_institution_and_stays_direct(kns: KnsSimulator, isolated_data_dir: Path) -> None:
    start = "https://fsso.cnki.net/Shibboleth.sso/Login?entityID=https://idp.sim-univ.edu.cn/idp/shibboleth&target=https://fsso.cnki.net/secure/default.aspx"
    async with serving(isolated_data_dir, kns) as mcp:
        waiting = await mcp.wait(await mcp.call("login", {"remote_access_url": start}), until=AWAITING)
        assert waiting["status"] == "awaiting_user", waiting
        assert "CARSI" in message_of(waiting)
        kns.gateway_login()  # the person logs in on the university's IdP page
        done = await mcp.wait(waiting)
        assert done["status"] == "completed", done
        assert done["result"]["institution_evidence"] == [gw.UNIVERSITY]
        assert "route" not in done["result"]
        assert kns.gateway.counts[("carsi", "fsso.cnki.net/Shibboleth.sso/SAML2/POST")] == 1
        found = await mcp.wait(await mcp.call("search", SEARCH))
        assert found["status"] == "completed", found
    assert proxied(kns, "wrdvpn") + proxied(kns, "host_rewrite") + proxied(kns, "prefix") == 0


async def test_force_login_leaves_the_gateway_and_the_next_search_goes_directly(
    kns: KnsSimulator, isolated_data_dir: Path
) -> None:
    """Issue 39 item 8: after searches through the gateway, ``login(force=true)`` without a URL leaves it for good:
    the next search's grid goes to kns.cnki.net directly, not through a work tab still on the gateway's origin."""
    kns.configure(login="institution")
    async with serving(isolated_data_dir, kns) as mcp:
        await login_through(mcp, kns, "wrdvpn")
        first = await mcp.wait(await mcp.call("search", SEARCH))  # the work tab holds the proxied search page
        assert first["status"] == "completed", first
        assert kns.gateway.count("wrdvpn") > 0
        direct = await mcp.wait(await mcp.call("login", {"force": True}), until=AWAITING)
        assert direct["status"] == "awaiting_user", direct
        direct = await mcp.wait(await mcp.call("operation_control", {"action": "resume", "operation_id": direct["operation_id"]}))
        assert direct["status"] == "completed" and "route" not in direct["result"], direct
        status = await mcp.call("session_status", {})
        assert "route" not in status, status
        through, before = kns.gateway.count("wrdvpn"), len(kns.requests)
        again = await mcp.wait(await mcp.call("search", {**SEARCH, "query": "模型"}))
        assert again["status"] == "completed", again
        assert again["result"]["candidate_count"] > 0, again
        grids = [r for r in kns.requests[before:] if r.endpoint == "grid"]
    assert kns.gateway.count("wrdvpn") == through, kns.gateway.log[-5:]  # nothing more through the gateway
    assert grids and all(r.host == "kns.cnki.net" for r in grids), [r.url for r in grids]


async def test_the_2026_citation_area_is_followed_through_the_gateway(kns: KnsSimulator, isolated_data_dir: Path) -> None:
    """Issue 39 item 6 off campus: the API refuses, the detail page's #MapArea link is followed through the gateway
    (the list page in its form), and the list comes back with public links only."""
    paper = richest(kns, "JOURNAL")
    (ref,) = seed(isolated_data_dir, kns, [paper])
    kns.configure(login="institution", citation_rendered=True, citation_api="gone", citation_area="link")
    async with serving(isolated_data_dir, kns) as mcp:
        await login_through(mcp, kns, "wrdvpn")
        reply = await mcp.wait(await mcp.call("related_papers", {"record_ref": ref, "relation": "references"}))
        assert reply["status"] == "completed", message_of(reply)[:3000]
        assert reply["result"]["origin"] == "page"
        same(seen(reply["result"]["papers"]), expected(kns.graph.references[paper.filename]))
        assert not scan(message_of(without_route(reply)))
    lists = [r for r in kns.gateway.log if "/kcms/detail/frame/list.aspx" in r.path]
    assert lists, kns.gateway.log[-5:]
    assert not any(r.host.endswith("sim-univ.edu.cn") for r in kns.requests)


async def test_only_a_gateway_is_a_route_and_it_is_kept_only_after_a_login_through_it(
    kns: KnsSimulator, isolated_data_dir: Path
) -> None:
    """Issue 42 item 3: hosts that are no gateway are refused before any request; a gateway login that is
    cancelled leaves no route (in force or in config.json); one that succeeds is kept, the person told the host
    first."""
    kns.configure(login="institution")
    refused = ["https://evil.example/", "https://127.0.0.1/https/x/kns8s/AdvSearch", "https://2130706433/login",
               "https://0x7f.1/wengine-vpn/", "https://[::1]/login", "https://xn--wbvpn-4ra.sim-univ.edu.cn/",
               "https://webvpn.sím-univ.edu.cn/", "https://webvpn.sim-univ.edu.cn/" + "a" * 100_000,
               "https://zylib.sim-univ.edu.cn/ticket-9f8e7d6c5b4a39281706/-----https://kns.cnki.net/kns8s/AdvSearch"]
    async with serving(isolated_data_dir, kns) as mcp:
        for url in refused:
            got = await mcp.client.call_tool("login", {"remote_access_url": url})
            assert got.is_error, (url[:80], got)
            assert "INVALID_LOGIN_URL" in str(got.content) or "REMOTE_ACCESS_UNSUPPORTED" in str(got.content), got
        assert not (isolated_data_dir / "config.json").exists() or "route" not in json.loads(
            (isolated_data_dir / "config.json").read_text(encoding="utf-8"))

        waiting = await mcp.wait(await mcp.call("login", {"remote_access_url": entry("wrdvpn")}), until=AWAITING)
        assert waiting["status"] == "awaiting_user", waiting
        assert gw.WEBVPN in waiting["progress"]["notice"] and "经由" in waiting["progress"]["notice"], waiting
        config = isolated_data_dir / "config.json"
        assert not config.exists() or "route" not in json.loads(config.read_text(encoding="utf-8")), "kept before the login"
        await mcp.call("operation_control", {"action": "cancel", "operation_id": waiting["operation_id"]})
        await mcp.wait(waiting)
        status = await mcp.call("session_status", {})
        assert "route" not in status, status
        through = proxied(kns, "wrdvpn")
        found = await mcp.wait(await mcp.call("search", SEARCH))
        assert found["status"] == "completed", found
        assert proxied(kns, "wrdvpn") == through  # the search went directly
        assert not config.exists() or "route" not in json.loads(config.read_text(encoding="utf-8"))

        await login_through(mcp, kns, "wrdvpn")
    assert json.loads(config.read_text(encoding="utf-8"))["route"] == {"kind": "wrdvpn", "gateway": gw.WEBVPN, "segment": "https"}
