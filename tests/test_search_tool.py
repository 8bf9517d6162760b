"""search / structured_search / get_metadata / continue through App (and MCP), with the fake site injected."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import msgspec
import psutil
import pytest
from mcp import Client
from mcp.types import CreateMessageRequestParams, CreateMessageResult, TextContent

from cnki_mcp.app import App
from cnki_mcp.core.clock import within
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Budget
from cnki_mcp.ops.jobs import OperationContext
from cnki_mcp.research import expert
from cnki_mcp.research.pipeline import SearchState
from cnki_mcp.research.query import LEXICAL_WARNING, SAMPLING_UNUSABLE_WARNING
from cnki_mcp.site import grid_query
from cnki_mcp.surface import server
from cnki_mcp.tools import get_metadata
from cnki_mcp.tools.structured_search import Args as StructuredSearchArgs
from tests.fake_site import FakeSite, sim_paper
from tests.harness import RawServer, call_tool, processes_on, serve_params
from tests.store_faults import copy_committed, persisted_raw

QUERY = {"query": "自动驾驶 产品责任"}
TWO_TITLES = {"op": "and", "items": [{"field": "title", "value": "自动驾驶"}, {"field": "title", "value": "产品责任"}]}
FULL_RUN = 17 + 100 + 15




@pytest.fixture
async def site() -> FakeSite:
    return FakeSite()


@pytest.fixture
async def app(isolated_data_dir: Path, site: FakeSite):
    application = App(isolated_data_dir, site_factory=lambda: site)
    yield application
    await application.close()


async def test_search_runs_inline_and_reports_the_lexical_plan(app: App, site: FakeSite) -> None:
    view = await call_tool(app, "search", QUERY)
    assert view["status"] == "completed" and view["kind"] == "search"
    result = view["result"]
    assert result["search_id"] == view["operation_id"]
    assert result["plan"]["method"] == "lexical" and result["plan"]["warnings"]
    assert result["plan"]["concepts"] == [["自动驾驶"], ["产品责任"]]
    assert result["candidate_count"] == 200 and view["requests"] == len(site.log) == FULL_RUN
    assert all(set(row) == {"record_ref", "title", "url"} for row in result["results"])
    assert result["coverage"][0] == {"channel": "q1", "pages": 5, "rows": 100, "total": 120, "exhausted": False}
    rows = await call_tool(app, "search_results", {"search_id": result["search_id"], "view": "records", "limit": 3})
    assert rows["total"] == result["selected_count"]
    assert rows["results"][0]["evidence"]["source_tier"] == 0.96


async def test_prefer_cache_answers_at_once_and_ignores_limit(app: App, site: FakeSite) -> None:
    first = await call_tool(app, "search", QUERY)
    store = await app.store()
    operations, requests = len(store.data.operations), len(site.log)
    hit = await call_tool(app, "search", {**QUERY, "limit": 3})
    assert hit["status"] == "completed" and hit["source"] == "cache" and hit["requests"] == 0
    assert hit["result"]["search_id"] == first["result"]["search_id"]
    assert len(hit["result"]["results"]) == 3 and hit["result"]["enhanced_count"] == 0
    assert len(store.data.operations) == operations and len(site.log) == requests
    live = await call_tool(app, "search", {**QUERY, "options": {"freshness": "live"}})
    assert live["operation_id"] != first["operation_id"] and len(store.data.operations) == operations + 1
    other = await call_tool(app, "search", {**QUERY, "options": {"max_pages": 1, "metadata": "basic"}})
    assert "source" not in other  # a different search is not a hit


async def test_a_partial_search_is_never_cached(app: App, site: FakeSite) -> None:
    raw = {**QUERY, "options": {"max_requests": 10}}
    first = await call_tool(app, "search", raw)
    assert first["status"] == "partial" and first["errors"][-1]["code"] == "BUDGET_EXHAUSTED"
    again = await call_tool(app, "search", raw)
    assert "source" not in again and again["operation_id"] != first["operation_id"]


async def test_continue_keeps_the_id_and_tops_up_the_budget(app: App, site: FakeSite) -> None:
    first = await call_tool(app, "search", {**QUERY, "options": {"max_requests": 40}})
    op_id = first["operation_id"]
    assert first["status"] == "partial" and first["requests"] == 40
    done = await call_tool(app, "operation_control", {"action": "continue", "operation_id": op_id})
    assert done["operation_id"] == op_id and done["status"] == "completed"
    assert done["budget"]["max_requests"] == 240  # +200 when none was asked for
    assert done["result"]["search_id"] == op_id and done["requests"] == FULL_RUN
    assert not [entry for entry, n in Counter(site.log).items() if n > 1]
    with pytest.raises(CnkiError) as completed:
        await call_tool(app, "operation_control", {"action": "continue", "operation_id": op_id})
    assert completed.value.code == "OPERATION_STATE"


async def test_continue_refuses_other_kinds_and_live_operations(app: App) -> None:
    jobs = await app.jobs()

    async def quick(op: OperationContext) -> dict[str, Any]:
        op.checkpoint({"anything": 1})
        return {}

    metadata = jobs.start("metadata", get_metadata.BUDGET.of(), quick)
    await metadata.done.wait()
    with pytest.raises(CnkiError) as other:
        await call_tool(app, "operation_control", {"action": "continue", "operation_id": metadata.record.operation_id})
    assert other.value.code == "CONTINUE_UNAVAILABLE"

    release = asyncio.Event()

    async def blocked(op: OperationContext) -> dict[str, Any]:
        op.checkpoint({"search_id": op.operation_id})
        await release.wait()
        return {}

    live = jobs.start("search", Budget(max_requests=5, timeout_seconds=5), blocked)
    with pytest.raises(CnkiError) as busy:
        await call_tool(app, "operation_control", {"action": "continue", "operation_id": live.record.operation_id})
    assert busy.value.code == "OPERATION_BUSY"
    release.set()
    await live.done.wait()


@pytest.mark.parametrize(
    "crash_at",
    [
        pytest.param(lambda kind, key: key == "subject#3", id="mid-retrieval"),
        pytest.param(lambda kind, key: kind == "detail", id="start-of-enrichment"),
        pytest.param(lambda kind, key: kind == "grid" and key.startswith("feedback"), id="feedback"),
    ],
)
async def test_continue_after_a_crash_repeats_nothing(tmp_path: Path, crash_at: Any) -> None:
    """The process dies mid-search; a new process on the research.db it left continues it."""
    crashed_dir, restarted_dir = tmp_path / "before", tmp_path / "after"
    before = FakeSite()
    before.crash_when = crash_at
    app = App(crashed_dir, site_factory=lambda: before)
    pending = asyncio.create_task(call_tool(app, "search", QUERY))
    await within(before.crashed.wait(), 10)
    store = await app.store()
    store.flush()  # every change made so far is committed by now anyway
    copy_committed(crashed_dir, restarted_dir)  # what the process leaves when it is killed here
    (op_id,) = store.data.operations
    pending.cancel()
    await app.close()

    after = FakeSite()
    app = App(restarted_dir, site_factory=lambda: after)
    try:
        status = await call_tool(app, "operation_status", {"operation_id": op_id})
        assert status["status"] == "interrupted"
        assert "search_results" not in json.dumps(status) and op_id not in (await app.store()).data.searches
        done = await call_tool(app, "operation_control", {"action": "continue", "operation_id": op_id})
    finally:
        await app.close()
    assert done["status"] == "completed" and done["operation_id"] == op_id
    assert done["result"]["search_id"] == op_id and done["result"]["candidate_count"] == 200
    performed = before.log + after.log
    assert len(performed) == FULL_RUN
    assert not [entry for entry, n in Counter(performed).items() if n > 1]
    assert after.log  # the restarted process did the rest


async def test_structured_search_keeps_cnki_order_and_lists_only(app: App, site: FakeSite) -> None:
    expression = {"op": "and", "items": [{"field": "title", "value": "自动驾驶"}, {"field": "title", "value": "产品责任"}]}
    view = await call_tool(app, "structured_search", {"expression": expression, "limit": 20})
    result = view["result"]
    assert view["status"] == "completed" and result["plan"]["method"] == "structured"
    assert site.counts == Counter({"grid": 1})
    assert [row["title"] for row in result["results"]] == [sim_paper(i).title for i in range(30, 50)]
    assert result["selected_count"] == 20 and result["enhanced_count"] == 0
    (query,) = site.queries
    assert [c.field for c in query.branches[0]] == ["title", "title"]

    ranked = await call_tool(app, "structured_search", {"expression": expression, "limit": 20, "options": {"metadata": "ranked", "freshness": "live"}})
    assert ranked["result"]["enhanced_count"] == 20 and site.counts["detail"] == 20
    assert len(ranked["result"]["coverage"]) == 1  # never any feedback


async def test_structured_search_year_and_sort_reach_the_site(app: App, site: FakeSite) -> None:
    expression = {"field": "keywords", "value": "自动驾驶"}
    await call_tool(app, "structured_search", {"expression": expression, "year_from": 2021, "year_to": 2022, "sort": "cited_desc"})
    assert {(q.year_from, q.year_to, q.sort) for q in site.queries} == {(2021, 2022, "cited_desc")}
    # Two rows in six pass the year filter, so the default target (the limit, 50) takes several pages.
    assert len(site.queries) == 5


async def test_get_metadata_network_path(app: App, site: FakeSite) -> None:
    search = await call_tool(app, "search", {**QUERY, "options": {"metadata": "basic"}})
    before = len(site.log)
    view = await call_tool(app, "get_metadata", {
        "search_id": search["result"]["search_id"], "limit": 3,
        "titles": [sim_paper(500).title, "没有这篇论文"],
        "fields": ["abstract", "quality"],
    })
    assert view["kind"] == "metadata" and view["status"] == "partial"
    records = view["result"]["records"]
    assert len(records) == 3  # paper 500 is not on the fake site either
    assert all(set(r) == {"record_ref", "title", "abstract", "quality"} for r in records)
    papers = (await app.store()).data.papers
    journals = len({papers[r["record_ref"]].source for r in records})
    assert Counter(kind for kind, _ in site.log[before:]) == Counter({"detail": 3, "journal": journals, "locate": 1})
    assert all(r["quality"]["tiers"] == ["CSSCI"] for r in records)
    assert sorted(e["code"] for e in view["errors"]) == ["DOCUMENT_NOT_FOUND", "DOCUMENT_NOT_FOUND"]
    spent = len(site.log)

    again = await call_tool(app, "get_metadata", {"record_refs": [r["record_ref"] for r in records], "quality": True})
    assert again["status"] == "completed" and len(site.log) == spent  # fresh details, cached journals
    refreshed = await call_tool(app, "get_metadata", {"record_refs": [records[0]["record_ref"]], "refresh": True})
    assert refreshed["status"] == "completed" and site.log[-1][0] == "detail"


async def test_get_metadata_unknown_search_fails_before_an_operation(app: App) -> None:
    with pytest.raises(CnkiError) as missing:
        await call_tool(app, "get_metadata", {"search_id": "op_missing"})
    assert missing.value.code == "SEARCH_NOT_FOUND"
    assert not (await app.store()).data.operations


# --- through MCP: sampling versus lexical planning ----------------------------------------------------


async def test_a_sampling_client_plans_the_concepts(app: App) -> None:
    asked: list[CreateMessageRequestParams] = []

    async def sampling(context: Any, params: CreateMessageRequestParams) -> CreateMessageResult:
        asked.append(params)
        reply = '```json\n[["自动驾驶", "无人驾驶"], ["产品责任"]]\n```'
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text=reply), model="m")

    async with Client(server.build_server(app), mode="legacy", sampling_callback=sampling) as client:
        result = await client.call_tool("search", {"query": "自动驾驶汽车的产品责任怎么认定", "options": {"metadata": "basic"}})
    data = result.structured_content
    assert result.is_error is False and data["status"] == "completed"
    plan = data["result"]["plan"]
    assert plan["method"] == "sampling" and plan["concepts"] == [["自动驾驶", "无人驾驶"], ["产品责任"]]
    assert "warnings" not in plan
    (params,) = asked
    assert params.max_tokens == 1200 and params.include_context == "none"
    assert [m.content.text for m in params.messages] == ["自动驾驶汽车的产品责任怎么认定"]


async def test_an_unusable_sampling_reply_falls_back_to_lexical(app: App) -> None:
    async def sampling(context: Any, params: CreateMessageRequestParams) -> CreateMessageResult:
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text="好的，概念是……"), model="m")

    async with Client(server.build_server(app), mode="legacy", sampling_callback=sampling) as client:
        result = await client.call_tool("search", {**QUERY, "options": {"metadata": "basic"}})
    plan = result.structured_content["result"]["plan"]
    assert plan["method"] == "lexical"
    assert plan["warnings"] == [SAMPLING_UNUSABLE_WARNING, LEXICAL_WARNING]


async def test_a_client_without_sampling_gets_the_lexical_plan(app: App) -> None:
    async with Client(server.build_server(app), mode="legacy") as client:
        result = await client.call_tool("search", {**QUERY, "options": {"metadata": "basic"}})
        # The same channels as the lexical plan: live, or prefer_cache would answer from that search.
        explicit = await client.call_tool(
            "search",
            {**QUERY, "concept_groups": [["自动驾驶"], ["产品责任"]], "options": {"metadata": "basic", "freshness": "live"}},
        )
    assert result.structured_content["result"]["plan"]["method"] == "lexical"
    assert explicit.structured_content["result"]["plan"]["method"] == "explicit"


# --- end to end: SIGKILL the real server mid-search, restart it, continue -------------------------------


def _v(url: str) -> str:
    return dict(parse_qsl(urlsplit(url).query)).get("v", "")


@pytest.mark.browser
async def test_sigkill_mid_search_then_continue_repeats_nothing(kns: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    # After 8 detail pages the site stops answering them: the process is killed while they hang.
    kns.fault("detail", "delay", seconds=60, after=8)
    with open(tmp_path / "stderr.txt", "wb") as errlog:
        first = await RawServer.start(serve_params(data, kns.browser_args, CNKI_INLINE_WAIT_SECONDS="1"), errlog, read_timeout=120)
        started = await first.call("search", {"query": "自动驾驶"})
        op_id = started["operation_id"]
        deadline = time.monotonic() + 120
        while kns.count("detail") < 9 and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert kns.count("detail") >= 9, kns.counts
        await asyncio.sleep(1.0)  # the last answered request's results are committed within milliseconds
        first.proc.kill()
        await first.proc.wait()
        for process in processes_on(data / "browser"):
            with contextlib.suppress(psutil.Error):
                process.kill()
        kns.configure(faults=[])

        persisted = persisted_raw(data)
        checkpoint = persisted["operations"][op_id]["checkpoint"]
        assert checkpoint["retrieved"] is True
        assert not checkpoint.get("enriched")
        done_details = {_v(p.get("locator") or p["url"]) for p in persisted["papers"].values() if p.get("detail_observed_at")}
        done_journals = {q["source_url"] for q in persisted["sources"].values()}
        assert len(done_details) >= 5  # a few of the first pages may not parse
        assert done_journals
        seen = len(kns.requests)

        second = await RawServer.start(serve_params(data, kns.browser_args, CNKI_INLINE_WAIT_SECONDS="50"), errlog, read_timeout=120)
        try:
            interrupted = await second.call("operation_status", {"operation_id": op_id})
            assert interrupted["status"] == "interrupted"
            await second.call("operation_control", {"action": "continue", "operation_id": op_id})
            final = await second.wait(await second.call("operation_status", {"operation_id": op_id}), timeout=240)
        finally:
            await second.close()
    assert final["status"] in ("completed", "partial"), final
    result = final["result"]
    assert result["search_id"] == op_id
    assert result["candidate_count"] >= 20
    later = kns.requests[seen:]
    assert not done_details & {_v(r.url) for r in later if r.endpoint == "detail"}
    assert not done_journals & {r.url for r in later if r.endpoint == "journal"}
    assert any(r.endpoint == "detail" for r in later)  # the rest of the pool was read after the restart


# --- the typed query: compiled once, kept in the checkpoint, an old checkpoint still continuing ---------


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every condition tree compiled (grid_query's DNF walk), every professional expression read."""
    seen: list[Any] = []
    tree, parse = grid_query._compile_tree, expert.parse

    def counted_tree(node: Any) -> Any:
        seen.append(node)
        return tree(node)

    def counted_parse(text: str) -> Any:
        seen.append(text)
        return parse(text)

    monkeypatch.setattr(grid_query, "_compile_tree", counted_tree)
    monkeypatch.setattr(expert, "parse", counted_parse)
    return seen


