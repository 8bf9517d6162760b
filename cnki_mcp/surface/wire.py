"""The stdio line layer: every line a client writes is read as one JSON-RPC message or answered.

The SDK's own stdin reader validates each line with pydantic, whose JSON parser gives up past 200
levels of nesting; it turns invalid UTF-8 into U+FFFD, splits lines at a bare CR, and drops any
line it cannot validate without a word, so the client waits for its own timeout. Here each line
(the bytes up to ``\\n``) is decoded once with msgspec — UTF-8 checked, lone surrogates refused,
nesting bounded only by the interpreter's recursion limit (about 990 levels) — and its envelope
checked. A good line goes to the server as a message; a bad one is answered with a JSON-RPC error
(``-32700`` when it is not JSON, ``-32600`` when it is not a message, ``id: null`` when the id is
unusable) on the SDK's own write stream, so answers never interleave with the server's.

The SDK's ``stdio_server`` keeps stdout: its claim of the descriptor keeps stray output off the
protocol and its writer serialises every answer. It is handed a stdin that yields no lines; this
module reads fd 0 itself (every child process is started with its stdin on the null device).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, BinaryIO

import anyio
import msgspec
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

log = logging.getLogger(__name__)

BOM = b"\xef\xbb\xbf"
DETAIL_CHARS = 300  # an error's data never echoes a whole hostile line


class Line(msgspec.Struct):
    """What one line becomes: a message for the server, an answer for the client, both, or neither (blank)."""

    message: SessionMessage | None = None
    answer: SessionMessage | None = None


def read_line(data: bytes) -> Line:
    """One line of stdin (its ``\\n`` optional) as a message to pass on or an error to answer."""
    if not data.strip():
        return Line()  # a blank line carries no message and nobody waits for it
    try:
        value = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        text = ("这一行不是合法的 UTF-8 JSON，无法解析（常见原因：被截断的 emoji 留下的孤立代理字符 \\ud800，或非 UTF-8 字节）。"
                "每行须是一条完整的 JSON-RPC 消息。")
        return _refused(PARSE_ERROR, text, str(exc), _salvaged_id(data))
    except RecursionError:
        return _refused(PARSE_ERROR, "这一行的 JSON 嵌套过深，无法解析；请减少嵌套层数。")
    if isinstance(value, list):
        return _refused(INVALID_REQUEST, "不支持批量请求（JSON 数组）；请每行发送一条 JSON-RPC 消息。")
    if not isinstance(value, dict):
        return _refused(INVALID_REQUEST, "每行须是一个 JSON 对象（一条 JSON-RPC 消息）。")
    if "id" in value and not usable_id(value["id"]):
        return _refused(INVALID_REQUEST, "id 须为字符串或整数，不能是 null、小数、布尔值、数组或对象。")
    try:
        message = jsonrpc_message_adapter.validate_python(value, by_name=False)
    except ValidationError as exc:
        return _invalid_envelope(value, exc)
    return Line(message=SessionMessage(message))


def _salvaged_id(data: bytes) -> Any:
    """The id of a line that is JSON but for its characters (a lone surrogate, a bad UTF-8 byte), so that
    the client's request gets its answer instead of waiting for it; None when there is none to read."""
    try:
        value = json.loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None
    return value.get("id") if isinstance(value, dict) else None


def usable_id(ident: Any) -> bool:
    """MCP ids are strings or integers (never null); JSON booleans decode as ``bool``, an ``int`` subclass."""
    return isinstance(ident, str) or (isinstance(ident, int) and not isinstance(ident, bool))


def _invalid_envelope(value: dict[str, Any], exc: ValidationError) -> Line:
    detail = "; ".join(
        f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
        for error in exc.errors(include_url=False, include_input=False)[:4]
    )
    ident = value.get("id")
    if "method" in value or not ("result" in value or "error" in value) or ident is None:
        text = '这一行不是有效的 JSON-RPC 2.0 请求：须有 "jsonrpc":"2.0" 和字符串 method，params 须为对象。'
        return _refused(INVALID_REQUEST, text, detail, ident)
    # A malformed reply to one of our requests: the request waiting for it ends with this error
    # instead of its timeout, and the client is told (id null: its reply is not a request).
    text = '这一行不是有效的 JSON-RPC 2.0 应答：须有 "jsonrpc":"2.0"、id，以及对象 result 或 error。'
    ended = JSONRPCError(jsonrpc="2.0", id=ident, error=ErrorData(code=INVALID_REQUEST, message=text))
    return Line(message=SessionMessage(ended), answer=_refused(INVALID_REQUEST, text, detail).answer)


def _refused(code: int, message: str, detail: str = "", ident: Any = None) -> Line:
    error = ErrorData(code=code, message=message, **({"data": detail[:DETAIL_CHARS]} if detail else {}))
    reply = JSONRPCError(jsonrpc="2.0", id=ident if usable_id(ident) else None, error=error)
    return Line(answer=SessionMessage(reply))


def next_line(source: BinaryIO, first: bool) -> Line | None:
    """The next line read and judged (in a worker thread: the read blocks, a big line takes a while)."""
    data = source.readline()
    if not data:
        return None
    # A UTF-8 byte order mark before the first line (some Windows clients write one) is not JSON.
    return read_line(data.removeprefix(BOM) if first else data)


class _NoLines:
    """The stdin handed to the SDK's transport: no lines, ending when the real stdin does."""

    def __init__(self, ended: anyio.Event) -> None:
        self._ended = ended

    def __aiter__(self) -> _NoLines:
        return self

    async def __anext__(self) -> str:
        await self._ended.wait()
        raise StopAsyncIteration


async def _pump(
    source: BinaryIO,
    inbound: MemoryObjectSendStream[SessionMessage | Exception],
    outbound: Any,
    ended: anyio.Event,
) -> None:
    try:
        async with inbound:
            first = True
            while True:
                # anyio's worker can be abandoned on cancel, so an open stdin never holds up shutdown.
                line = await anyio.to_thread.run_sync(next_line, source, first, abandon_on_cancel=True)
                if line is None:
                    return
                first = False
                if line.answer is not None:
                    log.debug("a line answered at once: %r", line.answer.message)
                    await outbound.send(line.answer)
                if line.message is not None:
                    await inbound.send(line.message)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        log.debug("the server stopped before stdin ended; the rest of stdin is not read")
    finally:
        ended.set()


@asynccontextmanager
async def stdio_streams(source: BinaryIO | None = None) -> AsyncIterator[tuple[Any, Any]]:
    """The server's read and write streams over stdin (or ``source``) and stdout."""
    ended = anyio.Event()
    inbound, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    async with stdio_server(stdin=_NoLines(ended)) as (_, write_stream):  # type: ignore[arg-type]
        async with anyio.create_task_group() as tg:
            tg.start_soon(_pump, source or sys.stdin.buffer, inbound, write_stream, ended)
            try:
                yield read_stream, write_stream
            finally:
                tg.cancel_scope.cancel()
