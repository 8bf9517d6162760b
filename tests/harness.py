"""How tests talk to the server: a real MCP client over stdio to ``python -m cnki_mcp serve`` (held open
for a whole test module), or ``call_tool`` on an in-process App, answering as a client would see it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import os
import shutil
import sys

import msgspec
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import TextContent

from cnki_mcp.app import App
from cnki_mcp.tools import parse_arguments

FINAL = ("completed", "partial", "failed", "skipped", "cancelled", "interrupted")
REPO = Path(__file__).resolve().parents[1]


async def call_tool(app: App, tool: str, raw: dict[str, Any], ctx: Any = None) -> Any:
    """One tool call on an in-process App, its answer as JSON values (what the client receives)."""
    return msgspec.to_builtins(await app.call(tool, parse_arguments(tool, raw), ctx))


def chromium_or_skip() -> str:
    """The Chromium the tests drive (CNKI_TEST_BROWSER, else Debian's), or skip the test."""
    path = os.environ.get("CNKI_TEST_BROWSER") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.skip("没有可用的 Chromium（CI 会安装 Debian 的 chromium）")
    return path


def serve_params(data: Path, browser_args: str, **env: str) -> StdioServerParameters:
    """``python -m cnki_mcp serve`` on ``data`` with a headless Chromium pointed at the simulator."""
    base = {
        "CNKI_DATA_DIR": str(data),
        "CNKI_HEADLESS": "1",
        "CNKI_BROWSER_PATH": chromium_or_skip(),
        "CNKI_BROWSER_ARGS": browser_args,
        "CNKI_REQUEST_INTERVAL_MS": "10",
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", ""),
    }
    return StdioServerParameters(command=sys.executable, args=["-m", "cnki_mcp", "serve"], env=base | env, cwd=REPO)


class McpSession:
    """Calls tools and follows operations to the status a test waits for."""

    def __init__(self, client: Client, data: Path) -> None:
        self.client = client
        self.data = data

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self.client.call_tool(tool, arguments)
        assert len(result.content) == 1 and isinstance(result.content[0], TextContent)
        return json.loads(result.content[0].text)

    async def wait(self, view: dict[str, Any], until: tuple[str, ...] = FINAL, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while view.get("status") not in until:
            assert time.monotonic() < deadline, view
            assert view.get("status") in ("running", "awaiting_user"), view
            view = await self.call("operation_status", {"operation_id": view["operation_id"], "wait_seconds": 5})
        return view


@contextlib.asynccontextmanager
async def held_client(params: StdioServerParameters, read_timeout: float = 90) -> AsyncIterator[Client]:
    """The client's task group must be entered and left by one task: a task of its own holds it, so a
    module-scoped fixture can hand the client to every test and close it at the end."""
    ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()

    async def hold() -> None:
        try:
            async with Client(params, read_timeout_seconds=read_timeout) as client:
                ready.set_result(client)
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    holder = asyncio.create_task(hold())
    client = await asyncio.wait_for(asyncio.shield(ready), 60)
    try:
        yield client
    finally:
        stop.set()
        await asyncio.wait_for(holder, 30)
