"""Abroad, end to end (issue 39): the real MCP client over stdio, ``python -m cnki_mcp serve``, a headless Chromium
and the simulator's overseas switch (``Scenario.oversea``, tests/kns/abroad.py): every request to kns/navi/www is
302-redirected to the overseas host, which answers with its own links, ``uniplatform=OVERSEA`` and
``.total-inform-oversea``.

Every tool family runs the same calls on the mainland and abroad, and answers the same, but for the links, which
name the overseas host (the site the person's browser is sent to) and ``site``, which session_status adds. Once
the session has landed abroad, no request the product builds goes to a mainland host (an in-page request there
would meet a cross-origin redirect). Through the university's gateway too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from cnki_mcp.pages.urls import on_site
from tests.harness import McpSession, chromium_path
from tests.kns import abroad
from tests.kns import pages as sim_pages
from tests.kns.corpus import Paper as SimPaper
from tests.kns.server import KnsSimulator
from tests.test_e2e_documents import journal_papers, seed
from tests.test_e2e_facets import WIDE
from tests.test_e2e_remote import entry, gateway_login, serving

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.skipif(chromium_path() is None, reason="没有可用的 Chromium"),
]

OVERSEA = "oversea.cnki.net"
SEARCH = {"query": "研究", "options": {"freshness": "live", "metadata": "basic", "max_pages": 1}}
# What differs between two runs whatever the site: ids, clocks (every ``…_at``), costs; and the site itself.
VOLATILE = {"operation_id", "search_id", "seconds", "elapsed_ms", "requests", "cursor", "next_cursor", "path",
            "progress", "site"}
_ABROAD_URL = re.compile(r"https://(?:chn\.)?oversea\.cnki\.net/[^\s\"'<>]*")


def stable(value: Any) -> Any:
    """An answer without what differs between any two runs, its overseas links written as mainland ones."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE and not k.endswith("_at")}
    if isinstance(value, list):
        return [stable(v) for v in value]
    if isinstance(value, str):
        return _ABROAD_URL.sub(lambda m: on_site(m.group(0), ""), value)
    return value


def mainland_links(answer: Any) -> list[str]:
    return re.findall(r"https://(?:kns|navi)\.cnki\.net/[^\"]{0,60}", json.dumps(answer, ensure_ascii=False))


