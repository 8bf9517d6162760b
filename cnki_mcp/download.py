"""download_paper: one click on the detail page's PDF/CAJ entry, never repeated by accident.

The local ledger (``artifacts`` in research.json, key ``<record_ref>:<pdf|caj>``) is read first:
an unchanged earlier file is returned from disk, and an earlier click whose outcome was never seen
is reconciled — the file may have arrived after that call gave up. Only ``retry=true`` clicks
again after such an uncertain click.

A new download opens the detail page in its own tab, confirms the paper, resolves ``auto`` (PDF
when offered, else CAJ), records the attempt as ``clicked`` and flushes the store, and only then
clicks once. Chrome saves into ``incoming/<operation_id>/`` under the download's GUID; captcha
and login pages on the way go to the person while the same download is still awaited; refusal
pages end the attempt with their own words. A finished file is checked (``%PDF-`` … ``%%EOF``,
CAJ header), hashed and published under ``downloads/[subdirectory/]`` without overwriting
anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
import time
import unicodedata
from pathlib import Path
from typing import Any

import msgspec

from cnki_mcp.browser import Tab
from cnki_mcp.clock import utc_now_iso
from cnki_mcp.documents import ENTRY_WAIT, PageSite, open_detail, settle
from cnki_mcp.errors import CnkiError
from cnki_mcp.files import adopt_file, safe_folder, validate_filename
from cnki_mcp.jobs import OperationContext
from cnki_mcp.model import Artifact, Paper
from cnki_mcp.parse import parse_download_refusal
from cnki_mcp.redact import client_url, without_secrets
from cnki_mcp.site import page_problem
from cnki_mcp.store import Store

log = logging.getLogger(__name__)

FORMATS = ("pdf", "caj")
ENTRIES = {"pdf": r"PDF下载|下载PDF", "caj": r"CAJ下载|下载CAJ"}
POLL = 1.0
MIN_FILE_BYTES = 100
MAGIC_BYTES = 8
PDF_TRAILER_WINDOW = 2048
CAJ_MAGIC = (b"CAJ", b"KDH", b"HN")
TITLE_RUNES = 75
REF_CHARS = 8
_GUID = re.compile(r"[A-Za-z0-9-]+")
_UNSAFE_NAME_CHARS = re.compile(r'[\x00-\x1f\x7f/\\<>:"|?*]')
_RESERVED = re.compile(r"(?:CON|PRN|AUX|NUL|COM[1-9]|LPT[1-9])(?:\..*)?", re.I | re.S)

# Visible link texts of the page, to tell which formats it offers (zero-width links do not count).
_ENTRY_TEXTS_JS = """(() => Array.from(document.querySelectorAll('a'))
  .filter(a => a.getBoundingClientRect().width > 0)
  .map(a => (a.innerText || '').trim()).join('\\n'))()"""


# --------------------------------------------------------------------------------------------
# Names and files


def artifact_key(record_ref: str, fmt: str) -> str:
    return f"{record_ref}:{fmt}"


def default_filename(title: str, record_ref: str, fmt: str) -> str:
    """「题名_编号前8位.<fmt>」 with the title made safe for every file system."""
    name = _UNSAFE_NAME_CHARS.sub("_", unicodedata.normalize("NFC", title)).strip(". ")
    name = name[:TITLE_RUNES].strip(". ")
    if not name or _RESERVED.fullmatch(name):
        name = f"论文_{name}"
    suffix = record_ref[4:] if record_ref.startswith("rec_") else record_ref
    return f"{name}_{suffix[:REF_CHARS]}.{fmt}"


def check_filename(filename: str, fmt: str) -> str:
    """A caller's file name: a safe single name whose extension is .pdf/.caj (and ``fmt``'s unless auto)."""
    validate_filename(filename)
    ext = os.path.splitext(filename)[1].lower().lstrip(".")
    if ext not in FORMATS or (fmt in FORMATS and ext != fmt):
        wanted = f".{fmt}" if fmt in FORMATS else ".pdf 或 .caj"
        raise CnkiError(
            "INVALID_FILENAME",
            f"文件名“{filename}”的扩展名须为 {wanted}，与下载格式一致。",
            details={"filename": filename, "format": fmt},
        )
    return filename


def validate_download(path: Path, fmt: str) -> None:
    """INVALID_FILE unless ``path`` is a complete file of the requested format (blocking)."""
    if path.is_symlink() or not path.is_file():
        raise CnkiError("INVALID_FILE", "下载文件不存在或不是普通文件。", details={"path": str(path)})
    size = path.stat().st_size
    if size < MIN_FILE_BYTES:
        raise CnkiError("INVALID_FILE", "下载文件不完整", details={"bytes": size})
    with open(path, "rb") as handle:
        head = handle.read(MAGIC_BYTES)
        handle.seek(max(0, size - PDF_TRAILER_WINDOW))
        tail = handle.read()
    if fmt == "pdf":
        if not head.startswith(b"%PDF-"):
            raise CnkiError("INVALID_FILE", "下载内容与请求格式不一致（可能是错误页面）", details={"format": fmt})
        if b"%%EOF" not in tail:
            raise CnkiError("INVALID_FILE", "PDF 缺少结束标记", details={"format": fmt})
    elif not head.startswith(CAJ_MAGIC):
        raise CnkiError("INVALID_FILE", "下载内容与请求格式不一致（可能是错误页面）", details={"format": fmt})


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def unchanged(artifact: Artifact) -> bool:
    """The completed file is still there with the recorded size and SHA-256 (blocking)."""
    if not artifact.path:
        return False
    path = Path(artifact.path)
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size != artifact.bytes:
            return False
        return _sha256(path) == artifact.sha256
    except OSError:
        return False


def _remove_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):
        folder.rmdir()


def publish(downloads: Path, artifact: Artifact, src: Path) -> Artifact:
    """Validate the browser's file, place it under downloads/ without overwriting, record it (blocking)."""
    validate_download(src, artifact.format)
    folder = safe_folder(downloads, artifact.folder or None)
    written = adopt_file(src, folder, artifact.name)
    _remove_empty(src.parent)
    return msgspec.structs.replace(
        artifact,
        state="completed",
        path=written.path,
        bytes=written.bytes,
        sha256=written.sha256,
        source="download",
        incoming="",
        updated_at=utc_now_iso(),
    )


