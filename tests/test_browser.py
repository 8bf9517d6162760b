"""The dedicated browser: launch, attach, pages, tabs, downloads, crash recovery, clean exit.

Real-browser tests (marked ``browser``) run Debian's headless Chromium against a tiny HTTPS server
in this file, reached as ``*.cnki.net`` through ``CNKI_BROWSER_ARGS`` host mapping — the same
route the CNKI simulator uses. The unit tests above them need no browser.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import NamedTuple

import psutil
import pytest
import pytest_asyncio

from cnki_mcp.core.clock import within
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.site import chrome as chrome_module
from cnki_mcp.site import page_io
from cnki_mcp.site.browser import Browser
from cnki_mcp.site.cdp import PageScriptError
from cnki_mcp.site.chrome import clear_stale_profile, env_browser_args, launch_arguments
from tests.harness import process_tree, tcp_ports

# --------------------------------------------------------------------------------------------
# Unit tests (no browser)


def test_env_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CNKI_HEADLESS", "1")
    assert chrome_module.env_headless()
    monkeypatch.setenv("CNKI_HEADLESS", "0")
    assert not chrome_module.env_headless()
    monkeypatch.setenv(
        "CNKI_BROWSER_ARGS", '--host-resolver-rules="MAP *.cnki.net 127.0.0.1:8443" --ignore-certificate-errors'
    )
    assert env_browser_args() == ["--host-resolver-rules=MAP *.cnki.net 127.0.0.1:8443", "--ignore-certificate-errors"]
    monkeypatch.setenv("CNKI_BROWSER_ARGS", '--broken="unclosed')
    with pytest.raises(CnkiError) as caught:
        env_browser_args()
    assert caught.value.code == "INVALID_INPUT"


def test_launch_arguments(tmp_path: Path) -> None:
    args = launch_arguments(Path("/opt/chrome"), tmp_path, headless=True, extra=["--custom=1"])
    assert args[0] == "/opt/chrome"
    assert f"--user-data-dir={tmp_path}" in args
    assert "--remote-debugging-port=0" in args and "--headless=new" in args
    assert args[-1] == "--custom=1"  # the caller's flags come last so they win
    assert ("--no-sandbox" in args) == (hasattr(os, "getuid") and os.getuid() == 0)
    headed = launch_arguments(Path("/opt/chrome"), tmp_path, headless=False, extra=[])
    assert "--headless=new" not in headed and "--start-minimized" in headed
    piped = launch_arguments(Path("/opt/chrome"), tmp_path, headless=True, extra=[], pipe=True)
    assert "--remote-debugging-pipe" in piped and not any(a.startswith("--remote-debugging-port") for a in piped)


def test_the_pipe_everywhere_but_flatpak_launchers(monkeypatch: pytest.MonkeyPatch) -> None:
    assert chrome_module.DEVTOOLS_PIPE
    monkeypatch.setattr(chrome_module, "DEVTOOLS_PIPE", True)
    assert chrome_module.devtools_pipe(Path("/usr/bin/chromium"))
    assert chrome_module.devtools_pipe(Path("/snap/bin/chromium"))
    assert not chrome_module.devtools_pipe(Path("/var/lib/flatpak/exports/bin/org.chromium.Chromium"))
    monkeypatch.setattr(chrome_module, "DEVTOOLS_PIPE", False)
    assert not chrome_module.devtools_pipe(Path("/usr/bin/chromium"))


def _fake_browser(profile: Path) -> subprocess.Popen[bytes]:
    """A process that looks like a browser on ``profile`` to a command-line scan."""
    return subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", f"--user-data-dir={profile}"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def test_stale_profile_lock_is_removed(tmp_path: Path) -> None:
    lock = tmp_path / "SingletonLock"
    os.symlink("another-host-999999", lock)
    (tmp_path / "DevToolsActivePort").write_text("1\n/devtools/browser/x\n")
    clear_stale_profile(tmp_path)
    assert not os.path.lexists(lock)
    assert not (tmp_path / "DevToolsActivePort").exists()


def test_leftover_of_dead_server_is_ended(tmp_path: Path) -> None:
    proc = _fake_browser(tmp_path)
    try:
        time.sleep(0.2)
        os.symlink(f"host-{proc.pid}", tmp_path / "SingletonLock")
        # Recorded owner: the parent process, but with another start time, so a server long gone.
        owner = {"server_pid": os.getppid(), "server_started": 1.0, "browser_pid": proc.pid}
        (tmp_path / "cnki-mcp-owner.json").write_text(json.dumps(owner))
        clear_stale_profile(tmp_path)
        assert proc.wait(timeout=5) is not None
        assert not os.path.lexists(tmp_path / "SingletonLock")
    finally:
        proc.kill()
        proc.wait()


def test_foreign_browser_on_profile_is_left_alone(tmp_path: Path) -> None:
    proc = _fake_browser(tmp_path)
    try:
        time.sleep(0.2)
        os.symlink(f"host-{proc.pid}", tmp_path / "SingletonLock")
        with pytest.raises(CnkiError) as caught:
            clear_stale_profile(tmp_path)
        assert caught.value.code == "BROWSER_PROFILE_IN_USE"
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


async def test_missing_executable_and_unstarted_browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    browser = Browser(tmp_path / "profile", tmp_path / "no-such-chrome", headless=True, extra_args=[])
    with pytest.raises(CnkiError) as caught:
        await browser.ensure()
    assert caught.value.code == "BROWSER_NOT_FOUND"
    monkeypatch.setenv("CNKI_BROWSER_PATH", str(tmp_path / "also-missing"))
    with pytest.raises(CnkiError) as discovered:
        await Browser(tmp_path / "profile").ensure()  # no executable given: discovery decides
    assert discovered.value.code == "BROWSER_NOT_FOUND" and "also-missing" in discovered.value.message
    assert not browser.running and browser.connection_generation == 0
    assert not await browser.probe()


# --------------------------------------------------------------------------------------------
# A tiny HTTPS site served as *.cnki.net

_INDEX = """<!doctype html><html><head><meta charset="utf-8"><title>首页</title></head><body>
<p id="greeting">你好，知网</p>
<a id="open" href="/popup" target="_blank">打开新页</a>
<a id="hidden" href="/popup" target="_blank" style="display:none">打开新页</a>
<a id="dl" href="/file.pdf">PDF下载</a>
</body></html>"""

_PDF = b"%PDF-1.4\n" + b"0" * 400 + b"\n%%EOF\n"


class _Site(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def _send(self, code: int, body: bytes | str, ctype: str = "text/html; charset=utf-8", extra: tuple = ()) -> None:
        data = body.encode("utf-8") if isinstance(body, str) else body
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for key, value in extra:
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        host = self.headers.get("Host", "")
        if self.path == "/":
            self._send(200, _INDEX, extra=(("Set-Cookie", "SID=s1; Path=/"),))
        elif self.path == "/popup":
            self._send(200, "<title>新页</title><body>弹出的页面</body>")
        elif self.path == "/file.pdf":
            self._send(200, _PDF, "application/pdf", (("Content-Disposition", "attachment; filename=paper.pdf"),))
        elif self.path == "/host":
            self._send(200, f"<title>host</title><body>{host}</body>")
        else:
            self._send(404, "<title>404</title>没有这个页面")

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8")
        echo = {
            "body": body,
            "type": self.headers.get("Content-Type"),
            "cookie": self.headers.get("Cookie"),
            "referer": self.headers.get("Referer"),
        }
        self._send(200, json.dumps(echo, ensure_ascii=False), "application/json; charset=utf-8")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    if shutil.which("openssl") is None:
        pytest.skip("需要 openssl 生成测试证书")
    folder = tmp_path_factory.mktemp("cert")
    key, cert = folder / "key.pem", folder / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-days", "2", "-subj", "/CN=cnki.net", "-addext", "subjectAltName=DNS:*.cnki.net",
         "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Site)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _chromium() -> str:
    path = os.environ.get("CNKI_TEST_BROWSER") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.skip("没有可用的 Chromium（CI 会安装 Debian 的 chromium）")
    return path


def _processes_on(profile: Path) -> list[int]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if any(str(profile) in arg for arg in proc.info.get("cmdline") or []):
            found.append(proc.pid)
    return found


async def _assert_gone(profile: Path) -> None:
    deadline = time.monotonic() + 5
    while _processes_on(profile) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert _processes_on(profile) == []


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared(site: int, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Browser]:
    """One browser for the page tests, configured only through the environment as in production."""
    profile = tmp_path_factory.mktemp("shared") / "profile"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CNKI_HEADLESS", "1")
        patch.setenv(
            "CNKI_BROWSER_ARGS",
            f'--host-resolver-rules="MAP *.cnki.net 127.0.0.1:{site}" --ignore-certificate-errors',
        )
        browser = Browser(profile, Path(_chromium()))
        await browser.ensure()
    print(f"\nlaunch to attached: {browser.launch_seconds:.2f} s")
    yield browser
    await browser.close()
    assert not browser.running
    await _assert_gone(profile)


@pytest.mark.browser
@pytest.mark.asyncio(loop_scope="module")
async def test_navigate_evaluate_and_fetch(shared: Browser) -> None:
    assert shared.running and shared.connection_generation == 1 and shared.process_id
    assert await shared.probe()
    tab = await shared.new_tab()
    try:
        page = await shared.navigate(tab, "https://kns.cnki.net/")
        assert (page.status, page.url) == (200, "https://kns.cnki.net/")
        assert await page_io.evaluate(shared, tab, "({title: document.title, n: 0, none: undefined, list: [1, '二']})") == {
            "title": "首页",
            "n": 0,
            "list": [1, "二"],
        }
        assert await page_io.evaluate(shared, tab, "new Promise(r => setTimeout(() => r(false), 10))") is False
        assert await page_io.evaluate(shared, tab, "undefined") is None
        assert "HeadlessChrome" not in await page_io.evaluate(shared, tab, "navigator.userAgent")
        assert "你好，知网" in await shared.page_html(tab)
        assert (await shared.screenshot(tab)).startswith(b"\x89PNG")
        with pytest.raises(PageScriptError) as script:
            await page_io.evaluate(shared, tab, "null.boom")
        assert "TypeError" in script.value.description

        posted = await page_io.fetch_in_page(shared,
            tab,
            "/grid",
            method="POST",
            body="QueryJson=%7B%7D&pageNum=2",
            headers={"Content-Type": "application/x-www-form-urlencoded; charset=UTF-8"},
        )
        assert posted.status == 200 and posted.url == "https://kns.cnki.net/grid" and not posted.redirected
        echo = json.loads(posted.text)
        assert echo["body"] == "QueryJson=%7B%7D&pageNum=2"
        assert echo["cookie"] == "SID=s1" and echo["referer"] == "https://kns.cnki.net/"
        with pytest.raises(CnkiError) as failed:
            await page_io.fetch_in_page(shared, tab, "https://127.0.0.1:9/", timeout=5)
        assert failed.value.code == "RESOURCE_FAILED"

        # Another mapped host, loaded through the network stack without rendering.
        other = await page_io.load_resource(shared, tab, "https://navi.cnki.net/host")
        assert other.status == 200 and "navi.cnki.net" in other.text
        missing = await shared.navigate(tab, "https://kns.cnki.net/nothing")
        assert missing.status == 404

        with pytest.raises(CnkiError) as waited:
            await page_io.wait_for(shared, tab, "document.querySelector('#never')", 0.3)
        assert waited.value.code == "CONTENT_NOT_READY"
        with pytest.raises(CnkiError) as hung:
            await page_io.evaluate(shared, tab, "new Promise(() => {})", 0.3)
        assert hung.value.code == "BROWSER_UNAVAILABLE"
    finally:
        await shared.close_tab(tab)


@pytest.mark.browser
@pytest.mark.asyncio(loop_scope="module")
async def test_click_new_tab_download_and_windows(shared: Browser, tmp_path: Path) -> None:
    tab = await shared.new_tab("https://kns.cnki.net/")
    try:
        assert await shared.wait_new_tab(tab, 0.2) is None
        assert not await shared.click(tab, "a#hidden", timeout=0.2)  # invisible: never a candidate
        assert await shared.click(tab, "a", text="打开新页", timeout=2)
        popup = await shared.wait_new_tab(tab, 5)
        assert popup is not None and popup.opener_id == tab.target_id
        assert await page_io.wait_for(shared, popup, "document.body && document.body.innerText", 5) == "弹出的页面"
        assert [p.target_id for p in await shared.popups(tab)] == [popup.target_id]
        await page_io.evaluate(shared, popup, "setTimeout(() => window.close(), 0), 1")
        deadline = time.monotonic() + 5
        while not popup.closed and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert popup.closed and await shared.popups(tab) == []
        with pytest.raises(CnkiError):
            await page_io.evaluate(shared, popup, "1")

        incoming = tmp_path / "incoming"
        await shared.set_download_dir(incoming)
        assert await shared.wait_download(None, 0.1) is None
        assert await shared.click(tab, "#dl", text="PDF下载")
        done = await shared.wait_download(None, 10)
        assert done is not None and done.state == "completed" and done.suggested_filename == "paper.pdf"
        assert Path(done.path) == incoming / done.guid
        assert Path(done.path).read_bytes() == _PDF

        assert await shared.bring_to_front(tab) is False  # headless: nothing a person could see
        assert await shared.minimize(tab)
    finally:
        await shared.close_tab(tab)
    assert tab.closed
    assert await shared.probe()  # no tab left, the browser keeps running


@pytest.mark.browser
async def test_killed_browser_is_unavailable_until_reset(site: int, tmp_path: Path) -> None:
    profile = tmp_path / "profile"
    profile.mkdir()
    # A lock left by a browser on another machine (a copied data folder): Chrome would refuse it.
    os.symlink("another-host-4242", profile / "SingletonLock")
    extra = [f"--host-resolver-rules=MAP *.cnki.net 127.0.0.1:{site}", "--ignore-certificate-errors"]
    browser = Browser(profile, Path(_chromium()), headless=True, extra_args=extra)
    try:
        tab = await browser.new_tab("https://kns.cnki.net/")
        first_pid = browser.process_id
        assert first_pid is not None
        psutil.Process(first_pid).kill()
        with pytest.raises(CnkiError) as dead:
            await page_io.evaluate(browser, tab, "1")
        assert dead.value.code == "BROWSER_UNAVAILABLE"
        deadline = time.monotonic() + 5
        while browser.running and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        with pytest.raises(CnkiError) as still:
            await browser.ensure()
        assert still.value.code == "BROWSER_UNAVAILABLE"
        assert not await browser.probe()

        await browser.reset()
        await browser.ensure()
        assert browser.connection_generation == 2 and browser.process_id != first_pid
        with pytest.raises(CnkiError) as stale:
            await page_io.evaluate(browser, tab, "1")
        assert stale.value.code == "BROWSER_UNAVAILABLE"
        fresh = await browser.new_tab()
        assert (await browser.navigate(fresh, "https://kns.cnki.net/")).status == 200
    finally:
        await browser.close()
    await _assert_gone(profile)


_ABANDON = """
import asyncio, sys
from pathlib import Path
from cnki_mcp.site.browser import Browser

