"""End to end: a CNKI that cannot be reached is a network failure, never "no papers".

The real MCP client over stdio, ``python -m cnki_mcp serve`` and a real headless Chromium. Every variant stays on
loopback: a refused port (127.0.0.1:1), names that do not resolve (``~NOTFOUND`` host-resolver rules), a proxy
that is not there, and the simulator's CDN refusal (HTTP 418) and connections closed without an answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.harness import McpSession, chromium_path, serve_params
from tests.kns.server import KnsSimulator

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(chromium_path() is None, reason="没有可用的 Chromium"),
]

REFUSED = '--host-resolver-rules="MAP *.cnki.net 127.0.0.1:1, MAP cnki.net 127.0.0.1:1" --ignore-certificate-errors'
NO_DNS = '--host-resolver-rules="MAP *.cnki.net ~NOTFOUND, MAP cnki.net ~NOTFOUND"'
NO_PROXY_THERE = "--proxy-server=http://127.0.0.1:1 --ignore-certificate-errors"

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("search", {"query": "数字法治"}),
    ("structured_search", {"expression": {"field": "title", "value": "违约金"}}),
    ("get_metadata", {"titles": ["面向典型案例的违约金制度完善"]}),
]


async def failed_unreachable(session: McpSession, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The operation's end, which must be a failure with NETWORK_UNREACHABLE and no result at all."""
    view = await session.wait(await session.call(tool, arguments), timeout=120)
    assert view["status"] == "failed", (tool, view)
    assert "result" not in view, (tool, view)
    assert [error["code"] for error in view["errors"]] == ["NETWORK_UNREACHABLE"], (tool, view["errors"])
    assert "NO_PROXY=cnki.net" in view["errors"][0]["message"]
    return view["errors"][0]["details"]


@pytest.mark.parametrize(
    ("browser_args", "reason", "net_error"),
    [
        (REFUSED, "connection", "net::ERR_CONNECTION_REFUSED"),
        (NO_DNS, "dns", "net::ERR_NAME_NOT_RESOLVED"),
        (NO_PROXY_THERE, "proxy", "net::ERR_PROXY_CONNECTION_FAILED"),
    ],
    ids=["refused", "dns", "proxy"],
)
async def test_an_unreachable_site_fails_every_tool_with_a_network_code(
    isolated_data_dir: Path, browser_args: str, reason: str, net_error: str
) -> None:
    async with McpSession.serving(serve_params(isolated_data_dir, browser_args)) as session:
        for tool, arguments in CALLS:
            details = await failed_unreachable(session, tool, arguments)
            assert details["reason"] == reason, (tool, details)
            assert details["net_error"] == net_error, (tool, details)


@pytest.mark.parametrize(
    ("fault", "reason"),
    [({"kind": "status", "status": 418}, "blocked"), ({"kind": "close"}, "connection")],
    ids=["cdn-418", "closed"],
)
async def test_the_cdns_418_and_closed_connections_are_network_failures(
    kns: KnsSimulator, isolated_data_dir: Path, fault: dict[str, Any], reason: str
) -> None:
    kns.fault("*", **fault)
    async with McpSession.serving(serve_params(isolated_data_dir, kns.browser_args)) as session:
        for tool, arguments in CALLS:
            details = await failed_unreachable(session, tool, arguments)
            assert details["reason"] == reason, (tool, details)
    assert kns.count("grid") == 0  # the search page itself was never served
    assert kns.count("search") >= 3
