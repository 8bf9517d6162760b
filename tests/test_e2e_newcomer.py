"""A newcomer's first calls through the real server over stdio (issue 30): a machine without a screen gets
the cause of BROWSER_UNAVAILABLE in Chinese at the first search, export_citations with refs it does not
know says RECORD_NOT_FOUND, and resources/templates/list answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness import McpSession, offline_params, serve_params
from tests.kns.server import KnsSimulator


@pytest.mark.browser
async def test_first_search_without_a_screen_names_the_cause_in_chinese(kns_server: KnsSimulator, tmp_path: Path) -> None:
    # The SDK passes no DISPLAY to the server; CNKI_HEADLESS off is what a newcomer's client config has.
    params = serve_params(tmp_path / "data", kns_server.browser_args, CNKI_HEADLESS="", CNKI_INLINE_WAIT_SECONDS="30")
    assert params.env is not None and "DISPLAY" not in params.env and "WAYLAND_DISPLAY" not in params.env
    async with McpSession.serving(params, check=lambda result: result.structured_content or {}) as mcp:
        view = await mcp.call("structured_search", {"expression": {"field": "title", "value": "违约金"}})
        view = await mcp.wait(view, timeout=60)
    problems = view.get("errors") or []
    (problem,) = [p for p in problems if p["code"] == "BROWSER_UNAVAILABLE"]
    assert problem["message"].startswith("浏览器启动后立即退出（退出码 ")
    assert "没有图形界面（浏览器报告缺少 X 服务器或 $DISPLAY）。" in problem["message"]
    assert "CNKI_HEADLESS=1" in problem["message"] and "cnki-mcp serve --http" in problem["message"]
    assert any("Missing X server or $DISPLAY" in line for line in problem["details"]["output"])
    assert kns_server.requests == [] or all(r.endpoint != "grid" for r in kns_server.requests)


async def test_export_citations_with_unknown_record_refs_is_record_not_found(tmp_path: Path) -> None:
    async with McpSession.serving(offline_params(tmp_path / "data"), check=lambda result: result.structured_content or {}) as mcp:
        answer = await mcp.result("export_citations", {"record_refs": ["rec_nope", "rec_gone"]})
    assert answer.is_error
    (problem,) = (answer.structured_content or {})["errors"]
    assert problem["code"] == "RECORD_NOT_FOUND"
    assert problem["message"] == "本地没有这些记录：rec_nope、rec_gone；请先检索或用 get_metadata 取得它们，再导出。"
    assert problem["details"] == {"record_refs": ["rec_nope", "rec_gone"]}


async def test_resource_templates_list_answers_over_stdio(tmp_path: Path) -> None:
    async with McpSession.serving(offline_params(tmp_path / "data")) as mcp:
        templates = await mcp.client.list_resource_templates()
        resources = await mcp.client.list_resources()
    assert templates.resource_templates == []
    assert [str(r.uri) for r in resources.resources] == ["cnki://guide"]