async def main() -> None:
    browser = Browser(Path(sys.argv[1]), Path(sys.argv[2]), headless=True, extra_args=[])
    await browser.ensure()
    print(browser.process_id, flush=True)
    if sys.argv[3] == "signal":
        await asyncio.sleep(60)

asyncio.run(main())
"""


@pytest.mark.browser
@pytest.mark.parametrize("ending", ["exit", "signal"])
async def test_server_exit_without_close_leaves_no_browser(tmp_path: Path, ending: str) -> None:
    """A server that exits (or is sent SIGTERM) without closing the browser still takes it along."""
    if ending == "signal" and sys.platform == "win32":
        pytest.skip("SIGTERM 只在 POSIX 上有意义")
    profile = tmp_path / "profile"
    server = subprocess.Popen(
        [sys.executable, "-c", _ABANDON, str(profile), _chromium(), ending],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=Path(__file__).resolve().parent.parent,
    )
    try:
        assert server.stdout is not None
        pid = int(await within(asyncio.to_thread(server.stdout.readline), 30))
        assert psutil.pid_exists(pid)
        if ending == "signal":
            server.terminate()
        await within(asyncio.to_thread(server.wait), 15)
    finally:
        server.kill()
        server.wait()
    await _assert_gone(profile)


class _Addr(NamedTuple):
    ip: str
    port: int


class _Conn(NamedTuple):
    laddr: _Addr
    raddr: _Addr
    pid: int | None
    status: str = psutil.CONN_ESTABLISHED


def test_a_socket_of_ours_the_machine_table_could_not_place_is_no_stranger(monkeypatch: pytest.MonkeyPatch) -> None:
    port, ours = 40000, 4242
    opened_meanwhile = _Conn(_Addr("127.0.0.1", 50001), _Addr("127.0.0.1", port), None)  # ours, owner not found yet
    hidden = _Conn(_Addr("127.0.0.1", 50002), _Addr("127.0.0.1", port), None)  # another user's: its pid is hidden
    known = _Conn(_Addr("127.0.0.1", 50003), _Addr("127.0.0.1", port), 777)
    browser_side = _Conn(_Addr("127.0.0.1", port), _Addr("127.0.0.1", 50001), 999)
    monkeypatch.setattr(psutil, "net_connections", lambda kind: [opened_meanwhile, hidden, known, browser_side])

    class Own:
        def __init__(self, pid: int) -> None:
            assert pid == ours

        def net_connections(self, kind: str) -> list[_Conn]:
            return [opened_meanwhile._replace(pid=ours)]

    monkeypatch.setattr(psutil, "Process", Own)
    assert chrome_module.devtools_strangers(port, ours) == [None, 777]


def test_an_unplaced_socket_gone_by_the_second_look_is_no_stranger_and_one_still_there_keeps_its_owner(monkeypatch: pytest.MonkeyPatch) -> None:
    port, ours = 40000, 4242
    short_request = _Conn(_Addr("127.0.0.1", 50001), _Addr("127.0.0.1", port), None)  # one of nodriver's /json calls
    placed_later = _Conn(_Addr("127.0.0.1", 50002), _Addr("127.0.0.1", port), None)
    ours_later = _Conn(_Addr("127.0.0.1", 50003), _Addr("127.0.0.1", port), None)
    looks = iter([[short_request, placed_later, ours_later], [placed_later._replace(pid=777), ours_later._replace(pid=ours)]])
    monkeypatch.setattr(psutil, "net_connections", lambda kind: next(looks))

    class Own:
        def __init__(self, pid: int) -> None:
            assert pid == ours

        def net_connections(self, kind: str) -> list[_Conn]:
            return []  # all three opened after the machine table's owners were read, none in ours yet

    monkeypatch.setattr(psutil, "Process", Own)
    assert chrome_module.devtools_strangers(port, ours) == [777]


@pytest.mark.browser
async def test_another_process_on_the_devtools_port_ends_the_browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CNKI_HEADLESS", "1")
    monkeypatch.setattr(chrome_module, "DEVTOOLS_PIPE", False)  # the port and its watcher: what Flatpak launchers keep
    browser = Browser(tmp_path / "profile", Path(_chromium()))
    await browser.ensure()
    try:
        port = browser._session.port  # type: ignore[union-attr]
        pid = browser.process_id
        assert pid is not None
        # Another local program (a child process: not this one) opens the port the way a CDP client would.
        intruder = subprocess.Popen(
            [sys.executable, "-c", f"import socket, time; s = socket.create_connection(('127.0.0.1', {port})); time.sleep(30)"]
        )
        try:
            with pytest.raises(Exception) as caught:
                for _ in range(100):  # bounded: 10 s
                    await browser.ensure()
                    await asyncio.sleep(0.1)
            assert getattr(caught.value, "code", "") == "BROWSER_DEVTOOLS_INTRUDED", caught.value
            assert intruder.pid in caught.value.details["pids"]  # type: ignore[attr-defined]
            assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        finally:
            intruder.kill()
            intruder.wait(5)
    finally:
        await browser.close()


# --- the DevTools pipe: no port at all ----------------------------------------------------------------------


@pytest.mark.browser
async def test_over_the_pipe_the_browser_listens_on_no_port_and_its_exit_is_seen(site: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CNKI_HEADLESS", "1")
    extra = [f"--host-resolver-rules=MAP *.cnki.net 127.0.0.1:{site}", "--ignore-certificate-errors"]
    browser = Browser(tmp_path / "profile", Path(_chromium()), extra_args=extra)
    await browser.ensure()
    try:
        assert browser._session is not None and browser._session.port == 0 and browser._session.watch is None
        tab = await browser.new_tab("https://kns.cnki.net/")
        second = await browser.new_tab("https://kns.cnki.net/")
        title = await page_io.evaluate(browser, tab, "document.title")
        assert title and title == await page_io.evaluate(browser, second, "document.title")
        await browser.close_tab(second)
        assert await page_io.evaluate(browser, tab, "1 + 1") == 2  # closing one session leaves the others working
        pid = browser.process_id
        assert pid is not None and tcp_ports(process_tree([psutil.Process(pid)]), listening=True) == []
        assert not (tmp_path / "profile" / "DevToolsActivePort").exists()
        psutil.Process(pid).kill()
        with pytest.raises(CnkiError) as caught:
            for _ in range(50):  # bounded: the pipe's end is seen at once
                await page_io.evaluate(browser, tab, "1")
                await asyncio.sleep(0.1)
        assert caught.value.code == "BROWSER_UNAVAILABLE", caught.value
    finally:
        await browser.close()


@pytest.mark.browser
async def test_a_browser_that_exits_when_handed_the_pipe_is_started_again_on_the_watched_port(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A browser older than --remote-debugging-io-pipes (Windows) exits at once when told to use a pipe: stood in
    # for by a launcher that exits with Chrome's "unsupported parameter" code when given the pipe flag.
    monkeypatch.setenv("CNKI_HEADLESS", "1")
    monkeypatch.setattr(chrome_module, "PORT_WHEN_PIPE_REFUSED", True)
    launches = tmp_path / "launches"
    old = tmp_path / "old-browser"
    old.write_text(
        f'#!/bin/sh\necho "$@" >> {shlex.quote(str(launches))}\n'
        f'case " $* " in *" --remote-debugging-pipe "*) echo "pipe not open" >&2; exit 13;; esac\n'
        f'exec {shlex.quote(_chromium())} "$@"\n'
    )
    old.chmod(0o755)
    browser = Browser(tmp_path / "profile", old)
    try:
        await browser.ensure()
        session = browser._session
        assert session is not None and session.port > 0 and session.watch is not None
        assert await browser.probe()
        await browser.reset()
        await browser.ensure()  # the same executable: straight to the port, no second refusal
        assert browser._session is not None and browser._session.port > 0
        tried = launches.read_text().splitlines()
        assert ["--remote-debugging-pipe" in line for line in tried] == [True, False, False]
    finally:
        await browser.close()
    # Where a refusal is not expected (the pipe on descriptors 3 and 4), the exit is reported as it is.
    monkeypatch.setattr(chrome_module, "PORT_WHEN_PIPE_REFUSED", False)
    launches.unlink()
    again = Browser(tmp_path / "profile", old)
    try:
        with pytest.raises(CnkiError) as caught:
            await again.ensure()
        assert caught.value.code == "BROWSER_UNAVAILABLE" and caught.value.details["exit_code"] == 13, caught.value
        assert len(launches.read_text().splitlines()) == 1
    finally:
        await again.close()


def test_only_an_exit_before_the_first_answer_earns_a_launch_on_the_port(monkeypatch: pytest.MonkeyPatch) -> None:
    exe = Path("C:/Chrome/chrome.exe")
    monkeypatch.setattr(chrome_module, "PORT_WHEN_PIPE_REFUSED", True)
    assert chrome_module.relaunch_on_port(CnkiError("BROWSER_UNAVAILABLE", details={"exit_code": 13, "output": []}), exe)
    assert not chrome_module.relaunch_on_port(CnkiError("BROWSER_PROFILE_IN_USE", details={"exit_code": 21}), exe)
    assert not chrome_module.relaunch_on_port(CnkiError("BROWSER_UNAVAILABLE", details={"exit_code": None}), exe)  # silent, still running
    assert not chrome_module.relaunch_on_port(CnkiError("BROWSER_UNAVAILABLE"), exe)
    monkeypatch.setattr(chrome_module, "PORT_WHEN_PIPE_REFUSED", False)
    assert not chrome_module.relaunch_on_port(CnkiError("BROWSER_UNAVAILABLE", details={"exit_code": 13}), exe)
