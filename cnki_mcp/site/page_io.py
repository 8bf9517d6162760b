"""The in-page request and script primitives: ``fetch()`` from inside a page, a load through Chrome's
network stack, the look at a gateway's login, and scripts evaluated in a page.

Only the exchange engine (``exchange.py``) may import this module (an import-linter contract): every
CNKI request and page evaluation goes through the engine's budget, pacing, route and classification.
The functions work on ``page_actions.PageActions`` (the browser's CDP door); clicks, navigation and
window work stay there.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import re
from typing import Any

from cnki_mcp.core.clock import Deadline
from cnki_mcp.core.errors import CnkiError, net_failure
from cnki_mcp.site.cdp import FetchResult, Tab
from cnki_mcp.site.cdp import cdp as cdp_module
from cnki_mcp.site.page_actions import (
    CALL_TIMEOUT,
    PAGE_CLOSE_TIMEOUT,
    PageActions,
    js_call,
)
from cnki_mcp.site.remote import GATEWAY_LOGIN_URL, NoAnswer

log = logging.getLogger(__name__)

FETCH_TIMEOUT = 30.0
RESPONSE_CAP = 8 * 1024 * 1024
RESOURCE_CHUNK = 1024 * 1024
NET_ERROR_WAIT = 0.3

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


async def evaluate(browser: PageActions, tab: Tab, expression: str, timeout: float = CALL_TIMEOUT) -> Any:
    """Evaluate a JS expression in the page, await it, return its JSON value (None for undefined)."""
    return await browser._evaluate(tab, expression, timeout)


async def wait_for(browser: PageActions, tab: Tab, js_predicate: str, timeout: float) -> Any:
    """Poll a JS expression in the page until it is truthy and return its value; CONTENT_NOT_READY on timeout."""
    return await browser._wait_for(tab, js_predicate, timeout)


async def fetch_in_page(
    browser: PageActions,
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
    target = browser.routing.out(url)
    expression = js_call(
        _FETCH_JS, call_id, target, method.upper(), body, headers or {}, int(timeout * 1000), RESPONSE_CAP
    )
    try:
        out = await browser._evaluate(tab, expression, timeout + 5.0)
    except asyncio.CancelledError:
        abort = js_call("(id) => { const c = (window.__cnkiFetches || {})[id]; if (c) c.abort(); }", call_id)
        task = asyncio.get_running_loop().create_task(_quiet_evaluate(browser, tab, abort))
        browser._background.add(task)
        task.add_done_callback(browser._background.discard)
        raise
    if not isinstance(out, dict):
        raise CnkiError("RESOURCE_FAILED", "页面内请求没有返回结果。", details={"url": url})
    if "error" in out:
        moved = None if out.get("timedOut") else tab._cross_origin_redirect(target, since)
        if moved is not None:
            return FetchResult(status=moved[1], url=browser.routing.back(moved[0]), text="", redirected=True)
        if not out.get("timedOut") and not browser.routing.direct and not asked_again:
            # A gateway drops in-page requests when its session ends (a reset, not an unreachable host):
            # the page tells first; a net error still there on the second asking is judged below.
            raise NoAnswer(url, str(out["error"]))
        if not out.get("timedOut"):
            # Chrome saw the request in the gateway's form; the answer names the public URL.
            unreachable = net_failure(url, await _net_error(tab, target, failed_since))
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


async def _net_error(tab: Tab, url: str, since: int) -> str:
    """The net error Chrome reported for the failed in-page request (its event may trail the script's answer)."""
    deadline = Deadline(NET_ERROR_WAIT)
    while not (error := tab._net_error(url, since)) and not deadline.passed:
        await asyncio.sleep(0.02)
    return error


async def gateway_login_shown(browser: PageActions, tab: Tab, timeout: float) -> bool:
    """Whether loading the tab's page again gives the gateway's login (a host-rewriting gateway whose
    session ended drops or CORS-fails in-page requests and serves its login for the page itself).
    One request: the caller charges it."""
    try:
        page = await load_resource(browser, tab, tab.url, timeout=timeout)
    except CnkiError as exc:
        log.debug("looking at the page after a failed in-page request: %s", exc)
        return False
    return page.url == GATEWAY_LOGIN_URL


async def settle(browser: PageActions, tab: Tab, timeout: float) -> None:
    """Wait (at most ``timeout``) until the tab's page has loaded, e.g. back from the gateway's login."""
    with contextlib.suppress(CnkiError):
        await browser._wait_for(tab, "document.readyState === 'complete'", timeout)


async def _quiet_evaluate(browser: PageActions, tab: Tab, expression: str) -> None:
    try:
        await browser._evaluate(tab, expression, 2.0)
    except CnkiError as exc:
        log.debug("in-page abort failed: %s", exc)


async def load_resource(browser: PageActions, tab: Tab, url: str, *, timeout: float = FETCH_TIMEOUT) -> FetchResult:
    """Load a URL through Chrome's network stack for the tab's frame, without rendering it.

    Cookies go along (``includeCredentials``) and it works cross-origin. Redirects are not
    visible: the URL reported is the one requested. No response at all is RESOURCE_FAILED.
    """
    cdp = cdp_module()
    deadline = Deadline(timeout)
    options = cdp.network.LoadNetworkResourceOptions(disable_cache=False, include_credentials=True)
    result = await browser._tab_call(
        tab,
        cdp.network.load_network_resource(
            url=browser.routing.out(url), options=options, frame_id=cdp.page.FrameId(tab.target_id)
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
            b64, data, eof = await browser._tab_call(tab, read, max(1.0, deadline.remaining()))
            piece = base64.b64decode(data) if b64 else data.encode("utf-8")
            size += len(piece)
            if size > RESPONSE_CAP:
                raise CnkiError("RESPONSE_TOO_LARGE", details={"url": url})
            chunks.append(piece)
            if eof:
                break
    finally:
        try:
            await browser._tab_call(tab, cdp.io.close(handle=result.stream), PAGE_CLOSE_TIMEOUT)
        except CnkiError as exc:
            log.debug("IO.close failed: %s", exc)
    text = _decode(b"".join(chunks), _charset(result.headers))
    if browser.routing.gateway_body(text):  # redirects are not visible here: the body tells
        url = GATEWAY_LOGIN_URL
    return FetchResult(status=status, url=url, text=browser.routing.text(text))
