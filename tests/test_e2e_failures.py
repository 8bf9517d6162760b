"""End to end (issue 41 items 1 and 2): a failure is a failure to the client, and the field check tells trouble
here from a changed site.

The real MCP client over stdio and ``python -m cnki_mcp serve``. Without a network (CNKI's names mapped to a
refused port, or a proxy that is not there, as in test_e2e_network): the search's operation is answered with
``isError`` (from the search call and from operation_status), search_results says the search failed,
export_citations has nothing to export, and the field check names the network as the cause, asks for no report
and quotes its message whole. Without a screen (a headed browser, no DISPLAY): the same from the browser's side,
over MCP and from ``cnki-mcp doctor --site``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp.types import CallToolResult

from cnki_mcp.fieldcheck.tour import LOCAL_HINT
from tests.harness import REPO, McpSession, chromium_path, serve_params
from tests.kns.server import KnsSimulator
from tests.test_e2e_network import NO_PROXY_THERE, REFUSED

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(chromium_path() is None, reason="没有可用的 Chromium"),
]

SEARCH = {"expression": {"field": "title", "value": "违约金"}}
REPORT_ASKED = ("改版", "issue", "doctor --report")


def structured(result: CallToolResult) -> dict[str, Any]:
    assert result.structured_content is not None, result
    return result.structured_content


async def final(session: McpSession, tool: str, arguments: dict[str, Any]) -> CallToolResult:
    """The call's answer, followed through operation_status to the operation's end."""
    result = await session.result(tool, arguments)
    while structured(result).get("status") in ("running", "awaiting_user"):
        wait = {"operation_id": structured(result)["operation_id"], "wait_seconds": 5}
        result = await session.result("operation_status", wait)
    return result


def no_report_asked(view: dict[str, Any]) -> None:
    text = json.dumps(view, ensure_ascii=False)
    assert not [word for word in REPORT_ASKED if word in text], text


async def site_check(session: McpSession) -> dict[str, Any]:
    """diagnostics' field check at its end: blocked at its first step, the rest skipped, nothing ✗."""
    result = await final(session, "diagnostics", {"site_check": True})
    view = structured(result)
    check = view["result"]
    assert check["status"] == "blocked", check
    assert [step["status"] for step in check["steps"]][:2] == ["blocked", "skipped"], check
    assert not [step for step in check["steps"] if step["status"] == "failed"], check
    no_report_asked(view)
    return check["steps"][0]


@pytest.mark.parametrize(("browser_args", "reason"), [(REFUSED, "connection"), (NO_PROXY_THERE, "proxy")], ids=["refused", "proxy"])
async def test_without_a_network_failures_are_errors_and_the_check_names_the_network(
    isolated_data_dir: Path, browser_args: str, reason: str
) -> None:
    params = serve_params(isolated_data_dir, browser_args, CNKI_INLINE_WAIT_SECONDS="20")
    async with McpSession.serving(params, check=structured, wait_timeout=180) as session:
        searched = await final(session, "structured_search", SEARCH)
        failed = structured(searched)
        assert searched.is_error and failed["status"] == "failed", failed
        (error,) = failed["errors"]
        assert error["code"] == "NETWORK_UNREACHABLE" and error["details"]["reason"] == reason, error
        assert "这不代表没有文献" in error["message"] and "continue" in error["message"], error  # a search says so
        again = await session.result("operation_status", {"operation_id": failed["operation_id"]})
        assert again.is_error and structured(again) == failed

        page = await session.result("search_results", {"search_id": failed["operation_id"]})
        assert page.is_error, page
        assert structured(page)["status"] == "failed" and structured(page)["results"] == []
        assert [e["code"] for e in structured(page)["errors"]] == ["NETWORK_UNREACHABLE"]
        assert "不是知网的答复" in structured(page)["message"]

        export = await session.result("export_citations", {"search_id": failed["operation_id"]})
        assert export.is_error and structured(export)["errors"][0]["code"] == "NOTHING_TO_EXPORT", structured(export)

        assert "next_step" in await session.call("session_status", {})

        step = await site_check(session)
        assert step["code"] == "NETWORK_UNREACHABLE", step
        assert "这不代表没有文献" not in step["message"] and "NO_PROXY=cnki.net" in step["message"], step
        assert step["message"].endswith("然后重试。") and "continue" not in step["message"], step  # whole, fitting


async def test_the_cdns_418_is_named_in_the_check(kns: KnsSimulator, isolated_data_dir: Path) -> None:
    kns.fault("*", kind="status", status=418)
    async with McpSession.serving(serve_params(isolated_data_dir, kns.browser_args), check=structured, wait_timeout=180) as session:
        step = await site_check(session)
    assert step["code"] == "NETWORK_UNREACHABLE" and "HTTP 418" in step["message"], step


def no_screen(data: Path, sim: KnsSimulator) -> dict[str, str]:
    """A headed browser on a machine without a screen: the environment a newcomer's client gives the server."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "SSH_CONNECTION", "SSH_TTY")}
    return env | {
        "CNKI_DATA_DIR": str(data),
        "CNKI_HEADLESS": "",
        "CNKI_BROWSER_PATH": chromium_path() or "",
        "CNKI_BROWSER_ARGS": sim.browser_args,
        "CNKI_INLINE_WAIT_SECONDS": "30",
    }


async def test_without_a_screen_the_search_says_so_and_the_check_names_the_screen(kns: KnsSimulator, tmp_path: Path) -> None:
    params = serve_params(tmp_path / "data", kns.browser_args, CNKI_HEADLESS="", CNKI_INLINE_WAIT_SECONDS="30")
    assert params.env is not None and "DISPLAY" not in params.env
    async with McpSession.serving(params, check=structured, wait_timeout=180) as session:
        view = structured(await final(session, "structured_search", SEARCH))
        assert "BROWSER_UNAVAILABLE" in [e["code"] for e in view["errors"]], view
        assert view["status"] == "failed"  # nothing was looked at: no empty result a client would read as "no papers"
        page = await session.call("search_results", {"search_id": view["operation_id"]})
        assert page["status"] != "completed" and page["results"] == [], page
        assert "BROWSER_UNAVAILABLE" in [e["code"] for e in page["errors"]] and "不是知网" in page["message"], page
        export = await session.result("export_citations", {"search_id": view["operation_id"]})
        assert export.is_error and structured(export)["errors"][0]["code"] == "NOTHING_TO_EXPORT"

        step = await site_check(session)
    assert step["code"] == "BROWSER_UNAVAILABLE" and "没有图形界面" in step["message"], step
    assert "CNKI_HEADLESS=1" in step["message"], step

    command = [sys.executable, "-m", "cnki_mcp", "doctor", "--site"]
    run = subprocess.run(command, capture_output=True, text=True, env=no_screen(tmp_path / "cli", kns), cwd=REPO, timeout=240)
    lines = run.stdout.splitlines()
    assert run.returncode == 1, run.stdout + run.stderr
    assert lines[1].startswith("! 检索页（高级检索的检索请求）：BROWSER_UNAVAILABLE 浏览器启动后立即退出"), lines
    assert "没有图形界面" in lines[1] and "cnki-mcp serve --http" in lines[1], lines
    assert not [line for line in lines if line.startswith("✗")], lines
    assert not [word for word in REPORT_ASKED if word in run.stdout], run.stdout
    assert lines[-1].endswith(LOCAL_HINT), lines
