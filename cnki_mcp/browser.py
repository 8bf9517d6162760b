"""The dedicated browser: launched by us, driven over the DevTools protocol with nodriver.

We start Chrome/Edge/Chromium ourselves with a dedicated profile and ``--remote-debugging-port=0``,
read the port Chrome picked from ``DevToolsActivePort``, then attach nodriver to it. Launching it
ourselves gives us the process tree (so nothing is left behind), its output (drained, never left in
a full pipe) and the choice of executable; nodriver gives us the websocket plumbing and the CDP
bindings. Every CDP command goes through ``Browser._call`` with a timeout, and any transport
failure, timeout, crash or closed browser surfaces as ``CnkiError("BROWSER_UNAVAILABLE")``.

One ``Browser`` per process, created lazily: nothing launches until ``ensure()`` is awaited.
A dead browser stays dead until ``reset()`` (``operation_control recover``); the next ``ensure()``
then starts a fresh one and ``connection_generation`` goes up, so callers can drop per-browser state.

nodriver is imported on first launch only: it takes about half a second to import.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import collections
import functools
import itertools
import json
import logging
import os
import re
import shlex
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any
from urllib.parse import urlsplit

import msgspec
import psutil

from cnki_mcp.errors import CnkiError, as_cnki_error
from cnki_mcp.model import Config

log = logging.getLogger(__name__)

CALL_TIMEOUT = 10.0  # default for a single CDP command
LAUNCH_TIMEOUT = 20.0  # executable start until DevToolsActivePort is written
ATTACH_TIMEOUT = 10.0
PROBE_TIMEOUT = 2.0
CLOSE_TIMEOUT = 3.0  # graceful Browser.close before the process tree is killed
EXIT_WAIT = 5.0  # after Browser.close, time for Chrome to flush the profile and exit
PAGE_CLOSE_TIMEOUT = 1.0
NAVIGATION_TIMEOUT = 20.0
FETCH_TIMEOUT = 30.0
RESPONSE_CAP = 8 * 1024 * 1024
RESOURCE_CHUNK = 1024 * 1024
WINDOW_CONFIRM_TIMEOUT = 2.0
CLICK_ATTEMPTS = 60
CLICK_INTERVAL = 0.05
WINDOW_SIZE = (1280, 900)
ACCEPT_LANGUAGE = "zh-CN,zh,en"

_OWNER_FILE = "cnki-mcp-owner.json"
_LOCK_NAMES = ("SingletonLock", "SingletonSocket", "SingletonCookie", "lockfile")
_PROFILE_IN_USE_EXIT = 21  # Chrome's exit code when another process holds the profile
_TRUE = {"1", "true", "yes", "on"}

_DEAD_MESSAGE = (
    "浏览器已退出或连接已断开（这不代表没有访问权限）。请调用 operation_control 的 recover，然后重试或 continue。"
)
_PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")


@functools.cache
def _nodriver() -> ModuleType:
    import nodriver

    logging.getLogger("nodriver").setLevel(logging.WARNING)
    # Chrome may send events newer than nodriver's bindings; nodriver logs those as errors.
    logging.getLogger("nodriver.core.connection").setLevel(logging.CRITICAL)
    return nodriver


def _cdp() -> ModuleType:
    return _nodriver().cdp


# --------------------------------------------------------------------------------------------
# Results


class NavigationResult(msgspec.Struct):
    """Outcome of ``navigate``: the main document's HTTP status (0 if none) and the final URL."""

    status: int
    url: str
    error: str = ""  # Chrome's net error text when the navigation itself reported one


class FetchResult(msgspec.Struct):
    """A response read through the browser: status, final URL, decoded body."""

    status: int
    url: str
    text: str
    redirected: bool = False


class DownloadEvent(msgspec.Struct):
    """Latest known state of one download; ``state`` is begun, inProgress, completed or canceled."""

    guid: str
    url: str = ""
    suggested_filename: str = ""
    state: str = "begun"
    received_bytes: int = 0
    total_bytes: int = 0
    path: str = ""  # where Chrome saved it (``<download dir>/<guid>`` with allowAndName)


# --------------------------------------------------------------------------------------------
# Tabs


class Tab:
    """A page target of one browser generation; pass it back to ``Browser`` methods."""

    def __init__(self, conn: Any, generation: int, opener_id: str | None) -> None:
        self._conn = conn
        self.generation = generation
        self.opener_id = opener_id
        self.target_id: str = str(conn.target.target_id)
        self.closed = False
        self.crashed = False
        self._documents: dict[str, tuple[int, str]] = {}
        self._document_seen = asyncio.Event()
        self._fetch_ids = itertools.count(1)
        # Redirects of the page's own requests as (sequence, from URL, to URL, status), newest last.
        self._redirects: collections.deque[tuple[int, str, str, int]] = collections.deque(maxlen=32)
        self._redirect_seq = itertools.count(1)
        self._last_redirect = 0

    @property
    def url(self) -> str:
        """The URL as last reported by target events (may lag a navigation in progress)."""
        target = self._conn.target
        return str(getattr(target, "url", "") or "")

    def _on_response(self, event: Any, _conn: Any = None) -> None:
        if getattr(event.type_, "value", event.type_) == "Document":
            self._documents[str(event.loader_id)] = (int(event.response.status), str(event.response.url))
            self._document_seen.set()

    def _on_request(self, event: Any, _conn: Any = None) -> None:
        redirect = event.redirect_response
        if redirect is not None and getattr(event.type_, "value", event.type_) != "Document":
            self._last_redirect = next(self._redirect_seq)
            self._redirects.append((self._last_redirect, str(redirect.url), str(event.request.url), int(redirect.status)))

    def _cross_origin_redirect(self, url: str, since: int) -> tuple[str, int] | None:
        """Where a request for ``url`` made after ``since`` was redirected to another origin, if it was.

        A cross-origin redirect is what makes an in-page fetch fail with a bare network error (CORS),
        e.g. a grid POST answered with a redirect to the login host.
        """
        hops = {source: (to, status) for seq, source, to, status in self._redirects if seq > since}
        current, seen, final = url, {url}, None
        while current in hops:
            current, status = hops[current]
            if current in seen:
                break
            seen.add(current)
            final = (current, status)
        if final is None or _origin(final[0]) == _origin(url):
            return None
        return final

    async def _document(self, loader_id: str, timeout: float) -> tuple[int, str] | None:
        deadline = time.monotonic() + timeout
        while loader_id not in self._documents:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            self._document_seen.clear()
            try:
                await asyncio.wait_for(self._document_seen.wait(), remaining)
            except TimeoutError:
                return None
        return self._documents.pop(loader_id)

    def __repr__(self) -> str:
        return f"<Tab {self.target_id[:8]} gen={self.generation} {self.url!r}>"


