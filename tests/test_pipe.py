"""CDP over the browser's pipe (``site/pipe.py``) against a stand-in for Chrome's end: framing, sessions, its end."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from cnki_mcp.core.clock import within
from cnki_mcp.site.cdp import cdp
from cnki_mcp.site.chrome import PipeEnds, posix_pipe_spawn, windows_pipe_spawn
from cnki_mcp.site.pipe import PipeChannel, PipeConnection


class FakeChrome:
    """Chrome's ends of the two pipes: reads our commands, writes what a test tells it to."""

    def __init__(self) -> None:
        self.reads, commands = os.pipe()  # commands: we write, "Chrome" reads
        answers, self.writes = os.pipe()
        self.channel = PipeChannel(commands, answers)
        self._pending = b""

    async def command(self) -> dict[str, Any]:
        while b"\0" not in self._pending:
            chunk = await asyncio.to_thread(os.read, self.reads, 65536)
            assert chunk, "the channel closed its command pipe"
            self._pending += chunk
        raw, self._pending = self._pending.split(b"\0", 1)
        return dict(json.loads(raw))

    def write(self, data: bytes) -> None:
        os.write(self.writes, data)

    def close(self) -> None:
        for fd in (self.reads, self.writes):
            try:
                os.close(fd)
            except OSError:
                pass


@pytest_asyncio.fixture
async def chrome() -> AsyncIterator[FakeChrome]:
    fake = FakeChrome()
    await fake.channel.open()
    yield fake
    fake.channel.close()
    fake.close()


async def test_answers_split_and_joined_anyhow_reach_their_commands(chrome: FakeChrome) -> None:
    first = asyncio.ensure_future(chrome.channel.browser.send(cdp().browser.get_version()))
    second = asyncio.ensure_future(chrome.channel.browser.send(cdp().target.get_targets()))
    ids = [(await chrome.command())["id"], (await chrome.command())["id"]]
    version = {"protocolVersion": "1.3", "product": "Chrome/1", "revision": "r", "userAgent": "UA", "jsVersion": "1"}
    targets = json.dumps({"id": ids[1], "result": {"targetInfos": []}}).encode() + b"\0"
    answer = json.dumps({"id": ids[0], "result": version}).encode() + b"\0"
    chrome.write(targets + answer[:7])  # the second answer first, and the first one in two pieces
    await asyncio.sleep(0.05)
    chrome.write(answer[7:])
    assert await within(first, 2) == ("1.3", "Chrome/1", "r", "UA", "1")
    assert await within(second, 2) == []


async def test_a_tab_gets_its_own_session_and_only_its_events(chrome: FakeChrome) -> None:
    info = cdp().target.TargetInfo(target_id=cdp().target.TargetID("T1"), type_="page", title="", url="about:blank", attached=False, can_access_opener=False)
    tab = PipeConnection(chrome.channel, info, None)
    attaching = asyncio.ensure_future(tab.attach())
    attach = await chrome.command()
    assert attach["method"] == "Target.attachToTarget" and attach["params"] == {"targetId": "T1", "flatten": True}
    assert "sessionId" not in attach
    chrome.write(json.dumps({"id": attach["id"], "result": {"sessionId": "S1"}}).encode() + b"\0")
    get_info = await chrome.command()
    chrome.write(json.dumps({"id": get_info["id"], "result": {"targetInfo": info.to_json()}}).encode() + b"\0")
    await within(attaching, 2)

    seen: dict[str, list[str]] = {"tab": [], "browser": []}
    tab.add_handler(cdp().page.FrameNavigated, lambda event, _c: seen["tab"].append(event.frame.url))
    chrome.channel.browser.add_handler(cdp().page.FrameNavigated, lambda event, _c: seen["browser"].append(event.frame.url))
    sending = asyncio.ensure_future(tab.send(cdp().page.enable()))
    enable = await chrome.command()
    assert enable["sessionId"] == "S1"
    frame = {"id": "F", "loaderId": "L", "url": "https://kns.cnki.net/", "domainAndRegistry": "", "securityOrigin": "",
             "mimeType": "text/html", "secureContextType": "Secure", "crossOriginIsolatedContextType": "NotIsolated",
             "gatedAPIFeatures": []}
    event = {"method": "Page.frameNavigated", "params": {"frame": frame, "type": "Navigation"}, "sessionId": "S1"}
    unknown = {"method": "Page.somethingNewer", "params": {}, "sessionId": "S1"}  # newer than the bindings: ignored
    stranger = {**event, "sessionId": "S2"}  # a session nobody here attached
    chrome.write(b"".join(json.dumps(m).encode() + b"\0" for m in (unknown, event, stranger, {"id": enable["id"], "result": {}})))
    await within(sending, 2)
    assert seen == {"tab": ["https://kns.cnki.net/"], "browser": []}

    closing = asyncio.ensure_future(tab.aclose())
    detach = await chrome.command()
    assert detach["method"] == "Target.detachFromTarget" and detach["params"] == {"sessionId": "S1"}
    chrome.write(json.dumps({"id": detach["id"], "result": {}}).encode() + b"\0")
    await within(closing, 2)
    assert set(chrome.channel.sessions) == {None}


