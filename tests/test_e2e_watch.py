"""watch end to end: the real MCP client, `python -m cnki_mcp serve`, headless Chromium and a simulator of this
module's own (papers published mid-test must not reach other modules' listings).

A structured watch and a concept watch get their baseline, a run with nothing new answers nothing, papers
published in the simulator's listing are then answered exactly, with their journals' tiers and what matched;
finally `cnki-mcp watch run` from a shell with a throwaway HOME reports the next new paper and writes its digest.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.harness import REPO, McpSession, chromium_or_skip, serve_params
from tests.kns.corpus import Paper as SimPaper
from tests.kns.server import KnsSimulator

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]

TOPIC = "知识图谱"
STRUCTURED = {"expression": {"field": "title", "value": TOPIC}}
CONCEPTS = {"query": TOPIC, "concept_groups": [[TOPIC]]}


@pytest.fixture(scope="module")
def sim() -> Iterator[KnsSimulator]:
    simulator = KnsSimulator().start()
    try:
        yield simulator
    finally:
        simulator.stop()


def fresh(sim: KnsSimulator, count: int, day: int) -> list[SimPaper]:
    """``count`` journal papers on the topic, newer than any in the corpus, in CSSCI/北大核心 journals."""
    models = [
        p for p in sim.corpus.papers
        if TOPIC in p.title and p.resource == "JOURNAL" and not p.online_first and ("CSSCI", "北大核心") == sim.corpus.journals[p.source_key].tiers
    ]
    return [
        replace(model, idx=90000 + day * 10 + i, filename=f"TSQB2026{day:02d}9{i:02d}", title=f"{TOPIC}新进展第{day}-{i}篇",
                date=f"2026-12-{day:02d}", year=2026, _lowered={})
        for i, model in enumerate(models[:count])
    ]


async def run_watch(mcp: McpSession, name: str) -> dict[str, Any]:
    view = await mcp.wait(await mcp.call("watch", {"action": "run", "name": name}))
    assert view["status"] == "completed", view
    result: dict[str, Any] = view["result"]
    return result


def shell(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cnki_mcp", *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=300)


async def test_a_watch_answers_exactly_the_papers_published_since_its_last_run(sim: KnsSimulator, tmp_path: Path) -> None:
    data = tmp_path / "data"
    home = tmp_path / "home"  # a throwaway HOME, as a scheduler's environment
    home.mkdir()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CNKI_")},
        "HOME": str(home), "CNKI_DATA_DIR": str(data), "CNKI_LANG": "zh", "CNKI_HEADLESS": "1",
        "CNKI_BROWSER_PATH": chromium_or_skip(), "CNKI_BROWSER_ARGS": sim.browser_args, "CNKI_REQUEST_INTERVAL_MS": "10",
    }
    async with McpSession.serving(serve_params(data, sim.browser_args)) as mcp:
        added = await mcp.call("watch", {"action": "add", "name": "图谱", "tool": "structured_search", "arguments": STRUCTURED})
        assert [w["name"] for w in added["watches"]] == ["图谱"]
        await mcp.call("watch", {"action": "add", "name": "概念", "arguments": CONCEPTS})
        taken = await mcp.result("watch", {"action": "add", "name": "图谱", "tool": "expert_search", "arguments": {"expression": "TI='x'"}})
        assert taken.is_error and "WATCH_EXISTS" in str(taken.content)

        baseline = await run_watch(mcp, "图谱")
        assert baseline["baseline"] is True and baseline["found"] == baseline["total"] > 0
        assert baseline["new"] == []
        concept_baseline = await run_watch(mcp, "概念")
        assert concept_baseline["baseline"] is True and concept_baseline["found"] > 0

        sim.clear_log()
        quiet = await run_watch(mcp, "图谱")
        assert (quiet["baseline"], quiet["found"], quiet["new"]) == (False, 0, [])
        print("\nrequests, nothing new (structured):", len(sim.requests), sim.counts)
        sim.clear_log()
        assert (await run_watch(mcp, "概念"))["found"] == 0
        print("requests, nothing new (concepts):", len(sim.requests), sim.counts)

        published = fresh(sim, 3, 29)
        sim.publish(*published)
        sim.clear_log()
        news = await run_watch(mcp, "图谱")
        print("requests, 3 new (structured):", len(sim.requests), sim.counts)
        newest_first = sorted(published, key=lambda p: p.idx, reverse=True) if len({p.date for p in published}) == 1 else published
        assert news["found"] == 3
        assert sorted(paper["title"] for paper in news["new"]) == sorted(p.title for p in newest_first)
        for paper in news["new"]:
            assert paper["tiers"] == ["CSSCI", "北大核心"], paper
            assert paper["matched"] == ["符合检索式"]
            assert paper["publication_date"].startswith("2026-12-29")
        sim.clear_log()
        concept_news = await run_watch(mcp, "概念")
        print("requests, 3 new (concepts):", len(sim.requests), sim.counts)
        assert sorted(paper["title"] for paper in concept_news["new"]) == sorted(p.title for p in published)
        assert all("篇名含 知识图谱" in paper["matched"] for paper in concept_news["new"])
        assert (await run_watch(mcp, "图谱"))["found"] == 0  # remembered

        listed = {w["name"]: w for w in (await mcp.call("watch", {"action": "list"}))["watches"]}
        assert listed["图谱"]["known"] == baseline["found"] + 3
        assert listed["图谱"]["arguments"] == STRUCTURED and listed["概念"]["arguments"] == CONCEPTS

        # From a shell while the server owns the data directory: the run goes through the server.
        sim.clear_log()
        owned = await asyncio.to_thread(shell, ["watch", "run", "图谱"], env)
        assert owned.returncode == 0, owned.stderr
        assert owned.stdout.splitlines()[0] == "图谱：0 篇新论文。" and sim.counts == {"grid": 1}
        assert [path.name for path in (data / "exports").glob("watch-*.md")] == [owned.stdout.splitlines()[-1].rsplit("/", 1)[1]]

    # The scheduler's way with nobody serving: the run in the command's own process.
    later = fresh(sim, 1, 30)
    sim.publish(*later)
    before = set((data / "exports").glob("watch-*.md"))
    done = await asyncio.to_thread(shell, ["watch", "run"], env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "图谱：1 篇新论文。" in lines and "概念：1 篇新论文。" in lines, done.stdout
    assert any(later[0].title in line for line in lines)
    digests = list(set((data / "exports").glob("watch-*.md")) - before)
    assert len(digests) == 1 and lines[-1] == f"摘要已写入 {digests[0]}"
    text = digests[0].read_text("utf-8")
    assert "## 图谱：1 篇新论文" in text and later[0].title in text and "〔CSSCI、北大核心〕" in text

    again = await asyncio.to_thread(shell, ["watch", "run", "图谱", "无此关注"], env)
    assert again.returncode == 1 and "图谱：0 篇新论文。" in again.stdout
    assert "无此关注：未完成：WATCH_NOT_FOUND" in again.stderr

    # CNKI asks for a check: a scheduled run does not wait for a person, says so, remembers nothing, exits 1.
    sim.publish(*fresh(sim, 1, 31))
    sim.captcha("grid")
    blocked = await asyncio.to_thread(shell, ["watch", "run", "图谱"], env)
    assert blocked.returncode == 1, blocked.stdout
    assert "图谱：未完成：知网要求人工验证或登录" in blocked.stderr
    sim.solve()
    assert "图谱：1 篇新论文。" in (await asyncio.to_thread(shell, ["watch", "run", "图谱"], env)).stdout