# CDP's answer when the page was replaced while a command ran in it (a redirect, a script's navigation).
_NAVIGATED = "Inspected target navigated or closed"


class PageScriptError(CnkiError):
    """A script evaluated in a page threw; ``description`` is the JavaScript error text."""

    def __init__(self, description: str) -> None:
        super().__init__(
            "OPERATION_FAILED",
            f"页面脚本执行出错：{description[:300]}",
            details={"script_error": description[:2000]},
        )
        self.description = description


# --------------------------------------------------------------------------------------------
# Launch helpers (synchronous; run in a thread when they scan or kill processes)


def env_headless() -> bool:
    """CNKI_HEADLESS=1 (or true/yes/on) runs the browser without windows."""
    return os.environ.get("CNKI_HEADLESS", "").strip().lower() in _TRUE


def env_browser_args() -> list[str]:
    """CNKI_BROWSER_ARGS, split like a POSIX shell (quotes group, backslashes escape)."""
    raw = os.environ.get("CNKI_BROWSER_ARGS", "").strip()
    if not raw:
        return []
    try:
        return shlex.split(raw)
    except ValueError as exc:
        raise CnkiError("INVALID_INPUT", f"CNKI_BROWSER_ARGS 无法解析：{exc}") from exc


def _is_root() -> bool:
    return hasattr(os, "getuid") and os.getuid() == 0


def launch_arguments(executable: Path, profile: Path, *, headless: bool, extra: list[str]) -> list[str]:
    """The full command line: our flags first, the caller's extra flags last so they can override."""
    args = [
        str(executable),
        f"--user-data-dir={profile}",
        "--remote-debugging-port=0",
        "--no-first-run",
        "--no-default-browser-check",
        "--no-startup-window",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-session-crashed-bubble",
        "--disable-search-engine-choice-screen",
        "--disable-dev-shm-usage",
        # Linux desktops would otherwise ask to unlock a keyring when the profile starts.
        "--password-store=basic",
        f"--accept-lang={ACCEPT_LANGUAGE}",
        f"--window-size={WINDOW_SIZE[0]},{WINDOW_SIZE[1]}",
    ]
    if headless:
        args.append("--headless=new")
    else:
        args.append("--start-minimized")
    if _is_root():
        args.append("--no-sandbox")
    return args + list(extra)


def _same_path(value: str, profile: Path) -> bool:
    try:
        return os.path.normcase(os.path.abspath(value)) == os.path.normcase(str(profile))
    except (OSError, ValueError):
        return False


def _profile_processes(profile: Path) -> list[psutil.Process]:
    """Main browser processes (not helpers) started with exactly this ``--user-data-dir``."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if any(arg.startswith("--type=") for arg in cmdline):
            continue
        for arg in cmdline:
            if arg.startswith("--user-data-dir=") and _same_path(arg.split("=", 1)[1], profile):
                found.append(proc)
                break
    return found


def _kill_tree(pid: int, create_time: float | None, timeout: float, *, group: bool) -> None:
    """Terminate a process and all its descendants, then kill what is left after ``timeout``."""
    procs: list[psutil.Process] = []
    try:
        root = psutil.Process(pid)
        if create_time is None or abs(root.create_time() - create_time) < 0.5:
            procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        pass
    for proc in procs:
        try:
            proc.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    for proc in alive:
        try:
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=1.0)
    if group and hasattr(os, "killpg"):
        # Helpers whose parent already died were re-parented; they still carry our process group.
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass


def _read_owner(profile: Path) -> dict[str, Any]:
    try:
        data = json.loads((profile / _OWNER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _is_leftover(owner: dict[str, Any], pid: int) -> bool:
    """True when the browser ``pid`` was started by a server that no longer runs it."""
    if owner.get("browser_pid") != pid:
        return False
    server = owner.get("server_pid")
    if server == os.getpid():
        with _LAUNCHED_LOCK:
            return pid not in _LAUNCHED
    if not isinstance(server, int):
        return True
    try:
        started = owner.get("server_started")
        alive = psutil.Process(server).create_time()
        return isinstance(started, (int, float)) and abs(alive - started) >= 0.5
    except psutil.Error:
        return True


def clear_stale_profile(profile: Path) -> None:
    """Make the profile launchable: end browsers a dead server left on it, drop stale locks.

    A browser on our profile whose owning server process (recorded in the owner file) is gone is a
    leftover of a crashed or killed server and is ended by PID. A browser we did not start, or one a
    live server still owns, is not touched: that is BROWSER_PROFILE_IN_USE.
    """
    markers = [profile / "DevToolsActivePort", *(profile / name for name in _LOCK_NAMES)]
    if not any(os.path.lexists(m) for m in markers):
        return
    owner = _read_owner(profile)
    for proc in _profile_processes(profile):
        if not _is_leftover(owner, proc.pid):
            raise CnkiError(
                "BROWSER_PROFILE_IN_USE",
                details={"pid": proc.pid, "profile": str(profile)},
            )
        log.warning("ending leftover browser %d on profile %s", proc.pid, profile)
        try:
            created = proc.create_time()
        except psutil.Error:
            continue
        _kill_tree(proc.pid, created, 3.0, group=False)
    for marker in markers:
        try:
            if os.path.lexists(marker):
                marker.unlink()
        except OSError:
            pass


def _loopback_without_proxy() -> None:
    """Keep the DevTools connection off any HTTP proxy configured in the environment."""
    if not any(os.environ.get(k) for k in _PROXY_VARIABLES):
        return
    for key in ("no_proxy", "NO_PROXY"):
        current = [p.strip() for p in os.environ.get(key, "").split(",") if p.strip()]
        for host in ("127.0.0.1", "localhost"):
            if host not in current:
                current.append(host)
        os.environ[key] = ",".join(current)


# --------------------------------------------------------------------------------------------
# Last-resort cleanup: kill every browser tree this process launched.

_LAUNCHED: dict[int, float] = {}
_LAUNCHED_LOCK = threading.Lock()
_HOOKS_INSTALLED = False


def _kill_launched() -> None:
    with _LAUNCHED_LOCK:
        items = list(_LAUNCHED.items())
        _LAUNCHED.clear()
    for pid, created in items:
        _kill_tree(pid, created, 2.0, group=True)


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    _kill_launched()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install_exit_hooks() -> None:
    global _HOOKS_INSTALLED
    if _HOOKS_INSTALLED:
        return
    _HOOKS_INSTALLED = True
    atexit.register(_kill_launched)
    if threading.current_thread() is not threading.main_thread():
        return
    for name in ("SIGTERM", "SIGHUP"):
        signum = getattr(signal, name, None)
        # Only where nobody else handles it: the default action would skip atexit and orphan Chrome.
        if signum is not None and signal.getsignal(signum) is signal.SIG_DFL:
            signal.signal(signum, _on_signal)


# --------------------------------------------------------------------------------------------
# One launched browser


class _Session:
    """Everything that belongs to one launch; dropped as a whole on reset or close."""

    def __init__(self, generation: int, proc: asyncio.subprocess.Process, created: float, headless: bool) -> None:
        self.generation = generation
        self.headless = headless
        self.proc = proc
        self.created = created
        self.nd: Any = None
        self.port = 0
        self.user_agent = ""
        self.tasks: list[asyncio.Task[Any]] = []
        self.output: collections.deque[str] = collections.deque(maxlen=40)
        self.tabs: dict[str, Tab] = {}
        self.pages: dict[str, Any] = {}  # target_id -> TargetInfo of live page targets
        self.popups: dict[str, list[str]] = collections.defaultdict(list)  # opener -> targets, in order
        self.claimed: set[str] = set()
        self.downloads: dict[str, DownloadEvent] = {}
        self.download_dir: Path | None = None
        self.changed = asyncio.Event()
        self.exited = False
        self.closing: set[asyncio.Task[Any]] = set()

    def notify(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    def alive(self) -> bool:
        if self.exited or self.proc.returncode is not None:
            return False
        socket = getattr(self.nd, "socket", None) if self.nd is not None else None
        return socket is not None and socket.close_code is None

    # nodriver calls handlers as f(event, connection) first; keep them trivial (see ecosystem §2.4).
    def on_target(self, event: Any, _conn: Any = None) -> None:
        info = event.target_info
        if info.type_ != "page":
            return
        tid = str(info.target_id)
        known = tid in self.pages
        self.pages[tid] = info
        tab = self.tabs.get(tid)
        if tab is not None:
            tab._conn.target = info
        if not known and info.opener_id:
            self.popups[str(info.opener_id)].append(tid)
        self.notify()

    def on_target_gone(self, event: Any, _conn: Any = None) -> None:
        tid = str(event.target_id)
        self.pages.pop(tid, None)
        if type(event).__name__ == "TargetCrashed":
            if tid in self.tabs:
                self.tabs[tid].crashed = True
        else:
            tab = self.tabs.pop(tid, None)
            if tab is not None:
                # Closed by the page itself (window.close) or a person: release its socket too.
                tab.closed = True
                task = asyncio.get_running_loop().create_task(tab._conn.aclose())
                self.closing.add(task)
                task.add_done_callback(self.closing.discard)
        self.notify()

    def on_download_begin(self, event: Any, _conn: Any = None) -> None:
        self.downloads[event.guid] = DownloadEvent(
            guid=event.guid, url=event.url, suggested_filename=event.suggested_filename
        )
        self.notify()

    def on_download_progress(self, event: Any, _conn: Any = None) -> None:
        entry = self.downloads.setdefault(event.guid, DownloadEvent(guid=event.guid))
        entry.state = str(event.state.value if hasattr(event.state, "value") else event.state)
        entry.received_bytes = int(event.received_bytes or 0)
        entry.total_bytes = int(event.total_bytes or 0)
        if entry.state == "completed":
            path = getattr(event, "file_path", None)
            if path:
                entry.path = str(path)
            elif self.download_dir is not None:
                entry.path = str(self.download_dir / event.guid)
        self.notify()


async def _drain(stream: asyncio.StreamReader, sink: collections.deque[str]) -> None:
    """Read the browser's output to the end so Chrome never blocks on a full pipe."""
    pending = b""
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        if len(pending) > 65536:
            lines.append(pending)
            pending = b""
        for raw in lines:
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                sink.append(line[:500])
                log.debug("browser: %s", line[:500])


