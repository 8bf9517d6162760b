"""The browser dies with the server: ending a tree, the guard process (POSIX), the job object (Windows).

The end-to-end case runs the real server over stdio with the real MCP client, a headless Chromium and
the simulator, SIGKILLs the server and waits for every process on the profile to be gone (on POSIX the
browser is driven over its pipe: it never had a DevTools port to close).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, cast

import msgspec
import psutil
import pytest

from cnki_mcp.core.errors import CnkiError
from cnki_mcp.site import reaper
from tests.harness import FINAL, McpSession, held_client, process_tree, processes_on, serve_params, tcp_ports
from tests.kns.server import KnsSimulator

KILL_DEADLINE = 10.0  # seconds the browser may take to go once the server is SIGKILLed
posix_only = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL and the guard process are POSIX")


async def _seconds_until(condition: object, timeout: float) -> float:
    started = time.monotonic()
    while not condition() and time.monotonic() - started < timeout:  # type: ignore[operator]
        await asyncio.sleep(0.05)
    return time.monotonic() - started


class Killed(msgspec.Struct):
    """One SIGKILL of a server: its browser before, and the seconds until browser and port were gone."""

    browsers: list[int]
    listening_before: list[int]  # TCP ports the browser's processes listened on: none over the pipe
    seconds: float


async def _kill_server_with_browser(data: Path, browser_args: str) -> Killed:
    """Start the server, let a search launch its browser, SIGKILL the server, wait for the browser."""
    async with held_client(serve_params(data, browser_args)) as client:
        session = McpSession(client, data)
        await session.wait(await session.call("search", {"query": "自动驾驶"}), FINAL, 120)
        report = await session.call("diagnostics", {})
        profile = Path(report["browser"]["profile_directory"])
        browsers = processes_on(profile)
        listening = tcp_ports(process_tree(browsers), listening=True)
        os.kill(report["process_id"], signal.SIGKILL)
        seconds = await _seconds_until(lambda: not processes_on(profile), KILL_DEADLINE)
        for process in processes_on(profile):  # never leave a browser behind, whatever the outcome
            with contextlib.suppress(psutil.Error):
                process.kill()
    return Killed([p.pid for p in browsers], listening, seconds)


# --- ending a tree ----------------------------------------------------------------------------------

_TREE = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"


def _tree_of(leader: psutil.Process) -> list[psutil.Process]:
    deadline = time.monotonic() + 10
    while not leader.children() and time.monotonic() < deadline:
        time.sleep(0.02)
    return [leader, *leader.children(recursive=True)]


@pytest.fixture
def browser_like() -> Iterator[list[psutil.Process]]:
    """A process tree standing in for a browser: a session leader and its child, like our Chrome."""
    proc = subprocess.Popen([sys.executable, "-c", _TREE], start_new_session=True)
    tree = _tree_of(psutil.Process(proc.pid))
    yield tree
    for member in tree:
        with contextlib.suppress(psutil.Error):
            member.kill()
    proc.wait(5)


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _ended(tree: list[psutil.Process], timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while any(_alive(p) for p in tree) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(_alive(p) for p in tree)


def _all_running(tree: list[psutil.Process]) -> bool:
    time.sleep(0.5)  # a signal sent to them would have landed by now
    return all(_alive(p) for p in tree)


@posix_only
def test_kill_tree_ends_the_whole_group(browser_like: list[psutil.Process]) -> None:
    leader = browser_like[0]
    reaper.kill_tree(leader.pid, leader.create_time(), 2.0, group=True)
    assert _ended(browser_like, 0)


@posix_only
def test_kill_tree_leaves_a_reused_pid_and_its_group_alone(browser_like: list[psutil.Process]) -> None:
    leader = browser_like[0]
    reaper.kill_tree(leader.pid, leader.create_time() - 100, 0.2, group=True)  # another process's pid now
    assert _all_running(browser_like)


class _NoGuard:
    def ensure(self) -> None:
        pass


@posix_only
async def test_preparing_a_launch_installs_the_signal_hooks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reaper, "_HOOKS_INSTALLED", False)
    monkeypatch.setattr(reaper, "_GUARD", _NoGuard())
    monkeypatch.setattr(reaper.atexit, "register", lambda _f: None)
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    for signum in before:
        signal.signal(signum, signal.SIG_DFL)
    try:
        await reaper.prepare()
        installed = {s: signal.getsignal(s) for s in before}
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
    assert installed == {signal.SIGTERM: reaper._on_signal, signal.SIGHUP: reaper._on_signal}


# --- the guard process -------------------------------------------------------------------------------


def _guard(instructions: bytes) -> None:
    """A guard given ``instructions`` by a server that then goes (its end of the pipe closes)."""
    guard = subprocess.Popen(reaper.guard_command(), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    guard.communicate(instructions, timeout=15)


def _line(tree: list[psutil.Process], sign: str = "+") -> bytes:
    leader = tree[0]
    return f"{sign}{leader.pid} {leader.create_time()!r}\n".encode() if sign == "+" else f"-{leader.pid}\n".encode()


def test_frozen_program_starts_its_guard_as_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    program = os.path.abspath(os.path.join("cnki-mcp", "cnki-mcp"))
    monkeypatch.setattr(sys, "executable", program)
    assert reaper.guard_command() == [program, "browser-guard", str(os.getpid())]


@pytest.mark.slow  # ~3 s: a guard process ends its trees
@posix_only
def test_guard_ends_its_trees_when_the_server_end_of_the_pipe_closes(browser_like: list[psutil.Process]) -> None:
    _guard(_line(browser_like))
    assert _ended(browser_like)


@posix_only
def test_guard_spares_a_released_tree(browser_like: list[psutil.Process]) -> None:
    _guard(_line(browser_like) + _line(browser_like, "-"))
    assert _all_running(browser_like)


@posix_only
def test_guard_spares_a_process_that_reused_the_pid(browser_like: list[psutil.Process]) -> None:
    leader = browser_like[0]
    _guard(f"+{leader.pid} {leader.create_time() - 100!r}\nnonsense\n+x y\n".encode())
    assert _all_running(browser_like)


_GUARD_IN_A_SERVER = """
import subprocess, sys, time
from cnki_mcp.site import reaper
subprocess.Popen(reaper.guard_command(), stdin=int(sys.argv[1]), stdout=subprocess.DEVNULL, start_new_session=True)
print("ready", flush=True)
time.sleep(60)
"""


@posix_only
def test_guard_acts_when_its_parent_dies_even_if_the_pipe_stays_open(browser_like: list[psutil.Process]) -> None:
    """The pipe's write end leaked to another process (here: the test), so no EOF comes: the guard still
    sees that the server is no longer its parent."""
    read, write = os.pipe()
    server = subprocess.Popen(
        [sys.executable, "-c", _GUARD_IN_A_SERVER, str(read)], pass_fds=(read,), stdout=subprocess.PIPE
    )
    cast(IO[bytes], server.stdout).readline()
    os.write(write, _line(browser_like))
    server.kill()
    server.wait(5)
    ended = _ended(browser_like)
    os.close(write)
    os.close(read)
    assert ended


@pytest.mark.slow  # ~4 s: guard processes started and ended
@posix_only
def test_a_new_guard_learns_every_launched_tree(browser_like: list[psutil.Process], monkeypatch: pytest.MonkeyPatch) -> None:
    leader = browser_like[0]
    monkeypatch.setattr(reaper, "_LAUNCHED", {leader.pid: leader.create_time()})
    guard = reaper._Guard()
    guard.ensure()
    first = cast(subprocess.Popen, guard.proc)
    first.kill()
    first.wait(5)
    guard.ensure()  # the first guard died: the new one must guard the running browser
    cast(subprocess.Popen, guard.proc).communicate(timeout=15)
    assert _ended(browser_like)


# --- Windows: the job object (the parts that run anywhere) ----------------------------------------------


class FakeKernel32:
    """Records kernel32 calls; each function answers what the test set."""

    def __init__(self, **answers: int) -> None:
        self.answers = {"CreateJobObjectW": 7, "SetInformationJobObject": 1, "OpenProcess": 9,
                        "AssignProcessToJobObject": 1, "CloseHandle": 1, **answers}
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any) -> int:
            self.calls.append((name, args))
            return self.answers[name]
        return call

    def named(self, name: str) -> list[tuple[Any, ...]]:
        return [args for called, args in self.calls if called == name]


@pytest.mark.skipif(ctypes.sizeof(ctypes.c_void_p) != 8, reason="the 64-bit layout")
def test_extended_limit_information_has_the_windows_x64_layout() -> None:
    assert ctypes.sizeof(reaper.ExtendedLimits) == 144
    assert reaper._BasicLimits.LimitFlags.offset == 16
    assert reaper.ExtendedLimits.IoInfo.offset == 64


def test_job_kills_on_close_and_allows_breakaway() -> None:
    kernel32 = FakeKernel32()
    job = reaper.Job.create(kernel32)
    (handle, info_class, info, size), = kernel32.named("SetInformationJobObject")
    assert job is not None
    assert handle == 7
    assert info_class == 9
    assert info._obj.BasicLimitInformation.LimitFlags == 0x2000 | 0x800
    assert size == ctypes.sizeof(reaper.ExtendedLimits)


def test_job_that_cannot_be_configured_is_closed_and_not_used() -> None:
    kernel32 = FakeKernel32(SetInformationJobObject=0)
    job = reaper.Job.create(kernel32)
    assert job is None
    assert kernel32.named("CloseHandle") == [(7,)]


@pytest.mark.parametrize("assigned", [1, 0])
def test_job_assign_opens_the_process_for_quota_and_terminate_and_closes_it(assigned: int) -> None:
    kernel32 = FakeKernel32(AssignProcessToJobObject=assigned)
    result = reaper.Job(kernel32, 7).assign(4242)
    assert result is bool(assigned)
    assert kernel32.named("OpenProcess") == [(0x0101, False, 4242)]
    assert kernel32.named("AssignProcessToJobObject") == [(7, 9)]
    assert kernel32.named("CloseHandle") == [(9,)]


def test_suspended_browser_runs_even_when_the_job_refuses_it() -> None:
    resumed: list[int] = []
    reaper.start_in_job(4242, reaper.Job(FakeKernel32(OpenProcess=0), 7), resumed.append)
    assert resumed == [4242]


def test_browser_that_cannot_be_resumed_is_killed_not_left_frozen(browser_like: list[psutil.Process]) -> None:
    def refuse(pid: int) -> None:
        raise psutil.AccessDenied(pid)

    with pytest.raises(CnkiError) as caught:
        reaper.start_in_job(browser_like[0].pid, None, refuse)
    assert caught.value.code == "BROWSER_UNAVAILABLE"
    assert _ended(browser_like[:1])


@pytest.mark.parametrize(("job", "flags"), [([object()], 0x200 | 0x4), ([None], 0x200), ([], 0x200)])
def test_windows_starts_the_browser_suspended_only_when_a_job_awaits_it(
    monkeypatch: pytest.MonkeyPatch, job: list[Any], flags: int
) -> None:
    monkeypatch.setattr(reaper, "_WINDOWS", True)
    monkeypatch.setattr(reaper, "_JOB", job)
    assert reaper.spawn_options() == {"creationflags": flags}


# --- end to end: SIGKILL the real server ---------------------------------------------------------------

RUNS = int(os.environ.get("CNKI_TEST_REAPER_RUNS", "1"))  # more runs for the figures


@pytest.mark.browser
@posix_only
async def test_sigkill_of_the_server_ends_its_browser_which_has_no_port(kns: KnsSimulator, tmp_path: Path) -> None:
    runs = [await _kill_server_with_browser(tmp_path / f"data{n}", kns.browser_args) for n in range(RUNS)]
    seconds = [run.seconds for run in runs]
    print(f"\nbrowser gone after SIGKILL, {RUNS} runs: min {min(seconds):.2f} s, "
          f"median {statistics.median(seconds):.2f} s, max {max(seconds):.2f} s")
    assert all(run.browsers for run in runs)
    assert all(run.listening_before == [] for run in runs)  # no DevTools port to leave open
    assert max(seconds) < KILL_DEADLINE
