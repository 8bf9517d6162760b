"""Integration: the real ``python -m cnki_mcp serve`` over stdio, driven by the mcp client and by raw JSON-RPC."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, MCPError, stdio_client
from mcp.types import CreateMessageRequestParams, CreateMessageResult

from cnki_mcp import __version__
from cnki_mcp.core.clock import within
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.surface import server
from tests.harness import SERVE, McpSession, RawServer, offline_params, payload, serve_params

# One row per rejection; every tool appears at least once. Validation happens before the app runs,
# so none of these depends on which tools can reach CNKI yet.
INVALID: list[tuple[str, dict[str, Any], str]] = [
    ("author_papers", {"author": "郑丽", "record_ref": "rec_1", "institution": "北江大学"}, "INVALID_INPUT"),
    ("journal_issues", {"journal": "法学评论", "year": 2024}, "INVALID_INPUT"),
    ("check_references", {"references": ["a"], "style": "ris"}, "INVALID_FORMAT"),
    ("diagnostics", {"verbose": True}, "INVALID_INPUT"),
    ("download_paper", {"record_ref": "rec_1", "title": "再论违约金调整"}, "INVALID_INPUT"),
    ("download_papers", {"record_refs": ["rec_1"], "interval_seconds": 1}, "INVALID_INTERVAL"),
    ("download_paper", {"record_ref": "rec_1", "wait_seconds": 901}, "INVALID_WAIT"),
    ("download_paper", {"record_ref": "rec_1", "format": "docx"}, "INVALID_FORMAT"),
    ("expert_search", {"expression": "TI='违约金' AND"}, "INVALID_EXPRESSION"),
    ("search_facets", {"expression": {"field": "title", "value": "的"}, "facets": ["year", "colour"]}, "INVALID_FACET"),
    ("expert_search", {"expression": "TI='违约金'", "limit": 0.5}, "INVALID_INPUT"),
    ("export_citations", {"record_refs": ["rec_1"], "format": "word"}, "INVALID_FORMAT"),
    ("export_citations", {"titles": ["题名"] * 101}, "BATCH_TOO_LARGE"),
    ("get_metadata", {"record_refs": ["rec_1"] * 101}, "BATCH_TOO_LARGE"),
    ("get_metadata", {"search_id": "op_1", "scope": "all"}, "INVALID_SCOPE"),
    ("link_references", {}, "INVALID_INPUT"),
    ("link_references", {"text": "字" * 180_000}, "INPUT_TOO_LARGE"),
    ("login", {"remote_access_url": "http://vpn.example.edu.cn/"}, "INVALID_LOGIN_URL"),
    ("operation_control", {"action": "stop"}, "INVALID_ACTION"),
    ("operation_status", {"wait_seconds": "10"}, "INVALID_INPUT"),
    ("read_online_html", {}, "INVALID_INPUT"),
    ("read_online_html", {"record_ref": "rec_1", "max_characters": 200_001}, "INVALID_LIMIT"),
    ("related_papers", {"record_ref": "rec_1", "relation": "cites"}, "INVALID_RELATION"),
    ("save_to_zotero", {"record_refs": ["rec_1"], "tags": ["a,b"]}, "INVALID_TAGS"),
    ("related_papers", {"record_ref": "rec_1", "limit": 101}, "INVALID_LIMIT"),
    ("search", {"query": "物理", "options": {"metadata": "full"}}, "INVALID_METADATA"),
    ("search", {"query": "   "}, "INVALID_QUERY"),
    ("search", {"query": "物理", "limit": 101}, "INVALID_LIMIT"),
    ("search", {"query": "物理", "concept_groups": [["词"]] * 9}, "INVALID_PLAN"),
    ("search", {"query": "物理", "bogus": 1}, "INVALID_INPUT"),
    ("search_results", {"search_id": "op_1", "view": "full"}, "INVALID_VIEW"),
    ("search_results", {"search_id": "missing"}, "SEARCH_NOT_FOUND"),
    ("session_status", {"refresh": "yes"}, "INVALID_INPUT"),
    ("structured_search", {"expression": "title=违约金"}, "INVALID_INPUT"),
    ("structured_search", {"expression": {"field": "title", "value": "违约金"}, "sort": "newest"}, "INVALID_SORT"),    ("watch", {"action": "watch"}, "INVALID_ACTION"),
    ("watch", {"action": "run"}, "INVALID_INPUT"),
]


def test_the_table_covers_every_tool() -> None:
    assert {t.name for t in server.TOOLS} <= {tool for tool, _, _ in INVALID}


async def test_default_sdk_handshake(tmp_path: Path) -> None:
    async with McpSession.serving(serve_params(tmp_path), read_timeout=20) as mcp:
        tools = (await mcp.client.list_tools()).tools
        diagnostics = await mcp.call("diagnostics", {})
    assert len(tools) == 22
    assert diagnostics["version"] == __version__
    assert diagnostics["data_dir"] == str(tmp_path)
    assert not (tmp_path / "browser").exists()


async def test_legacy_handshake_round_trip_and_invalid_table(tmp_path: Path) -> None:
    failures: list[str] = []
    async with McpSession.serving(serve_params(tmp_path), mode="legacy", read_timeout=20) as mcp:
        client = mcp.client
        assert client.protocol_version.startswith("2025-")
        assert client.server_info is not None
        assert client.server_info.name == "cnki"
        assert client.instructions == server.instructions_text()

        tools = (await client.list_tools()).tools
        assert [t.name for t in tools] == sorted(t.name for t in server.TOOLS)

        guide = await client.read_resource("cnki://guide")
        assert guide.contents[0].text == server.guide_text()

        prompts = {p.name for p in (await client.list_prompts()).prompts}
        assert prompts == {"research_topic", "literature_review"}
        research = await client.get_prompt("research_topic", {"topic": "分层作业"})
        review = await client.get_prompt("literature_review", {"topic": "分层作业"})
        assert research.messages[0].content.text == "深度检索以下研究问题：分层作业"
        assert review.messages[0].content.text.endswith("逐项链接证据：分层作业")

        assert (await mcp.call("diagnostics", {}))["version"] == __version__

        for tool, arguments, code in INVALID:
            result = await mcp.result(tool, arguments)
            data = payload(result)
            got = [e.get("code") for e in data.get("errors", [])]
            if not (result.is_error and data.get("status") == "failed" and got == [code]):
                failures.append(f"{tool} {arguments!r:.80}: expected {code}, got isError={result.is_error} {got}")

        # An unknown tool is a JSON-RPC error, not a tool result.
        with pytest.raises(MCPError) as unknown:
            await mcp.result("no_such_tool", {})
        assert (unknown.value.error.code, (unknown.value.error.data or {}).get("code")) == (-32602, "UNKNOWN_TOOL")

        # Still serving after the whole table, and validation never launched the browser
        # (search_results did open the store, so diagnostics now reports it).
        after = await mcp.call("diagnostics", {})
    assert not failures, "\n".join(failures)
    assert after["status"] == "completed"
    assert "store" in after
    assert after["browser"]["running"] is False


async def test_raw_2025_06_18_client_and_a_garbage_line(tmp_path: Path) -> None:
    with open(tmp_path / "stderr.txt", "wb") as errlog:
        raw = await RawServer.spawn(serve_params(tmp_path / "data"), errlog)
        proc = raw.proc
        assert proc.stdin is not None
        try:
            raw.post(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
                }
            )
            init = await raw.read()
            assert init["id"] == 1
            assert init["result"]["protocolVersion"] == "2025-06-18"
            assert init["result"]["serverInfo"]["name"] == "cnki"
            assert init["result"]["instructions"] == server.instructions_text()
            assert {"tools", "resources", "prompts"} <= set(init["result"]["capabilities"])

            raw.send(b"this is not json {{{\n")
            raw.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
            raw.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
            raw.post({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "search", "arguments": {"query": ""}}})
            answers: dict[int, dict[str, Any]] = {}
            while len(answers) < 2:
                message = await raw.read()
                if message.get("id") in (2, 3):
                    answers[message["id"]] = message
            listed = answers[2]["result"]["tools"]
            assert len(listed) == 22
            assert all(set(t["annotations"]) == {"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"} for t in listed)
            call = answers[3]["result"]
            assert call["isError"] is True
            assert call["structuredContent"]["errors"][0]["code"] == "INVALID_QUERY"
            assert json.loads(call["content"][0]["text"]) == call["structuredContent"]
        finally:
            proc.stdin.close()
            try:
                await within(proc.wait(), 15)
            except TimeoutError:
                proc.kill()
                await proc.wait()
                pytest.fail("the server did not stop after stdin closed")


async def test_protocol_probe_passes_against_the_real_server() -> None:
    # The argv as a client configuration holds it (already ending with "serve"); the failing probe
    # below covers the form without it.
    report = await server.protocol_probe(list(SERVE), timeout=30)
    assert report == {"passed": True, "transport": "stdio", "tools": 22, "version": __version__, "browser_started": False}


async def test_protocol_probe_reports_a_child_that_is_not_a_server() -> None:
    with pytest.raises(CnkiError) as caught:
        await server.protocol_probe([sys.executable, "-c", "import sys; print('你好', file=sys.stderr)"], timeout=10)
    assert caught.value.code == "PROTOCOL_CHECK_FAILED"
    assert "你好" in caught.value.message  # the child's own output explains the failure


@pytest.mark.slow
async def test_a_client_that_never_answers_sampling_gets_its_search_within_the_inline_wait(tmp_path: Path) -> None:
    """The client declares sampling and never answers: planning waits 4 s (40 % of a 10 s inline wait),
    says so in progress meanwhile, falls back to the lexical plan and says why."""
    params = offline_params(tmp_path / "data", CNKI_INLINE_WAIT_SECONDS="10")  # the operation ends at once
    progress: list[str] = []

    async def never(context: Any, params: CreateMessageRequestParams) -> CreateMessageResult:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    with open(tmp_path / "stderr.txt", "w", encoding="utf-8") as errlog:
        async with stdio_client(params, errlog=errlog) as streams:
            async with ClientSession(*streams, sampling_callback=never) as session:
                await session.initialize()
                started = time.monotonic()
                result = await within(
                    session.call_tool("search", {"query": "自动驾驶 产品责任"}, progress_callback=on_progress), 30
                )
                took = time.monotonic() - started
    plan = result.structured_content["result"]["plan"]  # type: ignore[index]
    assert 4 <= took < 10
    assert plan["method"] == "lexical"
    assert "4 秒内没有回复" in plan["warnings"][0]
    assert any("等待客户端模型" in message for message in progress)