async def _watch_exit(session: _Session) -> None:
    code = await session.proc.wait()
    session.exited = True
    session.notify()
    with _LAUNCHED_LOCK:
        _LAUNCHED.pop(session.proc.pid, None)
    log.info("browser process %d exited with code %s", session.proc.pid, code)


# --------------------------------------------------------------------------------------------
# JavaScript run in pages

_FETCH_JS = r"""
async (id, url, method, body, headers, timeoutMs, cap) => {
  const reg = (window.__cnkiFetches = window.__cnkiFetches || {});
  const ctl = new AbortController();
  reg[id] = ctl;
  let timedOut = false;
  const timer = setTimeout(() => { timedOut = true; ctl.abort(); }, timeoutMs);
  try {
    const init = {method, headers, credentials: 'include', signal: ctl.signal, redirect: 'follow'};
    if (body !== null) init.body = body;
    const r = await fetch(url, init);
    const out = {status: r.status, url: r.url, redirected: r.redirected,
                 contentType: r.headers.get('content-type') || ''};
    const parts = [];
    let size = 0;
    if (r.body) {
      const reader = r.body.getReader();
      for (;;) {
        const {done, value} = await reader.read();
        if (done) break;
        size += value.byteLength;
        if (size > cap) { ctl.abort(); out.tooLarge = true; return out; }
        parts.push(value);
      }
    }
    const all = new Uint8Array(size);
    let offset = 0;
    for (const p of parts) { all.set(p, offset); offset += p.byteLength; }
    const m = /charset\s*=\s*"?([^;"\s]+)/i.exec(out.contentType);
    let decoder;
    try { decoder = new TextDecoder(m ? m[1] : 'utf-8'); } catch (e) { decoder = new TextDecoder('utf-8'); }
    out.text = decoder.decode(all);
    return out;
  } catch (e) {
    return {error: (e && e.name ? e.name + ': ' : '') + String(e && e.message || e), timedOut};
  } finally {
    clearTimeout(timer);
    delete reg[id];
  }
}
"""

_FIND_CLICK_JS = r"""
(selector, pattern) => {
  const re = pattern ? new RegExp(pattern, 'i') : null;
  for (const el of document.querySelectorAll(selector)) {
    const text = ((el.innerText || el.value || '') + '').trim();
    if (re && !re.test(text)) continue;
    const style = getComputedStyle(el);
    if (style.display === 'none' || style.visibility === 'hidden') continue;
    const box = el.getBoundingClientRect();
    if (box.width <= 0 || box.height <= 0) continue;
    window.__cnkiClickTarget = el;
    el.scrollIntoView({block: 'center', inline: 'center', behavior: 'instant'});
    return true;
  }
  return false;
}
"""

_CLICK_STATE_JS = r"""
(() => {
  const el = window.__cnkiClickTarget;
  if (!el || !el.isConnected) return null;
  const b = el.getBoundingClientRect();
  const x = b.left + b.width / 2, y = b.top + b.height / 2;
  const hit = document.elementFromPoint(x, y);
  return {x, y, w: b.width, h: b.height,
          disabled: !!el.disabled || el.getAttribute('aria-disabled') === 'true',
          hit: !!hit && (hit === el || el.contains(hit))};
})()
"""


