"""Tool calls through the owner of a data directory (``owner.py``), for a command that needs the library while
a server owns it: ``cnki-mcp watch run`` then runs in the owner's process, under its pacing, its browser and
its person, as a client's call would. Nobody owning the directory, the command runs in its own process.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import msgspec

from cnki_mcp.core.clock import within
from cnki_mcp.core.errors import error_from
from cnki_mcp.core.model import Problem
from cnki_mcp.serving import endpoint
from cnki_mcp.serving.owner import OwnerInfo, claim, read_owner

CONNECT_SECONDS = 10.0
CALL_SECONDS = 120.0  # one call: an operation_status waits at most 55 s, a run's inline wait less


def live_owner(root: Path) -> OwnerInfo | None:
    """The owner serving ``root`` now, or None when nobody does (``owner.lock`` is free: taken and let go)."""
    lock = claim(root)
    if lock is not None:
        lock.release()
        return None
    return read_owner(root)


class OwnerSession:
    """One MCP session with the owner; ``call`` answers a tool's structured result or raises its error."""

    def __init__(self, session: Any) -> None:
        self._session = session

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await within(self._session.call_tool(tool, arguments), CALL_SECONDS)
        content: dict[str, Any] = result.structured_content or {}
        if result.is_error:
            raise error_from(msgspec.convert(content["errors"][0], Problem))
        return content


@contextlib.asynccontextmanager
async def owner_session(root: Path, owner: OwnerInfo) -> AsyncIterator[OwnerSession]:
    """A session on the owner's endpoint with the directory's token (never through a proxy: it is local)."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    token = await asyncio.to_thread(endpoint.token, root)
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(CONNECT_SECONDS, read=None), trust_env=False
    )
    async with http, streamable_http_client(owner.url, http_client=http) as (read, write), ClientSession(read, write) as session:
        await within(session.initialize(), CONNECT_SECONDS * 2)
        yield OwnerSession(session)
