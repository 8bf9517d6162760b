"""The search as an MCP App, end to end: the page the real server serves at ui://cnki/search.html, in a real headless
Chromium, inside a test host that implements the host side of the Apps bridge (SEP-1865).

The host is a page served from loopback. It loads the app's HTML (read from the server with resources/read) into a
sandboxed iframe under the specification's default policy (no network), answers ``ui/initialize``, hands over a real
tool call's arguments and result, and passes each ``tools/call`` the app sends to this test, which forwards it to the
real server over MCP and posts the answer back. Every call the app made is recorded.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from PIL import Image

from cnki_mcp.core.clock import within
from cnki_mcp.surface.apps import APP_URI
from tests.harness import FINAL, McpSession, chromium_on_cdp, chromium_or_skip, serve_params
from tests.kns.server import KnsSimulator

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]

# The specification's restrictive default for a resource that declares no domains.
APP_CSP = (
    "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "media-src 'self' data:; connect-src 'none'; frame-src 'none'; object-src 'none'; base-uri 'self'"
)

HOST_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>test host</title></head>
<body style="margin:0">
<script>
"use strict";
const log = {calls: [], methods: []};
let frame, setting;
const send = (message) => frame.contentWindow.postMessage({jsonrpc: "2.0", ...message}, "*");
window.hostLog = log;
window.answer = (id, result) => send({id, result});
window.setTheme = (theme) => send({method: "ui/notifications/host-context-changed", params: {theme}});
let asked;
window.teardown = () => new Promise((resolve) => { asked = resolve; send({id: "bye", method: "ui/resource-teardown", params: {reason: "test"}}); });
window.addEventListener("message", (event) => {
  if (!frame || event.source !== frame.contentWindow) return;
  const m = event.data;
  log.methods.push(m.method || "(answer)");
  if (m.id === "bye" && !m.method) return asked(m);
  if (m.method === "ui/initialize") {
    send({id: m.id, result: {protocolVersion: m.params.protocolVersion, hostInfo: {name: "cnki-test-host", version: "1"},
      hostCapabilities: {serverTools: {}, openLinks: {}},
      hostContext: {theme: setting.theme, toolInfo: {tool: {name: setting.tool}}, displayMode: "inline", locale: "zh-CN"}}});
  } else if (m.method === "ui/notifications/initialized") {
    send({method: "ui/notifications/tool-input", params: {arguments: setting.input}});
    send({method: "ui/notifications/tool-result", params: setting.result});
  } else if (m.method === "tools/call") {
    log.calls.push({id: m.id, name: m.params.name, arguments: m.params.arguments});  // the test answers
  } else if (m.method === "ui/notifications/size-changed") {
    frame.style.height = Math.min(m.params.height, 2000) + "px";
  } else if (m.method && m.id !== undefined) {
    send({id: m.id, result: {}});
  }
});
fetch("/case.json").then((r) => r.json()).then((c) => {
  setting = c;
  frame = document.createElement("iframe");
  frame.setAttribute("sandbox", "allow-scripts");
  frame.style.cssText = "width:1000px;height:700px;border:0;display:block";
  const policy = `<meta http-equiv="Content-Security-Policy" content="${c.csp}">`;
  frame.srcdoc = c.html.replace("<head>", "<head>" + policy);
  document.body.append(frame);
});
</script>
</body></html>
"""


