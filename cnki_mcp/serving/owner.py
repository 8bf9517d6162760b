"""One owner per data directory: the process that holds ``owner.lock`` and serves every client.

The owner runs the App (store, jobs, limiter, browser) and an HTTP endpoint (``endpoint.py``) whose address
it writes to ``owner.json`` (0600: pid, host, port). ``cnki-mcp serve --http`` is an owner on the address it
is given; a stdio server that finds the lock free becomes the owner too, serves its own client directly and
runs the endpoint on an ephemeral loopback port; one that finds it held joins the owner (``relay.py``);
``shared.py`` makes that choice, above both.
The lock is the truth (the system releases it when its process dies, however it dies); ``owner.json``
only says where to connect.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from cnki_mcp import __version__
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.files import atomic_replace, make_private_dir
from cnki_mcp.serving import endpoint
from cnki_mcp.store.library import DirectoryLock

if TYPE_CHECKING:  # app imports the whole product; the owner is chosen before any of it is needed
    from cnki_mcp.app import App

log = logging.getLogger(__name__)

OWNER_LOCK = "owner.lock"
OWNER_FILE = "owner.json"


class OwnerInfo(msgspec.Struct):
    """What ``owner.json`` says: the owner's process and where its endpoint listens."""

    pid: int
    host: str
    port: int
    version: str = ""

    @property
    def url(self) -> str:
        return endpoint.url(self.host, self.port)


def claim(root: Path) -> DirectoryLock | None:
    """``owner.lock`` taken (this process is the owner), or None when a live process holds it."""
    make_private_dir(Path(root))
    try:
        return DirectoryLock.acquire(root, OWNER_LOCK)
    except CnkiError as exc:
        if exc.code == "DATA_DIRECTORY_IN_USE":
            return None
        raise


def read_owner(root: Path) -> OwnerInfo | None:
    try:
        return msgspec.json.decode((Path(root) / OWNER_FILE).read_bytes(), type=OwnerInfo)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


class Owner:
    """This process as the owner of ``root``: its claim, its App and its endpoint."""

    def __init__(self, root: Path, lock: DirectoryLock, app: App) -> None:
        self.root = Path(root)
        self.lock = lock
        self.app = app
        self.app.owner_pid = os.getpid()
        self.endpoint: endpoint.Endpoint | None = None

    async def open_endpoint(self, host: str = "127.0.0.1", port: int = 0) -> endpoint.Endpoint:
        """Start the HTTP endpoint and say where it is in ``owner.json``."""
        from cnki_mcp.surface.server import build_server

        self.endpoint = await endpoint.start(build_server(self.app), self.root, host, port)
        reach = "127.0.0.1" if host in ("0.0.0.0", "", "localhost") else "::1" if host in ("::", "[::]") else host.strip("[]")
        info = OwnerInfo(pid=os.getpid(), host=reach, port=self.endpoint.port, version=__version__)
        await asyncio.to_thread(atomic_replace, self.root / OWNER_FILE, msgspec.json.encode(info), 0o600)
        log.info("owner of %s (pid %d), endpoint %s", self.root, os.getpid(), self.endpoint.url)
        return self.endpoint

    async def close(self) -> None:
        """Endpoint, App, ``owner.json`` and the lock, in that order (the next owner starts clean)."""
        try:
            if self.endpoint is not None:
                await self.endpoint.stop()
        finally:
            try:
                await self.app.close()
            finally:
                info = read_owner(self.root)
                if info is not None and info.pid == os.getpid():
                    with contextlib.suppress(OSError):
                        (self.root / OWNER_FILE).unlink()
                self.lock.release()


def _busy(root: Path) -> CnkiError:
    info = read_owner(root)
    who = f"（进程 {info.pid}，{info.url}）" if info is not None else ""
    return CnkiError(
        "DATA_DIRECTORY_IN_USE",
        f"数据目录 {root} 已由另一个 cnki-mcp 进程负责{who}；serve --http 需要独占数据目录。请先结束那个进程，"
        "或用 CNKI_DATA_DIR 指定其他目录。stdio 客户端不受影响：它们会自动加入正在运行的服务。",
        details={"path": str(root), "owner_pid": info.pid if info is not None else None},
    )


def _say(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


async def serve_http(root: Path, host: str, port: int) -> None:
    """``cnki-mcp serve --http``: the owner on ``host:port`` until SIGINT/SIGTERM."""
    from cnki_mcp.app import App

    lock = claim(root)
    if lock is None:
        raise _busy(root)
    owner = Owner(root, lock, App(root))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    if sys.platform != "win32":
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.add_signal_handler(signum, stop.set)
    try:
        served = await owner.open_endpoint(host, port)
        if not endpoint.is_loopback(host):
            _say(
                f"警告：HTTP 服务监听在 {host}，不只是本机。持有访问令牌的任何人都能使用这台电脑上的浏览器和其中的知网登录；"
                "请只在可信的网络中这样做，并妥善保管令牌（cnki-mcp config --rotate-token 可以更换）。"
            )
        _say(f"cnki-mcp HTTP 服务：{served.url}")
        waiter = asyncio.ensure_future(stop.wait())
        await asyncio.wait({waiter, served.task}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
    finally:
        await owner.close()