def _origin(url: str) -> tuple[str, str, int | None]:
    try:
        parts = urlsplit(url)
        return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port
    except ValueError:
        return "", url, None


def _js_call(function_source: str, *args: Any) -> str:
    """An expression that calls a JS function with JSON-encoded arguments (no string splicing)."""
    encoded = ", ".join(json.dumps(a, ensure_ascii=False) for a in args)
    return f"({function_source.strip()})({encoded})"


def _wrap_json(expression: str) -> str:
    # Return JSON text: nodriver/Chrome 135+ hand back RemoteObjects for objects (ecosystem §2.3).
    body = expression.strip().rstrip(";")
    return (
        "(async () => { const __v = await (\n" + body + "\n);"
        " const __s = __v === undefined ? undefined : JSON.stringify(__v);"
        " return __s === undefined ? 'null' : __s; })()"
    )


def _charset(headers: Any) -> str:
    if not headers:
        return "utf-8"
    for key, value in dict(headers).items():
        if str(key).lower() == "content-type":
            match = re.search(r"charset\s*=\s*\"?([^;\"\s]+)", str(value), re.I)
            if match:
                return match.group(1)
    return "utf-8"


def _decode(data: bytes, charset: str) -> str:
    try:
        return data.decode(charset, "replace")
    except LookupError:
        return data.decode("utf-8", "replace")


# --------------------------------------------------------------------------------------------


