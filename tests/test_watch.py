"""The watch tool through App with the fake site: what add keeps, the store across a restart, the refusals, a
run that does not complete remembering nothing; and the digest's Markdown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cnki_mcp.app import App
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.watch_model import WatchPaper, WatchRun
from cnki_mcp.research.watch import digest
from tests.fake_site import FakeSite
from tests.harness import call_tool

TREE = {"op": "and", "items": [{"field": "title", "value": "自动驾驶"}, {"field": "title", "value": "产品责任"}]}


@pytest.fixture
async def app(isolated_data_dir: Path):
    application = App(isolated_data_dir, site_factory=FakeSite)
    yield application
    await application.close()


async def code_of(app: App, raw: dict[str, Any]) -> str:
    with pytest.raises(CnkiError) as caught:
        await call_tool(app, "watch", raw)
    return caught.value.code


async def test_add_fixes_the_plan_and_the_watches_survive_a_restart(app: App, isolated_data_dir: Path) -> None:
    added = await call_tool(app, "watch", {"action": "add", "name": " 责任 ", "arguments": {"query": "自动驾驶 产品责任", "year_from": 2020}})
    assert added == {"watches": [{"name": "责任", "tool": "search", "known": 0,
                                  "arguments": {"query": "自动驾驶 产品责任", "year_from": 2020, "concept_groups": [["自动驾驶"], ["产品责任"]]}}]}
    await call_tool(app, "watch", {"action": "add", "name": "树", "tool": "structured_search", "arguments": {"expression": TREE}})
    await app.close()
    again = App(isolated_data_dir, site_factory=FakeSite)
    try:
        listed = await call_tool(again, "watch", {"action": "list"})
        assert [w["name"] for w in listed["watches"]] == ["责任", "树"]
        assert (await call_tool(again, "watch", {"action": "remove", "name": "责任"}))["watches"][0]["name"] == "树"
    finally:
        await again.close()


async def test_the_refusals(app: App) -> None:
    await call_tool(app, "watch", {"action": "add", "name": "树", "tool": "structured_search", "arguments": {"expression": TREE}})
    assert await code_of(app, {"action": "add", "name": "树", "tool": "expert_search", "arguments": {"expression": "TI='x'"}}) == "WATCH_EXISTS"
    assert await code_of(app, {"action": "remove", "name": "无"}) == "WATCH_NOT_FOUND"
    assert await code_of(app, {"action": "run", "name": "无"}) == "WATCH_NOT_FOUND"
    # the watched tool's own rules, with its own codes
    assert await code_of(app, {"action": "add", "name": "坏", "tool": "expert_search", "arguments": {"expression": "TI=("}}) == "INVALID_EXPRESSION"
    assert await code_of(app, {"action": "add", "name": "坏", "arguments": {"query": ""}}) == "INVALID_QUERY"
    assert await code_of(app, {"action": "add", "name": "坏", "arguments": {"query": "x", "bogus": 1}}) == "INVALID_INPUT"
    assert [w["name"] for w in (await call_tool(app, "watch", {"action": "list"}))["watches"]] == ["树"]


async def test_a_run_that_does_not_complete_remembers_nothing(app: App) -> None:
    arguments = {"query": "自动驾驶 产品责任", "options": {"max_requests": 2}}  # three listings: the budget stops the third
    await call_tool(app, "watch", {"action": "add", "name": "紧", "arguments": arguments})
    view = await call_tool(app, "watch", {"action": "run", "name": "紧"})
    assert view["kind"] == "watch" and view["status"] == "partial" and "result" not in view
    assert [e["code"] for e in view["errors"]][-1] == "WATCH_INCOMPLETE"
    (watch,) = (await call_tool(app, "watch", {"action": "list"}))["watches"]
    assert watch["known"] == 0 and "baseline_at" not in watch


def test_the_digest_lists_the_new_papers_with_their_tiers_and_what_matched() -> None:
    paper = WatchPaper(record_ref="r1", title="新论文", authors=["甲", "乙"], source="情报学报", publication_date="2026-12-29",
                       url="https://kns.cnki.net/x", tiers=["CSSCI"], matched=["篇名含 知识图谱"])
    text = digest([WatchRun(name="图谱", found=1, new=[paper]), WatchRun(name="新", baseline=True, found=7, total=29)],
                  {"坏": "WATCH_NOT_FOUND: 没有这个关注"}, "2026-12-30 08:00")
    assert text.splitlines() == [
        "# 知网关注摘要 2026-12-30 08:00", "",
        "## 图谱：1 篇新论文", "",
        "- [新论文](https://kns.cnki.net/x)　甲、乙　情报学报 2026-12-29〔CSSCI〕", "  - 命中：篇名含 知识图谱", "",
        "## 新", "", "首次运行，建立基线：记下 7 篇（知网列表共 29 篇）。", "",
        "## 坏：未完成", "", "WATCH_NOT_FOUND: 没有这个关注",
    ]
