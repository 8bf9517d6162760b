"""CDP over the pipe Chrome opens with ``--remote-debugging-pipe``: the browser has no DevTools port at all.

Chrome reads commands from one pipe and writes answers and events to another, each message a JSON text ended
by a NUL byte (its descriptors 3 and 4 on Linux and macOS, two handles named on its command line on Windows:
``chrome.py``). Only the process that launched it holds the other ends, so no other program, of this user or
another, can open the channel (a TCP port takes no token: anyone local could drive the tab).

Our two ends are plain blocking pipes on every system: a reader thread hands what arrives to the event loop,
a writer thread sends what the loop queued, so the loop never waits on the pipe. (Windows anonymous pipes
cannot be read asynchronously by asyncio; one code path everywhere is the one the Linux tests exercise.)

One ``PipeChannel`` carries every session: a tab is attached with ``Target.attachToTarget(flatten=True)`` and
its commands and events name the ``sessionId`` it got. A ``PipeConnection`` is the browser (no session) or one
tab over it, with the few members ``browser.py`` uses of a nodriver connection: ``send``, ``add_handler``,
``attach``, ``aclose``, ``target`` and ``socket.close_code``. The commands and events are nodriver's ``cdp``
bindings; nodriver's own connection speaks WebSocket only.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import json
import logging
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

import msgspec

from cnki_mcp.site.cdp import cdp, nodriver

log = logging.getLogger(__name__)

_CLOSED = 1006  # like a WebSocket that dropped: what ``close_code`` says once the pipe is gone
_CHUNK = 65536

Handler = Callable[[Any, Any], None]


class _Frames:
    """Splits what Chrome writes into messages (NUL-terminated JSON)."""

    def __init__(self, channel: PipeChannel) -> None:
        self._channel = channel
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer known to hold no NUL: a long message is scanned once

    def feed(self, data: bytes) -> None:
        self._buffer += data
        start = 0
        while (end := self._buffer.find(b"\0", max(start, self._scanned))) >= 0:
            raw = bytes(self._buffer[start:end])
            start = end + 1
            self._channel._received(raw)
        del self._buffer[:start]
        self._scanned = len(self._buffer)


class PipeChannel:
    """Our two ends of the browser's pipe: one command stream, answers matched by id, events by session."""

    def __init__(self, commands_fd: int, answers_fd: int) -> None:
        # The threads own the descriptors once open: each closes its own when it ends.
        self._commands_fd = commands_fd
        self._answers_fd = answers_fd
        self._outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._frames = _Frames(self)
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._opened = False
        self._closing = False
        self.sessions: dict[str | None, PipeConnection] = {}
        self.close_code: int | None = None
        self.browser = PipeConnection(self, None, None)  # the browser target itself: no session
        self.sessions[None] = self.browser

    async def open(self) -> None:
        """Start the reader and writer threads."""
        if self._opened or self._closing:
            return
        loop = asyncio.get_running_loop()
        self._opened = True
        for name, work in (("read", self._read), ("write", self._write)):
            threading.Thread(target=work, args=(loop,), name=f"devtools-pipe-{name}", daemon=True).start()

    def close(self) -> None:
        """Close our command end (Chrome sees EOF) and fail every command still waiting. The answer end
        closes when Chrome's does: a thread blocked reading a descriptor must not have it closed under it."""
        if not self._closing:
            self._closing = True
            if self._opened:
                self._outbox.put(None)
            else:
                for fd in (self._commands_fd, self._answers_fd):
                    with contextlib.suppress(OSError):
                        os.close(fd)
        self._lost(None)

    async def request(self, method: str, params: dict[str, Any], session_id: str | None) -> dict[str, Any]:
        """Send one command and wait for its answer (the caller bounds the wait)."""
        if self.close_code is not None or not self._opened:
            raise ConnectionError("DevTools pipe closed")
        command_id = next(self._ids)
        message: dict[str, Any] = {"id": command_id, "method": method, "params": params}
        if session_id is not None:
            message["sessionId"] = session_id
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[command_id] = future
        try:
            # json, not msgspec: the cdp bindings hand over str subclasses (TargetID, SessionID …)
            self._outbox.put(json.dumps(message).encode() + b"\0")
            return await future
        finally:
            self._pending.pop(command_id, None)

    # --- the two threads: blocking calls on the pipe, results handed to the loop -----------------------

    def _read(self, loop: asyncio.AbstractEventLoop) -> None:
        error: OSError | None = None
        try:
            while chunk := os.read(self._answers_fd, _CHUNK):
                loop.call_soon_threadsafe(self._frames.feed, chunk)
        except OSError as exc:
            error = exc
        except RuntimeError:  # the loop is closed: nobody reads any more
            pass
        finally:
            self._outbox.put(None)  # Chrome is gone: the writer ends too, whatever the loop does
            with contextlib.suppress(OSError):
                os.close(self._answers_fd)
            self._tell(loop, error)

    def _write(self, loop: asyncio.AbstractEventLoop) -> None:
        error: OSError | None = None
        try:
            while (data := self._outbox.get()) is not None:
                view = memoryview(data)
                while view:
                    view = view[os.write(self._commands_fd, view):]
        except OSError as exc:  # Chrome closed its end
            error = exc
        finally:
            with contextlib.suppress(OSError):
                os.close(self._commands_fd)
            if error is not None:
                self._tell(loop, error)

    def _tell(self, loop: asyncio.AbstractEventLoop, error: OSError | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(self._lost, error)

    # --- on the loop ---------------------------------------------------------------------------------

    def _received(self, raw: bytes) -> None:
        try:
            message = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            log.debug("unreadable message on the DevTools pipe (%d bytes)", len(raw))
            return
        if not isinstance(message, dict):
            return
        if "id" in message:
            future = self._pending.pop(message["id"], None)
            if future is not None and not future.done():
                future.set_result(message)
        elif "method" in message:
            conn = self.sessions.get(message.get("sessionId"))
            if conn is not None:
                conn._dispatch(message)

    def _lost(self, exc: Exception | None) -> None:
        if self.close_code is None:
            self.close_code = _CLOSED
            log.debug("DevTools pipe closed: %s", exc)
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(ConnectionError("DevTools pipe closed"))


class PipeConnection:
    """The browser target (``session_id`` None) or one tab attached over the pipe."""

    def __init__(self, channel: PipeChannel, target: Any, session_id: str | None) -> None:
        self.channel = channel
        self.target = target
        self.session_id = session_id
        self.handlers: dict[type, list[Handler]] = collections.defaultdict(list)

    @property
    def socket(self) -> PipeChannel:
        """What ``close_code`` is read from, as on a nodriver connection's WebSocket."""
        return self.channel

    def add_handler(self, event_type: type, callback: Handler) -> None:
        if callback not in self.handlers[event_type]:
            self.handlers[event_type].append(callback)

    async def send(self, command: Any) -> Any:
        """Run one ``cdp`` command (a generator: request out, result in); a CDP error raises nodriver's
        ``ProtocolException``, as over the WebSocket."""
        request = next(command)
        answer = await self.channel.request(request["method"], request.get("params", {}), self.session_id)
        if "error" in answer:
            raise nodriver().core.connection.ProtocolException(answer["error"])
        try:
            command.send(answer.get("result", {}))
        except StopIteration as done:
            return done.value
        raise RuntimeError(f"{request['method']}: the cdp binding wanted more than one answer")

    async def attach(self) -> None:
        """Attach to this tab's target: a flattened session on the shared pipe."""
        browser = self.channel.browser
        target_id = self.target.target_id
        session_id = await browser.send(cdp().target.attach_to_target(target_id=target_id, flatten=True))
        self.session_id = str(session_id)
        self.channel.sessions[self.session_id] = self
        self.target = await browser.send(cdp().target.get_target_info(target_id))

    async def aclose(self) -> None:
        """A tab: detach its session (its target may be gone already). The browser: close the pipe."""
        if self is self.channel.browser:
            self.channel.close()
            return
        session_id, self.session_id = self.session_id, None
        if session_id is None:  # never attached
            return
        self.channel.sessions.pop(session_id, None)
        if self.channel.close_code is None:
            try:
                await self.channel.browser.send(cdp().target.detach_from_target(session_id=cdp().target.SessionID(session_id)))
            except Exception as exc:  # the target closed first: nothing to detach
                log.debug("detaching session %s: %s", session_id[:8], exc)

    def _dispatch(self, message: dict[str, Any]) -> None:
        try:
            event = cdp().util.parse_json_event(message)
        except Exception:  # an event newer than nodriver's bindings
            return
        for callback in list(self.handlers.get(type(event), ())):
            try:
                callback(event, self)
            except Exception:
                log.warning("DevTools event handler %r failed on %s", callback, type(event).__name__, exc_info=True)