class HostServer:
    """The loopback server of the host page and of the case it shows (the app's HTML, a tool call's input and result)."""

    def __init__(self) -> None:
        self.case: dict[str, Any] = {}
        host = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body, kind = (
                    (json.dumps(host.case, ensure_ascii=False), "application/json")
                    if self.path == "/case.json"
                    else (HOST_PAGE, "text/html")
                )
                data = body.encode("utf-8")
                self.send_response(200)
                self.send_header("Content-Type", f"{kind}; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Browser:
    """A headless Chromium on the host page, over CDP: the app's frame read and clicked, the console watched."""

    def __init__(self, tab: Any) -> None:
        self.tab = tab
        self.errors: list[str] = []
        self.frame_context: Any = None

    async def watch(self) -> None:
        from nodriver import cdp

        def console(event: Any) -> None:
            if event.type_ in ("error", "assert"):
                self.errors.append("console: " + " ".join(str(a.value or a.description) for a in event.args))

        def thrown(event: Any) -> None:
            self.errors.append(f"exception: {event.exception_details.text} {event.exception_details.exception}")

        def entry(event: Any) -> None:
            if event.entry.level == "error":
                self.errors.append(f"log: {event.entry.text} {event.entry.url or ''}")

        self.tab.add_handler(cdp.runtime.ConsoleAPICalled, console)
        self.tab.add_handler(cdp.runtime.ExceptionThrown, thrown)
        self.tab.add_handler(cdp.log.EntryAdded, entry)
        await self.tab.send(cdp.runtime.enable())
        await self.tab.send(cdp.log.enable())

    async def js(self, expression: str, *, in_app: bool = False) -> Any:
        from nodriver import cdp

        context = self.frame_context if in_app else None
        remote, exc = await within(
            self.tab.send(cdp.runtime.evaluate(expression=expression, context_id=context, await_promise=True, return_by_value=True)),
            10,
        )
        assert exc is None, exc
        return remote.value

    async def until(self, expression: str, *, in_app: bool = True, timeout: float = 30) -> Any:
        for _ in range(int(timeout / 0.1)):
            value = await self.js(expression, in_app=in_app)
            if value:
                return value
            await asyncio.sleep(0.1)
        raise AssertionError(f"timed out waiting for {expression}")

    async def open(self, url: str) -> None:
        """The host page at ``url``, and a world of the test's own in the app's frame (same DOM, own globals)."""
        from nodriver import cdp

        await self.tab.get(url)
        await self.until("document.querySelector('iframe') && hostLog.methods.includes('ui/notifications/initialized')", in_app=False)
        tree = await self.tab.send(cdp.page.get_frame_tree())
        (child,) = tree.child_frames or []
        self.frame_context = (await self.tab.send(cdp.page.create_isolated_world(frame_id=child.frame.id_, world_name="test")))

    async def click(self, selector: str) -> None:
        """A real mouse click on the centre of ``selector`` in the app's frame."""
        from nodriver import cdp

        frame = await self.js("(() => { const r = document.querySelector('iframe').getBoundingClientRect(); return [r.x, r.y]; })()")
        box = await self.js(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); e.scrollIntoView({{block: 'center'}});"
            " const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()",
            in_app=True,
        )
        x, y = frame[0] + box[0], frame[1] + box[1]
        for kind in ("mousePressed", "mouseReleased"):
            await self.tab.send(cdp.input_.dispatch_mouse_event(type_=kind, x=x, y=y, button=cdp.input_.MouseButton.LEFT, click_count=1))

    async def screenshot(self) -> Image.Image:
        from nodriver import cdp

        data = await self.tab.send(cdp.page.capture_screenshot(format_="png"))
        return Image.open(io.BytesIO(base64.b64decode(data)))


class Case:
    """One showing of the app: the host given a real call's input and result, the app's tool calls forwarded to the server."""

    def __init__(self, mcp: McpSession, host: HostServer, browser: Browser) -> None:
        self.mcp, self.host, self.browser = mcp, host, browser
        self.calls: list[dict[str, Any]] = []
        self.answers: list[dict[str, Any]] = []  # the server's structured answers, in the order of ``calls``
        self._relay: asyncio.Task[None] | None = None
        self._closing = False

    async def show(self, tool: str, arguments: dict[str, Any], *, theme: str = "light") -> dict[str, Any]:
        result = await self.mcp.result(tool, arguments)
        assert not result.is_error, result
        read = await self.mcp.client.read_resource(APP_URI)
        (content,) = read.contents
        assert content.mime_type == "text/html;profile=mcp-app"
        self.host.case = {
            "html": content.text, "csp": APP_CSP, "tool": tool, "input": arguments, "theme": theme,
            "result": result.model_dump(mode="json", by_alias=True, exclude_none=True),
        }
        await self.browser.open(self.host.url)
        self._relay = asyncio.create_task(self._forward())
        return result.structured_content or {}

    async def _forward(self) -> None:
        """Each tools/call the app sends, forwarded to the real server; the answer posted back to the app."""
        while not self._closing:
            calls = await self.browser.js("hostLog.calls")
            for call in calls[len(self.calls):]:
                self.calls.append(call)
                answer = await self.mcp.result(call["name"], call["arguments"])
                dumped = answer.model_dump(mode="json", by_alias=True, exclude_none=True)
                self.answers.append(answer.structured_content or {})
                await self.browser.js(f"answer({json.dumps(call['id'])}, {json.dumps(dumped, ensure_ascii=False)})")
            await asyncio.sleep(0.1)

    def called(self, name: str) -> list[dict[str, Any]]:
        return [call["arguments"] for call in self.calls if call["name"] == name]

    async def answered(self, name: str, timeout: float = 60) -> list[dict[str, Any]]:
        """The arguments of the calls to ``name`` once at least one has been forwarded and answered."""
        for _ in range(int(timeout / 0.1)):
            if any(call["name"] == name for call in self.calls[: len(self.answers)]):
                return self.called(name)
            await asyncio.sleep(0.1)
        raise AssertionError(f"the app did not call {name}")

    async def close(self) -> None:
        # The flag as well as the cancel: a cancel that lands inside nodriver's send can be swallowed there, and
        # the relay would then poll for ever (a 300 s teardown, seen twice in long runs).
        self._closing = True
        if self._relay is not None:
            self._relay.cancel()
            await asyncio.wait({self._relay}, timeout=15)


