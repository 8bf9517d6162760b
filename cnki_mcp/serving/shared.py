"""``cnki-mcp serve`` over stdio on a data directory other servers may share: owner or relay.

The first server takes ``owner.lock`` (``owner.py``), serves its client directly and opens the endpoint
others join; a later one relays its client to the owner (``relay.py``) and takes over when the owner goes.
This module sits above both, so that neither imports the other. A directory where not even the lock file
can be made is served alone, as before (the store then says what is wrong).

``initialize`` and ``tools/list`` need only the surface: the App (the whole product: pages, site, documents,
references …) is imported in a worker thread and made once the client's first request has been answered,
then the owner's endpoint is opened. A tool call that comes sooner starts it at once and waits for it; so
does a client that has sent nothing ``START_AFTER_SECONDS`` after the start. A server that joins meanwhile
finds no ``owner.json`` yet and waits for it, as it would for any owner still starting.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from cnki_mcp import __version__
from cnki_mcp.core.errors import CnkiError, as_cnki_error
from cnki_mcp.serving import endpoint
from cnki_mcp.serving.owner import Owner, OwnerInfo, claim, read_owner
from cnki_mcp.store.library import DirectoryLock

if TYPE_CHECKING:  # app imports the whole product; a relay never needs it, an owner not before its first answer
    from cnki_mcp.app import App
    from cnki_mcp.surface.server import CallContext

log = logging.getLogger(__name__)

START_AFTER_SECONDS = 2.0  # a client that sends nothing does not keep the others out for longer
READY_SECONDS = 60.0  # how long a tool call waits for the App (its import takes well under a second)


async def _app_class() -> type[App]:
    """``App``, its modules imported in a worker thread (the event loop keeps answering the client)."""
    module = await asyncio.to_thread(importlib.import_module, "cnki_mcp.app")
    app_class: type[App] = module.App
    return app_class


class _Deferred:
    """The App as the surface sees it before it exists: a tool call starts it (if the first answer has not
    already) and waits for it."""

    def __init__(self, go: asyncio.Event, ready: asyncio.Future[App | CnkiError]) -> None:
        self._go = go
        self._ready = ready

    async def call(self, tool: str, args: msgspec.Struct, ctx: CallContext) -> dict[str, Any] | msgspec.Struct:
        self._go.set()
        try:
            app = await asyncio.wait_for(asyncio.shield(self._ready), READY_SECONDS)
        except TimeoutError:
            raise CnkiError("OPERATION_FAILED", f"服务在 {READY_SECONDS:g} 秒内没有完成启动。请重启客户端后重试。") from None
        if isinstance(app, CnkiError):
            raise app
        return await app.call(tool, args, ctx)


class Shared:
    """This stdio server's part in the data directory: the owner (with its App) or a relay to it."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.owner: Owner | None = None
        self.app: App | None = None
        self._lock: DirectoryLock | None = None  # claimed, not yet handed to an Owner
        self._starting: asyncio.Task[None] | None = None
        self._waiting = False  # the start still waits for the first answer: cancelling it is safe

    async def serve_stdio(self) -> None:
        from cnki_mcp.surface.server import serve_stdio

        try:
            self._lock = await asyncio.to_thread(claim, self.root)
        except (CnkiError, OSError) as exc:
            log.warning("cannot claim %s for other clients: %s", self.root, exc)
        else:
            if self._lock is None:
                from cnki_mcp.serving.relay import Relay

                info = read_owner(self.root)
                log.info("%s is owned by pid %s: joining it", self.root, info.pid if info else "?")
                await Relay(self.root, self.become_owner).run()
                return
        go = asyncio.Event()  # set by the first answer or by a tool call
        ready: asyncio.Future[App | CnkiError] = asyncio.get_running_loop().create_future()
        self._waiting = True
        self._starting = asyncio.create_task(self._start(go, ready), name="cnki-start")
        await serve_stdio(_Deferred(go, ready), go)

    async def become_owner(self, lock: DirectoryLock) -> OwnerInfo:
        """This process as the owner, its endpoint open: how a relay takes over from an owner that went."""
        self._lock = lock
        await self._take()
        return await self._open()

    async def _take(self) -> None:
        """A fresh App, owning the directory under the claimed lock (running operations of an old owner read
        as interrupted), or alone when there is none."""
        self.app = (await _app_class())(self.root)
        if self._lock is not None:
            self.owner = Owner(self.root, self._lock, self.app)
            self._lock = None

    async def _start(self, go: asyncio.Event, ready: asyncio.Future[App | CnkiError]) -> None:
        try:
            try:
                await asyncio.wait_for(go.wait(), START_AFTER_SECONDS)
            except TimeoutError:
                pass
            finally:
                self._waiting = False
            await self._take()
        except asyncio.CancelledError:
            ready.set_result(CnkiError("CANCELLED"))
            raise
        except Exception as exc:  # every tool call says so; the server itself goes on answering
            log.exception("the server could not start")
            ready.set_result(as_cnki_error(exc))
            return
        assert self.app is not None
        ready.set_result(self.app)
        if self.owner is not None:
            await self._open()

    async def _open(self) -> OwnerInfo:
        """The endpoint others join; this client is served without it when it cannot be opened."""
        assert self.owner is not None
        try:
            served = await self.owner.open_endpoint()
        except Exception as exc:  # serving this client matters more than letting others join
            log.warning("other clients cannot join this server: %s", getattr(exc, "message", None) or repr(exc))
            return OwnerInfo(pid=os.getpid(), host="127.0.0.1", port=0)
        return OwnerInfo(pid=os.getpid(), host="127.0.0.1", port=served.port, version=__version__)

    async def close(self) -> None:
        starting = self._starting
        if starting is not None and not starting.done():
            if self._waiting:
                starting.cancel()
            # A start that has begun is let finish, so what it opens is what is closed below.
            await asyncio.wait({starting}, timeout=endpoint.START_SECONDS + endpoint.STOP_SECONDS)
        if self.owner is not None:
            await self.owner.close()
        elif self.app is not None:
            await self.app.close()
        if self._lock is not None:  # claimed, and the client left before the App was made
            self._lock.release()
            self._lock = None
