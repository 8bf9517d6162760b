"""A stdio server that joins the owner of its data directory instead of refusing its client.

Every message the client writes on stdin (read by ``wire.py``) goes as it is to the owner's HTTP endpoint
through the SDK's streamable HTTP client transport (a session of its own, the token of ``endpoint.py``);
every message the owner sends back — responses, progress and other notifications, sampling requests — is
written to stdout. Cancellations are notifications like the others, so they reach the owner too. Nothing is
interpreted but what a change of owner needs:

- the client's ``initialize`` (and ``notifications/initialized``) is kept and replayed, under an id of
  the relay's own whose answer nobody sees, on every later connection, so the client's session goes on;
- a request the owner never acknowledged (no answer to its POST began: the owner was already gone) is
  sent to the next owner; the others still unanswered when the owner goes are answered with
  ``OWNER_CHANGED`` (a tool call as an ``isError`` result), and a late answer to them is dropped;
- a request of the 2026-07-28 era (its ``_meta`` names the version: no handshake, no session) goes as the
  single exchange that era defines over HTTP, with the routing headers its body implies
  (``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``), so the owner answers it as it answers its own
  stdio client; the SDK's transport turns the client's cancellation of it into closing its POST;
- the relay watches ``owner.lock``: when it can take it, the owner is gone and this process becomes the
  owner itself (``shared.Shared.become_owner``), then connects to its own endpoint; when ``owner.json``
  names another process, another server took over and the relay re-joins it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.inbound import (
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    NAME_BEARING_METHODS,
    encode_header_value,
)
from mcp.shared.message import ClientMessageMetadata, SessionMessage
from mcp.types import (
    INTERNAL_ERROR,
    PROTOCOL_VERSION_META_KEY,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from cnki_mcp.core.clock import within
from cnki_mcp.core.errors import CnkiError, ErrorCode
from cnki_mcp.serving import endpoint
from cnki_mcp.serving.owner import OwnerInfo, claim, read_owner
from cnki_mcp.store.library import DirectoryLock
from cnki_mcp.surface.wire import stdio_streams

log = logging.getLogger(__name__)

OWNER_WAIT_SECONDS = 15.0  # how long a message waits for an owner to be reachable
POLL_SECONDS = 0.2  # how often the lock and owner.json are looked at
REJOIN_SECONDS = 15.0  # how long the replayed initialize may take
CONNECT_SECONDS = 10.0  # connecting to the owner, writing a request
# How the owner's session manager (404) and the SDK's client transport say the owner dropped the session.
SESSION_ENDED = ("Session not found", "Session terminated")


def _request_ids(body: bytes) -> list[Any]:
    """The JSON-RPC request ids in a POST body (one message, or a batch)."""
    try:
        value = json.loads(body)
    except ValueError:
        return []
    messages = value if isinstance(value, list) else [value]
    return [m["id"] for m in messages if isinstance(m, dict) and "method" in m and "id" in m]


def stamped(item: SessionMessage) -> SessionMessage:
    """``item`` with the HTTP headers of its era: a 2026-07-28 request's routing headers, taken from its body
    (a stdio client sends none); any other message as it is."""
    message = item.message
    if not isinstance(message, JSONRPCRequest):
        return item
    params = message.params or {}
    meta = params.get("_meta")
    version = meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
    if version not in MODERN_PROTOCOL_VERSIONS:
        return item
    headers = {MCP_PROTOCOL_VERSION_HEADER: version, MCP_METHOD_HEADER: message.method}
    name_key = NAME_BEARING_METHODS.get(message.method)
    if name_key is not None and isinstance(name := params.get(name_key), str):
        headers[MCP_NAME_HEADER] = encode_header_value(name)
    return SessionMessage(message, metadata=ClientMessageMetadata(headers=headers))


class _Delivery(httpx2.AsyncBaseTransport):
    """The HTTP transport to the owner, noting the requests the owner acknowledged: its answer to their POST
    began (the SDK's server starts it on receipt). One without that never reached a live owner."""

    def __init__(self, delivered: set[Any]) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self._delivered = delivered

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if request.method == "POST":
            self._delivered.update(_request_ids(request.content))
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def owner_client(token: str, delivered: set[Any]) -> httpx2.AsyncClient:
    """The HTTP client to the owner: its token, never a proxy (the owner is local)."""
    # No read timeout: the GET stream may stay quiet for hours (a stream that timed out is given up after a
    # few reconnections, and then the owner ends the idle session); a gone owner is noticed by _watch.
    return httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"},
        timeout=httpx2.Timeout(CONNECT_SECONDS, read=None),
        follow_redirects=True,
        trust_env=False,
        transport=_Delivery(delivered),
    )


