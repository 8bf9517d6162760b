"""The browsers this server launched end with it, however it ends.

Ending a process tree, the registry of the trees this process launched, the exit hooks (atexit,
SIGTERM, SIGHUP) and the ties that still hold when no hook can run (SIGKILL, a crash, the OOM killer):

- POSIX: a guard process (the hidden ``cnki-mcp browser-guard`` command) in a session of its own, so a
  signal to the server's process group spares it. It reads the browsers to guard from a pipe whose
  write end only the server holds: however the server ends, the guard reads EOF (and it also sees
  its parent change) and ends those trees, gently first so Chrome keeps the login in its profile.
  Linux's PR_SET_PDEATHSIG was not used: it ends only Chrome's main process, not its helpers, fires
  when the forking *thread* ends, needs a ``preexec_fn`` (unsafe in a threaded server) and has no
  macOS equivalent.
- Windows: Chrome starts suspended, joins a job object with KILL_ON_JOB_CLOSE whose only handle the
  server holds, then runs; when the server dies, Windows closes the handle and ends every process in
  the job. Children Chrome starts are in the job too; breakaway stays allowed for the few Chrome
  asks to detach, and nested jobs let Chrome's sandbox keep jobs of its own.

The hooks, the guard and the job end only the browsers registered here, each checked against its
start time, so a browser the person started is never touched. On Linux and macOS the browser is driven
over ``--remote-debugging-pipe`` (``pipe.py``): the server's end of the pipe goes with it, and Chrome
exits on that end too. On Windows the DevTools port stays; it closes when the browser ends.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from types import FrameType
from typing import Any

import psutil

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.settings import GUARD_COMMAND

log = logging.getLogger(__name__)

GUARD_POLL = 1.0  # seconds between the guard's checks that its parent is still the server
GUARD_TERM_WAIT = 2.0  # after SIGTERM, time for Chrome to flush the profile before SIGKILL
_WINDOWS = sys.platform == "win32"
_CREATE_NEW_PROCESS_GROUP = 0x00000200
_CREATE_SUSPENDED = 0x00000004


# --------------------------------------------------------------------------------------------
# Ending one tree


def kill_tree(pid: int, created: float, timeout: float, *, group: bool) -> None:
    """Terminate the process ``pid`` started at ``created`` and all its descendants, kill what is left
    after ``timeout``; with ``group``, then its whole process group (helpers re-parented when their
    parent died still carry it). A ``pid`` now held by another process is left alone, group and all."""
    procs: list[psutil.Process] = []
    ours = True
    try:
        root = psutil.Process(pid)
        ours = abs(root.create_time() - created) < 0.5
        if ours:
            procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        pass  # gone: while its group has members its pid cannot be reused, so the group is still ours
    except psutil.Error:
        ours = False
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(alive, timeout=1.0)
    if group and ours and hasattr(os, "killpg"):
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)


# --------------------------------------------------------------------------------------------
# The trees this process launched, and the exit hooks that end them

_LAUNCHED: dict[int, float] = {}
_LAUNCHED_LOCK = threading.Lock()
_HOOKS_INSTALLED = False


def is_launched(pid: int) -> bool:
    """True while ``pid`` is a browser this process launched and has not ended yet."""
    with _LAUNCHED_LOCK:
        return pid in _LAUNCHED


def kill_launched() -> None:
    """End every browser tree this process launched (blocking)."""
    with _LAUNCHED_LOCK:
        items = list(_LAUNCHED.items())
        _LAUNCHED.clear()
    for pid, created in items:
        kill_tree(pid, created, 2.0, group=True)
        _GUARD.send(f"-{pid}")


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    kill_launched()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install_exit_hooks() -> None:
    global _HOOKS_INSTALLED
    if _HOOKS_INSTALLED:
        return
    _HOOKS_INSTALLED = True
    atexit.register(kill_launched)
    if threading.current_thread() is not threading.main_thread():
        return
    for name in ("SIGTERM", "SIGHUP"):
        signum = getattr(signal, name, None)
        # Only where nobody else handles it: the default action would skip atexit and orphan Chrome.
        if signum is not None and signal.getsignal(signum) is signal.SIG_DFL:
            signal.signal(signum, _on_signal)


# --------------------------------------------------------------------------------------------
# POSIX: the guard process


def guard_command() -> list[str]:
    """How to start a guard of this process: this program again, frozen or not, given our pid."""
    program = [os.path.abspath(sys.executable)]
    if not getattr(sys, "frozen", False):
        program += ["-m", "cnki_mcp"]
    return [*program, GUARD_COMMAND, str(os.getpid())]


class _Guard:
    """The server's side of the guard: starts it, tells it which browsers to end."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def ensure(self) -> None:
        """Start the guard unless it runs (blocking: call in a thread); a new one learns every tree."""
        with self._lock:
            if self.proc is not None and self.proc.poll() is None:
                return
            if self.proc is not None:
                log.warning("browser guard exited with code %s; starting another", self.proc.returncode)
            try:
                self.proc = subprocess.Popen(
                    guard_command(),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,  # stdout is the MCP protocol: never shared
                    start_new_session=True,
                )
            except OSError as exc:
                self.proc = None
                log.warning("browser guard could not start (%s): a SIGKILLed server would leave its browser", exc)
                return
            assert self.proc.stdin is not None
            # Lines are tiny and the guard reads them at once; never let a stuck guard block the server.
            os.set_blocking(self.proc.stdin.fileno(), False)
        with _LAUNCHED_LOCK:
            items = list(_LAUNCHED.items())
        for pid, created in items:
            self.send(f"+{pid} {created!r}")

    def send(self, line: str) -> None:
        proc = self.proc
        if proc is None or proc.stdin is None:
            return
        try:
            os.write(proc.stdin.fileno(), line.encode("ascii") + b"\n")
        except (OSError, ValueError) as exc:
            log.warning("browser guard did not take %r: %s", line, exc)