def arrivals(artifact: Artifact) -> list[Path]:
    """Files the browser may have finished for an earlier click (its GUID, else any GUID-named file)."""
    if not artifact.incoming:
        return []
    incoming = Path(artifact.incoming)
    if artifact.download_guid:
        names = [artifact.download_guid] if _GUID.fullmatch(artifact.download_guid) else []
    else:
        try:
            names = sorted(entry.name for entry in incoming.iterdir() if _GUID.fullmatch(entry.name))
        except OSError:
            return []
    return [incoming / name for name in names if (incoming / name).is_file()]


def reconcile(downloads: Path, artifact: Artifact) -> Artifact | None:
    """Finish an uncertain click whose file has arrived since; None while nothing complete is there."""
    for candidate in arrivals(artifact):
        try:
            return publish(downloads, artifact, candidate)
        except CnkiError as exc:
            if exc.code != "INVALID_FILE":
                raise
            # Possibly still being written: an uncertain click stays uncertain.
            log.info("late download %s is not a complete %s yet: %s", candidate.name, artifact.format, exc.message)
    return None


def view(artifact: Artifact, source: str | None = None) -> dict[str, Any]:
    """The result object shown to clients."""
    data: dict[str, Any] = {"state": artifact.state, "record_ref": artifact.record_ref, "format": artifact.format}
    if artifact.state == "completed":
        data.update(path=artifact.path, bytes=artifact.bytes, sha256=artifact.sha256, source=source or artifact.source)
    else:
        data.update(folder=artifact.folder, name=artifact.name, operation_id=artifact.operation_id)
    return data


def _uncertain(artifact: Artifact, message: str) -> CnkiError:
    return CnkiError("SIDE_EFFECT_UNCERTAIN", message, details=view(artifact), retryable=True)


# --------------------------------------------------------------------------------------------
# The ledger before any request


def _forget(store: Store, key: str, previous: Artifact | None) -> None:
    """Undo a ``clicked`` entry whose outcome is certain (nothing downloaded)."""
    if previous is not None:
        store.put_artifact(key, previous)
    elif store.data.artifacts.pop(key, None) is not None:
        store.mark_dirty()


async def prior(store: Store, record_ref: str, fmt: str, retry: bool) -> dict[str, Any] | None:
    """The answer the ledger gives without CNKI, or None when a new click is due.

    Completed and unchanged → the file (``source: cache``). Clicked → the file if it has arrived
    since; otherwise SIDE_EFFECT_UNCERTAIN unless ``retry``.
    """
    for candidate in FORMATS if fmt == "auto" else (fmt,):
        key = artifact_key(record_ref, candidate)
        artifact = store.data.artifacts.get(key)
        if artifact is None:
            continue
        if artifact.state == "completed":
            if await asyncio.to_thread(unchanged, artifact):
                return {"status": "completed", "source": "cache", "requests": 0, "result": view(artifact, "cache")}
            continue
        if artifact.state == "clicked":
            done = await asyncio.to_thread(reconcile, store.downloads_dir, artifact)
            if done is not None:
                store.put_artifact(key, done)
                return {"status": "completed", "source": "local", "requests": 0, "result": view(done)}
            if not retry:
                raise _uncertain(
                    artifact,
                    "上次下载已点击但结果未知，文件也还没有到达；稍后用相同参数再调用会再次检查，确认需要重新下载时传 retry=true。",
                )
    return None