class Browser:
    """The dedicated browser of this process. Create once; call ``ensure()`` before use."""

    def __init__(
        self,
        profile_dir: Path,
        executable: Path | None = None,
        headless: bool | None = None,
        extra_args: list[str] | None = None,
        *,
        config: Config | None = None,
    ) -> None:
        self._profile = Path(profile_dir).expanduser().absolute()
        self._executable = Path(executable) if executable is not None else None
        self._headless = headless
        self._extra_args = list(extra_args) if extra_args is not None else None
        self._config = config
        self._session: _Session | None = None
        self._generation = 0
        self._lock = asyncio.Lock()
        self._background: set[asyncio.Task[Any]] = set()
        self.launch_seconds: float | None = None  # launch-to-attached time of the current browser

    # -- diagnostics ---------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._session is not None and self._session.alive()

    @property
    def process_id(self) -> int | None:
        return self._session.proc.pid if self._session is not None else None

    @property
    def profile_directory(self) -> Path:
        return self._profile

    @property
    def connection_generation(self) -> int:
        return self._generation

    @property
    def headless(self) -> bool:
        """The mode of the running browser, else the mode the next launch will use."""
        if self._session is not None:
            return self._session.headless
        return env_headless() if self._headless is None else self._headless

    @property
    def output_tail(self) -> list[str]:
        """The browser's last output lines, for diagnostics."""
        return list(self._session.output) if self._session is not None else []

    # -- lifecycle -----------------------------------------------------------------------------

    async def ensure(self) -> None:
        """Start the browser if none was started (or after reset); a dead one is reported, not restarted."""
        async with self._lock:
            if self._session is None:
                await self._launch()
            elif not self._session.alive():
                raise CnkiError("BROWSER_UNAVAILABLE", _DEAD_MESSAGE, details=self._dead_details())

    async def start(self) -> None:
        """Start the browser now; a dead one is cleaned up and replaced, a live one kept."""
        async with self._lock:
            if self._session is not None and self._session.alive():
                return
            await self._drop()
            await self._launch()

    async def reset(self) -> None:
        """Close and forget the browser, so the next ``ensure()`` starts a fresh one (recover)."""
        async with self._lock:
            await self._drop()

    async def close(self) -> None:
        """Close the browser gracefully, then make sure its whole process tree is gone."""
        async with self._lock:
            await self._drop()

    async def probe(self, timeout: float = PROBE_TIMEOUT) -> bool:
        """True when the browser answers ``Browser.getVersion`` within ``timeout``."""
        session = self._session
        if session is None or not session.alive():
            return False
        try:
            await self._call(session.nd, _cdp().browser.get_version(), timeout)
        except CnkiError:
            return False
        return True

    def _executable_path(self) -> Path:
        if self._executable is not None:
            path = self._executable
        else:
            from cnki_mcp import discovery

            path = Path(discovery.resolve_browser(self._config or Config()))
        if not path.is_file():
            raise CnkiError("BROWSER_NOT_FOUND", details={"path": str(path)})
        return path

    async def _launch(self) -> None:
        executable = self._executable_path()
        extra = self._extra_args if self._extra_args is not None else env_browser_args()
        headless = self.headless
        profile = self._profile
        profile.mkdir(parents=True, exist_ok=True, mode=0o700)
        await asyncio.to_thread(clear_stale_profile, profile)
        # Tabs of the previous run must not come back; cookies and logins are kept.
        sessions = profile / "Default" / "Sessions"
        if sessions.is_dir():
            await asyncio.to_thread(shutil.rmtree, sessions, True)
        _loopback_without_proxy()
        _install_exit_hooks()

        # Import nodriver (~0.5 s) while Chrome starts instead of after.
        importing = asyncio.ensure_future(asyncio.to_thread(_nodriver))
        args = launch_arguments(executable, profile, headless=headless, extra=extra)
        log.info("launching browser: %s", " ".join(shlex.quote(a) for a in args))
        started = time.monotonic()
        kwargs: dict[str, Any] = {}
        if sys.platform == "win32":
            kwargs["creationflags"] = 0x00000200  # CREATE_NEW_PROCESS_GROUP
        else:
            kwargs["start_new_session"] = True
        try:
            proc = await asyncio.create_subprocess_exec(
                *args,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                **kwargs,
            )
        except OSError as exc:
            await importing
            raise CnkiError(
                "BROWSER_UNAVAILABLE", f"无法启动浏览器：{exc}", details={"path": str(executable)}
            ) from exc
        try:
            created = psutil.Process(proc.pid).create_time()
        except psutil.Error:
            created = time.time()
        with _LAUNCHED_LOCK:
            _LAUNCHED[proc.pid] = created
        self._generation += 1
        session = _Session(self._generation, proc, created, headless)
        self._session = session
        assert proc.stdout is not None
        session.tasks.append(asyncio.create_task(_drain(proc.stdout, session.output)))
        session.tasks.append(asyncio.create_task(_watch_exit(session)))
        try:
            # Written first: if this server dies now, the next one knows the browser is a leftover.
            owner = {
                "server_pid": os.getpid(),
                "server_started": psutil.Process().create_time(),
                "browser_pid": proc.pid,
            }
            (profile / _OWNER_FILE).write_text(json.dumps(owner), encoding="utf-8")
            port = await self._wait_port(session)
            await importing
            await self._attach(session, executable, port)
        except (CnkiError, asyncio.CancelledError):
            await self._drop()
            raise
        except Exception as exc:
            details = self._dead_details(session)
            await self._drop()
            raise CnkiError("BROWSER_UNAVAILABLE", f"浏览器启动后无法连接：{exc}", details=details) from exc
        self.launch_seconds = time.monotonic() - started
        log.info(
            "browser %d attached on port %d in %.2f s (generation %d, %s)",
            proc.pid,
            port,
            self.launch_seconds,
            session.generation,
            "headless" if headless else "headed",
        )

    async def _wait_port(self, session: _Session) -> int:
        port_file = self._profile / "DevToolsActivePort"
        deadline = time.monotonic() + LAUNCH_TIMEOUT
        while time.monotonic() < deadline:
            if session.proc.returncode is not None:
                code = session.proc.returncode
                await asyncio.sleep(0.05)  # let the drain task collect the last words
                if code == _PROFILE_IN_USE_EXIT:
                    raise CnkiError("BROWSER_PROFILE_IN_USE", details=self._dead_details(session))
                raise CnkiError(
                    "BROWSER_UNAVAILABLE",
                    f"浏览器启动后立即退出（退出码 {code}）。",
                    details=self._dead_details(session),
                )
            try:
                lines = port_file.read_text(encoding="utf-8").splitlines()
                if len(lines) >= 2:  # the second line (browser websocket path) marks a complete write
                    return int(lines[0])
            except (OSError, ValueError):
                pass
            await asyncio.sleep(0.03)
        raise CnkiError(
            "BROWSER_UNAVAILABLE",
            f"浏览器在 {LAUNCH_TIMEOUT:.0f} 秒内没有打开调试端口。",
            details=self._dead_details(session),
        )

    async def _attach(self, session: _Session, executable: Path, port: int) -> None:
        nd = _nodriver()
        cdp = nd.cdp
        config = nd.Config(
            user_data_dir=str(self._profile),  # a custom dir: nodriver never deletes it
            browser_executable_path=str(executable),
            headless=self.headless,
            host="127.0.0.1",
            port=port,
        )
        session.port = port
        session.nd = await asyncio.wait_for(nd.Browser.create(config=config), ATTACH_TIMEOUT)
        nd.core.util.get_registered_instances().discard(session.nd)
        conn = session.nd
        conn.add_handler(cdp.target.TargetCreated, session.on_target)
        conn.add_handler(cdp.target.TargetInfoChanged, session.on_target)
        conn.add_handler(cdp.target.TargetDestroyed, session.on_target_gone)
        conn.add_handler(cdp.target.TargetCrashed, session.on_target_gone)
        conn.add_handler(cdp.browser.DownloadWillBegin, session.on_download_begin)
        conn.add_handler(cdp.browser.DownloadProgress, session.on_download_progress)
        await self._call(conn, cdp.target.set_discover_targets(discover=True), CALL_TIMEOUT, session=session)
        if self.headless:
            version = await self._call(conn, cdp.browser.get_version(), CALL_TIMEOUT, session=session)
            # (protocol, product, revision, user_agent, js_version)
            session.user_agent = str(version[3]).replace("HeadlessChrome", "Chrome")

    async def _drop(self) -> None:
        session = self._session
        self._session = None
        if session is None:
            return
        try:
            await self._shutdown(session)
        except asyncio.CancelledError:
            # Cancelled mid-shutdown (e.g. an unshielded server teardown): still end the tree, blocking.
            _kill_tree(session.proc.pid, session.created, 1.0, group=sys.platform != "win32")
            with _LAUNCHED_LOCK:
                _LAUNCHED.pop(session.proc.pid, None)
            raise

    async def _shutdown(self, session: _Session) -> None:
        closing = False
        if session.alive():
            try:
                await asyncio.wait_for(session.nd.send(_cdp().browser.close()), CLOSE_TIMEOUT)
                closing = True
            except TimeoutError:
                log.warning("browser %d did not answer Browser.close", session.proc.pid)
            except Exception as exc:  # the socket often drops as Chrome shuts down
                closing = True
                log.debug("Browser.close: %s", exc)
        if closing and session.proc.returncode is None:
            try:
                await asyncio.wait_for(session.proc.wait(), EXIT_WAIT)
            except TimeoutError:
                log.warning("browser %d did not exit after Browser.close; killing it", session.proc.pid)
        await asyncio.to_thread(_kill_tree, session.proc.pid, session.created, 3.0, group=sys.platform != "win32")
        with _LAUNCHED_LOCK:
            _LAUNCHED.pop(session.proc.pid, None)
        for conn in [*(t._conn for t in session.tabs.values()), session.nd]:
            if conn is None:
                continue
            try:
                await asyncio.wait_for(conn.aclose(), 2.0)
            except Exception as exc:
                log.debug("closing a DevTools socket failed: %s", exc)
        for task in [*session.tasks, *session.closing]:
            if not task.done():
                try:
                    await asyncio.wait_for(asyncio.shield(task), 1.0)
                except (TimeoutError, Exception):
                    task.cancel()
        owner = self._profile / _OWNER_FILE
        if _read_owner(self._profile).get("browser_pid") == session.proc.pid:
            try:
                owner.unlink()
            except OSError:
                pass

    def _dead_details(self, session: _Session | None = None) -> dict[str, Any]:
        session = session or self._session
        if session is None:
            return {}
        return {
            "pid": session.proc.pid,
            "exit_code": session.proc.returncode,
            "generation": session.generation,
            "output": list(session.output)[-10:],
        }

    # -- the one door to CDP ------------------------------------------------------------------

    def _live(self, tab: Tab | None = None) -> _Session:
        session = self._session
        if session is None:
            raise CnkiError("BROWSER_UNAVAILABLE", "浏览器尚未启动或已被重置。")
        if not session.alive():
            raise CnkiError("BROWSER_UNAVAILABLE", _DEAD_MESSAGE, details=self._dead_details(session))
        if tab is not None:
            if tab.generation != session.generation:
                raise CnkiError("BROWSER_UNAVAILABLE", "这个标签页属于已经关闭的浏览器。")
            if tab.crashed:
                raise CnkiError("BROWSER_UNAVAILABLE", "标签页已崩溃（这不代表没有访问权限）。")
            if tab.closed:
                raise CnkiError("BROWSER_UNAVAILABLE", "标签页已经关闭。", details={"target": tab.target_id})
        return session

    async def _call(self, conn: Any, command: Any, timeout: float, *, session: _Session | None = None) -> Any:
        """Send one CDP command with a timeout; transport failures become BROWSER_UNAVAILABLE."""
        if session is None:
            self._live()
        return await self._guard(conn.send(command), timeout)

    async def _guard(self, awaitable: Any, timeout: float) -> Any:
        try:
            return await asyncio.wait_for(awaitable, timeout)
        except CnkiError:
            raise
        except TimeoutError as exc:
            if self._session is not None and not self._session.alive():
                raise CnkiError("BROWSER_UNAVAILABLE", _DEAD_MESSAGE, details=self._dead_details()) from exc
            raise as_cnki_error(exc) from exc
        except Exception as exc:
            if self._session is not None and not self._session.alive():
                raise CnkiError("BROWSER_UNAVAILABLE", _DEAD_MESSAGE, details=self._dead_details()) from exc
            if _NAVIGATED in str(exc):
                raise CnkiError("PAGE_NAVIGATED", details={"cause": str(exc)}) from exc
            raise as_cnki_error(exc) from exc

    async def _tab_call(self, tab: Tab, command: Any, timeout: float) -> Any:
        self._live(tab)
        return await self._call(tab._conn, command, timeout)

    async def _wait_changed(self, session: _Session, timeout: float) -> None:
        if timeout <= 0:
            return
        try:
            await asyncio.wait_for(session.changed.wait(), timeout)
        except TimeoutError:
            pass

    # -- tabs ----------------------------------------------------------------------------------

    async def _adopt(self, session: _Session, info: Any, opener_id: str | None) -> Tab:
        nd = _nodriver()
        cdp = nd.cdp
        conn = nd.core.tab.Tab(target=info, parent=session.nd)
        tab = Tab(conn, session.generation, opener_id)
        try:
            await self._guard(conn.attach(), CALL_TIMEOUT)
            conn.add_handler(cdp.network.ResponseReceived, tab._on_response)
            conn.add_handler(cdp.network.RequestWillBeSent, tab._on_request)
            await self._call(conn, cdp.network.enable(), CALL_TIMEOUT)
            # Background tabs are hidden: without this, mouse input waits ~5 s for a frame that never comes.
            await self._call(conn, cdp.emulation.set_focus_emulation_enabled(enabled=True), CALL_TIMEOUT)
            if session.user_agent:
                await self._call(
                    conn,
                    cdp.network.set_user_agent_override(user_agent=session.user_agent, accept_language=ACCEPT_LANGUAGE),
                    CALL_TIMEOUT,
                )
        except BaseException:
            try:
                await asyncio.wait_for(conn.aclose(), PAGE_CLOSE_TIMEOUT)
            except Exception as exc:
                log.debug("closing a half-attached tab socket failed: %s", exc)
            raise
        session.tabs[tab.target_id] = tab
        return tab

    async def new_tab(self, url: str | None = None, *, timeout: float = NAVIGATION_TIMEOUT) -> Tab:
        """Open a background tab (a minimised window when headed and none exists), optionally navigate."""
        await self.ensure()
        session = self._live()
        cdp = _cdp()
        kwargs: dict[str, Any] = {"background": True}
        if not self.headless and not session.pages:
            kwargs.update(
                new_window=True,
                window_state=cdp.target.WindowState.MINIMIZED,
                width=WINDOW_SIZE[0],
                height=WINDOW_SIZE[1],
            )
        target_id = await self._call(session.nd, cdp.target.create_target(url="about:blank", **kwargs), CALL_TIMEOUT)
        info = await self._call(session.nd, cdp.target.get_target_info(target_id), CALL_TIMEOUT)
        session.pages[str(target_id)] = info
        session.claimed.add(str(target_id))
        tab = await self._adopt(session, info, None)
        if url:
            await self.navigate(tab, url, timeout=timeout)
        return tab

    async def close_tab(self, tab: Tab, *, with_popups: bool = True) -> None:
        """Close a tab (and the tabs it opened); closing an already closed tab is fine."""
        session = self._session
        if session is None or tab.generation != session.generation or not session.alive():
            return
        cdp = _cdp()
        ids = [tab.target_id]
        if with_popups:
            ids += [p for p in session.popups.get(tab.target_id, []) if p in session.pages]
        for tid in ids:
            if tid in session.pages:
                try:
                    await self._call(session.nd, cdp.target.close_target(target_id=tid), PAGE_CLOSE_TIMEOUT)
                except CnkiError as exc:
                    log.debug("closing tab %s failed: %s", tid, exc)
            session.pages.pop(tid, None)
            closed = session.tabs.pop(tid, None)
            if closed is not None:
                closed.closed = True
                try:
                    await asyncio.wait_for(closed._conn.aclose(), PAGE_CLOSE_TIMEOUT)
                except Exception as exc:
                    log.debug("closing the socket of tab %s failed: %s", tid, exc)
        session.popups.pop(tab.target_id, None)

    async def wait_new_tab(self, opener: Tab, timeout: float) -> Tab | None:
        """The next tab opened by ``opener`` (e.g. by a click) not returned before; None on timeout."""
        session = self._live(opener)
        deadline = time.monotonic() + timeout
        while True:
            session = self._live(opener)
            for tid in session.popups.get(opener.target_id, []):
                if tid in session.claimed or tid not in session.pages:
                    continue
                session.claimed.add(tid)
                return session.tabs.get(tid) or await self._adopt(session, session.pages[tid], opener.target_id)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            await self._wait_changed(session, remaining)

    async def page_tabs(self) -> list[Tab]:
        """Every page of this browser, ours or opened by a person (attached on first sight), oldest first."""
        session = self._live()
        result = []
        for tid, info in list(session.pages.items()):
            tab = session.tabs.get(tid)
            if tab is None:
                opener = str(info.opener_id) if info.opener_id else None
                try:
                    tab = await self._adopt(session, info, opener)
                except CnkiError as exc:
                    if not session.alive():
                        raise
                    log.debug("could not attach to tab %s (closed meanwhile?): %s", tid, exc)
                    continue
            result.append(tab)
        return result

    async def popups(self, opener: Tab) -> list[Tab]:
        """All live tabs opened by ``opener``, oldest first."""
        session = self._live(opener)
        result = []
        for tid in list(session.popups.get(opener.target_id, [])):
            info = session.pages.get(tid)
            if info is None:
                continue
            session.claimed.add(tid)
            result.append(session.tabs.get(tid) or await self._adopt(session, info, opener.target_id))
        return result

    # -- page work -----------------------------------------------------------------------------

    async def evaluate(self, tab: Tab, expression: str, timeout: float = CALL_TIMEOUT) -> Any:
        """Evaluate a JS expression in the page, await it, return its JSON value (None for undefined)."""
        cdp = _cdp()
        remote, exc = await self._tab_call(
            tab,
            cdp.runtime.evaluate(
                expression=_wrap_json(expression), await_promise=True, return_by_value=True, user_gesture=True
            ),
            timeout,
        )
        if exc is not None:
            detail = exc.exception.description if exc.exception is not None and exc.exception.description else exc.text
            raise PageScriptError(str(detail))
        value = remote.value
        return None if value is None else json.loads(value)

    async def page_html(self, tab: Tab, timeout: float = CALL_TIMEOUT) -> str:
        html = await self.evaluate(
            tab, "document.documentElement ? document.documentElement.outerHTML : ''", timeout
        )
        return str(html or "")

    async def screenshot(self, tab: Tab, timeout: float = CALL_TIMEOUT) -> bytes:
        """A PNG of the visible part of the page, for diagnostics.

        Headless Chrome paints only the front tab of a window that is not minimised (a human step
        minimises it afterwards): a capture of anything else waits for a frame that never comes.
        So headless, the window is restored and the tab brought to the front first (no one sees
        it). A headed window is left as it is: a person may be using it.
        """
        cdp = _cdp()
        if self.headless:
            await self._set_window_state(tab, "normal")
            await self._tab_call(tab, cdp.page.bring_to_front(), timeout)
        data = await self._tab_call(tab, cdp.page.capture_screenshot(format_="png"), timeout)
        return base64.b64decode(data)

    async def wait_for(self, tab: Tab, js_predicate: str, timeout: float, *, interval: float = 0.12) -> Any:
        """Poll a JS expression until it is truthy and return its value; CONTENT_NOT_READY on timeout.

        Script errors while polling (the document being replaced, the page's objects not there yet)
        count as "not yet"; transport failures end the wait at once.
        """
        deadline = time.monotonic() + timeout
        last_error = ""
        while True:
            try:
                value = await self.evaluate(tab, js_predicate, max(1.0, min(CALL_TIMEOUT, timeout)))
                if value:
                    return value
            except CnkiError as exc:
                if exc.code == "BROWSER_UNAVAILABLE":
                    raise
                last_error = exc.message
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CnkiError(
                    "CONTENT_NOT_READY",
                    "页面未呈现预期内容，不能判定正文不存在或无权限。",
                    details={"last_error": last_error} if last_error else None,
                )
            await asyncio.sleep(min(interval, remaining))

    async def navigate(
        self, tab: Tab, url: str, timeout: float = NAVIGATION_TIMEOUT, *, until: str = "ready"
    ) -> NavigationResult:
        """Navigate and wait: ``commit`` (response arrived), ``ready`` (DOM parsed) or ``complete`` (loaded).

        The status is the main document's HTTP status (0 for about:, data: and same-document moves).
        A navigation Chrome could not complete without any response raises RESOURCE_FAILED.
        """
        if until not in ("commit", "ready", "complete"):
            raise ValueError(f"unknown navigation wait {until!r}")
        cdp = _cdp()
        deadline = time.monotonic() + timeout
        tab._documents.clear()
        _frame, loader_id, error_text, *_ = await self._tab_call(tab, cdp.page.navigate(url=url), timeout)
        document = None
        if loader_id:
            document = await tab._document(str(loader_id), min(2.0, max(0.0, deadline - time.monotonic())))
        if error_text and document is None:
            raise CnkiError(
                "RESOURCE_FAILED",
                f"页面打开失败：{error_text}",
                details={"url": url, "net_error": str(error_text)},
            )
        if until != "commit":
            state = "=== 'complete'" if until == "complete" else "!== 'loading'"
            condition = f"document.readyState {state}"
            await self.wait_for(tab, condition, max(0.0, deadline - time.monotonic()), interval=0.05)
        final = await self.evaluate(tab, "location.href", max(1.0, deadline - time.monotonic()))
        status = document[0] if document is not None else 0
        return NavigationResult(status=status, url=str(final or url), error=str(error_text or ""))

    async def fetch_in_page(
        self,
        tab: Tab,
        url: str,
        *,
        method: str = "GET",
        body: str | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = FETCH_TIMEOUT,
    ) -> FetchResult:
        """Run fetch() inside the page: the page's origin, cookies and Referer go along.

        The body is capped at 8 MiB (RESPONSE_TOO_LARGE); a network failure or the in-page timeout
        is RESOURCE_FAILED. A redirect to another origin (which the page's CORS rules refuse to
        follow, e.g. to the login host) is returned as that redirect: its status, the target URL as
        ``url``, an empty body, ``redirected`` set. If the caller is cancelled, the in-page request
        is aborted too.
        """
        call_id = f"{tab.generation}-{next(tab._fetch_ids)}"
        since = tab._last_redirect
        expression = _js_call(
            _FETCH_JS, call_id, url, method.upper(), body, headers or {}, int(timeout * 1000), RESPONSE_CAP
        )
        try:
            out = await self.evaluate(tab, expression, timeout + 5.0)
        except asyncio.CancelledError:
            abort = _js_call("(id) => { const c = (window.__cnkiFetches || {})[id]; if (c) c.abort(); }", call_id)
            task = asyncio.get_running_loop().create_task(self._quiet_evaluate(tab, abort))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
            raise
        if not isinstance(out, dict):
            raise CnkiError("RESOURCE_FAILED", "页面内请求没有返回结果。", details={"url": url})
        if "error" in out:
            moved = None if out.get("timedOut") else tab._cross_origin_redirect(url, since)
            if moved is not None:
                return FetchResult(status=moved[1], url=moved[0], text="", redirected=True)
            if out.get("timedOut"):
                message = f"页面内请求超时（{timeout:.0f} 秒）。"
            else:
                message = f"页面内请求失败：{out['error']}"
            raise CnkiError("RESOURCE_FAILED", message, details={"url": url, "error": out["error"]})
        if out.get("tooLarge"):
            raise CnkiError("RESPONSE_TOO_LARGE", details={"url": out.get("url") or url})
        return FetchResult(
            status=int(out.get("status") or 0),
            url=str(out.get("url") or url),
            text=str(out.get("text") or ""),
            redirected=bool(out.get("redirected")),
        )

    async def _quiet_evaluate(self, tab: Tab, expression: str) -> None:
        try:
            await self.evaluate(tab, expression, 2.0)
        except CnkiError as exc:
            log.debug("in-page abort failed: %s", exc)

    async def load_resource(self, tab: Tab, url: str, *, timeout: float = FETCH_TIMEOUT) -> FetchResult:
        """Load a URL through Chrome's network stack for the tab's frame, without rendering it.

        Cookies go along (``includeCredentials``) and it works cross-origin. Redirects are not
        visible: the URL reported is the one requested. No response at all is RESOURCE_FAILED.
        """
        cdp = _cdp()
        deadline = time.monotonic() + timeout
        options = cdp.network.LoadNetworkResourceOptions(disable_cache=False, include_credentials=True)
        result = await self._tab_call(
            tab,
            cdp.network.load_network_resource(url=url, options=options, frame_id=cdp.page.FrameId(tab.target_id)),
            timeout,
        )
        status = int(result.http_status_code or 0)
        if result.stream is None:
            if status:
                return FetchResult(status=status, url=url, text="")
            raise CnkiError(
                "RESOURCE_FAILED",
                f"浏览器没能取回页面：{result.net_error_name or '未知网络错误'}",
                details={"url": url, "net_error": result.net_error_name},
            )
        chunks: list[bytes] = []
        size = 0
        try:
            while True:
                remaining = max(1.0, deadline - time.monotonic())
                read = cdp.io.read(handle=result.stream, size=RESOURCE_CHUNK)
                b64, data, eof = await self._tab_call(tab, read, remaining)
                piece = base64.b64decode(data) if b64 else data.encode("utf-8")
                size += len(piece)
                if size > RESPONSE_CAP:
                    raise CnkiError("RESPONSE_TOO_LARGE", details={"url": url})
                chunks.append(piece)
                if eof:
                    break
        finally:
            try:
                await self._tab_call(tab, cdp.io.close(handle=result.stream), PAGE_CLOSE_TIMEOUT)
            except CnkiError as exc:
                log.debug("IO.close failed: %s", exc)
        return FetchResult(status=status, url=url, text=_decode(b"".join(chunks), _charset(result.headers)))

    async def click(self, tab: Tab, selector: str, timeout: float = 5.0, *, text: str | None = None) -> bool:
        """Click the first visible element matching ``selector`` (and the ``text`` regex) like a person.

        Waits up to ``timeout`` for a candidate (False if none appears), scrolls it to the centre,
        waits until its box is stable, enabled and not covered (else CONTROL_NOT_ACTIONABLE), then
        dispatches real mouse events at its centre.
        """
        cdp = _cdp()
        deadline = time.monotonic() + timeout
        while not await self.evaluate(tab, _js_call(_FIND_CLICK_JS, selector, text or ""), CALL_TIMEOUT):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            await asyncio.sleep(min(0.1, remaining))
        previous: dict[str, Any] | None = None
        for _ in range(CLICK_ATTEMPTS):
            state = await self.evaluate(tab, _CLICK_STATE_JS, CALL_TIMEOUT)
            if isinstance(state, dict):
                steady = previous is not None and all(abs(state[k] - previous[k]) <= 1 for k in ("x", "y", "w", "h"))
                if steady and state["hit"] and not state["disabled"]:
                    x, y = float(state["x"]), float(state["y"])
                    left = cdp.input_.MouseButton.LEFT
                    await self._tab_call(tab, cdp.input_.dispatch_mouse_event("mouseMoved", x, y), CALL_TIMEOUT)
                    for kind in ("mousePressed", "mouseReleased"):
                        event = cdp.input_.dispatch_mouse_event(kind, x, y, button=left, click_count=1)
                        await self._tab_call(tab, event, CALL_TIMEOUT)
                    return True
                previous = state
            await asyncio.sleep(CLICK_INTERVAL)
        raise CnkiError(
            "CONTROL_NOT_ACTIONABLE", details={"selector": selector, "text": text, "last_state": previous}
        )

    # -- windows -------------------------------------------------------------------------------

    async def _set_window_state(self, tab: Tab, state: str) -> bool:
        """Set the tab's window state and confirm it (2 s); True when Chrome reports the new state."""
        cdp = _cdp()
        session = self._live(tab)
        window_id, bounds = await self._call(
            session.nd, cdp.browser.get_window_for_target(cdp.target.TargetID(tab.target_id)), CALL_TIMEOUT
        )
        wanted = cdp.browser.WindowState(state)
        current = bounds.window_state
        # Chrome only changes to minimized/maximized/fullscreen from normal.
        normal = cdp.browser.WindowState.NORMAL
        if current not in (None, normal, wanted):
            bounds = cdp.browser.Bounds(window_state=normal)
            await self._call(session.nd, cdp.browser.set_window_bounds(window_id, bounds), CALL_TIMEOUT)
        if current != wanted:
            bounds = cdp.browser.Bounds(window_state=wanted)
            await self._call(session.nd, cdp.browser.set_window_bounds(window_id, bounds), CALL_TIMEOUT)
        deadline = time.monotonic() + WINDOW_CONFIRM_TIMEOUT
        confirmed = False
        while True:
            now = await self._call(session.nd, cdp.browser.get_window_bounds(window_id), CALL_TIMEOUT)
            if now.window_state == wanted:
                confirmed = True
                break
            if time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.03)
        # A minimised page should keep behaving as if focused (timers, focus checks).
        await self._tab_call(
            tab, cdp.emulation.set_focus_emulation_enabled(enabled=state == "minimized"), CALL_TIMEOUT
        )
        return confirmed

    async def bring_to_front(self, tab: Tab) -> bool:
        """Show the tab to a person: window to normal, tab activated.

        Returns True when a person can now see it, False when headless (there is no window to
        show). WINDOW_STATE_UNCONFIRMED when a headed window did not come back to normal.
        """
        cdp = _cdp()
        confirmed = await self._set_window_state(tab, "normal")
        activate = cdp.target.activate_target(cdp.target.TargetID(tab.target_id))
        await self._call(self._live(tab).nd, activate, CALL_TIMEOUT)
        await self._tab_call(tab, cdp.page.bring_to_front(), CALL_TIMEOUT)
        if self.headless:
            return False
        if not confirmed:
            raise CnkiError("WINDOW_STATE_UNCONFIRMED", details={"target": tab.target_id, "state": "normal"})
        return True

    async def minimize(self, tab: Tab) -> bool:
        """Minimise the tab's window again; False (logged, not raised) when Chrome did not confirm it."""
        confirmed = await self._set_window_state(tab, "minimized")
        if not confirmed:
            log.info("window of tab %s did not report minimized", tab.target_id)
        return confirmed

    # -- downloads -----------------------------------------------------------------------------

    async def set_download_dir(self, path: Path) -> None:
        """Save downloads into ``path`` under their GUID and report them; forgets earlier downloads."""
        cdp = _cdp()
        await self.ensure()
        session = self._live()
        path = Path(path).absolute()
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        await self._call(
            session.nd,
            cdp.browser.set_download_behavior(behavior="allowAndName", download_path=str(path), events_enabled=True),
            CALL_TIMEOUT,
        )
        session.downloads.clear()
        session.download_dir = path

    async def wait_download(self, guid: str | None = None, timeout: float = 1.0) -> DownloadEvent | None:
        """Wait up to ``timeout`` for a download to finish (completed or canceled).

        ``guid`` None means the first download begun since ``set_download_dir``. On timeout the
        latest state is returned (begun/inProgress), or None when nothing has begun yet — so a
        caller can poll every second and look at the tabs in between.
        """
        deadline = time.monotonic() + timeout
        while True:
            session = self._live()
            if guid is not None:
                entry = session.downloads.get(guid)
            else:
                entry = next(iter(session.downloads.values()), None)
            if entry is not None and entry.state in ("completed", "canceled"):
                return msgspec.structs.replace(entry)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return msgspec.structs.replace(entry) if entry is not None else None
            await self._wait_changed(session, remaining)
