"""The floor: the smallest MCP server the SDK makes, one tool over stdio, nothing else imported.

``bench/bench_startup.py`` starts it beside ``cnki-mcp serve`` so the server's start-up reads as "how much
more than the SDK itself"; run it alone with ``python bench/floor_server.py`` (it serves until stdin closes).
"""

from __future__ import annotations

from typing import Any

import anyio
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.types import ListToolsResult, PaginatedRequestParams, Tool


async def _list_tools(ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None) -> ListToolsResult:
    return ListToolsResult(tools=[Tool(name="echo", description="echo", input_schema={"type": "object"})])


async def main() -> None:
    server: Server[Any] = Server("floor", version="1", on_list_tools=_list_tools)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
