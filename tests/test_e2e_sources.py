"""来源类别 and named journals end to end (issue 39 items 2, 3): the real MCP client, ``python -m cnki_mcp serve``,
headless Chromium and the simulator, direct and through a university gateway.

``source_categories`` is applied by CNKI's own left panel (the ``LYBSM`` group): every expected list is the
simulator's oracle for the listing narrowed by the category codes (a QueryJson this file writes by hand), and
what reached the simulator is one panel request and the grid pages, never a journal page. Named sources: with
``ly_similar`` the simulator's ``LY=`` also lists journals of similar names, as CNKI does; those rows are
dropped and counted.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.harness import McpSession, chromium_path, serve_params
from tests.kns import facets as sim_facets
from tests.kns.corpus import Paper as SimPaper
from tests.kns.query import similar_name
from tests.kns.server import KnsSimulator
from tests.test_e2e_facets import group_posts
from tests.test_e2e_remote import login_through, message_of, proxied, serving
from tests.test_e2e_structured import _item, grid_posts, oracle_query

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]

WIDE = {"field": "title", "value": "的"}
YEARS = {"year_from": 2014, "year_to": 2026}
WIDE_ORACLE = oracle_query([[_item("TI", "的")]], 2014, 2026)
CODES = {"CSSCI": "P0209", "北大核心": "P01", "CSCD": "P0210", "EI": "SIMEI", "SCI": "SIMSCI"}
NAMED = "智能系统学报"  # LY= of it also reaches 软件工程学报 and 开放大学学报 under ly_similar


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def mcp(kns_server: KnsSimulator, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[McpSession]:
    data = tmp_path_factory.mktemp("sources") / "data"
    async with McpSession.serving(serve_params(data, kns_server.browser_args)) as mcp:
        yield mcp


def narrowed(query: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """``query`` narrowed as the left panel narrows it: one SCDBGroup child of the categories' codes (ORed)."""
    items = [{"Field": "LYBSM", "Value": CODES[name], "Operator": "DEFAULT", "Logic": 1} for name in names]
    group = {"Key": "SCDBGroup", "Items": [], "ChildItems": [{"Key": "LYBSM", "Items": items, "ChildItems": []}]}
    return {"QNode": {"QGroup": [*query["QNode"]["QGroup"], group]}}


def categories(paper: SimPaper) -> set[str]:
    return {name for _code, name in sim_facets.values(paper, "LYBSM")}


def titles(view: dict[str, Any]) -> list[str]:
    return [row["title"] for row in view["result"]["results"]]


