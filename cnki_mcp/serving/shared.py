"""``cnki-mcp serve`` over stdio on a data directory other servers may share: owner or relay.

The first server takes ``owner.lock`` (``owner.py``), serves its client directly and opens the endpoint
others join; a later one relays its client to the owner (``relay.py``) and takes over when the owner goes.
This module sits above both, so that neither imports the other. A directory where not even the lock file
can be made is served alone, as before (the store then says what is wrong).

What can wait for the client's first answer waits: the owner's endpoint (uvicorn and its protocol are
imported in a worker thread) opens once the first request has been answered, or ``START_AFTER_SECONDS``
after the start when the client sends nothing. A server that joins meanwhile finds no ``owner.json`` yet
and waits for it, as it would for any owner still starting.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

from cnki_mcp import __version__
from cnki_mcp.app import App
from cnki_mcp.core.clock import within
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.serving import endpoint
from cnki_mcp.serving.owner import Owner, OwnerInfo, claim, read_owner
from cnki_mcp.store.library import DirectoryLock

log = logging.getLogger(__name__)

START_AFTER_SECONDS = 2.0  # a client that sends nothing does not keep the others out for longer


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
        self._take()
        assert self.app is not None
        answered = asyncio.Event()  # set by the first answer
        self._waiting = True
        self._starting = asyncio.create_task(self._open_after(answered), name="cnki-endpoint")
        await serve_stdio(self.app, answered)

    async def become_owner(self, lock: DirectoryLock) -> OwnerInfo:
        """This process as the owner, its endpoint open: how a relay takes over from an owner that went."""
        self._lock = lock
        self._take()
        return await self._open()

    def _take(self) -> None:
        """A fresh App, owning the directory under the claimed lock (running operations of an old owner read
        as interrupted), or alone when there is none."""
        self.app = App(self.root)
        if self._lock is not None:
            self.owner = Owner(self.root, self._lock, self.app)
            self._lock = None

    async def _open_after(self, answered: asyncio.Event) -> None:
        try:
            await within(answered.wait(), START_AFTER_SECONDS)
        except TimeoutError:
            pass
        finally:
            self._waiting = False
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
        if self._lock is not None:  # claimed, and never handed to an owner
            self._lock.release()
            self._lock = None
