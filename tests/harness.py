"""A real MCP client over stdio to `python -m cnki_mcp serve`, held open for a whole test module."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.types import TextContent

FINAL = ("completed", "partial", "failed", "skipped", "cancelled", "interrupted")


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
