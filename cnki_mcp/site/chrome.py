"""The Chrome process behind the dedicated browser: command line, profile, launch, output and its end.

We start Chrome/Edge/Chromium ourselves with a dedicated profile. It is driven over
``--remote-debugging-pipe`` (``pipe.py``): the two pipe ends it inherits (descriptors 3 and 4 on Linux and
macOS, two handles named by ``--remote-debugging-io-pipes`` on Windows) are the only way in, and no DevTools
port exists. A browser started through a Flatpak launcher gets ``--remote-debugging-port=0`` instead: we read
the port Chrome picked from ``DevToolsActivePort`` and ``browser.py`` attaches nodriver to it (watched: see the
end of this module).
Launching it ourselves gives us the process tree (so nothing is left behind), its output (drained, never
left in a full pipe) and the choice of executable. A browser left on our profile by a server that died is
ended at the next launch, and an owner file in the profile tells the next server what it may end;
``reaper.py`` makes every browser this process launched end with it, even on SIGKILL.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import psutil

from cnki_mcp.core.clock import poll, within
from cnki_mcp.core.display import browser_output_cause
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.site import reaper

log = logging.getLogger(__name__)

LAUNCH_TIMEOUT = 20.0  # executable start until DevToolsActivePort is written (or the pipe answers)
EXIT_WAIT = 5.0  # after Browser.close, time for Chrome to flush the profile and exit
PIPE_EXIT_WAIT = 2.0  # after the pipe closed at start, time for Chrome's exit to be seen
WINDOW_SIZE = (1280, 900)
ACCEPT_LANGUAGE = "zh-CN,zh,en"

_OWNER_FILE = "cnki-mcp-owner.json"
_LOCK_NAMES = ("SingletonLock", "SingletonSocket", "SingletonCookie", "lockfile")
_PROFILE_IN_USE_EXIT = 21  # Chrome's exit code when another process holds the profile
_TRUE = {"1", "true", "yes", "on"}
_PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")
_OUTPUT_LINES = 40
# CDP over the inherited pipe on every system; test launchers may flip it to get the port and its watcher.
DEVTOOLS_PIPE = True
# A Flatpak launcher starts Chrome in a sandbox; Flatpak's sources say inherited descriptors pass through, but a
# sandboxed Chromium was never tried with them (docs/hardening.md): the port there.
_NO_PIPE_MARKER = "/flatpak/exports/bin/"
# A Windows browser older than ``--remote-debugging-io-pipes`` exits at once when told to use a pipe it was not
# given (or finds no descriptors 3 and 4): it is started again on the watched port. Elsewhere the pipe on
# descriptors 3 and 4 is as old as Chrome 72, so an exit there is reported as it is. Tests may flip it.
PORT_WHEN_PIPE_REFUSED = sys.platform == "win32"


def devtools_pipe(executable: Path) -> bool:
    """Whether the browser at ``executable`` is driven over its pipe (else over a watched loopback port)."""
    return DEVTOOLS_PIPE and _NO_PIPE_MARKER not in executable.as_posix()


def relaunch_on_port(error: CnkiError, executable: Path) -> bool:
    """Whether a pipe launch of ``executable`` that failed with ``error`` is worth one more launch on the port
    (the browser exited before its first answer, and not because another browser holds the profile); the log
    says so when it is."""
    details = error.details if isinstance(error.details, dict) else {}
    if not (PORT_WHEN_PIPE_REFUSED and error.code == "BROWSER_UNAVAILABLE" and details.get("exit_code") is not None):
        return False
    log.warning(
        "browser %s exited when handed the DevTools pipe (exit code %s): too old for it? started again on a "
        "watched loopback port", executable, details["exit_code"],
    )
    return True


# Puts the pipe ends we pass as stdin/stdout on descriptors 3 and 4, then becomes Chrome (same pid): Python's
# subprocess cannot place a descriptor on a chosen number without a preexec_fn (unsafe in a threaded server).
_ON_FDS_3_AND_4 = 'exec "$0" "$@" 3<&0 4>&1 </dev/null >&2'


class PipeEnds(NamedTuple):
    """The two pipes of a launch: Chrome reads our commands from one and writes its answers to the other."""

    chrome_reads: int
    we_write: int
    we_read: int
    chrome_writes: int

    @classmethod
    def open(cls) -> PipeEnds:
        """Four descriptors, none inheritable (PEP 446) until a launch hands two of them to Chrome."""
        chrome_reads, we_write = os.pipe()
        we_read, chrome_writes = os.pipe()
        return cls(chrome_reads, we_write, we_read, chrome_writes)

    def close_all(self) -> None:
        for fd in self:
            with contextlib.suppress(OSError):
                os.close(fd)


def posix_pipe_spawn(args: list[str], ends: PipeEnds) -> tuple[list[str], dict[str, Any]]:
    """The command and the spawn keywords that put Chrome's ends on its descriptors 3 and 4."""
    command = ["/bin/sh", "-c", _ON_FDS_3_AND_4, *args]
    return command, {"stdin": ends.chrome_reads, "stdout": ends.chrome_writes, "stderr": asyncio.subprocess.PIPE}