async def test_an_error_answer_raises_and_the_pipe_end_fails_every_waiting_command(chrome: FakeChrome) -> None:
    failing = asyncio.ensure_future(chrome.channel.browser.send(cdp().target.close_target(cdp().target.TargetID("gone"))))
    command = await chrome.command()
    chrome.write(json.dumps({"id": command["id"], "error": {"code": -32000, "message": "No target with given id found"}}).encode() + b"\0")
    with pytest.raises(Exception, match="No target with given id found"):
        await within(failing, 2)

    waiting = asyncio.ensure_future(chrome.channel.browser.send(cdp().browser.get_version()))
    await chrome.command()
    assert chrome.channel.close_code is None
    os.close(chrome.writes)  # Chrome exited: its end of the answers pipe closed
    with pytest.raises(ConnectionError):
        await within(waiting, 2)
    assert chrome.channel.close_code is not None
    with pytest.raises(ConnectionError):
        await chrome.channel.browser.send(cdp().browser.get_version())


# --- handing Chrome its ends (chrome.py) ------------------------------------------------------------------


def test_on_linux_and_macos_chrome_gets_its_ends_on_descriptors_3_and_4() -> None:
    ends = PipeEnds(10, 11, 12, 13)
    command, streams = posix_pipe_spawn(["/opt/chrome", "--remote-debugging-pipe"], ends)
    assert command[:2] == ["/bin/sh", "-c"] and command[3:] == ["/opt/chrome", "--remote-debugging-pipe"]
    assert "3<&0 4>&1" in command[2]
    assert streams == {"stdin": 10, "stdout": 13, "stderr": asyncio.subprocess.PIPE}


class FakeStartupInfo:
    """What ``subprocess.STARTUPINFO`` is given (the real one exists on Windows only)."""

    def __init__(self, **fields: Any) -> None:
        self.fields = fields


def test_on_windows_chrome_is_told_its_two_handles_and_inherits_only_them() -> None:
    handles = {10: 0x1F4, 13: 0x2A8}  # the CRT descriptors of Chrome's ends -> their OS handles
    inheritable: list[tuple[int, bool]] = []
    ends = PipeEnds(10, 11, 12, 13)
    args = ["C:\\Chrome\\chrome.exe", "--remote-debugging-pipe", "--custom=1"]
    command, streams = windows_pipe_spawn(
        args, ends, os_handle=handles.__getitem__, set_inheritable=lambda h, v: inheritable.append((h, v)), startupinfo=FakeStartupInfo
    )
    # Chrome reads the first handle and writes the second, in decimal (base::StringToUint).
    assert command == [*args, "--remote-debugging-io-pipes=500,680"]
    assert sorted(inheritable) == [(500, True), (680, True)]  # CreateProcess refuses a listed handle that is not
    startupinfo = streams.pop("startupinfo")
    assert startupinfo.fields == {"lpAttributeList": {"handle_list": [500, 680]}}
    # Our ends (11, 12) are neither named nor listed; the browser's output comes back on its stdout.
    assert streams == {
        "stdin": asyncio.subprocess.DEVNULL, "stdout": asyncio.subprocess.PIPE, "stderr": asyncio.subprocess.STDOUT, "close_fds": True,
    }


async def test_opened_ends_carry_bytes_both_ways_and_are_not_inherited() -> None:
    ends = PipeEnds.open()
    try:
        assert not any(os.get_inheritable(fd) for fd in ends)
        os.write(ends.we_write, b"command\0")
        assert os.read(ends.chrome_reads, 100) == b"command\0"
        os.write(ends.chrome_writes, b"answer\0")
        assert os.read(ends.we_read, 100) == b"answer\0"
    finally:
        ends.close_all()
    with pytest.raises(OSError):
        os.fstat(ends.we_read)


async def test_both_threads_end_and_close_our_ends_once_chrome_is_gone() -> None:
    fake = FakeChrome()
    ours = (fake.channel._commands_fd, fake.channel._answers_fd)
    before = set(threading.enumerate())
    await fake.channel.open()
    threads = [t for t in threading.enumerate() if t not in before and t.name.startswith("devtools-pipe-")]
    assert len(threads) == 2
    fake.channel.close()  # our command end closes: Chrome reads EOF …
    assert await asyncio.to_thread(os.read, fake.reads, 100) == b""
    os.close(fake.writes)  # … and exits, closing its answer end
    for thread in threads:
        await asyncio.to_thread(thread.join, 5)
        assert not thread.is_alive()
    for fd in ours:
        with pytest.raises(OSError):
            os.fstat(fd)
    os.close(fake.reads)
