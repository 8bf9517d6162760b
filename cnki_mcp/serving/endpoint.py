"""The owner's HTTP endpoint: MCP over streamable HTTP at ``/mcp``, behind a bearer token and Host/Origin checks.

``cnki-mcp serve --http`` runs it on the address it is given; a stdio server that owns the data directory
runs it on an ephemeral loopback port so that other servers on the same directory can join (``owner.py``).
The SDK's session manager does the protocol (mcp already depends on starlette and uvicorn); this module
only puts a guard in front of it. uvicorn, its HTTP protocol and psutil are imported when an endpoint is
really started, in a worker thread, so that a stdio server answers its client meanwhile. The guard:

- ``Host`` must name the bound address (any local address for a wildcard bind) with its port, and an
  ``Origin``, when sent, the same: anything else is refused (421 / 403), so a web page reached through
  DNS rebinding never gets an answer;
- ``Authorization: Bearer <token>`` must carry the token kept in ``<data>/http-token`` (0600, created on
  first use, replaced by ``cnki-mcp config --rotate-token``); a missing or wrong token is 401. The file is
  read again when it changes, so a rotated token takes effect without a restart.

Connections are bounded for whoever has no token: a request's headers must arrive within
``HEADER_SECONDS`` of connecting (uvicorn's keep-alive timeout then closes an idle one), at most
``connection_cap()`` are open at once — well under the descriptor limit, whose soft value is raised to
the hard one where allowed. Over the cap, connections are closed to come back to it, in this order: those
whose request came without the token (they are being refused anyway), those idle between requests, then the
oldest that have sent nothing for ``STALL_SECONDS`` (bytes waiting in the kernel are a request a busy loop has
not read yet, and a flooded client may write late: neither is closed unanswered); so a flood of idle,
half-sent or unauthenticated connections never keeps a real call out. Beyond ``OVERFLOW`` times the cap (half
the descriptors) room is made at once, in the same order but without waiting for a connection to stall.

A request without the token is answered 401 at once and its connection closed after it (``Connection:
close``): the unauthenticated share is what is being refused at the moment, never a kept-alive pool, and it
is the first closed when room is needed. Authorised calls run at most ``AUTHORISED_INFLIGHT`` at once; the next ones are answered at once with
503 and a JSON-RPC busy error (``Retry-After``), never a reset and never an unbounded queue. What
a flood makes uvicorn and asyncio log (invalid requests, ``accept`` out of descriptors) is one line per
``LOG_EVERY_SECONDS``, never a traceback per attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import importlib
import ipaddress
import json
import logging
import os
import secrets
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.files import atomic_replace, make_private_dir
from cnki_mcp.store import library
from cnki_mcp.surface.server import lone_surrogate_answer

if TYPE_CHECKING:
    import uvicorn
    from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger(__name__)

TOKEN_FILE = library.TOKEN_FILE
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
PATH = "/mcp"
START_SECONDS = 10.0
STOP_SECONDS = 5.0
HEADER_SECONDS = 10.0  # from connecting to a request's last header line
IDLE_SECONDS = 5  # between requests on a kept-alive connection (uvicorn's timeout_keep_alive)
# 2,000 authorised calls opened at once all get an answer (200 or a 503 busy error), none a reset; beyond twice
# this, connections that have sent nothing yet are closed unanswered (measured in docs/hardening.md, round 4).
CONNECTIONS_MAX = 2048
OVERFLOW = 2  # connections beyond the cap are held (and answered) up to this many times the cap
STALL_SECONDS = 3.0  # a connection over the cap that sent nothing for this long is stalled (a flooded client may be late)
# Authorised calls handled at once: every tool call is an asyncio task of this process (the browser work
# behind them is paced anyway), so more at once only queues memory; the next ones get a busy answer.
AUTHORISED_INFLIGHT = 64
BUSY_RETRY_SECONDS = 2
LOG_EVERY_SECONDS = 30.0
# What starting an endpoint imports: uvicorn and the protocol and lifespan classes its Config loads by name.
MODULES = ("uvicorn", "uvicorn.protocols.http.h11_impl", "uvicorn.lifespan.on", "psutil")


# --- the token ---------------------------------------------------------------------------------------


def _read_token(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text or None


def token(root: Path, *, rotate: bool = False) -> str:
    """The bearer token of the data directory ``root``: created on first use (0600), new when ``rotate``."""
    root = Path(root)
    path = root / TOKEN_FILE
    try:
        make_private_dir(root)
        if not rotate:
            found = _read_token(path)
            if found is not None:
                _tighten(path)
                return found
        fresh = secrets.token_urlsafe(32)
        if rotate:
            atomic_replace(path, fresh.encode("ascii"), 0o600)
            return fresh
        # Created only if absent: two servers starting at once agree on the first one written.
        temp = root / f".{TOKEN_FILE}.{secrets.token_hex(6)}.tmp"
        atomic_replace(temp, fresh.encode("ascii"), 0o600)
        try:
            os.link(temp, path)
        except FileExistsError:
            pass
        finally:
            temp.unlink(missing_ok=True)
    except OSError as exc:
        raise CnkiError(
            "STORE_UNAVAILABLE",
            f"无法在数据目录 {root} 中写入访问令牌（{exc.strerror or exc}）。请检查目录权限，或用 CNKI_DATA_DIR 指定可写的目录。",
            details={"path": str(path)},
        ) from exc
    found = _read_token(path)
    if found is None:
        raise CnkiError("STORE_UNAVAILABLE", f"访问令牌文件 {path} 无法读取。请删除它后重试。", details={"path": str(path)})
    return found


def _tighten(path: Path) -> None:
    """The token is a key to the person's logged-in browser: only its owner may read it."""
    if os.name == "nt":
        return
    with contextlib.suppress(OSError):
        if path.stat().st_mode & 0o077:
            path.chmod(0o600)


