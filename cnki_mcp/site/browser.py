"""The dedicated browser: the Chrome we launched (``chrome.py``), driven over the DevTools protocol.

``Browser`` speaks CDP to the Chrome process over its pipe (``pipe.py``) or, for a Flatpak launcher or a Windows
browser that refused the pipe, attaches nodriver to its watched loopback port; it is the one door to CDP: every command goes
through ``_call`` with a timeout, and any transport failure, timeout, crash or closed browser
surfaces as ``CnkiError("BROWSER_UNAVAILABLE")``. Its tabs, popups and downloads are tracked from
target and browser events; what it does inside a page and its window is ``page_actions.PageActions``.

One ``Browser`` per process, created lazily: nothing launches until ``ensure()`` is awaited.
A dead browser stays dead until ``reset()`` (``operation_control recover``); the next ``ensure()``
then starts a fresh one and ``connection_generation`` goes up, so callers can drop per-browser state.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from pathlib import Path
from typing import Any

import msgspec

from cnki_mcp.core.clock import Deadline, within
from cnki_mcp.core.errors import CnkiError, as_cnki_error
from cnki_mcp.core.model import Config
from cnki_mcp.site.cdp import NAVIGATED, DownloadEvent, Tab, cdp, nodriver
from cnki_mcp.site.chrome import (
    ACCEPT_LANGUAGE,
    WINDOW_SIZE,
    ChromeProcess,
    devtools_pipe,
    devtools_strangers,
    env_browser_args,
    env_headless,
    relaunch_on_port,
)
from cnki_mcp.site.page_actions import CALL_TIMEOUT, NAVIGATION_TIMEOUT, PAGE_CLOSE_TIMEOUT, PageActions
from cnki_mcp.site.pipe import PipeChannel, PipeConnection
from cnki_mcp.site.remote import Routing
from cnki_mcp.site.route import DIRECT

log = logging.getLogger(__name__)

ATTACH_TIMEOUT = 10.0
PROBE_TIMEOUT = 2.0
CLOSE_TIMEOUT = 3.0  # graceful Browser.close before the process tree is killed
WATCH_SECONDS = 1.0  # how often the DevTools port (Windows) is looked at for other processes

_DEAD_MESSAGE = (
    "浏览器已退出或连接已断开（这不代表没有访问权限）。请调用 operation_control 的 recover，然后重试或 continue。"
)


# --------------------------------------------------------------------------------------------
# One attached browser


class _Session:
    """Everything that belongs to one launch; dropped as a whole on reset or close."""

    def __init__(self, generation: int, chrome: ChromeProcess, headless: bool) -> None:
        self.generation = generation
        self.headless = headless
        self.chrome = chrome
        self.nd: Any = None  # the browser target's connection: a PipeConnection, or nodriver's Browser
        self.port = 0  # the DevTools port; 0 over the pipe
        self.user_agent = ""
        self.tabs: dict[str, Tab] = {}
        self.pages: dict[str, Any] = {}  # target_id -> TargetInfo of live page targets
        self.popups: dict[str, list[str]] = collections.defaultdict(list)  # opener -> targets, in order
        self.claimed: set[str] = set()
        self.downloads: dict[str, DownloadEvent] = {}
        self.download_dir: Path | None = None
        self.changed = asyncio.Event()
        self.closing: set[asyncio.Task[Any]] = set()
        self.strangers: list[int | None] = []  # other processes found on the DevTools port: the browser was ended
        self.watch: asyncio.Task[None] | None = None
        self.version: tuple[str, ...] = ()  # Browser.getVersion's answer at attach

    def notify(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    def alive(self) -> bool:
        if not self.chrome.running:
            return False
        socket = getattr(self.nd, "socket", None) if self.nd is not None else None
        return socket is not None and socket.close_code is None

    async def watch_port(self) -> None:
        """Every ``WATCH_SECONDS``: another process on the DevTools port ends the browser at once (the port
        takes no token; see ``chrome.devtools_strangers``); the next call is told why."""
        while self.chrome.running:
            await asyncio.sleep(WATCH_SECONDS)
            strangers = await asyncio.to_thread(devtools_strangers, self.port)
            if strangers:
                log.error("another process (pid %s) connected to the browser's DevTools port: browser ended", strangers)
                self.strangers = strangers
                self.chrome.kill_now()
                return

    async def attach_pipe(self, importing: asyncio.Future[Any]) -> None:
        """Speak CDP over the pipe Chrome was started with; the channel owns its descriptors from here on."""
        assert self.chrome.pipe is not None
        self.nd = PipeChannel(*self.chrome.pipe).browser
        self.chrome.pipe = None
        await importing

        async def version() -> Any:
            await self.nd.channel.open()
            return await self.nd.send(cdp().browser.get_version())

        self.version = await self.chrome.first_answer(version(), generation=self.generation)

    async def attach_port(self, profile: Path, executable: Path, port: int) -> None:
        """Attach nodriver to the loopback DevTools ``port`` (a Flatpak launcher, a browser that refused the pipe)."""
        nd = nodriver()
        config = nd.Config(
            user_data_dir=str(profile),  # a custom dir: nodriver never deletes it
            browser_executable_path=str(executable),
            headless=self.headless,
            host="127.0.0.1",
            port=port,
        )
        self.port = port
        self.nd = await within(nd.Browser.create(config=config), ATTACH_TIMEOUT)
        nd.core.util.get_registered_instances().discard(self.nd)

    async def wait_changed(self, timeout: float) -> None:
        """Until a target or download event, or ``timeout`` seconds."""
        if timeout <= 0:
            return
        try:
            await within(self.changed.wait(), timeout)
        except TimeoutError:
            pass

    def follow(self) -> None:
        """Route the browser connection's target and download events to this session."""
        protocol = cdp()
        for event, handler in (
            (protocol.target.TargetCreated, self.on_target),
            (protocol.target.TargetInfoChanged, self.on_target),
            (protocol.target.TargetDestroyed, self.on_target_gone),
            (protocol.target.TargetCrashed, self.on_target_gone),
            (protocol.browser.DownloadWillBegin, self.on_download_begin),
            (protocol.browser.DownloadProgress, self.on_download_progress),
        ):
            self.nd.add_handler(event, handler)

    # Event handlers are called as f(event, connection) on the connection's reader: keep them trivial.
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


