"""What the dedicated browser does in a page: evaluate, navigate, fetch, load, click, and its window.

``PageActions`` is the page half of ``browser.Browser``: every call goes through the browser's one
door to CDP (``_tab_call``/``_call``, a timeout each, failures as BROWSER_UNAVAILABLE or
PAGE_NAVIGATED), and scripts are run with JSON-encoded arguments, never by splicing strings.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import re
from typing import Any

from cnki_mcp.core.clock import Deadline, poll
from cnki_mcp.core.errors import BLOCKED_STATUS, CnkiError, net_failure, network_unreachable
from cnki_mcp.site.cdp import FetchResult, NavigationResult, PageScriptError, Tab
from cnki_mcp.site.cdp import cdp as cdp_module
from cnki_mcp.site.remote import GATEWAY_LOGIN_URL, NoAnswer, Routing

log = logging.getLogger(__name__)

CALL_TIMEOUT = 10.0  # default for a single CDP command
NAVIGATION_TIMEOUT = 20.0
FETCH_TIMEOUT = 30.0
RESPONSE_CAP = 8 * 1024 * 1024
RESOURCE_CHUNK = 1024 * 1024
PAGE_CLOSE_TIMEOUT = 1.0
WINDOW_CONFIRM_TIMEOUT = 2.0
CLICK_ATTEMPTS = 60
CLICK_INTERVAL = 0.05
NET_ERROR_WAIT = 0.3


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


def js_call(function_source: str, *args: Any) -> str:
    """An expression that calls a JS function with JSON-encoded arguments (no string splicing)."""
    encoded = ", ".join(json.dumps(a, ensure_ascii=False) for a in args)
    return f"({function_source.strip()})({encoded})"


def _wrap_json(expression: str) -> str:
    # Return JSON text: with Chrome 135+ nodriver hands back RemoteObjects for objects, not values.
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


class PageActions:
    """Page and window work of ``browser.Browser``, which provides the CDP door used here."""

    _background: set[asyncio.Task[Any]]
    # The remote-access route: URLs out in the gateway's form, everything a page says back in public form.
    routing: Routing

    @property
    def headless(self) -> bool:
        raise NotImplementedError

    def _live(self, tab: Tab | None = None) -> Any:
        raise NotImplementedError

    async def _call(self, conn: Any, command: Any, timeout: float, *, session: Any = None) -> Any:
        raise NotImplementedError

    async def _tab_call(self, tab: Tab, command: Any, timeout: float) -> Any:
        raise NotImplementedError

    # -- page work -----------------------------------------------------------------------------

    async def evaluate(self, tab: Tab, expression: str, timeout: float = CALL_TIMEOUT) -> Any:
        """Evaluate a JS expression in the page, await it, return its JSON value (None for undefined)."""
        cdp = cdp_module()
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
        return None if value is None else json.loads(self.routing.text(value))

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
        cdp = cdp_module()
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
        deadline = Deadline(timeout)
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
            if deadline.passed:
                raise CnkiError(
                    "CONTENT_NOT_READY",
                    "页面未呈现预期内容，不能判定正文不存在或无权限。",
                    details={"last_error": last_error} if last_error else None,
                )
            await asyncio.sleep(min(interval, deadline.remaining()))

    async def navigate(
        self, tab: Tab, url: str, timeout: float = NAVIGATION_TIMEOUT, *, until: str = "ready"
    ) -> NavigationResult:
        """Navigate and wait: ``commit`` (response arrived), ``ready`` (DOM parsed) or ``complete`` (loaded).

        The status is the main document's HTTP status (0 for about:, data: and same-document moves).
        A navigation that never reached the host, or that the CDN turned away (HTTP 418), raises
        NETWORK_UNREACHABLE; any other one Chrome could not complete without a response RESOURCE_FAILED.
        """
        if until not in ("commit", "ready", "complete"):
            raise ValueError(f"unknown navigation wait {until!r}")
        cdp = cdp_module()
        deadline = Deadline(timeout)
        tab._documents.clear()
        target = self.routing.out(url)
        _frame, loader_id, error_text, *_ = await self._tab_call(tab, cdp.page.navigate(url=target), timeout)
        document = None
        if loader_id:
            document = await tab._document(str(loader_id), min(2.0, deadline.remaining()))
        if error_text and document is None:
            raise net_failure(url, str(error_text)) or CnkiError(
                "RESOURCE_FAILED",
                f"页面打开失败：{error_text}",
                details={"url": url, "net_error": str(error_text)},
            )
        if document is not None and document[0] == BLOCKED_STATUS:
            raise network_unreachable(self.routing.back(document[1]) if document[1] else url, "blocked", status=BLOCKED_STATUS)
        if until != "commit":
            state = "=== 'complete'" if until == "complete" else "!== 'loading'"
            condition = f"document.readyState {state}"
            await self.wait_for(tab, condition, deadline.remaining(), interval=0.05)
        final = await self.evaluate(tab, "location.href", max(1.0, deadline.remaining()))
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
        asked_again: bool = False,
    ) -> FetchResult:
        """Run fetch() inside the page: the page's origin, cookies and Referer go along.

        The body is capped at 8 MiB (RESPONSE_TOO_LARGE); a network failure or the in-page timeout
        is RESOURCE_FAILED. A redirect to another origin (which the page's CORS rules refuse to
        follow, e.g. to the login host) is returned as that redirect: its status, the target URL as
        ``url``, an empty body, ``redirected`` set. If the caller is cancelled, the in-page request
        is aborted too. Through a gateway, a request that got no answer is ``NoAnswer`` unless it is
        ``asked_again``: the door looks at the page and asks once more, each a request of its own
        (``Door.fetch``).
        """
        call_id = f"{tab.generation}-{next(tab._fetch_ids)}"
        since = tab._last_redirect
        failed_since = tab._last_failure
        target = self.routing.out(url)
        expression = js_call(
            _FETCH_JS, call_id, target, method.upper(), body, headers or {}, int(timeout * 1000), RESPONSE_CAP
        )
        try:
            out = await self.evaluate(tab, expression, timeout + 5.0)
        except asyncio.CancelledError:
            abort = js_call("(id) => { const c = (window.__cnkiFetches || {})[id]; if (c) c.abort(); }", call_id)
            task = asyncio.get_running_loop().create_task(self._quiet_evaluate(tab, abort))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
            raise
        if not isinstance(out, dict):
            raise CnkiError("RESOURCE_FAILED", "页面内请求没有返回结果。", details={"url": url})
        if "error" in out:
            moved = None if out.get("timedOut") else tab._cross_origin_redirect(target, since)
            if moved is not None:
                return FetchResult(status=moved[1], url=self.routing.back(moved[0]), text="", redirected=True)
            if not out.get("timedOut") and not self.routing.direct and not asked_again:
                # A gateway drops in-page requests when its session ends (a reset, not an unreachable host):
                # the page tells first; a net error still there on the second asking is judged below.
                raise NoAnswer(url, str(out["error"]))
            if not out.get("timedOut"):
                # Chrome saw the request in the gateway's form; the answer names the public URL.
                unreachable = net_failure(url, await self._net_error(tab, target, failed_since))
                if unreachable is not None:
                    raise unreachable
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

    async def _net_error(self, tab: Tab, url: str, since: int) -> str:
        """The net error Chrome reported for the failed in-page request (its event may trail the script's answer)."""
        deadline = Deadline(NET_ERROR_WAIT)
        while not (error := tab._net_error(url, since)) and not deadline.passed:
            await asyncio.sleep(0.02)
        return error

    async def gateway_login_shown(self, tab: Tab, timeout: float) -> bool:
        """Whether loading the tab's page again gives the gateway's login (a host-rewriting gateway whose
        session ended drops or CORS-fails in-page requests and serves its login for the page itself).
        One request: the caller charges it."""
        try:
            page = await self.load_resource(tab, tab.url, timeout=timeout)
        except CnkiError as exc:
            log.debug("looking at the page after a failed in-page request: %s", exc)
            return False
        return page.url == GATEWAY_LOGIN_URL

    async def settle(self, tab: Tab, timeout: float) -> None:
        """Wait (at most ``timeout``) until the tab's page has loaded, e.g. back from the gateway's login."""
        with contextlib.suppress(CnkiError):
            await self.wait_for(tab, "document.readyState === 'complete'", timeout)

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
        cdp = cdp_module()
        deadline = Deadline(timeout)
        options = cdp.network.LoadNetworkResourceOptions(disable_cache=False, include_credentials=True)
        result = await self._tab_call(
            tab,
            cdp.network.load_network_resource(
                url=self.routing.out(url), options=options, frame_id=cdp.page.FrameId(tab.target_id)
            ),
            timeout,
        )
        status = int(result.http_status_code or 0)
        if result.stream is None:
            if status:
                return FetchResult(status=status, url=url, text="")
            raise net_failure(url, str(result.net_error_name or "")) or CnkiError(
                "RESOURCE_FAILED",
                f"浏览器没能取回页面：{result.net_error_name or '未知网络错误'}",
                details={"url": url, "net_error": result.net_error_name},
            )
        chunks: list[bytes] = []
        size = 0
        try:
            while True:
                read = cdp.io.read(handle=result.stream, size=RESOURCE_CHUNK)
                b64, data, eof = await self._tab_call(tab, read, max(1.0, deadline.remaining()))
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
        text = _decode(b"".join(chunks), _charset(result.headers))
        if self.routing.gateway_body(text):  # redirects are not visible here: the body tells
            url = GATEWAY_LOGIN_URL
        return FetchResult(status=status, url=url, text=self.routing.text(text))

    async def click(self, tab: Tab, selector: str, timeout: float = 5.0, *, text: str | None = None) -> bool:
        """Click the first visible element matching ``selector`` (and the ``text`` regex) like a person.

        Waits up to ``timeout`` for a candidate (False if none appears), scrolls it to the centre,
        waits until its box is stable, enabled and not covered (else CONTROL_NOT_ACTIONABLE), then
        dispatches real mouse events at its centre.
        """
        cdp = cdp_module()
        find = js_call(_FIND_CLICK_JS, selector, text or "")
        if not await poll(lambda: self.evaluate(tab, find, CALL_TIMEOUT), timeout, 0.1):
            return False
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
        cdp = cdp_module()
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

        async def in_state() -> bool:
            now = await self._call(session.nd, cdp.browser.get_window_bounds(window_id), CALL_TIMEOUT)
            return bool(now.window_state == wanted)

        confirmed = await poll(in_state, WINDOW_CONFIRM_TIMEOUT, 0.03)
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
        cdp = cdp_module()
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