def differences(a: Any, b: Any, where: str = "") -> list[str]:
    """Where two answers differ (at most a few places), for a failure's message."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in differences(a.get(k), b.get(k), f"{where}.{k}")][:5]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{where}[{i}]")][:5]
    return [] if a == b else [f"{where}: {a!r:.300} != {b!r:.300}"]


def completed(view: dict[str, Any]) -> dict[str, Any]:
    assert view["status"] == "completed", json.dumps(view, ensure_ascii=False)[:3000]
    return view["result"]


async def every_tool(mcp: McpSession, ref: str, paper: SimPaper, kns: KnsSimulator) -> dict[str, Any]:
    """Every tool family once, the same calls on either site: their results by tool."""
    out: dict[str, Any] = {}
    out["session_status"] = completed(await mcp.wait(await mcp.call("session_status", {"refresh": True})))
    found = completed(await mcp.wait(await mcp.call("search", SEARCH)))
    out["search"] = found
    out["search_results"] = await mcp.call("search_results", {"search_id": found["search_id"], "view": "records",
                                                               "limit": 20})
    out["structured_search"] = completed(await mcp.wait(await mcp.call("structured_search", {
        "expression": WIDE, "limit": 20, "options": {"freshness": "live"}})))
    out["expert_search"] = completed(await mcp.wait(await mcp.call("expert_search", {
        "expression": "TI % '数字经济'", "limit": 20, "options": {"freshness": "live"}})))
    out["search_facets"] = completed(await mcp.wait(await mcp.call("search_facets", {
        "expression": WIDE, "facets": ["subject", "year"], "freshness": "live"})))
    out["get_metadata"] = completed(await mcp.wait(await mcp.call("get_metadata", {
        "record_refs": [ref], "fields": ["abstract", "keywords", "pages", "source_url", "quality"]})))
    out["read_online_html"] = completed(await mcp.wait(await mcp.call("read_online_html", {"record_ref": ref})))
    got = completed(await mcp.wait(await mcp.call("download_paper", {"record_ref": ref})))
    assert Path(got["path"]).read_bytes() == sim_pages.pdf_bytes(paper)
    out["download_paper"] = got
    out["export_citations"] = await mcp.call("export_citations", {"record_refs": [ref], "format": "gbt7714"})
    for relation in ("references", "citing", "similar"):
        out[f"related_papers {relation}"] = completed(await mcp.wait(await mcp.call("related_papers", {
            "record_ref": ref, "relation": relation, "limit": 5})))
    out["journal_issues"] = completed(await mcp.wait(await mcp.call("journal_issues", {
        "issn": kns.corpus.journals[paper.source_key].issn})))
    out["author_papers"] = completed(await mcp.wait(await mcp.call("author_papers", {
        "author": paper.authors[0], "record_ref": ref, "limit": 5})))
    return out


async def test_every_tool_answers_abroad_as_on_the_mainland(
    kns: KnsSimulator, tmp_path_factory: pytest.TempPathFactory
) -> None:
    paper = journal_papers(kns, 1)[0]
    answers = []
    for oversea in ("", OVERSEA):
        kns.reset()
        kns.configure(login="institution", download="ok", oversea=oversea)
        data = tmp_path_factory.mktemp("abroad" if oversea else "mainland") / "data"
        (ref,) = seed(data, kns, [paper])  # a mainland detail URL, as a search at home kept it
        async with serving(data, kns) as mcp:
            answers.append(await every_tool(mcp, ref, paper, kns))
            status = completed(await mcp.wait(await mcp.call("session_status", {"refresh": True})))
            diagnostics = await mcp.call("diagnostics", {})
        if oversea:
            built = [r for r in kns.requests if r.endpoint == "moved"]
            served = {r.host for r in kns.requests if r.endpoint != "moved"}
    mainland, overseas = answers
    # The answers compared are the real ones: every tool found what the corpus holds.
    assert mainland["search"]["results"] and mainland["structured_search"]["results"]
    assert mainland["expert_search"]["results"] and mainland["author_papers"]["records"]
    assert overseas["get_metadata"]["records"][0]["pages"] == paper.pages  # .total-inform-oversea read too
    assert paper.sections[0].title in json.dumps(overseas["read_online_html"], ensure_ascii=False)
    assert paper.title in json.dumps(overseas["export_citations"], ensure_ascii=False)
    assert overseas["journal_issues"]["years"]
    assert mainland_links(mainland["search"]) and mainland_links(mainland["related_papers references"])
    mentions = {tool: mainland_links(answer) for tool, answer in overseas.items()}
    assert not any(mentions.values()), mentions  # every link names the overseas site
    for tool in mainland:
        assert stable(overseas[tool]) == stable(mainland[tool]), (tool, differences(stable(overseas[tool]), stable(mainland[tool])))
    assert status["site"] == {"kind": "oversea", "host": OVERSEA}
    assert diagnostics["site"] == {"setting": "auto", "kind": "oversea", "host": OVERSEA}
    assert "site" not in mainland["session_status"]
    # The links name the overseas site; only the first navigation went to the mainland host and was sent on.
    assert all(r["url"].startswith(f"https://{OVERSEA}/kcms2/") for r in overseas["search"]["results"])
    assert [r.path for r in built] == ["/kns8s/AdvSearch"]
    assert OVERSEA in served and not served & set(abroad.MAINLAND), served
    assert any("uniplatform=OVERSEA" in r.url for r in kns.requests if r.endpoint == "citation")


async def test_a_session_set_to_the_overseas_site_never_asks_the_mainland(
    kns: KnsSimulator, isolated_data_dir: Path
) -> None:
    kns.configure(oversea=OVERSEA, login="institution")
    isolated_data_dir.mkdir(parents=True, exist_ok=True)
    (isolated_data_dir / "config.json").write_text('{"site": "oversea"}', encoding="utf-8")
    async with serving(isolated_data_dir, kns) as mcp:
        before = await mcp.call("session_status", {})
        found = completed(await mcp.wait(await mcp.call("search", SEARCH)))
        status = completed(await mcp.wait(await mcp.call("session_status", {"refresh": True})))
        check = completed(await mcp.wait(await mcp.call("diagnostics", {"site_check": True})))
    assert before["site"] == status["site"] == {"kind": "oversea", "host": OVERSEA}
    assert (check["status"], check["site"]) == ("passed", OVERSEA)  # doctor --site: every page read abroad
    assert found["results"] and all(r["url"].startswith(f"https://{OVERSEA}/kcms2/") for r in found["results"])
    assert not [r.url for r in kns.requests if r.host in abroad.MAINLAND]


async def test_abroad_through_the_universitys_gateway(kns: KnsSimulator, isolated_data_dir: Path) -> None:
    paper = journal_papers(kns, 1)[0]
    (ref,) = seed(isolated_data_dir, kns, [paper])
    kns.configure(login="institution", download="ok", oversea="chn.oversea.cnki.net")
    async with serving(isolated_data_dir, kns) as mcp:
        logged = await gateway_login(mcp, kns, await mcp.call("login", {"remote_access_url": entry("host_rewrite")}))
        assert logged["status"] == "completed", logged
        found = completed(await mcp.wait(await mcp.call("search", SEARCH)))
        meta = completed(await mcp.wait(await mcp.call("get_metadata", {"record_refs": [ref], "fields": ["pages"]})))
        got = completed(await mcp.wait(await mcp.call("download_paper", {"record_ref": ref})))
        issues = completed(await mcp.wait(await mcp.call("journal_issues", {
            "issn": kns.corpus.journals[paper.source_key].issn})))
        status = completed(await mcp.wait(await mcp.call("session_status", {"refresh": True})))
    assert logged["result"]["institution_evidence"] == ["示例大学图书馆"]
    assert found["results"] and all(r["url"].startswith("https://chn.oversea.cnki.net/kcms2/") for r in found["results"])
    assert "sim-univ" not in json.dumps([found, meta, got, issues], ensure_ascii=False)
    assert meta["records"][0]["pages"] == paper.pages
    assert Path(got["path"]).read_bytes() == sim_pages.pdf_bytes(paper)
    assert issues["years"]
    assert status["site"] == {"kind": "oversea", "host": "chn.oversea.cnki.net"}
    assert any(host == "chn.oversea.cnki.net" for (_kind, host) in kns.gateway.counts)


async def test_relative_links_of_the_citation_api_name_the_overseas_site(kns: KnsSimulator, isolated_data_dir: Path) -> None:
    paper = journal_papers(kns, 1)[0]
    (ref,) = seed(isolated_data_dir, kns, [paper])
    kns.configure(login="institution", oversea=OVERSEA, citation_relative_links=True)
    async with serving(isolated_data_dir, kns) as mcp:
        similar = completed(await mcp.wait(await mcp.call("related_papers", {"record_ref": ref, "relation": "similar", "limit": 5})))
    links = [item["url"] for item in similar["papers"] if item.get("url")]
    assert links and all(url.startswith(f"https://{OVERSEA}/kcms2/article/abstract?") for url in links), links
    assert similar["origin"] == "api" and not mainland_links(similar["papers"])