class Browser(PageActions):
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
        self._pipe_refused: set[Path] = set()  # executables that exited when handed the pipe: the port for them
        self._lock = asyncio.Lock()
        self._background: set[asyncio.Task[Any]] = set()
        self.launch_seconds: float | None = None  # launch-to-attached time of the current browser
        self.routing = Routing(config.route, config.site) if config is not None else Routing(DIRECT)
    # -- diagnostics ---------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._session is not None and self._session.alive()

    @property
    def process_id(self) -> int | None:
        return self._session.chrome.pid if self._session is not None else None

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
        return list(self._session.chrome.output) if self._session is not None else []

    # -- lifecycle -----------------------------------------------------------------------------

    async def ensure(self) -> None:
        """Start the browser if none was started (or after reset); a dead one is reported, not restarted."""
        async with self._lock:
            if self._session is None:
                await self._launch()
            elif self._session.strangers:
                raise CnkiError("BROWSER_DEVTOOLS_INTRUDED", details={"pids": self._session.strangers})
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
            await self._call(session.nd, cdp().browser.get_version(), timeout)
        except CnkiError:
            return False
        return True

    async def version(self, timeout: float = PROBE_TIMEOUT) -> str:
        """The product the running browser reports (``Chrome/131.0.6778.85``); "" when none runs or it is silent."""
        session = self._session
        if session is None or not session.alive():
            return ""
        try:
            answer = await self._call(session.nd, cdp().browser.get_version(), timeout)
        except CnkiError:
            return ""
        return str(answer[1]).replace("HeadlessChrome", "Chrome")

    def _executable_path(self) -> Path:
        if self._executable is not None:
            path = self._executable
        else:
            from cnki_mcp.site import discovery

            path = Path(discovery.resolve_browser(self._config or Config()))
        if not path.is_file():
            raise CnkiError("BROWSER_NOT_FOUND", details={"path": str(path)})
        return path

    async def _launch(self) -> None:
        executable = self._executable_path()
        pipe = devtools_pipe(executable) and executable not in self._pipe_refused
        try:
            await self._launch_with(executable, pipe)
        except CnkiError as exc:
            if not (pipe and relaunch_on_port(exc, executable)):
                raise
            self._pipe_refused.add(executable)
            await self._launch_with(executable, False)

    async def _launch_with(self, executable: Path, pipe: bool) -> None:
        extra = self._extra_args if self._extra_args is not None else env_browser_args()
        headless = self.headless
        # Import nodriver (~0.5 s) while Chrome starts instead of after.
        importing = asyncio.ensure_future(asyncio.to_thread(nodriver))
        started = time.monotonic()
        try:
            chrome = await ChromeProcess.launch(executable, self._profile, headless=headless, extra=extra, pipe=pipe)
        except BaseException:
            await asyncio.gather(importing, return_exceptions=True)
            raise
        self._generation += 1
        session = _Session(self._generation, chrome, headless)
        chrome.on_exit = session.notify
        self._session = session
        try:
            if chrome.pipe is not None:
                await session.attach_pipe(importing)
            else:
                port = await chrome.devtools_port(generation=session.generation)
                await importing
                await session.attach_port(self._profile, executable, port)
                session.version = await self._call(session.nd, cdp().browser.get_version(), CALL_TIMEOUT, session=session)
            await self._listen(session)
        except (CnkiError, asyncio.CancelledError):
            await self._drop()
            raise
        except Exception as exc:
            details = self._dead_details(session)
            await self._drop()
            raise CnkiError("BROWSER_UNAVAILABLE", f"浏览器启动后无法连接：{exc}", details=details) from exc
        self.launch_seconds = time.monotonic() - started
        if not pipe:
            session.watch = asyncio.create_task(session.watch_port(), name="devtools-watch")
        where = f"on port {session.port}" if session.port else "over its pipe"
        mode = "headless" if headless else "headed"
        log.info("browser %d attached %s in %.2f s (generation %d, %s)", chrome.pid, where, self.launch_seconds, session.generation, mode)

    async def _listen(self, session: _Session) -> None:
        """Follow the browser's targets and downloads; the user agent a headless browser must hide."""
        session.follow()
        await self._call(session.nd, cdp().target.set_discover_targets(discover=True), CALL_TIMEOUT, session=session)
        if self.headless:
            # (protocol, product, revision, user_agent, js_version)
            session.user_agent = str(session.version[3]).replace("HeadlessChrome", "Chrome")

    async def _drop(self) -> None:
        session = self._session
        self._session = None
        if session is None:
            return
        if session.watch is not None:
            session.watch.cancel()
        try:
            await self._shutdown(session)
        except asyncio.CancelledError:
            # Cancelled mid-shutdown (e.g. an unshielded server teardown): still end the tree, blocking.
            session.chrome.kill_now()
            raise

    async def _shutdown(self, session: _Session) -> None:
        async def close() -> bool:
            try:
                await within(session.nd.send(cdp().browser.close()), CLOSE_TIMEOUT)
            except TimeoutError:
                log.warning("browser %d did not answer Browser.close", session.chrome.pid)
                return False
            except Exception as exc:  # the socket often drops as Chrome shuts down
                log.debug("Browser.close: %s", exc)
            return True

        await session.chrome.stop(close if session.alive() else None)
        for conn in [*(t._conn for t in session.tabs.values()), session.nd]:
            if conn is None:
                continue
            try:
                await within(conn.aclose(), 2.0)
            except Exception as exc:
                log.debug("closing a DevTools socket failed: %s", exc)
        for task in list(session.closing):
            if not task.done():
                try:
                    await within(asyncio.shield(task), 1.0)
                except (TimeoutError, Exception):
                    task.cancel()

    def _dead_details(self, session: _Session | None = None) -> dict[str, Any]:
        session = session or self._session
        if session is None:
            return {}
        return {**session.chrome.details(), "generation": session.generation}

    # -- the one door to CDP ------------------------------------------------------------------

    def _live(self, tab: Tab | None = None) -> _Session:
        session = self._session
        if session is None:
            raise CnkiError("BROWSER_UNAVAILABLE", "浏览器尚未启动或已被重置。")
        if session.strangers:
            raise CnkiError("BROWSER_DEVTOOLS_INTRUDED", details={"pids": session.strangers})
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
            return await within(awaitable, timeout)
        except CnkiError:
            raise
        except TimeoutError as exc:
            if self._session is not None and not self._session.alive():
                raise CnkiError("BROWSER_UNAVAILABLE", _DEAD_MESSAGE, details=self._dead_details()) from exc
            raise as_cnki_error(exc) from exc
        except Exception as exc:
            if self._session is not None and not self._session.alive():
                raise CnkiError("BROWSER_UNAVAILABLE", _DEAD_MESSAGE, details=self._dead_details()) from exc
            if NAVIGATED in str(exc):
                raise CnkiError("PAGE_NAVIGATED", details={"cause": str(exc)}) from exc
            raise as_cnki_error(exc) from exc

    async def _tab_call(self, tab: Tab, command: Any, timeout: float) -> Any:
        self._live(tab)
        return await self._call(tab._conn, command, timeout)

    # -- tabs ----------------------------------------------------------------------------------

    async def _adopt(self, session: _Session, info: Any, opener_id: str | None) -> Tab:
        protocol = cdp()
        conn: Any
        if isinstance(session.nd, PipeConnection):
            conn = PipeConnection(session.nd.channel, info, None)
        else:
            conn = nodriver().core.tab.Tab(target=info, parent=session.nd)
        tab = Tab(conn, session.generation, opener_id, self.routing.back)
        try:
            await self._guard(conn.attach(), CALL_TIMEOUT)
            conn.add_handler(protocol.network.ResponseReceived, tab._on_response)
            conn.add_handler(protocol.network.RequestWillBeSent, tab._on_request)
            conn.add_handler(protocol.network.LoadingFailed, tab._on_failed)
            conn.add_handler(protocol.page.JavascriptDialogOpening, lambda event, _c=None: self._on_dialog(tab, event))
            # Page events first: an alert() would otherwise block the page (and every later command in it).
            await self._call(conn, protocol.page.enable(), CALL_TIMEOUT)
            await self._call(conn, protocol.network.enable(), CALL_TIMEOUT)
            # Background tabs are hidden: without this, mouse input waits ~5 s for a frame that never comes.
            await self._call(conn, protocol.emulation.set_focus_emulation_enabled(enabled=True), CALL_TIMEOUT)
            if session.user_agent:
                await self._call(
                    conn,
                    protocol.network.set_user_agent_override(user_agent=session.user_agent, accept_language=ACCEPT_LANGUAGE),
                    CALL_TIMEOUT,
                )
        except BaseException:
            try:
                await within(conn.aclose(), PAGE_CLOSE_TIMEOUT)
            except Exception as exc:
                log.debug("closing a half-attached tab socket failed: %s", exc)
            raise
        session.tabs[tab.target_id] = tab
        return tab

    def _on_dialog(self, tab: Tab, event: Any) -> None:
        """Note a JavaScript dialog's text on its tab and answer it at once, so it never blocks the page
        (an alert or beforeunload is accepted, a confirm or prompt dismissed)."""
        tab.dialogs.append(str(event.message or ""))
        accept = str(getattr(event.type_, "value", event.type_)) in ("alert", "beforeunload")
        task = asyncio.get_running_loop().create_task(self._answer_dialog(tab, accept))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _answer_dialog(self, tab: Tab, accept: bool) -> None:
        try:
            await self._tab_call(tab, cdp().page.handle_java_script_dialog(accept=accept), CALL_TIMEOUT)
        except CnkiError as exc:
            log.debug("answering a dialog in tab %s failed: %s", tab.target_id[:8], exc.message)

    async def new_tab(self, url: str | None = None, *, timeout: float = NAVIGATION_TIMEOUT) -> Tab:
        """Open a background tab (a minimised window when headed and none exists), optionally navigate."""
        await self.ensure()
        session = self._live()
        protocol = cdp()
        kwargs: dict[str, Any] = {"background": True}
        if not self.headless and not session.pages:
            kwargs.update(
                new_window=True,
                window_state=protocol.target.WindowState.MINIMIZED,
                width=WINDOW_SIZE[0],
                height=WINDOW_SIZE[1],
            )
        target_id = await self._call(session.nd, protocol.target.create_target(url="about:blank", **kwargs), CALL_TIMEOUT)
        info = await self._call(session.nd, protocol.target.get_target_info(target_id), CALL_TIMEOUT)
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
        protocol = cdp()
        ids = [tab.target_id]
        if with_popups:
            ids += [p for p in session.popups.get(tab.target_id, []) if p in session.pages]
        for tid in ids:
            if tid in session.pages:
                try:
                    await self._call(session.nd, protocol.target.close_target(target_id=tid), PAGE_CLOSE_TIMEOUT)
                except CnkiError as exc:
                    log.debug("closing tab %s failed: %s", tid, exc)
            session.pages.pop(tid, None)
            closed = session.tabs.pop(tid, None)
            if closed is not None:
                closed.closed = True
                try:
                    await within(closed._conn.aclose(), PAGE_CLOSE_TIMEOUT)
                except Exception as exc:
                    log.debug("closing the socket of tab %s failed: %s", tid, exc)
        session.popups.pop(tab.target_id, None)

    async def wait_new_tab(self, opener: Tab, timeout: float) -> Tab | None:
        """The next tab opened by ``opener`` (e.g. by a click) not returned before; None on timeout."""
        deadline = Deadline(timeout)
        while True:
            session = self._live(opener)
            for tid in session.popups.get(opener.target_id, []):
                if tid in session.claimed or tid not in session.pages:
                    continue
                session.claimed.add(tid)
                return session.tabs.get(tid) or await self._adopt(session, session.pages[tid], opener.target_id)
            if deadline.passed:
                return None
            await session.wait_changed(deadline.remaining())

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

    # -- downloads -----------------------------------------------------------------------------

    async def set_download_dir(self, path: Path) -> None:
        """Save downloads into ``path`` under their GUID and report them; forgets earlier downloads."""
        protocol = cdp()
        await self.ensure()
        session = self._live()
        path = Path(path).absolute()
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        await self._call(
            session.nd,
            protocol.browser.set_download_behavior(behavior="allowAndName", download_path=str(path), events_enabled=True),
            CALL_TIMEOUT,
        )
        session.downloads.clear()
        session.download_dir = path

    async def cancel_download(self, guid: str) -> None:
        """Stop a transfer that runs on (past its wait, or over the size cap); CDP refuses a finished one."""
        await self._call(self._live().nd, cdp().browser.cancel_download(guid=guid), CALL_TIMEOUT)

    async def wait_download(self, guid: str | None = None, timeout: float = 1.0) -> DownloadEvent | None:
        """Wait up to ``timeout`` for a download to finish (completed or canceled).

        ``guid`` None means the first download begun since ``set_download_dir``. On timeout the
        latest state is returned (begun/inProgress), or None when nothing has begun yet — so a
        caller can poll every second and look at the tabs in between.
        """
        deadline = Deadline(timeout)
        while True:
            session = self._live()
            if guid is not None:
                entry = session.downloads.get(guid)
            else:
                entry = next(iter(session.downloads.values()), None)
            if entry is not None and entry.state in ("completed", "canceled"):
                return msgspec.structs.replace(entry, url=self.routing.back(entry.url))
            if deadline.passed:
                return msgspec.structs.replace(entry, url=self.routing.back(entry.url)) if entry is not None else None
            await session.wait_changed(deadline.remaining())