class DownloadRequest(msgspec.Struct):
    format: str = "auto"
    filename: str = ""
    subdirectory: str = ""
    wait_seconds: int = 120
    retry: bool = False


def check_target(downloads: Path, request: DownloadRequest, title: str = "", record_ref: str = "") -> None:
    """Reject a bad name or folder before anything reaches CNKI (blocking: creates the folder).

    Also FILE_EXISTS when the final name is already known (a filename, or an explicit format
    with a known title).
    """
    if request.filename:
        check_filename(request.filename, request.format)
    folder = safe_folder(downloads, request.subdirectory or None)
    name = request.filename
    if not name and request.format in FORMATS and title and record_ref:
        name = default_filename(title, record_ref, request.format)
    if name and os.path.lexists(folder / name):
        raise CnkiError("FILE_EXISTS", f"目标文件 {folder / name} 已存在，未点击下载。", details={"path": str(folder / name)})


# --------------------------------------------------------------------------------------------
# The click and the wait


class Downloads:
    """download_paper for one process: downloads run one at a time."""

    def __init__(self) -> None:
        self._lock: asyncio.Lock | None = None

    def _serial(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    async def download(
        self, op: OperationContext, store: Store, site: PageSite, paper: Paper, request: DownloadRequest
    ) -> dict[str, Any]:
        async with self._serial():
            # Another call may have finished the same file while this one queued.
            earlier = await prior(store, paper.record_ref, request.format, request.retry)
            if earlier is not None:
                return earlier["result"]
            try:
                return await self._download(op, store, site, paper, request)
            except CnkiError as exc:
                raise without_secrets(exc) from None

    async def _download(
        self, op: OperationContext, store: Store, site: PageSite, paper: Paper, request: DownloadRequest
    ) -> dict[str, Any]:
        browser = site.browser
        op.stage("detail")
        tab, bound = await open_detail(op, store, site, paper)
        incoming: Path | None = None
        key = ""
        try:
            await settle(site, tab)
            offered = str(await browser.evaluate(tab, _ENTRY_TEXTS_JS) or "")
            fmt = request.format
            if fmt == "auto":
                fmt = next((f for f in FORMATS if re.search(ENTRIES[f], offered, re.I)), "")
            if not fmt or not re.search(ENTRIES[fmt], offered, re.I):
                wanted = {"pdf": "PDF ", "caj": "CAJ "}.get(fmt or request.format, "PDF 或 CAJ ")
                raise CnkiError(
                    "DOWNLOAD_ENTRY_NOT_FOUND",
                    f"详情页没有可确认的 {wanted}下载入口；未点击。",
                    details={"record_ref": paper.record_ref, "format": request.format},
                )
            if request.filename:
                name = check_filename(request.filename, fmt)
            else:
                name = default_filename(bound.title, paper.record_ref, fmt)
            folder = await asyncio.to_thread(safe_folder, store.downloads_dir, request.subdirectory or None)
            if os.path.lexists(folder / name):
                raise CnkiError("FILE_EXISTS", f"目标文件 {folder / name} 已存在，未点击下载。", details={"path": str(folder / name)})
            incoming = await asyncio.to_thread(store.incoming_dir, op.operation_id)
            await browser.set_download_dir(incoming)

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
                updated_at=utc_now_iso(),
            )
            store.put_artifact(key, artifact)
            await store.flush_async()  # the click must be on disk before it happens

            op.stage("clicking", {"format": fmt})
            try:
                async with site.request(op):
                    clicked = await browser.click(tab, "a", ENTRY_WAIT, text=ENTRIES[fmt])
            except CnkiError as exc:
                if exc.code != "BROWSER_UNAVAILABLE":  # a lost browser may have clicked after all
                    _forget(store, key, previous)
                raise
            if not clicked:
                _forget(store, key, previous)
                raise CnkiError("DOWNLOAD_ENTRY_NOT_FOUND", "下载入口在点击前消失了；未点击。", details={"format": fmt})
            op.stage("waiting_for_download")
            return await self._await_file(op, store, site, tab, key, artifact, previous, request.wait_seconds)
        finally:
            pending = store.data.artifacts.get(key) if key else None
            uncertain = pending is not None and pending.state == "clicked" and pending.incoming == str(incoming)
            # While the click's outcome is open, its popups may still carry the transfer: leave them.
            await browser.close_tab(tab, with_popups=not uncertain)
            if incoming is not None and not uncertain:
                _remove_empty(incoming)  # nothing can arrive there any more

    async def _await_file(
        self,
        op: OperationContext,
        store: Store,
        site: PageSite,
        opener: Tab,
        key: str,
        artifact: Artifact,
        previous: Artifact | None,
        wait_seconds: int,
    ) -> dict[str, Any]:
        browser = site.browser
        deadline = time.monotonic() + wait_seconds
        guid: str | None = None
        while True:
            event = await browser.wait_download(guid, POLL)
            if event is not None:
                if guid is None:
                    guid = event.guid
                    artifact = msgspec.structs.replace(artifact, download_guid=guid, updated_at=utc_now_iso())
                    store.put_artifact(key, artifact)
                    op.stage("transferring")
                if event.state == "completed":
                    return await self._finish(store, key, artifact, previous)
                if event.state == "canceled":
                    _forget(store, key, previous)
                    raise CnkiError("DOWNLOAD_CANCELLED", "浏览器报告传输取消；未重复点击。", details={"format": artifact.format})
            if time.monotonic() >= deadline:
                raise _uncertain(
                    artifact,
                    f"点击下载后 {wait_seconds} 秒内文件没有下载完成，下载可能仍在进行；"
                    "稍后用相同参数再调用会先检查文件是否已到，确认需要重新下载时才传 retry=true。",
                )
            if guid is None and await self._look_at_tabs(op, store, site, opener, key, previous):
                deadline = time.monotonic() + wait_seconds

    async def _look_at_tabs(
        self, op: OperationContext, store: Store, site: PageSite, opener: Tab, key: str, previous: Artifact | None
    ) -> bool:
        """Hand challenges to the person (True: the wait starts again); refusals end the attempt."""
        browser = site.browser
        tabs = [opener, *await browser.popups(opener)]
        for tab in tabs:
            if tab.closed:
                continue
            seen = await site.glance(tab)
            if seen is None or not seen.ready:
                continue
            problem = page_problem(seen.page, seen.url)
            if problem is not None and problem.code != "ACCESS_DENIED":
                await self._human(op, site, tab, problem)
                return True
            if tab is opener:
                continue
            url = client_url(seen.url)
            op.stage("download_tab", {"url": url})
            refusal = parse_download_refusal(seen.html)
            if refusal:
                _forget(store, key, previous)
                raise CnkiError("DOWNLOAD_REFUSED", f"知网未提供文件：{refusal}", details={"url": url})
        return False

    async def _human(self, op: OperationContext, site: PageSite, tab: Tab, reason: CnkiError) -> None:
        """The human step, ended early once the awaited download begins.

        After a captcha or login the page usually goes on to the file, and a page that turned
        into a download keeps showing what it showed before, so the download itself is the signal.
        """
        browser = site.browser
        step = asyncio.ensure_future(site.human_step(op, tab, reason))
        try:
            while True:
                done, _ = await asyncio.wait({step}, timeout=POLL)
                if done:
                    try:
                        step.result()
                    except CnkiError:
                        if tab.closed or await browser.wait_download(None, 0) is not None:
                            return
                        raise
                    return
                if await browser.wait_download(None, 0) is not None:
                    return
        finally:
            if not step.done():
                step.cancel()
                with contextlib.suppress(asyncio.CancelledError, CnkiError):
                    await step

    async def _finish(self, store: Store, key: str, artifact: Artifact, previous: Artifact | None) -> dict[str, Any]:
        src = Path(artifact.incoming) / artifact.download_guid
        if not _GUID.fullmatch(artifact.download_guid):
            _forget(store, key, previous)
            raise CnkiError("INVALID_FILE", "浏览器报告的下载标识无效。")
        try:
            done = await asyncio.to_thread(publish, store.downloads_dir, artifact, src)
        except CnkiError as exc:
            if exc.code in ("INVALID_FILE", "FILE_EXISTS", "UNSAFE_OUTPUT_PATH"):
                _forget(store, key, previous)
                with contextlib.suppress(OSError):
                    src.unlink()
                _remove_empty(src.parent)
            raise
        store.put_artifact(key, done)
        return view(done)
