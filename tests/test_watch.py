"""The watch tool through App with the fake site: what add keeps, the store across a restart, the refusals, a
run that does not complete remembering nothing, a listing cut short (WATCH_GAP) and found again later, the
memory's cap (WATCH_MEMORY_FULL), one run of a watch at a time (WATCH_RUNNING, and another process kept out by
the directory lock); and the digest's Markdown."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cnki_mcp.app import App
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Problem
from cnki_mcp.research.watch import WatchPaper, WatchRun, digest
from tests.fake_site import FakeSite
from tests.harness import REPO, call_tool

TITLE = {"expression": {"field": "title", "value": "自动驾驶"}}  # one listing: the fake site's "title"
TREE = {"op": "and", "items": [{"field": "title", "value": "自动驾驶"}, {"field": "title", "value": "产品责任"}]}


@pytest.fixture
async def app(isolated_data_dir: Path):
    application = App(isolated_data_dir, site_factory=FakeSite)
    yield application
    await application.close()


def site_app(root: Path, lists: dict[str, range] | None = None, **options: Any) -> App:
    """An App on the fake site whose listings are ``lists``, shared by every site it makes: a test publishes
    papers by giving a listing a newer range."""

    def factory() -> FakeSite:
        site = FakeSite(**options)
        if lists is not None:
            site.lists = lists
        return site

    return App(root, site_factory=factory)


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


async def test_a_listing_cut_short_is_said_and_its_gap_read_by_a_later_run(isolated_data_dir: Path) -> None:
    lists = {"title": range(100, 150)}
    app = site_app(isolated_data_dir, lists)
    try:
        await call_tool(app, "watch", {"action": "add", "name": "缺", "tool": "structured_search", "arguments": {**TITLE, "options": {"max_pages": 2}}})
        assert (await call_tool(app, "watch", {"action": "run", "name": "缺"}))["result"]["found"] == 20  # baseline: page 1
        lists["title"] = range(40, 150)  # 60 new papers on top: two pages of 20 do not reach the known ones
        cut = (await call_tool(app, "watch", {"action": "run", "name": "缺"}))["result"]
        assert cut["found"] == 40 and [w["code"] for w in cut["warnings"]] == ["WATCH_GAP"]
        assert cut["warnings"][0]["details"] == {"watch": "缺", "listings": 1, "channels": ["native"], "max_pages": 2}
        assert cut["warnings"][0]["message"].startswith("这次有 1 个列表（符合检索式）读到 max_pages=2 页就停了。")
        (listed,) = (await call_tool(app, "watch", {"action": "list"}))["watches"]
        assert listed["gap"] is True and listed["known"] == 60
        again = (await call_tool(app, "watch", {"action": "run", "name": "缺"}))["result"]
        assert again["found"] == 0 and [w["code"] for w in again["warnings"]] == ["WATCH_GAP"]  # told, not again; still a gap
        wider = await call_tool(app, "watch", {"action": "run", "name": "缺", "arguments": {"options": {"max_pages": 5}}})
        found = wider["result"]
        assert found["found"] == 20 and found["warnings"] == []  # the gap's papers, read on to the known ones
        assert sorted(paper["title"][-3:] for paper in found["new"]) == [f"{i:03d}" for i in range(80, 100)]
        (listed,) = (await call_tool(app, "watch", {"action": "list"}))["watches"]
        assert "gap" not in listed and listed["known"] == 80 and listed["arguments"]["options"] == {"max_pages": 5}
        assert (await call_tool(app, "watch", {"action": "run", "name": "缺"}))["result"]["found"] == 0
        assert await code_of(app, {"action": "run", "name": "缺", "arguments": {"expression": "x"}}) == "INVALID_INPUT"
    finally:
        await app.close()


async def test_a_full_memory_that_forgets_papers_a_listing_showed_says_so(isolated_data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("cnki_mcp.research.watch.KNOWN_KEPT", 30)
    lists = {"title": range(100, 150)}
    app = site_app(isolated_data_dir, lists)
    try:
        await call_tool(app, "watch", {"action": "add", "name": "满", "tool": "structured_search", "arguments": TITLE})
        await call_tool(app, "watch", {"action": "run", "name": "满"})  # 20 known
        lists["title"] = range(80, 150)
        run = (await call_tool(app, "watch", {"action": "run", "name": "满"}))["result"]
        assert run["found"] == 20 and [w["code"] for w in run["warnings"]] == ["WATCH_MEMORY_FULL"]
        assert run["warnings"][0]["details"] == {"watch": "满", "kept": 30, "forgotten": 10}
    finally:
        await app.close()


async def test_one_run_of_a_watch_at_a_time(isolated_data_dir: Path) -> None:
    from cnki_mcp.tools.watch import start_watch

    app = site_app(isolated_data_dir, latency=0.5)
    try:
        await call_tool(app, "watch", {"action": "add", "name": "一", "tool": "structured_search", "arguments": TITLE})
        store = await app.store()
        first = await start_watch(app, store.data.watches["一"], None)
        with pytest.raises(CnkiError) as caught:
            await call_tool(app, "watch", {"action": "run", "name": "一"})
        assert caught.value.code == "WATCH_RUNNING" and caught.value.details["operation_id"] == first.record.operation_id
        await first.done.wait()
        assert (await call_tool(app, "watch", {"action": "run", "name": "一"}))["status"] == "completed"
        # Another process (a scheduler's `cnki-mcp watch run`) cannot open the store this one holds.
        other = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-m", "cnki_mcp", "watch", "run", "一"], cwd=REPO, capture_output=True, text=True, timeout=120,
            env={**os.environ, "CNKI_LANG": "zh"},
        )
        assert other.returncode == 1 and other.stderr.startswith("DATA_DIRECTORY_IN_USE"), other.stderr
    finally:
        await app.close()


def test_the_digest_says_what_a_run_could_not_see_before_its_papers() -> None:
    gap = Problem(code="WATCH_GAP", message="这次有 1 个列表（符合检索式）读到 max_pages=2 页就停了。")
    text = digest([WatchRun(name="图谱", found=0, warnings=[gap])], {}, "2026-12-30 08:00")
    assert text.splitlines()[2:5] == ["## 图谱：0 篇新论文", "", "> ⚠ WATCH_GAP：这次有 1 个列表（符合检索式）读到 max_pages=2 页就停了。"]


def test_the_command_prints_a_runs_warnings(isolated_data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from cnki_mcp import cli

    async def ran(names: list[str], runs: list[WatchRun], failures: dict[str, str]) -> bool:
        runs.append(WatchRun(name="图谱", found=0, warnings=[Problem(code="WATCH_GAP", message="缺口。")]))
        return True

    monkeypatch.setenv("CNKI_LANG", "zh")
    monkeypatch.setattr(cli, "_in_process", ran)
    done = CliRunner().invoke(cli.cli, ["watch", "run"])
    assert done.exit_code == 0 and done.output.splitlines()[:2] == ["图谱：0 篇新论文。", "  ⚠ WATCH_GAP：缺口。"]