async def native(mcp: McpSession, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    view = await mcp.wait(await mcp.call(tool, {"limit": 50, "options": {"freshness": "live"}, **arguments}))
    assert view["status"] == "completed", message_of(view)[:3000]
    return view


# --- 来源类别 -------------------------------------------------------------------------------------------


async def test_the_source_category_facet_is_the_panels_lybsm_group(mcp: McpSession, kns: KnsSimulator) -> None:
    view = await mcp.wait(await mcp.call("search_facets", {"expression": WIDE, **YEARS, "facets": ["source_category"]}))
    hits = kns.expected(WIDE_ORACLE)

    assert view["status"] == "completed", view
    assert view["result"]["facets"]["source_category"] == [
        {"value": text, "code": f"LYBSM={value}", "count": count} for value, text, count in sim_facets.expected(hits, "LYBSM")
    ][:10]
    assert [p.form["groupIds"] for p in group_posts(kns)] == ["LYBSM"]


async def test_structured_search_in_two_categories_is_cnkis_narrowed_listing(mcp: McpSession, kns: KnsSimulator) -> None:
    await native(mcp, "structured_search", {"expression": WIDE, **YEARS})  # the template is captured
    kns.clear_log()
    wanted = ["CSSCI", "北大核心"]

    view = await native(mcp, "structured_search", {"expression": WIDE, **YEARS, "source_categories": ["cssci", "中文核心"]})
    oracle = kns.expected(narrowed(WIDE_ORACLE, wanted))
    panel = sim_facets.expected(kns.expected(WIDE_ORACLE), "LYBSM")
    applied = view["result"]["source_categories"]
    (grid,) = grid_posts(kns)

    assert titles(view) == [p.title for p in oracle[:50]] and len(oracle) > 50
    assert all(categories(p) & set(wanted) for p in oracle)
    assert applied["requested"] == wanted and applied["confirmed"] is True
    assert applied["applied"] == [
        {"name": name, "code": f"LYBSM={CODES[name]}", "count": next(n for v, _t, n in panel if v == CODES[name])}
        for name in wanted
    ]
    assert [p.form["groupIds"] for p in group_posts(kns)] == ["LYBSM"]
    sent = json.loads(grid.form["QueryJson"])["QNode"]["QGroup"][-1]
    assert sent["Key"] == "SCDBGroup" and [i["Value"] for i in sent["ChildItems"][0]["Items"]] == ["P0209", "P01"]
    # Requests per call: the 来源类别 panel once, grid page 1; no journal page.
    assert view["requests"] == 2 and len(kns.requests) == 2 and kns.count("journal") == 0
    # search_facets of the search narrows its listing the same way.
    facets = await mcp.wait(await mcp.call("search_facets", {"search_id": view["result"]["search_id"], "facets": ["year"]}))
    assert facets["result"]["total"] == len(oracle)
    assert facets["result"]["facet_filters"] == {"source_category": ["LYBSM=P0209", "LYBSM=P01"]}


async def test_expert_search_finds_a_category_without_a_known_code_by_its_name(mcp: McpSession, kns: KnsSimulator) -> None:
    view = await native(mcp, "expert_search", {"expression": "TI='的'", **YEARS, "source_categories": ["EI"]})
    oracle = kns.expected(narrowed(WIDE_ORACLE, ["EI"]))

    assert titles(view) == [p.title for p in oracle[:50]] and oracle
    assert all("EI" in categories(p) for p in oracle)
    assert view["result"]["source_categories"]["applied"][0]["code"] == "LYBSM=SIMEI"


async def test_research_search_keeps_to_the_categories_and_still_ranks(mcp: McpSession, kns: KnsSimulator) -> None:
    view = await mcp.wait(await mcp.call("search", {
        "query": "知识图谱", "source_categories": ["CSCD"], "options": {"freshness": "live", "metadata": "basic", "max_pages": 1},
    }))
    result = view["result"]
    by_title = {p.title: p for p in kns.corpus.papers}

    assert view["status"] == "completed", message_of(view)[:3000]
    assert len(result["results"]) >= 10 and all("CSCD" in categories(by_title[row["title"]]) for row in result["results"])
    assert result["source_categories"]["confirmed"] is True
    assert [p.form["groupIds"] for p in group_posts(kns)] == ["LYBSM"]  # once, for every channel
    # The panel once, then page 1 of q1 主题, q2 篇名, q3 关键词, each narrowed (a control listing may confirm a zero).
    narrowed_pages = [p for p in grid_posts(kns) if json.loads(p.form["QueryJson"])["QNode"]["QGroup"][-1]["Key"] == "SCDBGroup"]
    assert len(narrowed_pages) == 3 and kns.count("journal") == 0


async def test_an_unknown_category_is_refused_naming_the_known_ones(mcp: McpSession, kns: KnsSimulator) -> None:
    reply = await mcp.client.call_tool("structured_search", {"expression": WIDE, "source_categories": ["SSCI"]})
    error = json.loads(reply.content[0].text)["errors"][0]  # type: ignore[union-attr]

    assert reply.is_error and error["code"] == "INVALID_INPUT"
    assert "北大核心、CSSCI、CSCD、WJCI、AMI、SCI、EI" in error["message"]
    assert kns.requests == []


async def test_a_sentence_search_refuses_categories_before_any_request(mcp: McpSession, kns: KnsSimulator) -> None:
    sentence = {"field": "sentence", "value": "大语言模型", "value2": "医学影像"}
    reply = await mcp.client.call_tool("structured_search", {"expression": sentence, "source_categories": ["CSSCI"]})
    error = json.loads(reply.content[0].text)["errors"][0]  # type: ignore[union-attr]

    assert reply.is_error and error["code"] == "INVALID_INPUT" and error["details"] == {"field": "source_categories"}
    assert kns.requests == []


async def test_a_listing_cnki_did_not_narrow_is_never_answered_as_narrowed(mcp: McpSession, kns: KnsSimulator) -> None:
    kns.configure(source_category_ignored=True)

    view = await mcp.wait(await mcp.call("structured_search", {
        "expression": WIDE, **YEARS, "source_categories": ["CSSCI"], "options": {"freshness": "live"},
    }))

    assert view["status"] == "partial", message_of(view)[:3000]
    assert view["errors"][0]["code"] == "SOURCE_CATEGORY_NOT_APPLIED"
    assert view["result"]["results"] == [] and view["result"]["candidate_count"] == 0
    assert view["result"]["source_categories"]["confirmed"] is False


# --- named sources ----------------------------------------------------------------------------------


def listed_from_similar(kns: KnsSimulator) -> tuple[list[SimPaper], list[SimPaper]]:
    """(the named journal's rows, the rows of similar names) CNKI's LY= lists for 的 in the title."""
    hits = kns.expected(WIDE_ORACLE)
    return [p for p in hits if p.source == NAMED], [p for p in hits if p.source != NAMED and similar_name(p.source, NAMED)]


@pytest.mark.parametrize(("tool", "expression"), [
    ("structured_search", {"op": "and", "items": [WIDE, {"field": "source", "value": NAMED, "match": "exact"}]}),
    ("expert_search", f"TI='的' AND LY='{NAMED}'"),
])
async def test_rows_of_journals_cnki_adds_for_a_similar_name_are_dropped_and_counted(
    mcp: McpSession, kns: KnsSimulator, tool: str, expression: Any
) -> None:
    kns.configure(ly_similar=True)
    own, similar = listed_from_similar(kns)

    view = await native(mcp, tool, {"expression": expression, **YEARS})

    assert own and similar
    assert sorted(titles(view)) == sorted(p.title for p in own)
    assert view["result"]["excluded_other_sources"] == len(similar)
    assert set(view["result"]["other_sources"]) == {p.source for p in similar}


async def test_without_similar_names_nothing_is_dropped(mcp: McpSession, kns: KnsSimulator) -> None:
    own, _similar = listed_from_similar(kns)

    view = await native(mcp, "expert_search", {"expression": f"TI='的' AND LY='{NAMED}'", **YEARS})

    assert sorted(titles(view)) == sorted(p.title for p in own)
    assert "excluded_other_sources" not in view["result"]


# --- through a university gateway ---------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.skipif(chromium_path() is None, reason="没有可用的 Chromium")
async def test_categories_and_named_sources_through_a_gateway(kns: KnsSimulator, isolated_data_dir: Path) -> None:
    kns.configure(login="institution", ly_similar=True)
    own, similar = listed_from_similar(kns)
    async with serving(isolated_data_dir, kns) as mcp:
        await login_through(mcp, kns, "wrdvpn")
        cats = await native(mcp, "structured_search", {"expression": WIDE, **YEARS, "source_categories": ["CSCD"]})
        named = await native(mcp, "expert_search", {"expression": f"TI='的' AND LY='{NAMED}'", **YEARS})

    assert titles(cats) == [p.title for p in kns.expected(narrowed(WIDE_ORACLE, ["CSCD"]))[:50]]
    assert cats["result"]["source_categories"]["confirmed"] is True
    assert sorted(titles(named)) == sorted(p.title for p in own)
    assert named["result"]["excluded_other_sources"] == len(similar)
    assert all(r.endpoint != "journal" for r in kns.requests)
    assert proxied(kns, "wrdvpn") >= len(kns.requests) > 0  # every CNKI request went through the gateway