class _TokenFile:
    """The token file, read again whenever it changes (a rotation needs no restart)."""

    def __init__(self, root: Path) -> None:
        self.path = Path(root) / TOKEN_FILE
        self._stamp: tuple[int, int] | None = None
        self._value: bytes = b""
        token(root)

    def current(self) -> bytes:
        try:
            info = self.path.stat()
        except OSError:
            return b""
        if os.name != "nt" and info.st_mode & 0o077:
            _tighten(self.path)  # loosened while we run (a chmod, a copy tool): only its owner may read it
        stamp = (info.st_mtime_ns, info.st_size)
        if stamp != self._stamp:
            self._value = (_read_token(self.path) or "").encode("ascii")
            self._stamp = stamp
        return self._value


# --- addresses ---------------------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _wildcard(host: str) -> bool:
    return host in ("0.0.0.0", "::", "[::]", "")


def _netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def url(host: str, port: int) -> str:
    return f"http://{_netloc(host, port)}{PATH}"


def allowed_hosts(host: str, port: int) -> set[str]:
    """``Host`` values that name this endpoint (lower case, with the port)."""
    names = {host.lower().strip("[]")}
    if is_loopback(host) or _wildcard(host):
        names |= {"127.0.0.1", "localhost", "::1"}
    if _wildcard(host):
        import psutil

        names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
        for addresses in psutil.net_if_addrs().values():
            names |= {a.address.split("%")[0].lower() for a in addresses if a.family in (socket.AF_INET, socket.AF_INET6)}
    names.discard("")
    return {_netloc(name, port) for name in names}


# --- the guard ---------------------------------------------------------------------------------------


class Peers:
    """The open connections by peer address, so the guard can tell the protocol what a request proved
    (``anonymous``: it came without the token; such a connection goes first at the cap)."""

    def __init__(self) -> None:
        self.by_address: dict[tuple[str, int] | None, Any] = {}

    @staticmethod
    def key(address: Any) -> tuple[str, int] | None:
        """(host, port) of a peer address (IPv6 peers carry two more fields) or of an ASGI scope's ``client``."""
        return (str(address[0]), int(address[1])) if address else None

    def mark_anonymous(self, client: Any) -> None:
        conn = self.by_address.get(self.key(client))
        if conn is not None:
            conn.anonymous = True


@dataclass
class Guard:
    """ASGI middleware: Host and Origin first (DNS rebinding), then the bearer token, then the capacity."""

    app: ASGIApp
    tokens: _TokenFile
    hosts: set[str] = field(default_factory=set)
    peers: Peers = field(default_factory=Peers)
    inflight: int = 0
    busy_answers: int = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host = headers.get("host", "").lower()
        origin = headers.get("origin")
        if host not in self.hosts:
            log.warning("HTTP request refused: foreign Host %r", host[:100])
            await _plain(send, 421, "Host 不是本服务绑定的地址（防 DNS 重绑定）。")
            return
        if origin is not None and origin.lower().removeprefix("http://") not in self.hosts:
            log.warning("HTTP request refused: foreign Origin %r", origin[:100])
            await _plain(send, 403, "Origin 不是本服务的地址。")
            return
        given = headers.get("authorization", "")
        scheme, _, value = given.partition(" ")
        expected = self.tokens.current()
        if not (expected and scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode("latin-1"), expected)):
            self.peers.mark_anonymous(scope.get("client"))
            await _plain(send, 401, "需要访问令牌：Authorization: Bearer <令牌>（cnki-mcp config <客户端> --http 输出带令牌的配置）。",
                         [(b"www-authenticate", b'Bearer realm="cnki-mcp"'), (b"connection", b"close")])
            return
        if self.inflight >= AUTHORISED_INFLIGHT:
            self.busy_answers += 1
            await _busy(receive, send)
            return
        self.inflight += 1
        try:
            if scope.get("method") == "POST":  # a call whose arguments hold half a surrogate pair: INVALID_INPUT
                body = await _whole_body(receive)
                if (answer := lone_surrogate_answer(body)) is not None:
                    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
                    await send({"type": "http.response.body", "body": answer})
                    return
                receive = _replay(body, receive)
            await self.app(scope, receive, send)
        finally:
            self.inflight -= 1