_GUARD = _Guard()


def _apply(line: bytes, guarded: dict[int, float]) -> None:
    """One instruction from the server: ``+pid created`` guards a tree, ``-pid`` lets it go."""
    with contextlib.suppress(ValueError):
        text = line.decode("ascii").strip()
        if text.startswith("+"):
            pid, created = text[1:].split()
            guarded[int(pid)] = float(created)
        elif text.startswith("-"):
            guarded.pop(int(text[1:]), None)


def guard(server: int, fd: int = 0) -> None:
    """The guard process: read instructions on ``fd`` until EOF or until the ``server`` is no longer
    its parent (it may have died before the guard got this far), then end every tree still guarded."""
    guarded: dict[int, float] = {}
    pending = b""
    gone = False
    while True:
        # Once the server is gone, what it wrote before dying is still read (without waiting).
        ready, _, _ = select.select([fd], [], [], 0 if gone else GUARD_POLL)
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                _apply(line, guarded)
        elif gone:
            break
        gone = gone or os.getppid() != server
    for pid, created in guarded.items():
        kill_tree(pid, created, GUARD_TERM_WAIT, group=True)


# --------------------------------------------------------------------------------------------
# Windows: the job object


class _IoCounters(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_uint64)
        for name in ("Read", "Write", "Other", "ReadTransfer", "WriteTransfer", "OtherTransfer")
    ]


class _BasicLimits(ctypes.Structure):
    # Fixed-width fields where Windows has DWORD (ctypes' c_ulong is 8 bytes on 64-bit POSIX).
    _fields_ = [
        ("PerProcessUserTimeLimit", ctypes.c_int64),
        ("PerJobUserTimeLimit", ctypes.c_int64),
        ("LimitFlags", ctypes.c_uint32),
        ("MinimumWorkingSetSize", ctypes.c_size_t),
        ("MaximumWorkingSetSize", ctypes.c_size_t),
        ("ActiveProcessLimit", ctypes.c_uint32),
        ("Affinity", ctypes.c_size_t),
        ("PriorityClass", ctypes.c_uint32),
        ("SchedulingClass", ctypes.c_uint32),
    ]


class ExtendedLimits(ctypes.Structure):
    """JOBOBJECT_EXTENDED_LIMIT_INFORMATION."""

    _fields_ = [
        ("BasicLimitInformation", _BasicLimits),
        ("IoInfo", _IoCounters),
        ("ProcessMemoryLimit", ctypes.c_size_t),
        ("JobMemoryLimit", ctypes.c_size_t),
        ("PeakProcessMemoryUsed", ctypes.c_size_t),
        ("PeakJobMemoryUsed", ctypes.c_size_t),
    ]


JOB_OBJECT_EXTENDED_LIMIT_INFORMATION = 9
JOB_OBJECT_LIMIT_BREAKAWAY_OK = 0x00000800
JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x00002000
PROCESS_TERMINATE = 0x0001
PROCESS_SET_QUOTA = 0x0100


def _last_error() -> int:
    return getattr(ctypes, "get_last_error", lambda: 0)()  # Windows only