def windows_pipe_spawn(
    args: list[str],
    ends: PipeEnds,
    *,
    os_handle: Callable[[int], int],
    set_inheritable: Callable[[int, bool], None],
    startupinfo: Callable[..., Any],
) -> tuple[list[str], dict[str, Any]]:
    """The command and the spawn keywords that hand Chrome its two ends on Windows.

    Chrome (``--remote-debugging-io-pipes=<it reads>,<it writes>``) takes the decimal values of two inherited
    pipe handles: an inherited handle keeps its value in the child. Only those two (and the standard streams)
    are inherited: the handle list of ``STARTUPINFO`` bounds what CreateProcess passes, so no other handle of
    this server leaks into the browser. They must be inheritable while CreateProcess runs; the caller closes
    them right after it. ``os_handle``, ``set_inheritable`` and ``startupinfo`` are ``msvcrt.get_osfhandle``,
    ``os.set_handle_inheritable`` and ``subprocess.STARTUPINFO`` (given, so this runs under test anywhere).
    """
    reads, writes = os_handle(ends.chrome_reads), os_handle(ends.chrome_writes)
    for handle in (reads, writes):
        set_inheritable(handle, True)
    command = [*args, f"--remote-debugging-io-pipes={reads},{writes}"]
    streams = {
        "stdin": asyncio.subprocess.DEVNULL,
        "stdout": asyncio.subprocess.PIPE,
        "stderr": asyncio.subprocess.STDOUT,
        "close_fds": True,
        "startupinfo": startupinfo(lpAttributeList={"handle_list": [reads, writes]}),
    }
    return command, streams


def _pipe_spawn(args: list[str], ends: PipeEnds) -> tuple[list[str], dict[str, Any]]:
    if sys.platform == "win32":
        import msvcrt

        return windows_pipe_spawn(
            args, ends, os_handle=msvcrt.get_osfhandle, set_inheritable=os.set_handle_inheritable, startupinfo=subprocess.STARTUPINFO
        )
    return posix_pipe_spawn(args, ends)


# --------------------------------------------------------------------------------------------
# Command line and profile (synchronous; run in a thread when they scan or kill processes)


def env_headless(env: Mapping[str, object] | None = None) -> bool:
    """CNKI_HEADLESS=1 (or true/yes/on) runs the browser without windows; ``env`` is this process's by
    default, or a client's configured env (doctor reads it from the client's config file)."""
    value = (os.environ if env is None else env).get("CNKI_HEADLESS", "")
    return isinstance(value, str) and value.strip().lower() in _TRUE


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