class Relay:
    """The stdio client's session, carried to whoever owns the data directory."""

    def __init__(self, root: Path, become_owner: Callable[[DirectoryLock], Awaitable[OwnerInfo]]) -> None:
        self.root = Path(root)
        self._become_owner = become_owner
        self._up: Any = None
        self._down: Any = None
        self._connected = asyncio.Event()
        self._init: JSONRPCRequest | None = None
        self._initialized = False
        self._outstanding: dict[Any, SessionMessage] = {}  # requests sent, by id, until answered
        self._delivered: set[Any] = set()  # ids the owner acknowledged; the others go to the next owner
        self._resends: set[asyncio.Task[None]] = set()
        self._replays: dict[str, asyncio.Future[Any]] = {}
        self._rejoins = 0
        self._lock: DirectoryLock | None = None  # taken from a dead owner, not yet used
        self._session_ended = False

    async def run(self) -> None:
        """Relay until the client closes stdin."""
        logging.getLogger("httpx2").setLevel(logging.WARNING)  # one line per relayed message otherwise
        async with stdio_streams() as (up_read, up_write):
            self._up = up_write
            connections = asyncio.create_task(self._connections(), name="cnki-relay")
            try:
                async for item in up_read:
                    if isinstance(item, SessionMessage):
                        await self._from_client(item)
            finally:
                connections.cancel()
                await asyncio.wait({connections}, timeout=endpoint.STOP_SECONDS)
                await up_write.aclose()  # ends the SDK's stdout writer, as the server's end of a session does

    # --- client → owner ------------------------------------------------------------------------

    async def _from_client(self, item: SessionMessage) -> None:
        message = item.message
        deadline = asyncio.get_running_loop().time() + OWNER_WAIT_SECONDS
        while True:
            try:
                await within(self._connected.wait(), max(0.0, deadline - asyncio.get_running_loop().time()))
            except TimeoutError:
                if isinstance(message, JSONRPCRequest):
                    await self._answer_failed(message.id, message.method, "OWNER_UNREACHABLE")
                return
            try:
                await self._down.send(stamped(item))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, AttributeError):
                self._connected.clear()
                await asyncio.sleep(POLL_SECONDS)
                continue
            break
        # Recorded right after the send: its answer needs a round trip to the owner, so it cannot come sooner.
        if isinstance(message, JSONRPCRequest):
            self._outstanding[message.id] = item
        if isinstance(message, JSONRPCRequest) and message.method == "initialize":
            self._init = message
        elif isinstance(message, JSONRPCNotification) and message.method == "notifications/initialized":
            self._initialized = True

    # --- owner → client ------------------------------------------------------------------------

    async def _from_owner(self, down_read: Any) -> None:
        async for item in down_read:
            if not isinstance(item, SessionMessage):
                log.debug("owner connection: %r", item)
                continue
            message = item.message
            if isinstance(message, (JSONRPCResponse, JSONRPCError)):
                waiter = self._replays.pop(str(message.id), None) if message.id is not None else None
                if waiter is not None:
                    if not waiter.done():
                        waiter.set_result(message)
                    continue
                self._delivered.discard(message.id)
                if message.id is None or self._outstanding.pop(message.id, None) is None:
                    continue  # answered already (the owner changed meanwhile)
                if isinstance(message, JSONRPCError) and message.error.message in SESSION_ENDED:
                    self._session_ended = True  # the owner no longer knows this session: join again
            await self._up.send(item)

    async def _answer_failed(self, ident: Any, method: str, code: ErrorCode) -> None:
        """What a request the owner cannot answer gets: a failed tool result, or a JSON-RPC error."""
        from cnki_mcp.surface.server import failure

        error = CnkiError(code)
        if method == "tools/call":
            result = failure(error).model_dump(by_alias=True, mode="json", exclude_none=True)
            reply: Any = JSONRPCResponse(jsonrpc="2.0", id=ident, result=result)
        else:
            reply = JSONRPCError(jsonrpc="2.0", id=ident, error=ErrorData(code=INTERNAL_ERROR, message=f"{code}: {error.message}"))
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await self._up.send(SessionMessage(reply))

    # --- the connection to the owner -----------------------------------------------------------

    async def _connections(self) -> None:
        while True:
            target = await self._find_owner()
            try:
                await self._connect(target)
            except Exception as exc:
                log.info("connection to the owner (pid %d) ended: %r", target.pid, exc)
                log.debug("how it ended", exc_info=True)
            finally:
                self._connected.clear()
                self._down = None
                unanswered, self._outstanding = self._outstanding, {}
                delivered, self._delivered = self._delivered, set()
                for ident, item in unanswered.items():
                    if ident not in delivered:  # the owner never had it: the next one answers it
                        resend = asyncio.create_task(self._from_client(item))
                        self._resends.add(resend)
                        resend.add_done_callback(self._resends.discard)
                        continue
                    method = item.message.method if isinstance(item.message, JSONRPCRequest) else ""
                    await self._answer_failed(ident, method, "OWNER_CHANGED")
            await asyncio.sleep(POLL_SECONDS)

    async def _find_owner(self) -> OwnerInfo:
        """The owner to connect to: this process, once the lock is free, or the one ``owner.json`` names."""
        while True:
            lock, self._lock = self._lock, None
            if lock is None:
                with contextlib.suppress(CnkiError):
                    lock = await asyncio.to_thread(claim, self.root)
            if lock is not None:
                log.warning("the owner of %s is gone; this process (pid %d) takes over", self.root, os.getpid())
                return await self._become_owner(lock)
            info = await asyncio.to_thread(read_owner, self.root)
            if info is not None:
                return info
            await asyncio.sleep(POLL_SECONDS)

    async def _connect(self, target: OwnerInfo) -> None:
        token = await asyncio.to_thread(endpoint.token, self.root)
        async with owner_client(token, self._delivered) as http:
            async with streamable_http_client(target.url, http_client=http) as (down_read, down_write):
                reader = asyncio.create_task(self._from_owner(down_read))
                try:
                    if self._init is not None:
                        await self._rejoin(down_write)
                    self._down = down_write
                    self._connected.set()
                    log.info("joined the owner of %s: pid %d at %s", self.root, target.pid, target.url)
                    await self._watch(target, reader)
                finally:
                    self._connected.clear()
                    reader.cancel()
                    await asyncio.wait({reader}, timeout=endpoint.STOP_SECONDS)

    async def _rejoin(self, down_write: Any) -> None:
        """The client's handshake again, for a new owner; its answer is the relay's own."""
        assert self._init is not None
        self._rejoins += 1
        ident = f"cnki-rejoin-{self._rejoins}"
        answered: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._replays[ident] = answered
        try:
            await down_write.send(SessionMessage(self._init.model_copy(update={"id": ident})))
            reply = await within(answered, REJOIN_SECONDS)
        finally:
            self._replays.pop(ident, None)
        if isinstance(reply, JSONRPCError):
            raise RuntimeError(f"the new owner refused the handshake: {reply.error.message}")
        if self._initialized:
            await down_write.send(SessionMessage(JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized")))

    async def _watch(self, target: OwnerInfo, reader: asyncio.Task[None]) -> None:
        """Until the owner is gone (its lock free: kept for the take-over) or another one is named."""
        self._session_ended = False
        while not reader.done() and not self._session_ended:
            await asyncio.sleep(POLL_SECONDS)
            if target.pid == os.getpid():
                continue  # this process is the owner: nothing to watch
            with contextlib.suppress(CnkiError):
                self._lock = await asyncio.to_thread(claim, self.root)
            if self._lock is not None:
                return
            info = await asyncio.to_thread(read_owner, self.root)
            if info is not None and (info.pid, info.port) != (target.pid, target.port):
                return