async def test_structured_search_compiles_its_tree_once(app: App, site: FakeSite, compiles: list[Any]) -> None:
    # A NOT inside an OR has no structured professional form: the summary's one comes from the compiled branches.
    either = {"op": "or", "items": [{"field": "title", "value": "自动驾驶"}, {"op": "not", "items": [{"field": "title", "value": "综述"}]}]}
    expression = {"op": "and", "items": [either, {"field": "title", "value": "产品责任"}]}
    view = await call_tool(app, "structured_search", {"expression": expression, "year_from": 2021, "limit": 50})
    assert view["status"] == "completed" and len(site.queries) > 1  # several pages, one compilation
    assert len(compiles) == 1
    assert view["result"]["expert_expression"] == expert.from_structured(expression) != ""
    checkpoint = (await app.store()).data.operations[view["operation_id"]].checkpoint
    assert msgspec.convert(checkpoint, SearchState).query == StructuredSearchArgs(expression=expression).asked()


async def test_expert_search_reads_its_expression_once(
    app: App, site: FakeSite, compiles: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(site, "_listing", lambda query: ("expert", site.lists["title"]))  # the fake lists branches only
    view = await call_tool(app, "expert_search", {"expression": "TI=自动驾驶", "limit": 50})
    assert view["status"] == "completed" and {q.expert for q in site.queries} == {"TI='自动驾驶'"}
    assert compiles == ["TI=自动驾驶"]


async def test_a_checkpoint_without_the_query_still_continues(app: App, site: FakeSite, compiles: list[Any]) -> None:
    first = await call_tool(app, "structured_search", {"expression": TWO_TITLES, "year_from": 2021, "limit": 50,
                                                       "options": {"max_requests": 2}})
    op_id = first["operation_id"]
    assert first["status"] == "partial" and len(compiles) == 1
    store = await app.store()
    record = store.data.operations[op_id]
    record.checkpoint.pop("query")  # as a version before the typed query wrote it
    store.put_operation(record)
    before = list(site.queries)
    done = await call_tool(app, "operation_control", {"action": "continue", "operation_id": op_id})
    assert done["status"] == "completed" and done["result"]["search_id"] == op_id
    assert len(compiles) == 2  # the resumed run compiled its one channel once, from the stored plan
    assert {(q.branches[0][0].value, q.year_from) for q in site.queries[len(before):]} == {("自动驾驶", 2021)}
