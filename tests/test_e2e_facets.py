"""search_facets and facet_filters end to end: the real MCP client, `python -m cnki_mcp serve`, headless
Chromium, the simulator.

One server process (and so one browser) serves the module. Expected facets come from the simulator's
oracle: the listing of a QueryJson this file writes by hand, counted field by field by ``tests/kns/facets.py``;
a refinement's expected rows from the same oracle with the SCDBGroup written by hand.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
import pytest_asyncio
from mcp.types import CallToolResult, ImageContent, TextContent
from PIL import Image

from cnki_mcp.research.chart import find_cjk_font
from cnki_mcp.store.library import Store
from tests.harness import McpSession, serve_params
from tests.kns import facets as sim_facets
from tests.kns.server import KnsSimulator, SimRequest
from tests.test_e2e_structured import _item, grid_posts, oracle_query

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]

# 的 in the title, 2014–2026: most of the corpus, every facet with entries.
WIDE = {"field": "title", "value": "的"}
WIDE_ORACLE = oracle_query([[_item("TI", "的")]], 2014, 2026)
FIELDS = {"year": ["YE"], "subject": ["CCL"], "topic": ["ZYZT", "CYZT"], "source": ["WXLY"], "author": ["AUC", "HWZZ"],
          "institution": ["AFC"], "fund": ["FUC"], "doc_type": ["WXLX2"]}
ALL_GROUPS = "YE,CCL,ZYZT|||CYZT,WXLY,AUC|||HWZZ,AFC,FUC,WXLX2"


def facets_payload(result: CallToolResult) -> dict[str, Any]:
    """The answer's JSON text (equal to its structured content), any chart image after it."""
    assert isinstance(result.content[0], TextContent)
    assert all(isinstance(part, ImageContent) for part in result.content[1:])
    data = json.loads(result.content[0].text)
    assert data == result.structured_content
    return data


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def mcp(kns_server: KnsSimulator, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[McpSession]:
    data = tmp_path_factory.mktemp("facets") / "data"
    async with McpSession.serving(serve_params(data, kns_server.browser_args), check=facets_payload) as mcp:
        yield mcp


def group_posts(kns: KnsSimulator) -> list[SimRequest]:
    return [r for r in kns.requests if r.endpoint == "group"]


def oracle(kns: KnsSimulator, query: dict[str, Any], facet: str, limit: int = 10) -> list[dict[str, Any]]:
    """What search_facets must answer for ``facet``: CNKI's order, years ascending (the newest ``limit``)."""
    hits = kns.expected(query)
    entries = [
        {"value": text, "code": f"{field}={value}", "count": count}
        for field in FIELDS[facet]
        for value, text, count in sim_facets.expected(hits, field)
    ]
    if facet == "year":
        return sorted(entries, key=lambda e: e["value"])[-limit:]
    return entries[:limit]


async def facets_of(mcp: McpSession, arguments: dict[str, Any]) -> dict[str, Any]:
    return await mcp.wait(await mcp.call("search_facets", {"freshness": "live", **arguments}))


async def test_every_facet_of_an_expression_is_the_oracles_in_cnkis_order(mcp: McpSession, kns: KnsSimulator) -> None:
    view = await facets_of(mcp, {"expression": WIDE, "year_from": 2014, "year_to": 2026})
    result = view["result"]
    (panel,) = group_posts(kns)
    (grid,) = grid_posts(kns)
    sent = json.loads(panel.form["queryJson"])

    assert view["status"] == "completed", view
    assert result["total"] == len(kns.expected(WIDE_ORACLE)) and 0 < result["total"] < len(kns.corpus.papers)
    for facet in FIELDS:
        assert result["facets"][facet] == oracle(kns, WIDE_ORACLE, facet), facet
    assert [e["value"] for e in result["facets"]["year"]] == [str(y) for y in range(2017, 2027)]
    assert "notes" not in result
    assert panel.form["groupIds"] == ALL_GROUPS
    assert sent["QNode"]["QGroup"] == json.loads(grid.form["QueryJson"])["QNode"]["QGroup"]
    assert view["requests"] == 4  # the template (search page, its click), grid page 1, the panel


async def test_the_same_call_again_is_answered_from_the_cache(mcp: McpSession, kns: KnsSimulator) -> None:
    first = await facets_of(mcp, {"expression": WIDE, "facets": ["year", "subject"], "limit": 3})
    kns.clear_log()

    again = await mcp.call("search_facets", {"expression": WIDE, "facets": ["subject"], "limit": 3})

    assert first["status"] == "completed"
    assert again["source"] == "cache" and again["requests"] == 0
    assert again["result"]["facets"] == {"subject": first["result"]["facets"]["subject"]}
    assert kns.requests == []


async def test_facet_filters_narrow_a_structured_search_as_the_left_panel_does(mcp: McpSession, kns: KnsSimulator) -> None:
    found = (await facets_of(mcp, {"expression": WIDE, "facets": ["year", "subject"]}))["result"]["facets"]
    years = [e["code"] for e in found["year"][-2:]]
    subject = found["subject"][0]["code"]
    kns.clear_log()
    picks = {"QNode": {"QGroup": [*WIDE_ORACLE["QNode"]["QGroup"], {"Key": "SCDBGroup", "ChildItems": [
        {"Key": "YE", "Items": [{"Field": "YE", "Value": code.split("=")[1]} for code in years]},
        {"Key": "CCL", "Items": [{"Field": "CCL", "Value": subject.split("=")[1]}]},
    ]}]}}
    expected = [paper.filename for paper in kns.expected(picks)]

    view = await mcp.wait(await mcp.call("structured_search", {
        "expression": WIDE, "year_from": 2014, "year_to": 2026, "limit": 100,
        "facet_filters": {"year": years, "subject": [subject]}, "options": {"freshness": "live"},
    }))
    rows = await mcp.call("search_results", {"search_id": view["result"]["search_id"], "view": "records", "limit": 100})
    (grid,) = grid_posts(kns)
    scdb = json.loads(grid.form["QueryJson"])["QNode"]["QGroup"][-1]

    assert view["status"] == "completed", view
    assert [row["record"]["filename"] for row in rows["results"]] == expected
    assert 0 < len(expected) < len(kns.expected(WIDE_ORACLE))
    assert scdb["Key"] == "SCDBGroup"
    assert [(c["Key"], [(i["Field"], i["Value"], i["Logic"]) for i in c["Items"]]) for c in scdb["ChildItems"]] == [
        ("YE", [("YE", code.split("=")[1], 1) for code in years]),
        ("CCL", [("CCL", subject.split("=")[1], 1)]),
    ]
    assert json.loads(grid.form["QueryJson"])["SearchFrom"] == 2


async def test_a_code_of_another_facet_is_refused_before_any_request(mcp: McpSession, kns: KnsSimulator) -> None:
    reply = await mcp.client.call_tool("structured_search", {"expression": WIDE, "facet_filters": {"year": ["CCL=I140"]}})
    error = json.loads(reply.content[0].text)["errors"][0]  # type: ignore[union-attr]

    assert reply.is_error
    assert error["code"] == "INVALID_FACET_FILTER"
    assert error["details"] == {"facet": "year", "code": "CCL=I140"}
    assert kns.requests == []


async def test_a_chart_comes_as_png_image_content_with_its_table(mcp: McpSession, kns: KnsSimulator) -> None:
    view = await facets_of(mcp, {"expression": WIDE, "year_from": 2014, "year_to": 2026, "facets": ["year", "source"],
                                 "chart": True, "limit": 20})
    reply = await mcp.result("operation_status", {"operation_id": view["operation_id"]})
    (image,) = reply.content[1:]
    assert isinstance(image, ImageContent)
    png = Image.open(io.BytesIO(base64.b64decode(image.data)))
    chart = view["result"]["chart"]
    table = view["result"]["chart_table"]
    font, warning = find_cjk_font()
    inked = sum(png.convert("L").histogram()[:200])  # pixels darker than light grey
    years = [e["value"] for e in view["result"]["facets"]["year"]]

    assert view["status"] == "completed"
    assert image.mime_type == "image/png"
    assert png.size == (chart["width"], chart["height"]) and png.size[0] == 960 and png.size[1] > 400
    assert inked > 5000  # columns, bars and text drawn, not a blank canvas
    assert [row["label"] for row in table if row["facet"] == "year"] == years == [str(y) for y in range(2014, 2027)]
    assert [(row["value"], row["count"]) for row in table if row["facet"] == "year"] == [
        (e["value"], e["count"]) for e in view["result"]["facets"]["year"]
    ]
    sources = [row for row in table if row["facet"] == "source"]
    assert [(row["value"], row["count"]) for row in sources] == [
        (e["value"], e["count"]) for e in view["result"]["facets"]["source"][:10]
    ]
    assert chart["font"] == font and chart.get("font_warning", "") == warning
    assert [row["label"] for row in sources] == (
        [row["value"][:15] + "…" if len(row["value"]) > 16 else row["value"] for row in sources] if font
        else [f"{n}." for n in range(1, len(sources) + 1)]
    )
    assert (mcp.data / "charts").is_dir() and chart["path"].startswith(str(mcp.data / "charts"))


async def test_a_stored_search_is_reused_and_its_next_summary_says_how_the_field_grew(mcp: McpSession, kns: KnsSimulator) -> None:
    arguments = {"expression": WIDE, "year_from": 2015, "year_to": 2026, "limit": 5}  # a listing no test asked facets of
    first = await mcp.wait(await mcp.call("structured_search", {**arguments, "options": {"freshness": "live"}}))
    facets = await facets_of(mcp, {"search_id": first["result"]["search_id"], "facets": ["year"], "limit": 20})
    again = await mcp.wait(await mcp.call("structured_search", {**arguments, "options": {"freshness": "live"}}))
    trend = again["result"]["year_trend"]
    years = facets["result"]["facets"]["year"]

    assert "year_trend" not in first["result"]
    assert facets["result"]["total"] == len(kns.expected(oracle_query([[_item("TI", "的")]], 2015, 2026))) and facets["result"]["search_id"] == first["result"]["search_id"]
    assert years == oracle(kns, oracle_query([[_item("TI", "的")]], 2015, 2026), "year", 20)
    assert [e["value"] for e in years] == [str(y) for y in range(2015, 2027)]
    assert trend["years"] == years and trend["channel"] == first["result"]["plan"]["channels"][0]["name"]
    assert trend["summary"].startswith(f"2017–2026 年发文量由 {years[-10]['count']} 篇变为 {years[-1]['count']} 篇")


async def test_groups_the_panel_leaves_folded_are_asked_again_one_by_one(mcp: McpSession, kns: KnsSimulator) -> None:
    kns.configure(facet_panel="folded")

    view = await facets_of(mcp, {"expression": WIDE, "year_from": 2014, "year_to": 2026})

    assert view["status"] == "completed", view
    assert [p.form["groupIds"] for p in group_posts(kns)] == [ALL_GROUPS, *ALL_GROUPS.split(",")[2:]]
    for facet in FIELDS:
        assert view["result"]["facets"][facet] == oracle(kns, WIDE_ORACLE, facet), facet


async def test_groups_under_other_ids_and_entries_behind_more_are_read(mcp: McpSession, kns: KnsSimulator) -> None:
    kns.configure(facet_panel="aliases")
    aliases = (await facets_of(mcp, {"expression": WIDE, "facets": ["source", "doc_type"]}))["result"]["facets"]
    kns.configure(facet_panel="hidden_more")
    hidden = (await facets_of(mcp, {"expression": WIDE, "facets": ["author"], "limit": 30}))["result"]["facets"]
    no_years = oracle_query([[_item("TI", "的")]], 1900, 2100)

    assert [e["code"].split("=")[0] for e in aliases["source"]] == ["QK"] * 10
    assert [(e["value"], e["count"]) for e in aliases["source"]] == [(e["value"], e["count"]) for e in oracle(kns, no_years, "source")]
    assert [(e["value"], e["count"]) for e in aliases["doc_type"]] == [(e["value"], e["count"]) for e in oracle(kns, no_years, "doc_type")]
    assert hidden["author"] == oracle(kns, no_years, "author", 30)


async def test_a_facet_the_panel_does_not_give_is_named_not_answered_empty(mcp: McpSession, kns: KnsSimulator) -> None:
    kns.configure(facet_panel="no_funds")

    view = await facets_of(mcp, {"expression": WIDE, "facets": ["fund", "year"]})

    assert view["status"] == "completed"
    assert view["result"]["facets"]["fund"] == []
    assert view["result"]["notes"] == {"fund": "知网分组面板没有给出这个分组（该检索可能没有这类信息）。"}
    assert [p.form["groupIds"] for p in group_posts(kns)] == ["FUC,YE", "FUC"]


async def test_a_panel_of_an_unknown_shape_fails_with_a_snapshot(mcp: McpSession, kns: KnsSimulator) -> None:
    kns.configure(facet_panel="unknown")

    view = await facets_of(mcp, {"expression": WIDE, "facets": ["year"]})
    (error,) = view["errors"]

    assert view["status"] == "failed"
    assert error["code"] == "PARSER_UNSUPPORTED"
    assert "没有 dl[groupid]" in error["message"]
    assert (mcp.data / "diagnostics" / error["details"]["snapshot"]).is_file()


async def test_a_challenge_on_the_panel_goes_to_a_person_then_the_panel_is_read(mcp: McpSession, kns: KnsSimulator) -> None:
    kns.captcha("group", style="json403")

    view = await mcp.call("search_facets", {"expression": WIDE, "facets": ["doc_type"], "freshness": "live"})
    waiting = await mcp.wait(view, until=("awaiting_user",))
    kns.solve()
    done = await mcp.wait(waiting)

    assert "验证" in waiting["message"]
    assert done["status"] == "completed", done
    assert [p.status for p in group_posts(kns)] == [403, 200]
    assert done["result"]["facets"]["doc_type"] == oracle(kns, oracle_query([[_item("TI", "的")]], 1900, 2100), "doc_type")


async def test_a_facet_answer_and_a_filtered_search_survive_a_restart(kns: KnsSimulator, tmp_path_factory: pytest.TempPathFactory) -> None:
    data = tmp_path_factory.mktemp("facets_restart") / "data"
    year = oracle(kns, WIDE_ORACLE, "year")[-1]["code"]
    arguments = {"expression": WIDE, "year_from": 2014, "year_to": 2026, "limit": 5, "facet_filters": {"year": [year]}}
    async with McpSession.serving(serve_params(data, kns.browser_args), check=facets_payload) as first:
        search = await first.wait(await first.call("structured_search", {**arguments, "options": {"freshness": "live"}}))
        search_id = search["result"]["search_id"]
        asked = await first.wait(await first.call("search_facets", {"search_id": search_id, "facets": ["subject"], "freshness": "live"}))
    # research.db holds both: a new Store on the same root reads them.
    store = Store.open(data)
    try:
        record = store.data.searches[search_id]
        (kept,) = store.data.facets.values()
    finally:
        store.close_sync()
    kns.clear_log()
    async with McpSession.serving(serve_params(data, kns.browser_args), check=facets_payload) as second:
        again = await second.call("search_facets", {"search_id": search_id, "facets": ["subject"]})

    assert search["status"] == asked["status"] == "completed", (search, asked)
    assert (record.year_from, record.year_to, record.facet_filters) == (2014, 2026, {"year": [year]})
    answered = asked["result"]["facets"]["subject"]
    assert msgspec.to_builtins(kept.facets["subject"])[: len(answered)] == answered and kept.total == asked["result"]["total"]
    assert again["source"] == "cache" and again["requests"] == 0
    assert again["result"]["facets"] == asked["result"]["facets"]
    assert kns.requests == []
