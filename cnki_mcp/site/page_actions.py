"""What the dedicated browser does in a page: navigate, click, screenshots, its window, and the script runner.

``PageActions`` is the page half of ``browser.Browser``: every call goes through the browser's one
door to CDP (``_tab_call``/``_call``, a timeout each, failures as BROWSER_UNAVAILABLE or
PAGE_NAVIGATED), and scripts are run with JSON-encoded arguments, never by splicing strings. Scripts
evaluated for their value and in-page requests are reached only through ``page_io`` (the exchange
engine's own module); ``_evaluate`` and ``_wait_for`` are the runner those and the actions here share.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from typing import Any

from cnki_mcp.core.clock import Deadline, poll
from cnki_mcp.core.errors import BLOCKED_STATUS, CnkiError, net_failure, network_unreachable
from cnki_mcp.core.text import loads_site_json
from cnki_mcp.site.cdp import NavigationResult, PageScriptError, Tab
from cnki_mcp.site.cdp import cdp as cdp_module
from cnki_mcp.site.remote import Routing

log = logging.getLogger(__name__)

CALL_TIMEOUT = 10.0  # default for a single CDP command
NAVIGATION_TIMEOUT = 20.0
PAGE_CLOSE_TIMEOUT = 1.0
WINDOW_CONFIRM_TIMEOUT = 2.0
CLICK_ATTEMPTS = 60
CLICK_INTERVAL = 0.05


# --------------------------------------------------------------------------------------------
# JavaScript run in pages

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

    async def _evaluate(self, tab: Tab, expression: str, timeout: float = CALL_TIMEOUT) -> Any:
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
        return None if value is None else loads_site_json(self.routing.text(value))

    async def page_html(self, tab: Tab, timeout: float = CALL_TIMEOUT) -> str:
        html = await self._evaluate(
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

    async def _wait_for(self, tab: Tab, js_predicate: str, timeout: float, *, interval: float = 0.12) -> Any:
        """Poll a JS expression until it is truthy and return its value; CONTENT_NOT_READY on timeout.

        Script errors while polling (the document being replaced, the page's objects not there yet)
        count as "not yet"; transport failures end the wait at once.
        """
        deadline = Deadline(timeout)
        last_error = ""
        while True:
            try:
                value = await self._evaluate(tab, js_predicate, max(1.0, min(CALL_TIMEOUT, timeout)))
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
            await self._wait_for(tab, condition, deadline.remaining(), interval=0.05)
        final = await self._evaluate(tab, "location.href", max(1.0, deadline.remaining()))
        self.routing.landed(str(final or ""))  # CNKI may have sent the session to its other site
        status = document[0] if document is not None else 0
        return NavigationResult(status=status, url=str(final or url), error=str(error_text or ""))

    async def click(self, tab: Tab, selector: str, timeout: float = 5.0, *, text: str | None = None) -> bool:
        """Click the first visible element matching ``selector`` (and the ``text`` regex) like a person.

        Waits up to ``timeout`` for a candidate (False if none appears), scrolls it to the centre,
        waits until its box is stable, enabled and not covered (else CONTROL_NOT_ACTIONABLE), then
        dispatches real mouse events at its centre.
        """
        cdp = cdp_module()
        find = js_call(_FIND_CLICK_JS, selector, text or "")
        if not await poll(lambda: self._evaluate(tab, find, CALL_TIMEOUT), timeout, 0.1):
            return False
        previous: dict[str, Any] | None = None
        for _ in range(CLICK_ATTEMPTS):
            state = await self._evaluate(tab, _CLICK_STATE_JS, CALL_TIMEOUT)
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