async def assert_drawn(browser: Browser, path: Path) -> None:
    """A screenshot of the host page (kept at ``path``) that is not one colour."""
    image = await browser.screenshot()
    image.save(path)
    assert image.width > 0 and image.height > 0
    assert len(image.convert("RGB").getcolors(maxcolors=1 << 24) or []) > 1, "the screenshot is one colour"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def mcp(kns_server: KnsSimulator, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[McpSession]:
    data = tmp_path_factory.mktemp("app") / "data"
    async with McpSession.serving(serve_params(data, kns_server.browser_args, CNKI_INLINE_WAIT_SECONDS="90")) as session:
        yield session


@pytest.fixture(scope="module")
def host() -> Iterator[HostServer]:
    server = HostServer()
    yield server
    server.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    import nodriver as uc
    from nodriver import cdp

    exe = chromium_or_skip()
    # The sandboxed frame stays in the page's process, so the page's CDP session sees its console and can click in it.
    extra = ["--disable-features=IsolateSandboxedIframes", "--window-size=1100,900"]
    async with chromium_on_cdp(exe, extra, "cnki-app-host-") as port:
        driver = await uc.start(host="127.0.0.1", port=port, browser_executable_path=exe)
        watched = Browser(await driver.get("about:blank"))
        await watched.watch()
        yield watched
        with contextlib.suppress(Exception):  # the connection drops while Chromium closes
            await within(watched.tab.send(cdp.browser.close()), 5)


@pytest_asyncio.fixture(loop_scope="module")
async def case(mcp: McpSession, host: HostServer, browser: Browser) -> AsyncIterator[Case]:
    browser.errors.clear()
    shown = Case(mcp, host, browser)
    try:
        yield shown
    finally:
        await shown.close()


async def test_the_table_shows_the_rows_and_two_ticked_rows_go_to_one_download_call(
    case: Case, mcp: McpSession, browser: Browser, tmp_path: Path
) -> None:
    answer = await case.show("structured_search", {"expression": {"field": "title", "value": "知识图谱"}, "limit": 8})
    summary = answer.get("result") or {}
    assert summary.get("search_id"), answer
    page = await mcp.call("search_results", {"search_id": summary["search_id"], "view": "records", "limit": 50})
    expected = [row["record"] for row in page["results"]]
    assert len(expected) >= 3

    count = len(expected)
    await browser.until(f"document.querySelectorAll('#rows tr').length === {count}")
    shown = await browser.js(
        "[...document.querySelectorAll('#rows tr')].map((tr) => [tr.dataset.ref, tr.cells[1].textContent, tr.cells[4].textContent])",
        in_app=True,
    )
    assert shown == [[r["record_ref"], r["title"], str(r["year"])] for r in expected]
    assert case.called("search_results") == [
        {"search_id": summary["search_id"], "scope": "selected", "view": "records", "offset": 0, "limit": 50}
    ]
    assert await browser.js("document.getElementById('download').disabled", in_app=True) is True

    await browser.click("#rows tr:nth-child(1) input[type=checkbox]")
    await browser.click("#rows tr:nth-child(2) input[type=checkbox]")
    await browser.until("!document.getElementById('download').disabled")
    await browser.click("#download")
    await browser.until("/下载任务|下载：/.test(document.getElementById('status').textContent)", timeout=60)
    assert case.called("download_papers") == [{"record_refs": [expected[0]["record_ref"], expected[1]["record_ref"]]}]
    (download,) = [a for c, a in zip(case.calls, case.answers, strict=True) if c["name"] == "download_papers"]
    if download.get("status") not in FINAL:  # the simulator asks for a login: the browser is freed for the next test
        await mcp.call("operation_control", {"action": "cancel", "operation_id": download["operation_id"]})

    await assert_drawn(browser, tmp_path / "table.png")

    light = await browser.js("getComputedStyle(document.body).backgroundColor", in_app=True)
    await browser.js("setTheme('dark')")
    await browser.until(f"getComputedStyle(document.body).backgroundColor !== {json.dumps(light)}")
    assert await browser.js("teardown()") == {"jsonrpc": "2.0", "id": "bye", "result": {}}
    assert browser.errors == []


async def test_sorting_and_filtering_keep_to_the_rows(case: Case, browser: Browser) -> None:
    await case.show("structured_search", {"expression": {"field": "title", "value": "知识图谱"}, "limit": 8}, theme="dark")
    await browser.until("document.querySelectorAll('#rows tr').length > 2")
    assert await browser.js("document.documentElement.dataset.theme", in_app=True) == "dark"
    await browser.click("th[data-key=year]")
    years = await browser.js("[...document.querySelectorAll('#rows tr')].map((tr) => Number(tr.cells[4].textContent))", in_app=True)
    assert years == sorted(years, reverse=True)
    title = await browser.js("document.querySelector('#rows tr:nth-child(2)').cells[1].textContent", in_app=True)
    await browser.js(
        f"(() => {{ const f = document.getElementById('filter'); f.value = {json.dumps(title)};"
        " f.dispatchEvent(new Event('input')); return true; })()",
        in_app=True,
    )
    assert await browser.js("[...document.querySelectorAll('#rows tr')].map((tr) => tr.cells[1].textContent)", in_app=True) == [title]
    await browser.click("#rows tr td.title a")  # the host opens links: the frame itself never navigates
    await browser.until("hostLog.methods.includes('ui/open-link')", in_app=False)
    assert browser.errors == []


async def test_a_facet_bar_narrows_the_search(case: Case, browser: Browser, tmp_path: Path) -> None:
    expression = {"field": "title", "value": "知识图谱"}
    answer = await case.show("search_facets", {"expression": expression, "facets": ["year", "subject"]})
    facets = (answer.get("result") or answer)["facets"]
    first = facets["year"][0]
    await browser.until("document.querySelectorAll('#chart g.bar').length > 0")
    await assert_drawn(browser, tmp_path / "facets.png")
    assert await browser.js("document.querySelectorAll('#chart g.bar').length", in_app=True) == min(len(facets["year"]), 30)
    await browser.click("#chart g.bar")
    await browser.until("document.querySelectorAll('#rows tr').length > 0", timeout=60)
    (narrowed,) = case.called("structured_search")
    assert narrowed == {"expression": expression, "facet_filters": {"year": [first["code"]]}}
    assert browser.errors == []


async def test_related_papers_are_drawn_as_a_graph(case: Case, mcp: McpSession, browser: Browser, tmp_path: Path) -> None:
    search = await mcp.call("structured_search", {"expression": {"field": "title", "value": "知识图谱"}, "limit": 5})
    ref = search["result"]["results"][0]["record_ref"]
    answer = await case.show("related_papers", {"record_ref": ref, "relation": "references", "limit": 10})
    references = (answer.get("result") or answer)["papers"]
    await browser.until(f"document.querySelectorAll('#relations g.node').length >= {min(len(references), 15) + 1}")
    assert await case.answered("related_papers") == [{"record_ref": ref, "relation": "citing", "limit": 20}]
    assert await browser.js("document.querySelector('#relations g.node.center text').textContent", in_app=True)
    await assert_drawn(browser, tmp_path / "graph.png")
    assert browser.errors == []