async def _whole_body(receive: Receive) -> bytes:
    parts = []
    while True:
        message = await receive()
        parts.append(message.get("body", b""))
        if message["type"] != "http.request" or not message.get("more_body"):
            return b"".join(parts)


def _replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` with the body already read given back first."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Any:
        return pending.pop() if pending else await receive()

    return replayed


async def _plain(send: Send, status: int, text: str, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = (text + "\n").encode("utf-8")
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


BUSY_MESSAGE = (
    f"服务繁忙：已有 {AUTHORISED_INFLIGHT} 个调用正在处理，这个请求没有执行；请在 {BUSY_RETRY_SECONDS} 秒后重试。"
)


async def _busy(receive: Receive, send: Send) -> None:
    """503 with a JSON-RPC error (id null: the request was not read) after the body is read, so closing the
    connection afterwards never resets it."""
    while (await receive()).get("more_body"):
        pass
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": BUSY_MESSAGE,
                                                               "data": {"code": "SERVER_BUSY", "retry_after": BUSY_RETRY_SECONDS}}},
                      ensure_ascii=False).encode("utf-8")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               (b"retry-after", str(BUSY_RETRY_SECONDS).encode()), (b"connection", b"close")]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# --- the server --------------------------------------------------------------------------------------


def load() -> None:
    """Import what an endpoint runs on (blocking: call it in a worker thread)."""
    for name in MODULES:
        importlib.import_module(name)


def connection_cap() -> int:
    """Open connections allowed: a quarter of the descriptor limit (raised first to the hard limit where
    the system allows), at most ``CONNECTIONS_MAX``; the rest stays for the browser, files and logs."""
    try:
        import resource
    except ImportError:  # Windows: no descriptor limit of this kind
        return CONNECTIONS_MAX
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
    limit = soft if soft != resource.RLIM_INFINITY else 65536
    return max(16, min(CONNECTIONS_MAX, limit // 4))


class _OncePer(logging.Filter):
    """One record per message kind every ``LOG_EVERY_SECONDS``, without its traceback: a flood of bad
    connections must not fill the log (and rotate the history away)."""

    KINDS = ("Invalid HTTP request", "socket.accept() out of system resource", "Exceeded concurrency limit")

    def __init__(self) -> None:
        super().__init__()
        self._last: dict[str, float] = {}
        self._dropped: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        kind = next((k for k in self.KINDS if message.startswith(k)), None)
        if kind is None:
            return True
        now = time.monotonic()
        if now - self._last.get(kind, -LOG_EVERY_SECONDS) < LOG_EVERY_SECONDS:
            self._dropped[kind] = self._dropped.get(kind, 0) + 1
            return False
        self._last[kind] = now
        dropped = self._dropped.pop(kind, 0)
        record.msg, record.args = f"{kind} (HTTP endpoint; {dropped} more since the last such line)", None
        record.exc_info = record.exc_text = None
        return True


_FLOOD_LOG = _OncePer()


def _protocol(cap: int, peers: Peers) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with a header deadline and a connection cap (see the module's text)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class Guarded(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self.opened_at = self.loop.time()
            self.requested = False
            self.anonymous = False
            self.peer = Peers.key(transport.get_extra_info("peername"))
            peers.by_address[self.peer] = self
            # The keep-alive timer doubles as the header deadline: a request's headers cancel it.
            self.timeout_keep_alive_task = self.loop.call_later(HEADER_SECONDS, self.timeout_keep_alive_handler)
            live = len(self._live())
            if live > OVERFLOW * cap:  # the hard ceiling (half the descriptors at most): room is made at once
                self._make_room(OVERFLOW * cap, 0.0)
            if live > cap:
                # A connection just made has had no chance to send its request: it is looked at again after
                # STALL_SECONDS, and only stalled ones (and the unauthenticated) are closed to come back to the cap.
                self.loop.call_later(STALL_SECONDS, self._make_room)

        def _live(self) -> list[Guarded]:  # (one being closed stays in the set until its connection_lost)
            return [c for c in self.connections if isinstance(c, Guarded) and not c.transport.is_closing()]

        def _make_room(self, limit: int = cap, stall: float = STALL_SECONDS) -> None:
            """Close connections down to the cap: refused without the token first, then idle between requests,
            then the oldest waiting for their first request at least STALL_SECONDS with nothing unread (bytes
            the kernel holds are a request this busy loop has not read yet, not a stalled client)."""
            live = self._live()
            now = self.loop.time()
            anonymous = [c for c in live if c.anonymous]
            idle = [c for c in live if c.requested and not c.anonymous and c.cycle is not None and c.cycle.response_complete]
            stalled = sorted(
                (c for c in live if not c.requested and now - c.opened_at >= stall and not _unread(c.transport) and (stall or c is not self)),
                key=lambda c: c.opened_at,
            )
            for victim in [*anonymous, *idle, *stalled][: len(live) - limit]:
                victim.transport.close()

        def connection_lost(self, exc: Exception | None) -> None:
            if peers.by_address.get(self.peer) is self:
                del peers.by_address[self.peer]
            super().connection_lost(exc)

        def handle_events(self) -> None:
            self.requested = self.requested or self.cycle is not None
            super().handle_events()
            self.requested = self.requested or self.cycle is not None

    return Guarded


def _unread(transport: asyncio.Transport) -> bool:
    """Whether bytes wait in the kernel for this connection (FIONREAD: nothing consumed). Where it cannot be
    asked (Windows), none are assumed: the connection is judged by its age alone."""
    sock = transport.get_extra_info("socket")
    if sock is None or os.name == "nt":
        return False
    import fcntl
    import termios

    try:
        pending = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0")
    except OSError:
        return False
    return int.from_bytes(pending, sys.byteorder) > 0


def _server(config: uvicorn.Config) -> uvicorn.Server:
    import uvicorn

    class _Server(uvicorn.Server):
        """uvicorn without its signal handlers: the command that runs it decides how the process ends."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return _Server(config)


def _bind(host: str, port: int) -> socket.socket:
    bind_host = "127.0.0.1" if host == "localhost" else host.strip("[]")
    family = socket.AF_INET6 if ":" in bind_host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        if os.name != "nt":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((bind_host, port))
    except OSError as exc:
        sock.close()
        raise CnkiError(
            "HTTP_ADDRESS_UNAVAILABLE",
            f"无法在 {_netloc(host, port)} 上监听（{exc.strerror or exc}）。请换一个端口（--port，0 表示任选空闲端口）或地址（--host）。",
            details={"host": host, "port": port},
        ) from exc
    sock.set_inheritable(False)
    return sock


@dataclass
class Endpoint:
    """A running endpoint: where it listens and how to stop it."""

    host: str
    port: int
    server: uvicorn.Server
    task: asyncio.Task[None]

    @property
    def url(self) -> str:
        return url(self.host, self.port)

    async def stop(self) -> None:
        self.server.should_exit = True
        done, _ = await asyncio.wait({self.task}, timeout=STOP_SECONDS)
        if not done:
            self.task.cancel()
            await asyncio.wait({self.task}, timeout=STOP_SECONDS)


async def start(mcp_server: Any, root: Path, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> Endpoint:
    """Serve ``mcp_server`` (a low-level ``Server``) over streamable HTTP until :meth:`Endpoint.stop`."""
    from mcp.server.transport_security import TransportSecuritySettings

    await asyncio.to_thread(load)
    import uvicorn

    tokens = await asyncio.to_thread(_TokenFile, root)
    sock = _bind(host, port)
    bound_port = sock.getsockname()[1]
    # The guard below checks Host and Origin itself, also for a wildcard bind the SDK's list cannot express.
    starlette_app = mcp_server.streamable_http_app(
        streamable_http_path=PATH,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        host=host,
    )
    peers = Peers()
    guard = Guard(starlette_app, tokens, allowed_hosts(host, bound_port), peers)
    # Named, not "auto": the same modules in every install, and a frozen build knows what to bundle.
    for name in ("uvicorn.error", "asyncio"):
        if _FLOOD_LOG not in logging.getLogger(name).filters:
            logging.getLogger(name).addFilter(_FLOOD_LOG)
    config = uvicorn.Config(
        guard, http=_protocol(connection_cap(), peers), ws="none", lifespan="on", log_level="warning", access_log=False,
        log_config=None, timeout_graceful_shutdown=2, timeout_keep_alive=IDLE_SECONDS,
    )
    server = _server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]), name="cnki-http")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + START_SECONDS
    while not server.started:
        if task.done() or loop.time() > deadline:
            sock.close()
            if not task.done():
                task.cancel()
            raise CnkiError(
                "HTTP_ADDRESS_UNAVAILABLE", f"HTTP 服务没能在 {START_SECONDS:g} 秒内启动（{_netloc(host, bound_port)}）。",
                details={"host": host, "port": bound_port},
            )
        await asyncio.sleep(0.02)
    return Endpoint(host, bound_port, server, task)
