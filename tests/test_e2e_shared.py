"""Many clients, one owner: two real MCP client sessions over stdio on one data directory, headless Chromium
and the simulator. The second server joins the first (no DATA_DIRECTORY_IN_USE); both work at once, see each
other's operations and share one browser; the owner SIGKILLed, the other takes over within seconds and
`continue` finishes the interrupted search without asking CNKI again for anything it had answered."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client
from mcp.types import CreateMessageRequestParams, CreateMessageResult, TextContent

from cnki_mcp.core.clock import within
from tests.harness import INIT_PARAMS, McpSession, RawServer, offline_params, processes_on, serve_params
from tests.kns.server import KnsSimulator
from tests.test_e2e_recovery import details, expression, listed, token

pytestmark = [pytest.mark.browser]

FIGURES: dict[str, float] = {}


@contextlib.asynccontextmanager
async def session(data: Path, kns: KnsSimulator, errlog: Any) -> AsyncIterator[McpSession]:
    """A client on its own server; a server killed under it does not fail the test on the way out."""
    params = serve_params(data, kns.browser_args, CNKI_INLINE_WAIT_SECONDS="2")
    entered = McpSession.serving(params, errlog=errlog)
    mcp = await entered.__aenter__()
    try:
        yield mcp
    finally:
        with contextlib.suppress(BaseException):
            await within(entered.__aexit__(None, None, None), 30)


async def search(mcp: McpSession, topic: str, **options: Any) -> dict[str, Any]:
    return await mcp.call("structured_search", {
        "expression": expression(topic), "limit": 50, "options": {"freshness": "live", **options},
    })


def browsers(data: Path) -> list[psutil.Process]:
    """The browser's root processes on the data directory's profile (its children name it too)."""
    found = processes_on(data / "browser" / "profile")
    pids = {p.pid for p in found}
    return [p for p in found if p.ppid() not in pids]


async def test_two_clients_share_one_owner_and_one_browser(kns: KnsSimulator, tmp_path: Path) -> None:
    data = tmp_path / "data"
    with (tmp_path / "stderr.txt").open("w") as errlog:
        async with session(data, kns, errlog) as first, session(data, kns, errlog) as second:
            one, two = await asyncio.gather(first.call("diagnostics", {}), second.call("diagnostics", {}))
            assert one["owner_pid"] == two["owner_pid"] == one["process_id"] == two["process_id"]
            assert one["data_dir"] == two["data_dir"] == str(data)
            # Both at once: each starts a search, both finish, each sees the other's.
            progress: list[float] = []

            async def heard(value: float, total: float | None, message: str | None) -> None:
                progress.append(value)

            relayed = second.client.call_tool("structured_search", {
                "expression": expression("绿色金融"), "limit": 50, "options": {"freshness": "live", "metadata": "basic"},
            }, progress_callback=heard)
            a, b = await asyncio.gather(search(first, "个人信息", metadata="basic"), relayed)
            b = second.check(b)
            done_a, done_b = await asyncio.gather(first.wait(a), second.wait(b))
            assert done_a["status"] == done_b["status"] == "completed", (done_a, done_b)
            seen_by_second = await second.call("operation_status", {"operation_id": a["operation_id"]})
            seen_by_first = await first.call("operation_status", {"operation_id": b["operation_id"]})
            assert seen_by_second["status"] == seen_by_first["status"] == "completed"
            assert progress and progress == sorted(progress)  # the owner's progress reached the joined client
            rows = await second.call("search_results", {"search_id": done_a["result"]["search_id"], "limit": 100})
            assert rows["total"] == done_a["result"]["candidate_count"]
            assert len(browsers(data)) == 1
            report = (await second.call("diagnostics", {}))["browser"]
            assert report["running"] and [p.pid for p in browsers(data)] == [report["process_id"]]


async def test_the_owner_killed_another_takes_over_and_continue_repeats_nothing(kns: KnsSimulator, tmp_path: Path) -> None:
    data = tmp_path / "data"
    papers = listed(kns, "个人信息")
    answered = 4
    with (tmp_path / "stderr.txt").open("w") as errlog:
        async with session(data, kns, errlog) as first, session(data, kns, errlog) as second:
            owner = (await first.call("diagnostics", {}))["owner_pid"]
            assert (await second.call("diagnostics", {}))["owner_pid"] == owner
            kns.fault("detail", "delay", seconds=30, after=answered)  # later detail pages hang until the kill
            view = await search(second, "个人信息", metadata="all")  # started from the joined client
            op_id = view["operation_id"]
            deadline = time.monotonic() + 30
            while kns.count("detail") < len(papers) and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            assert kns.count("detail") == len(papers), kns.counts
            assert (await first.call("operation_status", {"operation_id": op_id}))["status"] == "running"
            await asyncio.sleep(2.5)  # the store's flush interval: the checkpoint is on disk
            before = list(kns.requests)
            stored = {token(r.url) for r in details(before) if r.status == 200}
            assert len(stored) == answered

            killed = time.monotonic()
            os.kill(owner, signal.SIGKILL)
            while True:
                result = await within(second.result("diagnostics", {}), 15)
                if not result.is_error:
                    break
                assert result.structured_content["errors"][0]["code"] in ("OWNER_CHANGED", "OWNER_UNREACHABLE")
                assert time.monotonic() - killed < 10
                await asyncio.sleep(0.1)
            FIGURES["takeover_seconds"] = time.monotonic() - killed
            assert FIGURES["takeover_seconds"] < 10
            new_owner = result.structured_content["owner_pid"]
            assert new_owner not in (owner, None)
            kns.configure(faults=[])

            interrupted = await second.call("operation_status", {"operation_id": op_id})
            assert interrupted["status"] == "interrupted", interrupted
            continued = await second.call("operation_control", {"action": "continue", "operation_id": op_id})
            done = await second.wait(continued)
            assert done["status"] == "completed" and done["operation_id"] == op_id, done
            assert done["result"]["enhanced_count"] == len(papers)
            after = kns.requests[len(before):]
            assert not [r for r in after if r.endpoint == "grid"]  # the listing was stored: not asked again
            assert not stored & {token(r.url) for r in details(after)}
            assert len(details(after)) == len(papers) - answered
            assert len(browsers(data)) == 1
    print(f"take-over: {FIGURES['takeover_seconds']:.2f} s")


async def test_sampling_crosses_the_relay(kns: KnsSimulator, tmp_path: Path) -> None:
    """The owner asks the joined client's model to plan the concepts; the request and its answer go through (the
    2025 era: a 2026-era connection plans without sampling)."""
    data = tmp_path / "data"
    asked: list[CreateMessageRequestParams] = []

    async def sampling(context: Any, params: CreateMessageRequestParams) -> CreateMessageResult:
        asked.append(params)
        reply = '```json\n[["个人信息"], ["保护"]]\n```'
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text=reply), model="m")

    params = serve_params(data, kns.browser_args, CNKI_INLINE_WAIT_SECONDS="2")
    with (tmp_path / "stderr.txt").open("w") as errlog:
        async with session(data, kns, errlog) as first:
            owner = (await first.call("diagnostics", {}))["owner_pid"]
            async with Client(stdio_client(params, errlog=errlog), mode="legacy", sampling_callback=sampling) as joined:
                mcp = McpSession(joined, data)
                assert (await mcp.call("diagnostics", {}))["owner_pid"] == owner
                view = await mcp.call("search", {"query": "个人信息保护", "options": {"metadata": "basic", "freshness": "live"}})
                done = await mcp.wait(view)
    assert done["status"] == "completed", done
    assert done["result"]["plan"]["method"] == "sampling"
    assert len(asked) == 1 and [m.content.text for m in asked[0].messages] == ["个人信息保护"]


async def test_a_cancellation_crosses_the_relay(tmp_path: Path) -> None:
    """The joined client cancels a search waiting for its sampling answer: the sampling request reaches the
    client through the relay, the cancellation reaches the owner, which ends the call before any operation."""
    data = tmp_path / "data"
    params = offline_params(data)
    with (tmp_path / "stderr.txt").open("wb") as errlog:
        owner = await RawServer.start(params, errlog)
        joined = await RawServer.spawn(params, errlog)
        try:
            sampling = {**INIT_PARAMS, "capabilities": {"sampling": {}}}
            await joined.request("initialize", sampling)
            joined.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
            joined.post({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "search", "arguments": {"query": "个人信息保护"}}})
            asked = await joined.read()
            assert asked["method"] == "sampling/createMessage", asked
            joined.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7, "reason": "test"}})
            await asyncio.sleep(2)
            seen = [m for m in await joined.drain(99) if m.get("method") != "notifications/progress"]
            cancelled = [m for m in seen if m.get("id") == 7]
            # The owner's SDK ended the call: over HTTP it says so with -32800 (over stdio it stays silent).
            assert [m["error"]["code"] for m in cancelled] == [-32800], seen
            status = await owner.call("operation_status", {})
            assert status["status"] == "idle"  # no search operation was started
        finally:
            assert await joined.close() == 0
            assert await owner.close() == 0


async def test_with_three_servers_one_takes_over_and_the_other_rejoins(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with (tmp_path / "stderr.txt").open("w") as errlog:
        async with McpSession.serving(offline_params(data), errlog=errlog) as first:
            owner = (await first.call("diagnostics", {}))["owner_pid"]
            async with McpSession.serving(offline_params(data), errlog=errlog) as second, \
                    McpSession.serving(offline_params(data), errlog=errlog) as third:
                assert {(await s.call("diagnostics", {}))["owner_pid"] for s in (second, third)} == {owner}
                killed = time.monotonic()
                os.kill(owner, signal.SIGKILL)
                owners = set()
                for client in (second, third):
                    while True:
                        result = await within(client.result("diagnostics", {}), 15)
                        if not result.is_error and result.structured_content["owner_pid"] != owner:
                            owners.add(result.structured_content["owner_pid"])
                            break
                        assert time.monotonic() - killed < 10
                        await asyncio.sleep(0.1)
                assert len(owners) == 1 and owner not in owners  # one took over, the other joined it
                missing = await third.result("search_results", {"search_id": "x"})
                assert missing.structured_content["errors"][0]["code"] == "SEARCH_NOT_FOUND"


async def test_the_first_call_after_the_owner_is_killed_reaches_the_new_owner(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with (tmp_path / "stderr.txt").open("w") as errlog:
        async with McpSession.serving(offline_params(data), errlog=errlog) as first:
            owner = (await first.call("diagnostics", {}))["owner_pid"]
            async with McpSession.serving(offline_params(data), errlog=errlog) as second:
                assert (await second.call("diagnostics", {}))["owner_pid"] == owner
                os.kill(owner, signal.SIGKILL)
                # At once: before the relay notices the owner is gone, the call's POST finds nobody listening.
                result = await within(second.result("diagnostics", {}), 30)
                assert not result.is_error, result.structured_content
                assert result.structured_content["owner_pid"] not in (owner, None)