def _kernel32() -> Any:
    """kernel32 with the prototypes we call (handles are pointers: never let ctypes cut them to int)."""
    from ctypes import wintypes

    k = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
    k.CreateJobObjectW.argtypes = (ctypes.c_void_p, wintypes.LPCWSTR)
    k.CreateJobObjectW.restype = wintypes.HANDLE
    k.SetInformationJobObject.argtypes = (wintypes.HANDLE, ctypes.c_int, ctypes.c_void_p, wintypes.DWORD)
    k.SetInformationJobObject.restype = wintypes.BOOL
    k.OpenProcess.argtypes = (wintypes.DWORD, wintypes.BOOL, wintypes.DWORD)
    k.OpenProcess.restype = wintypes.HANDLE
    k.AssignProcessToJobObject.argtypes = (wintypes.HANDLE, wintypes.HANDLE)
    k.AssignProcessToJobObject.restype = wintypes.BOOL
    k.CloseHandle.argtypes = (wintypes.HANDLE,)
    k.CloseHandle.restype = wintypes.BOOL
    return k


class Job:
    """One job object for every browser of this process; its handle is never inherited or closed, so
    it closes exactly when the process ends."""

    def __init__(self, kernel32: Any, handle: int) -> None:
        self._kernel32 = kernel32
        self.handle = handle

    @classmethod
    def create(cls, kernel32: Any) -> Job | None:
        handle = kernel32.CreateJobObjectW(None, None)
        if not handle:
            log.warning("CreateJobObject failed (%d): a killed server would leave its browser", _last_error())
            return None
        info = ExtendedLimits()
        info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | JOB_OBJECT_LIMIT_BREAKAWAY_OK
        if not kernel32.SetInformationJobObject(
            handle, JOB_OBJECT_EXTENDED_LIMIT_INFORMATION, ctypes.byref(info), ctypes.sizeof(info)
        ):
            log.warning("SetInformationJobObject failed (%d)", _last_error())
            kernel32.CloseHandle(handle)
            return None
        return cls(kernel32, handle)

    def assign(self, pid: int) -> bool:
        """Put the (still suspended) process ``pid`` in the job; False when Windows refused."""
        process = self._kernel32.OpenProcess(PROCESS_SET_QUOTA | PROCESS_TERMINATE, False, pid)
        if not process:
            log.warning("OpenProcess(%d) failed (%d)", pid, _last_error())
            return False
        try:
            if self._kernel32.AssignProcessToJobObject(self.handle, process):
                return True
            log.warning("AssignProcessToJobObject(%d) failed (%d)", pid, _last_error())
            return False
        finally:
            self._kernel32.CloseHandle(process)


_JOB: list[Job | None] = []  # created once, on the first launch


def _job() -> Job | None:
    if not _JOB:
        try:
            _JOB.append(Job.create(_kernel32()))
        except (OSError, AttributeError) as exc:
            log.warning("no job object (%s): a killed server would leave its browser", exc)
            _JOB.append(None)
    return _JOB[0]


def start_in_job(pid: int, job: Job | None, resume: Any) -> None:
    """Put the suspended ``pid`` in ``job``, then let it run whatever the job said; a process that
    cannot be resumed is killed rather than left frozen."""
    try:
        if job is not None:
            job.assign(pid)
    finally:
        try:
            resume(pid)
        except psutil.Error as exc:
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).kill()
            raise CnkiError("BROWSER_UNAVAILABLE", f"无法启动浏览器：{exc}", details={"pid": pid}) from exc


# --------------------------------------------------------------------------------------------
# What chrome.py calls around a launch


async def prepare() -> None:
    """Before a launch: the exit hooks (signal handlers need the main thread), then the job or the
    guard ready (in a thread: starting a process blocks)."""
    _install_exit_hooks()
    await asyncio.to_thread(_job if _WINDOWS else _GUARD.ensure)


def spawn_options() -> dict[str, Any]:
    """Keyword arguments for starting Chrome: its own process group, suspended on Windows so it joins
    the job before it can start a child."""
    if not _WINDOWS:
        return {"start_new_session": True}
    flags = _CREATE_NEW_PROCESS_GROUP
    if _JOB and _JOB[0] is not None:
        flags |= _CREATE_SUSPENDED
    return {"creationflags": flags}


def adopt(pid: int, options: dict[str, Any]) -> float:
    """Right after the spawn: tie the browser ``pid`` to this process; its start time."""
    if options.get("creationflags", 0) & _CREATE_SUSPENDED:
        start_in_job(pid, _JOB[0], lambda p: psutil.Process(p).resume())
    try:
        created = psutil.Process(pid).create_time()
    except psutil.Error:
        created = time.time()
    with _LAUNCHED_LOCK:
        _LAUNCHED[pid] = created
    _GUARD.send(f"+{pid} {created!r}")
    return created


def release(pid: int) -> None:
    """The browser ``pid`` has been ended: forget it (its pid may be reused)."""
    with _LAUNCHED_LOCK:
        _LAUNCHED.pop(pid, None)
    _GUARD.send(f"-{pid}")
