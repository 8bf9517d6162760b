"""download_paper: one click on the detail page's whole-document PDF/CAJ entry, never repeated by accident.

The caller's file name and folder are checked first; then the local ledger (``artifacts`` in
research.db, key ``<record_ref>:<pdf|caj>``) answers: an unchanged earlier file is returned from
disk (or copied there under the name the caller asks for now), and an earlier click whose outcome
was never seen is reconciled — the file may have arrived after that call gave up. Only
``retry=true`` clicks again after such an uncertain click.

A new download opens the detail page in its own tab, confirms the paper, reads its entries
(a tip that the institution has not subscribed, or entries marked unavailable, end it before any
click), resolves ``auto`` (PDF when offered, else CAJ — for theses the whole-document CAJ entry,
never a chapter or page entry), records the attempt as ``clicked`` and flushes the store, and only
then clicks once. Chrome saves into ``incoming/<operation_id>/`` under the download's GUID. From
the click on, the tabs are looked at every half second until a download begins: CNKI's error page
(its words are in the URL) and refusal pages end the attempt with the site's words, captcha and
login pages go to the person while the same download is still awaited. A finished file is
classified by its header (download_files.py) and published under ``downloads/[subdirectory/]``
without overwriting anything. Every page that ends the attempt is saved as a snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgspec

from cnki_mcp.core.clock import Deadline, china_day, next_china_midnight, parse_utc, utc_now_iso, within
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.files import safe_folder
from cnki_mcp.core.model import Artifact, DownloadResult, LocalReply, Paper
from cnki_mcp.core.redact import client_url, without_secrets
from cnki_mcp.documents.download_files import (
    FORMATS,
    DownloadRequest,
    artifact_key,
    check_filename,
    default_filename,
    deliver,
    gather_stray,
    publish,
    read_body,
    reconcile,
    remove_empty,
    tiny_file,
    tiny_text,
    unchanged,
    valid_guid,
    view,
    wanted_format,
)
from cnki_mcp.ops.jobs import OperationContext
from cnki_mcp.pages.page_state import is_refusal, page_text_sample, parse_download_refusal, refusal_in_url
from cnki_mcp.research.backend import SiteBackend
from cnki_mcp.research.detail_tab import ENTRY_WAIT, open_detail, settle
from cnki_mcp.research.enrich import Enrichment
from cnki_mcp.site.browser import DownloadEvent, Tab
from cnki_mcp.site.door import page_problem
from cnki_mcp.site.exchange import CHALLENGE_CODES, note_snapshot
from cnki_mcp.store.library import Store

log = logging.getLogger(__name__)

POLL = 0.5
TAB_LIST_WAIT = 2.0
STEP_STOP_SECONDS = 10.0
HTML_FILE_LIMIT = 2 << 20
# One file's size cap: a whole doctoral thesis (the largest thing CNKI sells as one file) is tens of MB, a
# scanned one a few hundred pages of images at most ~200 MB; 512 MiB fits any of them twice over and stops a
# transfer that would never end (or fill the disk) long before it hurts.
MAX_FILE_BYTES = 512 << 20
# The whole-document entry of each format. Chapter, page and online-reading entries (分章下载,
# 分页下载, 在线阅读 on thesis pages) never match, and neither does the other format's entry.
_PARTS = "分章|分页|章节|在线"
ENTRIES = {
    "pdf": rf"^(?![\s\S]*(?:{_PARTS}|CAJ))[\s\S]*(?:PDF\s*(?:整本)?下载|下载\s*PDF)",
    "caj": rf"^(?![\s\S]*(?:{_PARTS}|PDF))[\s\S]*(?:CAJ\s*(?:整本)?下载|下载\s*CAJ|整本下载)",
}
_UNAVAILABLE_CLASS = re.compile(r"disabled|unavailable", re.I)
_LABELS = {"pdf": "PDF ", "caj": "CAJ "}
FOREIGN_DBCODE = "WWJD"

# The page's download-related links as a person sees them (visible, in document order), and the
# institution tips above them.
_DOWNLOAD_PAGE_JS = r"""(() => {
  const shown = el => { const s = getComputedStyle(el), b = el.getBoundingClientRect();
    return s.display !== 'none' && s.visibility !== 'hidden' && b.width > 0 && b.height > 0; };
  const text = el => (el.innerText || '').trim();
  const entries = Array.from(document.querySelectorAll('a')).filter(shown)
    .map(a => ({text: text(a), title: a.getAttribute('title') || '',
                classes: [a.getAttribute('class') || '', a.parentElement && a.parentElement.getAttribute('class') || ''].join(' '),
                disabled: a.getAttribute('aria-disabled') === 'true' || a.hasAttribute('disabled')}))
    .filter(e => /下载|阅读|PDF|CAJ/i.test(e.text));
  const tips = Array.from(document.querySelectorAll('.organizationTip')).filter(shown).map(text).filter(Boolean);
  return {entries, tips};
})()"""


class Entry(msgspec.Struct, frozen=True):
    text: str
    title: str = ""
    classes: str = ""
    disabled: bool = False

    @property
    def unavailable(self) -> bool:
        return self.disabled or bool(_UNAVAILABLE_CLASS.search(self.classes)) or is_refusal(self.title)


class DownloadPage(msgspec.Struct):
    entries: list[Entry] = []
    tips: list[str] = []


# --------------------------------------------------------------------------------------------
# The page's entries


def _refused(words: str, **details: Any) -> CnkiError:
    return CnkiError("DOWNLOAD_REFUSED", f"知网未提供文件：{words}", details=details)


def choose_entry(page: DownloadPage, wanted: str, dbcode: str = "") -> tuple[str, Entry]:
    """The format to download and its whole-document entry (``auto``: PDF when offered, else CAJ).

    DOWNLOAD_REFUSED when the page says the institution has not subscribed or marks the entry
    unavailable; DOWNLOAD_ENTRY_NOT_FOUND when there is no whole-document entry at all.
    """
    tip = next((tip for tip in page.tips if is_refusal(tip)), "")
    if tip:
        raise _refused(tip, where="detail_page")
    disabled: Entry | None = None
    for fmt in FORMATS if wanted == "auto" else (wanted,):
        entry = next((e for e in page.entries if re.search(ENTRIES[fmt], e.text, re.I)), None)
        if entry is not None and not entry.unavailable:
            return fmt, entry
        disabled = disabled or entry
    if disabled is not None:
        words = disabled.title.strip() or "下载入口被标为不可用"
        raise CnkiError(
            "DOWNLOAD_REFUSED",
            f"知网未提供文件：详情页的“{disabled.text}”入口不可用（{words}）；未点击。",
            details={"where": "detail_page", "entry": disabled.text},
        )
    raise _no_entry(page, wanted, dbcode)


def _no_entry(page: DownloadPage, wanted: str, dbcode: str) -> CnkiError:
    offered = [e.text for e in page.entries if re.search("下载", e.text)]
    details: dict[str, Any] = {"format": wanted, "offered": offered}
    if dbcode.upper() == FOREIGN_DBCODE:
        message = "这是外文文献（WWJD）的详情页：知网不提供它的 PDF/CAJ 下载，只有指向出版方的原文链接；未点击。"
    else:
        message = f"详情页没有可确认的 {_LABELS.get(wanted, 'PDF 或 CAJ ')}整本下载入口；未点击。"
        if offered:
            message += f"页面上只有：{'、'.join(offered)}（分章、分页下载不会被当作整本）。"
    return CnkiError("DOWNLOAD_ENTRY_NOT_FOUND", message, details=details)


# --------------------------------------------------------------------------------------------
# The ledger before any request


def _forget(store: Store, key: str, previous: Artifact | None) -> None:
    """Undo a ``clicked`` entry whose outcome is certain (nothing downloaded)."""
    if previous is not None:
        store.put_artifact(key, previous)
    elif store.data.artifacts.pop(key, None) is not None:
        store.mark_dirty()


def _completed(store: Store, key: str, done: Artifact) -> None:
    """A clicked download's file has arrived: the ledger says so and the day's count goes up."""
    store.put_artifact(key, done)
    store.count_download()


def downloads_taken(store: Store) -> int:
    """Today's places under the daily cap (China's day): downloads completed, and clicks whose outcome is
    still open (each holds its place until its file arrives, which counts it, or it is forgotten)."""
    today = china_day()
    held = 0
    for artifact in store.data.artifacts.values():
        moment = parse_utc(artifact.updated_at) if artifact.state == "clicked" else None
        held += moment is not None and china_day(moment) == today
    return store.downloads_on() + held


def over_daily_limit(store: Store, limit: int, *, batch: bool) -> CnkiError | None:
    """DAILY_LIMIT_REACHED when no place is left under ``limit`` today (0: no cap), else None."""
    if not limit:
        return None
    taken = downloads_taken(store)
    if taken < limit:
        return None
    resets_at = next_china_midnight().isoformat(timespec="seconds")
    stopped = "批量下载已停止" if batch else "这次没有点击下载"
    after = "其余论文见 remaining。届时用 operation_control 的 continue 继续" if batch else "届时再下载"
    return CnkiError(
        "DAILY_LIMIT_REACHED",
        f"今天（北京时间 {china_day()}）已下载 {taken} 篇（含结果未明的点击），达到每日上限 {limit} 篇，{stopped}，以免知网把账号标记为异常。"
        f"北京时间 {resets_at} 后重置，{after}；上限在 config.json 的 daily_download_limit 或环境变量 "
        "CNKI_DAILY_DOWNLOAD_LIMIT 中设置（0 表示不限）。",
        details={"count": taken, "limit": limit, "resets_at": resets_at},
    )


def _uncertain(artifact: Artifact, message: str) -> CnkiError:
    return CnkiError("SIDE_EFFECT_UNCERTAIN", message, details=msgspec.to_builtins(view(artifact)), retryable=True)


async def prior(store: Store, record_ref: str, request: DownloadRequest) -> LocalReply | None:
    """The answer the ledger gives without CNKI, or None when a new click is due.

    Completed and unchanged → the file (``source: cache``), or a copy of it where the caller asks
    now. Clicked → the file if it has arrived since; otherwise SIDE_EFFECT_UNCERTAIN unless
    ``retry``. The caller's name and folder must have been checked before (``check_names``).
    """
    wanted = wanted_format(request)
    for candidate in (wanted,) if wanted in FORMATS else FORMATS:
        key = artifact_key(record_ref, candidate)
        artifact = store.data.artifacts.get(key)
        if artifact is None:
            continue
        if artifact.state == "completed":
            if not await asyncio.to_thread(unchanged, artifact):
                continue
            result = await asyncio.to_thread(deliver, store.downloads_dir, artifact, request, "cache")
            return LocalReply(source="cache", requests=0, result=result)
        if artifact.state != "clicked":
            continue
        done = await asyncio.to_thread(reconcile, store.downloads_dir, artifact)
        if done is not None:
            _completed(store, key, done)
            result = await asyncio.to_thread(deliver, store.downloads_dir, done, request)
            return LocalReply(source="local", requests=0, result=result)
        if not request.retry:
            raise _uncertain(
                artifact,
                "上次下载已点击但结果未知，文件也还没有到达；稍后用相同参数再调用会再次检查，确认需要重新下载时传 retry=true。",
            )
    return None


# --------------------------------------------------------------------------------------------
# The click and the wait


class Downloads:
    """download_paper for one process: downloads run one at a time, and a batch's clicks keep their spacing
    from the last click any tool sent.

    The daily cap is checked under the same lock, before the detail page is opened, and the ``clicked``
    entry that follows holds the place: concurrent batches and download_paper calls queue here, so no two
    see the same free place. The data directory's lock (store/library.py) keeps every other process off
    the same ledger, so this one check is the only one there is."""

    def __init__(self) -> None:
        self._lock: asyncio.Lock | None = None
        self._last_click: float | None = None  # time.monotonic() of this process's last download click

    def _serial(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    async def download(
        self,
        op: OperationContext,
        engine: Enrichment,
        site: SiteBackend,
        paper: Paper,
        request: DownloadRequest,
        spacing: float = 0.0,
        *,
        daily_limit: int,
    ) -> DownloadResult:
        """``spacing``: the least seconds between the last click and this one (a batch's interval; 0: none);
        ``daily_limit``: downloads allowed per day in China (0: no cap)."""
        store = engine.store
        async with self._serial():
            # Another call may have finished the same file while this one queued.
            earlier = await prior(store, paper.record_ref, request)
            if earlier is not None:
                result: DownloadResult = earlier.result
                return result
            full = over_daily_limit(store, daily_limit, batch=False)
            if full is not None:
                raise full
            try:
                return await self._download(op, engine, site, paper, request, spacing)
            except CnkiError as exc:
                raise without_secrets(exc) from None

    async def _download(
        self, op: OperationContext, engine: Enrichment, site: SiteBackend, paper: Paper, request: DownloadRequest, spacing: float
    ) -> DownloadResult:
        store = engine.store
        op.stage("detail")
        tab, bound = await open_detail(op, engine, site, paper)
        incoming: Path | None = None
        key = ""
        try:
            await settle(site, tab)
            fmt, entry = await self._entry(site, tab, bound, wanted_format(request))
            if request.filename:
                name = check_filename(request.filename, fmt)
            else:
                name = default_filename(bound.title, paper.record_ref, fmt)
            folder = await asyncio.to_thread(safe_folder, store.downloads_dir, request.subdirectory or None)
            if os.path.lexists(folder / name):
                raise CnkiError("FILE_EXISTS", f"目标文件 {folder / name} 已存在，未点击下载。", details={"path": str(folder / name)})
            incoming = await asyncio.to_thread(store.incoming_dir, op.operation_id)
            await site.set_download_dir(incoming)
            await self._spaced(op, spacing)

            key = artifact_key(paper.record_ref, fmt)
            previous = store.data.artifacts.get(key)
            artifact = Artifact(
                state="clicked",
                record_ref=paper.record_ref,
                title=bound.title,
                format=fmt,
                folder=request.subdirectory,
                name=name,
                incoming=str(incoming),
                operation_id=op.operation_id,
                chosen_name=bool(request.filename),
                updated_at=utc_now_iso(),
            )
            store.put_artifact(key, artifact)
            await store.flush_async()  # the click must be on disk before it happens

            op.stage("clicking", {"format": fmt, "entry": entry.text})
            detail_path = urlsplit(tab.url).path
            dialogs_before = len(tab.dialogs)
            self._last_click = time.monotonic()
            try:
                clicked = await site.click(op, tab, "a", ENTRY_WAIT, text=ENTRIES[fmt])
            except CnkiError as exc:
                if exc.code != "BROWSER_UNAVAILABLE":  # a lost browser may have clicked after all
                    _forget(store, key, previous)
                raise
            if not clicked:
                _forget(store, key, previous)
                raise CnkiError("DOWNLOAD_ENTRY_NOT_FOUND", "下载入口在点击前消失了；未点击。", details={"format": fmt})
            # The site's pacing and the wait for the entry may have held the click: the next one is spaced from
            # when this one was really sent.
            self._last_click = time.monotonic()
            op.stage("waiting_for_download")
            watch = _Watch(op, store, site, tab, detail_path, key, previous, dialogs_before)
            return await self._await_file(watch, artifact, request.wait_seconds)
        finally:
            pending = store.data.artifacts.get(key) if key else None
            uncertain = pending is not None and pending.state == "clicked" and pending.incoming == str(incoming)
            # While the click's outcome is open, its popups may still carry the transfer: leave them.
            await site.close_tab(tab, with_popups=not uncertain)
            if incoming is not None and not uncertain:
                remove_empty(incoming)  # nothing can arrive there any more

    async def _spaced(self, op: OperationContext, spacing: float) -> None:
        """Hold the click until ``spacing`` seconds after the last one (the detail page stays open meanwhile)."""
        wait = 0.0 if self._last_click is None else self._last_click + spacing - time.monotonic()
        if wait > 0:
            with op.stage_while("pacing", {"seconds": round(wait, 1)}):
                await asyncio.sleep(wait)

    async def _entry(self, site: SiteBackend, tab: Tab, bound: Paper, wanted: str) -> tuple[str, Entry]:
        """The entry to click, read from the live page; a page that ends the attempt is saved.

        An alert() the detail page opened with a refusal's words (legacy pages: 对不起，贵单位没有订购该专辑…)
        ends it before any click."""
        alert = next((text for text in tab.dialogs if is_refusal(text)), "")
        if alert:
            raise await _with_snapshot(site, "download-refused", tab, _refused(alert, where="detail_page", dialog=True))
        data = await site.evaluate(tab, _DOWNLOAD_PAGE_JS)
        try:
            page = msgspec.convert(data, DownloadPage)
        except msgspec.ValidationError:
            problem = CnkiError("CONTENT_NOT_READY", "详情页的下载区域无法读取；未点击。", details={"format": wanted})
            raise await _with_snapshot(site, "download-detail", tab, problem) from None
        try:
            return choose_entry(page, wanted, bound.dbcode)
        except CnkiError as exc:
            kind = "download-refused" if exc.code == "DOWNLOAD_REFUSED" else "download-detail"
            raise await _with_snapshot(site, kind, tab, exc) from None

    async def _await_file(self, watch: _Watch, artifact: Artifact, wait_seconds: int) -> DownloadResult:
        site = watch.site
        deadline = Deadline(wait_seconds)
        guid: str | None = None
        while True:
            # Until a download begins, look at the tabs: right after the click, then every POLL.
            if guid is None and await watch.look():
                deadline.restart()
            event = await site.wait_download(guid, POLL)
            if event is not None:
                if guid is None:
                    guid = event.guid
                    artifact = msgspec.structs.replace(artifact, download_guid=guid, updated_at=utc_now_iso())
                    watch.store.put_artifact(watch.key, artifact)
                    watch.op.stage("transferring")
                if event.state == "completed":
                    return await self._finish(watch, artifact, event.url, event.path)
                if event.state == "canceled":
                    watch.forget()
                    raise CnkiError("DOWNLOAD_CANCELLED", "浏览器报告传输取消；未重复点击。", details={"format": artifact.format})
                over = max(event.received_bytes, event.total_bytes) > MAX_FILE_BYTES
                # A transfer over the cap, or one that runs on past the wait, is stopped, not left to run.
                if over or deadline.passed:
                    done = await self._cancel(watch, event, artifact)
                    if done is not None:  # it finished while being cancelled
                        return await self._finish(watch, artifact, done.url, done.path)
                    raise _stopped(event, artifact.format, wait_seconds, over)
            if deadline.passed:
                raise _uncertain(
                    artifact,
                    f"点击下载后 {wait_seconds} 秒内文件没有下载完成，下载可能仍在进行；"
                    "稍后用相同参数再调用会先检查文件是否已到，确认需要重新下载时才传 retry=true。",
                )

    async def _cancel(self, watch: _Watch, event: DownloadEvent, artifact: Artifact) -> DownloadEvent | None:
        """Cancel a transfer; None once it is gone (the click forgotten: nothing arrived, a later call may click
        again), or its completed event when it finished meanwhile."""
        try:
            await watch.site.cancel_download(event.guid)
        except CnkiError as exc:
            if exc.code == "BROWSER_UNAVAILABLE":
                raise
            log.debug("cancelling download %s: %s", event.guid, exc.message)  # it finished meanwhile: looked at below
        last = await watch.site.wait_download(event.guid, POLL)
        if last is not None and last.state == "completed":
            return last
        watch.forget()
        with contextlib.suppress(OSError):
            (Path(artifact.incoming) / event.guid).unlink()
        return None

    async def _finish(self, watch: _Watch, artifact: Artifact, url: str, reported: str = "") -> DownloadResult:
        """Keep what arrived: any PDF/CAJ-family or unknown body (said so); an HTML page is a refusal.

        A file the browser wrote outside incoming/ is moved in first, so no download is ever lost."""
        store = watch.store
        src = Path(artifact.incoming) / artifact.download_guid
        if not valid_guid(artifact.download_guid):
            watch.forget()
            raise CnkiError("INVALID_FILE", "浏览器报告的下载标识无效。")
        stray = await asyncio.to_thread(gather_stray, src, reported, Path.cwd())
        if stray is not None:
            watch.op.stage("stray_download", {"found_at": str(stray)})
        try:
            tiny = await asyncio.to_thread(tiny_file, src)
            if tiny is not None:
                raise await self._tiny_file(watch, tiny, url)
            body = await asyncio.to_thread(read_body, src)
            if body.format == "html":
                raise await self._html_file(watch, src, url)
            done = await asyncio.to_thread(publish, store.downloads_dir, artifact, src, body)
        except CnkiError as exc:
            if exc.code in ("INVALID_FILE", "FILE_EXISTS", "UNSAFE_OUTPUT_PATH", "DOWNLOAD_REFUSED"):
                watch.forget()
                with contextlib.suppress(OSError):
                    src.unlink()
                remove_empty(src.parent)
            raise
        _completed(store, watch.key, done)
        return view(done)

    async def _html_file(self, watch: _Watch, src: Path, url: str) -> CnkiError:
        """An error page that arrived as "the file": its words, and the page kept as a snapshot."""
        raw = await asyncio.to_thread(_read_limited, src)
        html = raw.decode("utf-8", "replace")
        words = await asyncio.to_thread(page_text_sample, html) or "知网返回了一个网页而不是论文文件"
        name = await watch.site.snapshot("download-file", html, url)
        return _refused(words, where="downloaded_file", **({"snapshot": name} if name else {}))


    async def _tiny_file(self, watch: _Watch, data: bytes, url: str) -> CnkiError:
        """A "file" of fewer bytes than any paper: its words as the refusal or error it is, kept as a snapshot."""
        text = tiny_text(data)
        words = (await asyncio.to_thread(page_text_sample, text)) if text.lstrip().startswith("<") else text
        name = await watch.site.snapshot("download-tiny", text, url)
        details: dict[str, Any] = {"where": "downloaded_file", "bytes": len(data), **({"snapshot": name} if name else {})}
        if words and is_refusal(words):
            return _refused(words, **details)
        shown = f"：{words}" if words else "（空文件）"
        return CnkiError("INVALID_FILE", f"知网给的文件只有 {len(data)} 字节，不是论文{shown}；内容已保存到诊断目录。", details=details)


def _stopped(event: DownloadEvent, fmt: str, wait_seconds: int, over: bool) -> CnkiError:
    """DOWNLOAD_CANCELLED for a transfer this side stopped: over the size cap, or not done within the wait."""
    details: dict[str, Any] = {"format": fmt, "received_bytes": event.received_bytes, "reason": "too_large" if over else "timeout"}
    if over:
        size = max(event.received_bytes, event.total_bytes)
        return CnkiError(
            "DOWNLOAD_CANCELLED",
            f"文件超过单个文件的上限 {MAX_FILE_BYTES >> 20} MB（已知 {size >> 20} MB），已取消传输，没有保存；"
            "整本学位论文也远小于这个上限，这很可能不是论文文件。",
            details={**details, "limit_bytes": MAX_FILE_BYTES},
        )
    return CnkiError(
        "DOWNLOAD_CANCELLED",
        f"点击下载后 {wait_seconds} 秒内文件没有传完（已收到 {event.received_bytes >> 10} KB），已取消传输，没有保存；"
        "网络较慢时可以增大 wait_seconds 后再调用（会重新点击下载）。",
        details=details,
        retryable=True,
    )


def _read_limited(path: Path) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(HTML_FILE_LIMIT)


async def _with_snapshot(site: SiteBackend, kind: str, tab: Tab, error: CnkiError) -> CnkiError:
    """``error`` with the tab saved (HTML and screenshot) and the snapshot's name in its details."""
    seen = None if tab.closed else await site.glance(tab)
    html, url = (seen.html, seen.url) if seen is not None else ("", tab.url)
    name = await site.snapshot(kind, html, url, tab)
    details = dict(error.details) if isinstance(error.details, dict) else {}
    return note_snapshot(CnkiError(error.code, error.message, details=details, retryable=error.retryable), name)


@dataclass
class _Watch:
    """The tabs of one clicked download: refusals end it at once, challenges go to the person."""

    op: OperationContext
    store: Store
    site: SiteBackend
    opener: Tab
    detail_path: str
    key: str
    previous: Artifact | None
    dialogs_before: int = 0  # the opener's dialogs from before the click

    def forget(self) -> None:
        _forget(self.store, self.key, self.previous)

    async def look(self) -> bool:
        """Look at the opener and its popups once; True after a human step (the wait starts again)."""
        for tab in await self._tabs():
            if tab.closed:
                continue
            # A dialog after the click while no download has begun is the site's answer (legacy alert() refusals).
            alert = next((text for text in tab.dialogs[self.dialogs_before if tab is self.opener else 0:] if text.strip()), "")
            if alert:
                self.forget()
                raise await _with_snapshot(self.site, "download-refused", tab, _refused(alert, url=tab.url, dialog=True))
            # The detail page itself is no refusal (its abstract may well say 无权…); a tab that left it may be.
            moved = tab is not self.opener or urlsplit(tab.url).path != self.detail_path
            words = refusal_in_url(tab.url) if moved else None  # readable before, or without, any DOM
            if words is None:
                seen = await self.site.glance(tab)
                if seen is None or not seen.ready:
                    continue
                problem = page_problem(seen.page, seen.url)
                if problem is not None and problem.code in CHALLENGE_CODES:
                    await self._human(tab, problem)
                    return True
                moved = moved or urlsplit(seen.url).path != self.detail_path
                if not moved:
                    continue
                self.op.stage("download_tab", {"url": client_url(seen.url)})
                words = refusal_in_url(seen.url) or parse_download_refusal(seen.html)
            if words:
                self.forget()
                raise await _with_snapshot(self.site, "download-refused", tab, _refused(words, url=tab.url))
        return False

    async def _tabs(self) -> list[Tab]:
        """The opener and its popups; a popup that cannot be attached yet is left for the next look.

        Attaching waits while the popup's navigation is pending (a slow file answer), and a popup
        that turned into the download goes away while it is attached: neither may hold up the wait.
        """
        site = self.site
        try:
            return [self.opener, *await within(site.popups(self.opener), TAB_LIST_WAIT)]
        except TimeoutError:
            log.debug("popups of the download tab not attached within %.0f s", TAB_LIST_WAIT)
        except CnkiError as exc:
            if exc.code != "BROWSER_UNAVAILABLE" or not site.browser_running:
                raise
            log.debug("popups of the download tab not listed: %s", exc.message)
        return [self.opener]

    async def _human(self, tab: Tab, reason: CnkiError) -> None:
        """The human step, ended early once the awaited download begins.

        After a captcha or login the page usually goes on to the file, and a page that turned
        into a download keeps showing what it showed before, so the download itself is the signal.
        A challenge the person did not answer in time is saved as a snapshot.
        """
        site = self.site
        step = asyncio.ensure_future(site.human_step(self.op, tab, reason))
        try:
            while True:
                done, _ = await asyncio.wait({step}, timeout=POLL)
                if done:
                    try:
                        step.result()
                    except CnkiError as exc:
                        if tab.closed or await site.wait_download(None, 0) is not None:
                            return
                        if exc.code == "VERIFICATION_TIMEOUT":
                            raise await _with_snapshot(self.site, "download-challenge", tab, exc) from None
                        raise
                    return
                if await site.wait_download(None, 0) is not None:
                    return
        finally:
            if not step.done():
                step.cancel()
                # Told to stop, a step only hides its page (a couple of seconds at most): never wait on it longer.
                await asyncio.wait({step}, timeout=STEP_STOP_SECONDS)
                if not step.done():
                    log.warning("the person's step on the download tab did not stop within %.0f s", STEP_STOP_SECONDS)
                elif not step.cancelled():
                    step.exception()  # read: a step that failed while stopping has nothing more to say
