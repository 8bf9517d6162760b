"""End to end: download_papers, a paced, resumable batch, through the real MCP client over stdio,
``python -m cnki_mcp serve`` and a real headless Chromium pointed at the simulator (tests/kns).

A batch of eight (a thesis, a CAJ-only paper, a refused one, two downloaded before) gets each paper's
status, file and SHA-256 with at most one order per paper, the orders at least 0.75 × interval apart
(also from the order download_paper sent just before); a server SIGKILLed mid-batch is continued by a
new one without a repeated order; a challenge mid-batch goes to the person and the batch goes on; the
daily cap and three refusals for want of rights stop a batch early with the rest in ``remaining``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
import os
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cnki_mcp.core.clock import within
from tests.harness import AWAITING, FINAL, McpSession, chromium_path, serve_params
from tests.kns import pages
from tests.kns.corpus import Paper as SimPaper
from tests.kns.server import KnsSimulator
from tests.store_faults import persisted
from tests.test_e2e_documents import EntrySimulator, answer, entry_sim, entry_simulator, journal_papers, seed, serve  # noqa: F401  (its fixtures ``sim`` and ``sim_server``: the entry simulator and its per-test reset)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(chromium_path() is None, reason="没有可用的 Chromium"),
]

INTERVAL = 5  # the least interval_seconds allows
FIGURES: dict[str, float] = {}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha(path: str) -> str:
    return sha(Path(path).read_bytes())


def theses(sim: KnsSimulator, count: int) -> list[SimPaper]:  # noqa: F811 - the fixture imported above
    return [p for p in sim.corpus.papers if p.resource == "DISSERTATION"][:count]


def gaps(orders: list[tuple[float, str, str]]) -> list[float]:
    return [later[0] - earlier[0] for earlier, later in zip(orders, orders[1:])]


def by_ref(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["record_ref"]: item for item in view["result"]["items"]}


async def follow(session: McpSession, view: dict[str, Any], heard: list[str], until: tuple[str, ...] = FINAL) -> dict[str, Any]:
    """``session.wait`` with the progress notifications of every status call kept in ``heard``."""

    async def note(value: float, total: float | None, message: str | None) -> None:
        heard.append(message or "")

    while view["status"] not in until:
        assert view["status"] in ("running", "awaiting_user"), view
        result = await session.client.call_tool(
            "operation_status", {"operation_id": view["operation_id"], "wait_seconds": 5}, progress_callback=note
        )
        view = answer(result)
    return view


@contextlib.asynccontextmanager
async def killable(data: Path, sim: KnsSimulator, **env: str) -> AsyncIterator[McpSession]:  # noqa: F811 - the fixture imported above
    """A client on its own server that the test may SIGKILL: the way out does not fail the test."""
    params = serve_params(data, sim.browser_args, CNKI_REQUEST_INTERVAL_MS="50", **env)
    entered = McpSession.serving(params, check=answer, wait_timeout=math.inf)
    session = await entered.__aenter__()
    try:
        yield session
    finally:
        with contextlib.suppress(BaseException):
            await within(entered.__aexit__(None, None, None), 30)


async def test_a_batch_of_eight_gets_each_papers_file_once_and_paced(sim: EntrySimulator, isolated_data_dir: Path) -> None:  # noqa: F811 - the fixture imported above
    first, cached_a, caj_only, refused, cached_b, second, third = journal_papers(sim, 7)
    (thesis,) = theses(sim, 1)
    papers = [first, thesis, cached_a, caj_only, refused, cached_b, second, third]
    refs = seed(isolated_data_dir, sim, papers)
    ref = dict(zip((p.filename for p in papers), refs))
    sim.configure(
        download="ok", login="institution", thesis_downloads="whole", caj_only={caj_only.filename},
        download_by_file={refused.filename: "abstract_only"},
    )
    async with serve(isolated_data_dir, sim, CNKI_INLINE_WAIT_SECONDS="2") as session:
        # Two papers downloaded before, one at a time: the batch must not order them again.
        for paper in (cached_a, cached_b):
            got = await session.wait(await session.call("download_paper", {"record_ref": ref[paper.filename]}))
            assert got["status"] == "completed", got
        before = len(sim.orders())
        requests_before = len(sim.requests)
        heard: list[str] = []
        started = time.monotonic()
        view = await session.call("download_papers", {"record_refs": refs, "interval_seconds": INTERVAL})
        assert view["kind"] == "download_batch", view
        done = await follow(session, view, heard)
        wall = time.monotonic() - started

    assert done["status"] == "completed", done
    assert "errors" not in done
    result = done["result"]
    assert [item["record_ref"] for item in result["items"]] == refs  # in the order given
    items = by_ref(done)
    expected = [
        (first, "downloaded", "pdf", pages.pdf_bytes(first)),
        (thesis, "downloaded", "caj", pages.caj_bytes(thesis, "HN")),  # CAJ整本下载, never a chapter
        (cached_a, "already_downloaded", "pdf", pages.pdf_bytes(cached_a)),
        (caj_only, "downloaded", "caj", pages.caj_bytes(caj_only, "HN")),
        (cached_b, "already_downloaded", "pdf", pages.pdf_bytes(cached_b)),
        (second, "downloaded", "pdf", pages.pdf_bytes(second)),
        (third, "downloaded", "pdf", pages.pdf_bytes(third)),
    ]
    for paper, status, fmt, data in expected:
        item = items[ref[paper.filename]]
        assert (item["status"], item["format"], item["sha256"], item["bytes"]) == (status, fmt, sha(data), len(data)), item
        assert file_sha(item["path"]) == sha(data)
        assert item["title"] == paper.title
    no = items[ref[refused.filename]]
    assert no["status"] == "refused" and no["code"] == "DOWNLOAD_REFUSED", no
    assert "只收录题录" in no["message"] and "path" not in no
    assert result["summary"] == {
        "downloaded": 5, "already_downloaded": 2, "refused": 1, "failed": 0, "uncertain": 0, "not_reached": 0,
    }
    assert result["remaining"] == []
    assert result["downloads_today"] == 7  # the two before, the five now; a cached answer is no download

    orders = sim.orders()
    batch_orders = orders[before:]
    assert Counter(name for _, name, _ in orders) == Counter({p.filename: 1 for p in papers})  # one order each
    assert [name for _, name, _ in batch_orders] == [p.filename for p in (first, thesis, caj_only, refused, second, third)]
    assert [kind for _, _, kind in batch_orders] == ["pdf", "caj", "caj", "pdf", "pdf", "pdf"]
    # Paced between the batch's orders, and from download_paper's order just before the first.
    assert min(gaps(orders[before - 1 :])) >= INTERVAL * 0.75, gaps(orders[before - 1 :])
    # Progress per paper: k/n and the title.
    for k, paper in enumerate(papers):
        if paper not in (cached_a, cached_b):
            assert any(f"{k}/8 {paper.title}" in message for message in heard), (k, heard[-5:])
    tried = len(batch_orders)
    FIGURES["wall_seconds_8"] = wall
    FIGURES["requests_per_paper"] = (len(sim.requests) - requests_before) / tried
    FIGURES["seconds_per_order"] = (batch_orders[-1][0] - batch_orders[0][0]) / (tried - 1)
    print("download_papers figures:", {k: round(v, 2) for k, v in FIGURES.items()},
          "requests by endpoint:", Counter(r.endpoint for r in sim.requests[requests_before:]))


async def test_a_batch_killed_after_its_third_paper_is_continued_without_a_repeated_order(
    sim: EntrySimulator, isolated_data_dir: Path  # noqa: F811 - the fixture imported above
) -> None:
    papers = journal_papers(sim, 6)
    refs = seed(isolated_data_dir, sim, papers)
    sim.configure(download="ok", login="institution")
    sim.fault("file", "delay", seconds=60, after=3)  # the 4th paper's file never comes before the kill
    async with killable(isolated_data_dir, sim, CNKI_INLINE_WAIT_SECONDS="2") as session:
        pid = (await session.call("diagnostics", {}))["process_id"]
        view = await session.call("download_papers", {"record_refs": refs, "interval_seconds": INTERVAL})
        op_id = view["operation_id"]
        deadline = time.monotonic() + 120
        # The 4th order is sent, and research.db holds the checkpoint with three papers and the 4th paper's click
        # (each committed when made: no flush interval to wait out).
        while time.monotonic() < deadline:
            stored = persisted(isolated_data_dir)
            record = stored.operations.get(op_id)
            clicked = [a for a in stored.artifacts.values() if a.state == "clicked" and a.operation_id == op_id]
            if len(sim.orders()) == 4 and record is not None and len((record.checkpoint or {}).get("items", {})) == 3 and clicked:
                break
            await asyncio.sleep(0.2)
        assert len(sim.orders()) == 4, sim.orders()
        os.kill(pid, signal.SIGKILL)
    sim.configure(faults=[])
    async with serve(isolated_data_dir, sim, CNKI_INLINE_WAIT_SECONDS="2") as session:
        interrupted = await session.call("operation_status", {"operation_id": op_id})
        assert interrupted["status"] == "interrupted", interrupted
        continued = await session.call("operation_control", {"action": "continue", "operation_id": op_id})
        done = await session.wait(continued)

    assert done["status"] == "completed" and done["operation_id"] == op_id, done
    items = [by_ref(done)[ref] for ref in refs]
    assert [item["status"] for item in items] == ["downloaded"] * 3 + ["uncertain"] + ["downloaded"] * 2
    assert items[3]["code"] == "SIDE_EFFECT_UNCERTAIN"  # clicked before the crash, nothing arrived: not ordered again
    for paper, item in zip(papers, items):
        if item["status"] == "downloaded":
            assert item["sha256"] == file_sha(item["path"]) == sha(pages.pdf_bytes(paper))
    names = [name for _, name, _ in sim.orders()]
    assert names == [p.filename for p in papers]  # every paper ordered once, none twice
    assert done["result"]["remaining"] == []


async def test_a_challenge_mid_batch_goes_to_the_person_and_the_batch_goes_on(sim: EntrySimulator, isolated_data_dir: Path) -> None:  # noqa: F811 - the fixture imported above
    papers = journal_papers(sim, 3)
    refs = seed(isolated_data_dir, sim, papers)
    sim.configure(download="ok", login="institution")
    sim.captcha("detail", after=1)  # the second paper's detail page is challenged
    async with serve(isolated_data_dir, sim, CNKI_INLINE_WAIT_SECONDS="2") as session:
        view = await session.call("download_papers", {"record_refs": refs, "interval_seconds": INTERVAL})
        waiting = await session.wait(view, until=AWAITING)
        assert waiting["status"] == "awaiting_user", waiting
        assert "验证" in waiting["message"]
        assert [name for _, name, _ in sim.orders()] == [papers[0].filename]  # the batch waits with it
        sim.solve()
        done = await session.wait(waiting)

    assert done["status"] == "completed", done
    items = [by_ref(done)[ref] for ref in refs]
    assert [item["status"] for item in items] == ["downloaded"] * 3
    assert [item["sha256"] for item in items] == [sha(pages.pdf_bytes(p)) for p in papers]
    assert [name for _, name, _ in sim.orders()] == [p.filename for p in papers]
    assert sim.solves == 1


async def test_the_daily_cap_stops_a_batch_with_the_rest_remaining(sim: EntrySimulator, isolated_data_dir: Path) -> None:  # noqa: F811 - the fixture imported above
    papers = journal_papers(sim, 4)
    refs = seed(isolated_data_dir, sim, papers)
    sim.configure(download="ok", login="institution")
    async with serve(isolated_data_dir, sim, CNKI_INLINE_WAIT_SECONDS="2", CNKI_DAILY_DOWNLOAD_LIMIT="2") as session:
        done = await session.wait(await session.call("download_papers", {"record_refs": refs, "interval_seconds": INTERVAL}))
        report = await session.call("diagnostics", {})

    assert done["status"] == "partial", done
    (error,) = done["errors"]
    assert error["code"] == "DAILY_LIMIT_REACHED", error
    assert (error["details"]["count"], error["details"]["limit"], error["details"]["remaining"]) == (2, 2, 2)
    assert error["details"]["resets_at"] in error["message"]
    result = done["result"]
    assert [item["status"] for item in result["items"]] == ["downloaded", "downloaded", "not_reached", "not_reached"]
    assert result["remaining"] == refs[2:]
    assert (result["downloads_today"], result["daily_limit"]) == (2, 2)
    assert [name for _, name, _ in sim.orders()] == [p.filename for p in papers[:2]]
    assert (report["downloads_today"], report["daily_download_limit"]) == (2, 2)


async def test_three_refusals_for_want_of_rights_stop_the_batch(sim: EntrySimulator, isolated_data_dir: Path) -> None:  # noqa: F811 - the fixture imported above
    papers = journal_papers(sim, 6)
    refs = seed(isolated_data_dir, sim, papers)
    # A refusal that is no question of rights (题录 only) does not count; then three that are.
    modes = dict(zip((p.filename for p in papers[1:5]), ("abstract_only", "balance", "unsubscribed", "no_permission")))
    sim.configure(download="ok", login="institution", download_by_file=modes)
    async with serve(isolated_data_dir, sim, CNKI_INLINE_WAIT_SECONDS="2") as session:
        done = await session.wait(await session.call("download_papers", {"record_refs": refs, "interval_seconds": INTERVAL}))

    assert done["status"] == "partial", done
    (error,) = done["errors"]
    assert error["code"] == "DOWNLOAD_RIGHTS_MISSING", error
    assert "login" in error["message"] and "remote_access_url" in error["message"]
    assert error["details"]["remaining"] == 1
    items = done["result"]["items"]
    assert [item["status"] for item in items] == ["downloaded", "refused", "refused", "refused", "refused", "not_reached"]
    assert ["余额不足" in items[2]["message"], "未订购" in items[3]["message"], "无权限" in items[4]["message"]] == [True] * 3
    assert done["result"]["remaining"] == refs[5:]
    assert [name for _, name, _ in sim.orders()] == [p.filename for p in papers[:5]]  # the sixth never ordered


async def test_three_batches_at_once_share_a_cap_of_three_and_download_paper_counts_too(sim: EntrySimulator, isolated_data_dir: Path) -> None:  # noqa: F811 - the fixture imported above
    papers = journal_papers(sim, 10)
    refs = seed(isolated_data_dir, sim, papers)
    sim.configure(download="ok", login="institution")
    async with serve(isolated_data_dir, sim, CNKI_INLINE_WAIT_SECONDS="2", CNKI_DAILY_DOWNLOAD_LIMIT="3") as session:
        started = await asyncio.gather(
            *(session.call("download_papers", {"record_refs": refs[k : k + 3], "interval_seconds": INTERVAL}) for k in (0, 3, 6))
        )
        done = [await session.wait(view) for view in started]
        single = await session.wait(await session.call("download_paper", {"record_ref": refs[9]}))
        report = await session.call("diagnostics", {})

    downloaded = [item for view in done for item in view["result"]["items"] if item["status"] == "downloaded"]
    FIGURES["cap_3_three_batches_downloads"] = len(downloaded)
    assert len(downloaded) == 3, done
    assert len(sim.orders()) == 3, sim.orders()
    stopped = [view for view in done if view["status"] == "partial"]
    assert stopped and all(view["errors"][0]["code"] == "DAILY_LIMIT_REACHED" for view in stopped), done
    assert (single["status"], single["errors"][0]["code"]) == ("failed", "DAILY_LIMIT_REACHED"), single
    assert len(sim.orders()) == 3
    assert (report["downloads_today"], report["daily_download_limit"]) == (3, 3)
