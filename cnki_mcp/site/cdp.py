"""CDP plumbing shared by the browser's halves: nodriver loaded on first use, the Tab handle, results.

nodriver is imported on first launch only: it takes about half a second to import.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import itertools
import logging
from collections.abc import Callable
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

import msgspec

from cnki_mcp.core.clock import Deadline, within
from cnki_mcp.core.errors import CnkiError

log = logging.getLogger(__name__)


@functools.cache
def nodriver() -> ModuleType:
    import nodriver

    logging.getLogger("nodriver").setLevel(logging.WARNING)
    # Chrome may send events newer than nodriver's bindings; nodriver logs those as errors.
    logging.getLogger("nodriver.core.connection").setLevel(logging.CRITICAL)
    return nodriver


def cdp() -> ModuleType:
    return nodriver().cdp


# --------------------------------------------------------------------------------------------
# Results


class NavigationResult(msgspec.Struct):
    """Outcome of ``navigate``: the main document's HTTP status (0 if none) and the final URL."""

    status: int
    url: str
    error: str = ""  # Chrome's net error text when the navigation itself reported one


class FetchResult(msgspec.Struct):
    """A response read through the browser: status, final URL, decoded body."""

    status: int
    url: str
    text: str
    redirected: bool = False


class DownloadEvent(msgspec.Struct):
    """Latest known state of one download; ``state`` is begun, inProgress, completed or canceled."""

    guid: str
    url: str = ""
    suggested_filename: str = ""
    state: str = "begun"
    received_bytes: int = 0
    total_bytes: int = 0
    path: str = ""  # where Chrome saved it (``<download dir>/<guid>`` with allowAndName)


# --------------------------------------------------------------------------------------------
# Tabs


class Tab:
    """A page target of one browser generation; pass it back to ``Browser`` methods."""

    def __init__(self, conn: Any, generation: int, opener_id: str | None, back: Callable[[str], str] | None = None) -> None:
        self._conn = conn
        self._back = back  # the browser's route: a gateway URL read back in public form
        self.generation = generation
        self.opener_id = opener_id
        self.target_id: str = str(conn.target.target_id)
        self.closed = False
        self.crashed = False
        self._documents: dict[str, tuple[int, str]] = {}
        self._document_seen = asyncio.Event()
        self._fetch_ids = itertools.count(1)
        # Redirects of the page's own requests as (sequence, from URL, to URL, status), newest last.
        self._redirects: collections.deque[tuple[int, str, str, int]] = collections.deque(maxlen=32)
        self._redirect_seq = itertools.count(1)
        self._last_redirect = 0
        # Requests of the page that failed without an answer, as (sequence, URL, Chrome's net error), newest last.
        self._request_urls: collections.OrderedDict[str, str] = collections.OrderedDict()
        self._failures: collections.deque[tuple[int, str, str]] = collections.deque(maxlen=32)
        self._failure_seq = itertools.count(1)
        self._last_failure = 0
        # Texts of the JavaScript dialogs (alert, confirm …) the page opened, oldest first; each was answered at once.
        self.dialogs: list[str] = []

    @property
    def url(self) -> str:
        """The URL as last reported by target events (may lag a navigation in progress)."""
        target = self._conn.target
        url = str(getattr(target, "url", "") or "")
        return self._back(url) if self._back is not None else url

    def _on_response(self, event: Any, _conn: Any = None) -> None:
        if getattr(event.type_, "value", event.type_) == "Document":
            self._documents[str(event.loader_id)] = (int(event.response.status), str(event.response.url))
            self._document_seen.set()

    def _on_request(self, event: Any, _conn: Any = None) -> None:
        self._request_urls[str(event.request_id)] = str(event.request.url)
        while len(self._request_urls) > 64:
            self._request_urls.popitem(last=False)
        redirect = event.redirect_response
        if redirect is not None and getattr(event.type_, "value", event.type_) != "Document":
            self._last_redirect = next(self._redirect_seq)
            self._redirects.append((self._last_redirect, str(redirect.url), str(event.request.url), int(redirect.status)))

    def _on_failed(self, event: Any, _conn: Any = None) -> None:
        url = self._request_urls.pop(str(event.request_id), "")
        if url and not event.canceled and event.cors_error_status is None:
            self._last_failure = next(self._failure_seq)
            self._failures.append((self._last_failure, url, str(event.error_text or "")))

    def _net_error(self, url: str, since: int) -> str:
        """Chrome's net error for a request for ``url`` that failed after ``since`` without an answer; "" if none."""
        return next((error for seq, source, error in reversed(self._failures) if seq > since and source == url), "")

    def _cross_origin_redirect(self, url: str, since: int) -> tuple[str, int] | None:
        """Where a request for ``url`` made after ``since`` was redirected to another origin, if it was.

        A cross-origin redirect is what makes an in-page fetch fail with a bare network error (CORS),
        e.g. a grid POST answered with a redirect to the login host.
        """
        hops = {source: (to, status) for seq, source, to, status in self._redirects if seq > since}
        current, seen, final = url, {url}, None
        while current in hops:
            current, status = hops[current]
            if current in seen:
                break
            seen.add(current)
            final = (current, status)
        if final is None or _origin(final[0]) == _origin(url):
            return None
        return final

    async def _document(self, loader_id: str, timeout: float) -> tuple[int, str] | None:
        deadline = Deadline(timeout)
        while loader_id not in self._documents:
            if deadline.passed:
                return None
            self._document_seen.clear()
            try:
                await within(self._document_seen.wait(), deadline.remaining())
            except TimeoutError:
                return None
        return self._documents.pop(loader_id)

    def __repr__(self) -> str:
        return f"<Tab {self.target_id[:8]} gen={self.generation} {self.url!r}>"


# CDP's answer when the page was replaced while a command ran in it (a redirect, a script's navigation).
NAVIGATED = "Inspected target navigated or closed"


class PageScriptError(CnkiError):
    """A script evaluated in a page threw; ``description`` is the JavaScript error text."""

    def __init__(self, description: str) -> None:
        super().__init__(
            "OPERATION_FAILED",
            f"页面脚本执行出错：{description[:300]}",
            details={"script_error": description[:2000]},
        )
        self.description = description


def _origin(url: str) -> tuple[str, str, int | None]:
    try:
        parts = urlsplit(url)
        return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port
    except ValueError:
        return "", url, None