def launch_arguments(executable: Path, profile: Path, *, headless: bool, extra: list[str], pipe: bool = False) -> list[str]:
    """The full command line: our flags first, the caller's extra flags last so they can override."""
    args = [
        str(executable),
        f"--user-data-dir={profile}",
        "--remote-debugging-pipe" if pipe else "--remote-debugging-port=0",
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
        return not reaper.is_launched(pid)
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
        reaper.kill_tree(proc.pid, created, 3.0, group=False)
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


# --------------------------------------------------------------------------------------------
# One launched process


class ChromeProcess:
    """One launched browser process: its pid, its last output lines and its exit."""

    def __init__(self, proc: asyncio.subprocess.Process, created: float, profile: Path) -> None:
        self.proc = proc
        self.created = created
        self.profile = profile
        self.output: collections.deque[str] = collections.deque(maxlen=_OUTPUT_LINES)
        self.exited = False
        self.on_exit: Callable[[], None] | None = None
        self.pipe: tuple[int, int] | None = None  # our ends of the DevTools pipe (commands, answers), if any
        self._tasks: list[asyncio.Task[Any]] = []

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def running(self) -> bool:
        return not self.exited and self.proc.returncode is None

    @classmethod
    async def launch(cls, executable: Path, profile: Path, *, headless: bool, extra: list[str], pipe: bool = False) -> ChromeProcess:
        """Start Chrome on ``profile`` (cleared of leftovers first) and record this server as its owner;
        ``pipe``: CDP over inherited descriptors (``chrome.pipe``), else over a loopback port."""
        profile.mkdir(parents=True, exist_ok=True, mode=0o700)
        await asyncio.to_thread(clear_stale_profile, profile)
        # Tabs of the previous run must not come back; cookies and logins are kept.
        sessions = profile / "Default" / "Sessions"
        if sessions.is_dir():
            await asyncio.to_thread(shutil.rmtree, sessions, True)
        if not pipe:
            _loopback_without_proxy()
        # The tie to this process comes first: from its first instant the browser cannot outlive us.
        await reaper.prepare()
        args = launch_arguments(executable, profile, headless=headless, extra=extra, pipe=pipe)
        log.info("launching browser: %s", " ".join(shlex.quote(a) for a in args))
        kwargs = reaper.spawn_options()
        ends = PipeEnds.open() if pipe else None
        streams: dict[str, Any]
        try:
            if ends is not None:
                command, streams = _pipe_spawn(args, ends)
            else:
                command = args
                streams = {"stdin": asyncio.subprocess.DEVNULL, "stdout": asyncio.subprocess.PIPE, "stderr": asyncio.subprocess.STDOUT}
            proc = await asyncio.create_subprocess_exec(command[0], *command[1:], **streams, **kwargs)
        except OSError as exc:
            if ends is not None:
                ends.close_all()
            raise CnkiError(
                "BROWSER_UNAVAILABLE", f"无法启动浏览器：{exc}", details={"path": str(executable)}
            ) from exc
        chrome = cls(proc, reaper.adopt(proc.pid, kwargs), profile)
        if ends is not None:
            os.close(ends.chrome_reads)  # Chrome holds them now: its exit is our EOF
            os.close(ends.chrome_writes)
            chrome.pipe = (ends.we_write, ends.we_read)
        output = proc.stdout or proc.stderr  # stderr where stdout carries the pipe (Linux, macOS)
        assert output is not None
        chrome._tasks = [
            asyncio.create_task(_drain(output, chrome.output)),
            asyncio.create_task(chrome._watch_exit()),
        ]
        # Written first: if this server dies now, the next one knows the browser is a leftover.
        owner = {"server_pid": os.getpid(), "server_started": psutil.Process().create_time(), "browser_pid": proc.pid}
        (profile / _OWNER_FILE).write_text(json.dumps(owner), encoding="utf-8")
        return chrome

    async def _watch_exit(self) -> None:
        code = await self.proc.wait()
        self.exited = True
        if self.on_exit is not None:
            self.on_exit()
        reaper.release(self.proc.pid)
        log.info("browser process %d exited with code %s", self.proc.pid, code)

    def details(self) -> dict[str, Any]:
        """What a failure report says of the process: pid, exit code and its last output lines."""
        return {"pid": self.proc.pid, "exit_code": self.proc.returncode, "output": list(self.output)[-10:]}

    async def exit_error(self, generation: int) -> CnkiError:
        """Why the browser is gone right after its start: the profile in use, or its last output."""
        code = self.proc.returncode
        await asyncio.sleep(0.05)  # let the drain task collect the last words
        details = {**self.details(), "generation": generation}
        if code == _PROFILE_IN_USE_EXIT:
            return CnkiError("BROWSER_PROFILE_IN_USE", details=details)
        cause = browser_output_cause(details["output"])
        return CnkiError(
            "BROWSER_UNAVAILABLE",
            f"浏览器启动后立即退出（退出码 {code}）" + (f"：{cause}" if cause else "。"),
            details=details,
        )

    async def first_answer(self, answer: Awaitable[Any], *, generation: int) -> Any:
        """The first CDP answer over the pipe, which says the browser is up; its exit or silence is an error."""
        answered = asyncio.ensure_future(answer)
        exited = asyncio.ensure_future(self.proc.wait())
        try:
            await asyncio.wait({answered, exited}, timeout=LAUNCH_TIMEOUT, return_when=asyncio.FIRST_COMPLETED)
        finally:
            exited.cancel()
            if not answered.done():
                answered.cancel()
                await asyncio.gather(answered, return_exceptions=True)
        failed = answered.cancelled() or answered.exception() is not None
        if failed and self.proc.returncode is None and not answered.cancelled():
            # The pipe closes as Chrome dies (no screen, a bad flag): give its exit a moment to be reaped.
            with contextlib.suppress(TimeoutError):
                await within(self.proc.wait(), PIPE_EXIT_WAIT)
        if failed and self.proc.returncode is not None:
            raise await self.exit_error(generation)
        if answered.cancelled():
            raise CnkiError(
                "BROWSER_UNAVAILABLE",
                f"浏览器在 {LAUNCH_TIMEOUT:.0f} 秒内没有在调试管道上应答。",
                details={**self.details(), "generation": generation},
            )
        return answered.result()

    async def devtools_port(self, *, generation: int) -> int:
        """The DevTools port Chrome picked, once ``DevToolsActivePort`` is completely written."""
        port_file = self.profile / "DevToolsActivePort"

        async def written_port() -> int | None:
            if self.proc.returncode is not None:
                raise await self.exit_error(generation)
            with contextlib.suppress(OSError, ValueError):
                lines = port_file.read_text(encoding="utf-8").splitlines()
                if len(lines) >= 2:  # the second line (browser websocket path) marks a complete write
                    return int(lines[0])
            return None

        port = await poll(written_port, LAUNCH_TIMEOUT, 0.03)
        if port:
            return port
        raise CnkiError(
            "BROWSER_UNAVAILABLE",
            f"浏览器在 {LAUNCH_TIMEOUT:.0f} 秒内没有打开调试端口。",
            details={**self.details(), "generation": generation},
        )

    async def stop(self, close: Callable[[], Awaitable[bool]] | None) -> None:
        """End the process: ``close()`` asks Chrome to close (True when it began to), then the tree is
        killed whatever is left; the owner file goes when it still names this browser."""
        if close is not None and await close() and self.proc.returncode is None:
            try:
                await within(self.proc.wait(), EXIT_WAIT)
            except TimeoutError:
                log.warning("browser %d did not exit after Browser.close; killing it", self.proc.pid)
        await asyncio.to_thread(reaper.kill_tree, self.proc.pid, self.created, 3.0, group=True)
        reaper.release(self.proc.pid)
        for task in self._tasks:
            if not task.done():
                try:
                    await within(asyncio.shield(task), 1.0)
                except (TimeoutError, Exception):
                    task.cancel()
        if _read_owner(self.profile).get("browser_pid") == self.proc.pid:
            try:
                (self.profile / _OWNER_FILE).unlink()
            except OSError:
                pass

    def kill_now(self) -> None:
        """End the process tree at once, blocking (a shutdown that was itself cancelled)."""
        reaper.kill_tree(self.proc.pid, self.created, 1.0, group=True)
        reaper.release(self.proc.pid)


# --- who else talks to the DevTools port (Flatpak launchers: no pipe) -----------------------------------
#
# The DevTools port takes no token: any local program could drive the logged-in tab through it. Where the
# browser is driven over the pipe there is no port. Where it is not (``devtools_pipe`` False: a Flatpak
# launcher), the port is bound to 127.0.0.1 only and watched: a connection to it from any process but this one
# ends the browser.


def devtools_strangers(port: int, ours: int | None = None) -> list[int | None]:
    """The processes (None: another user's, pid hidden) connected to the DevTools ``port`` other than ``ours``
    (blocking: reads the system's connection table)."""
    ours = os.getpid() if ours is None else ours
    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError) as exc:
        log.debug("connection table unreadable: %s", exc)
        return []
    found = _clients(connections, port, ours)
    if any(c.pid is None for c in found):
        # The machine-wide table maps sockets to processes before it reads the connections, so a socket we
        # opened meanwhile (nodriver's WebSocket to a new tab, or one of its short /json requests) has no owner
        # there. Our own table, read after, knows every socket of ours still open; one that is gone by then is
        # read once more in the machine-wide table: still there, it has an owner now (or stays a stranger);
        # gone, it was a request already over. A connection is one process's, so nothing else is let through.
        try:
            mine = {(c.laddr, c.raddr) for c in psutil.Process(ours).net_connections(kind="tcp")}
            again = {(c.laddr, c.raddr): c.pid for c in _clients(psutil.net_connections(kind="tcp"), port, None)}
        except (psutil.Error, OSError) as exc:
            log.debug("connection table unreadable the second time: %s", exc)
            mine, again = set(), {}
        placed = []
        for c in found:
            key = (c.laddr, c.raddr)
            if c.pid is None and key not in mine and key in again and again[key] != ours:
                placed.append(c._replace(pid=again[key]))
            elif c.pid is not None:
                placed.append(c)
        found = placed
    return [c.pid for c in found]


def _clients(connections: list[Any], port: int, ours: int | None) -> list[Any]:
    """The established connections to the DevTools ``port`` from a process other than ``ours``."""
    return [
        c for c in connections
        if c.status == psutil.CONN_ESTABLISHED and getattr(c.raddr, "port", None) == port
        and getattr(c.laddr, "port", None) != port and (ours is None or c.pid != ours)
    ]
