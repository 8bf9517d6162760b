"""download_papers: many papers' downloads as one paced, resumable operation, within a daily cap.

Every paper goes through download_paper's one path (``Downloads``: the ledger first, one click on the
whole-document entry, its refusals, CAJ handling and the uncertain-click rule), at its turn: its detail
page is opened only then, and its click waits until ``interval`` seconds (jittered ±25 %) after the last
click any tool of this process sent. Papers already in the ledger are answered from it without CNKI.

The batch keeps its progress as the operation's checkpoint after every paper, so a server that died
mid-batch leaves it ``interrupted`` and ``continue`` goes on with the papers not done; a paper clicked
before the crash is checked in the download folder first and never ordered twice. A challenge pauses
the whole batch (the per-paper path hands it to the person). It stops early, with the rest in
``remaining`` and the reason in the operation's errors, when the day's successful downloads reach the
cap (DAILY_LIMIT_REACHED), when three papers tried in a row were refused for want of rights
(DOWNLOAD_RIGHTS_MISSING), on cancel (after the paper whose click was sent), and on what would stop any
operation (budget, browser, network, the person's wait).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from typing import Any

import msgspec

from cnki_mcp.core import tool_args
from cnki_mcp.core.clock import within
from cnki_mcp.core.errors import FATAL_CODES, CnkiError, as_cnki_error, for_its_tool
from cnki_mcp.core.files import remove_empty_folders
from cnki_mcp.core.model import BatchItem, BatchResult, Budget, DownloadResult, Paper
from cnki_mcp.core.tool_args import FILE_FORMATS, RIGHTS_STREAK
from cnki_mcp.documents.download import Downloads, over_daily_limit, prior
from cnki_mcp.documents.download_files import DownloadRequest, artifact_key, check_names
from cnki_mcp.ops.jobs import OperationContext
from cnki_mcp.pages.page_state import is_rights_refusal
from cnki_mcp.research.backend import SiteBackend
from cnki_mcp.research.enrich import Enrichment
from cnki_mcp.store.library import Store

KIND = "download_batch"
STATUSES = ("downloaded", "already_downloaded", "refused", "failed", "uncertain", "not_reached")
REQUESTS_PER_PAPER = 10  # budget: a detail page (a relocation at worst), the order, the person's pages
SECONDS_PER_PAPER = 60  # budget beyond the interval and the transfer wait: the page, the click, the checks
CANCEL_GRACE = 30  # seconds beyond the transfer wait a clicked paper is seen through after a cancel
# Codes after which the next paper would fare no better: the batch stops, the paper stays not reached.
STOPPING = FATAL_CODES | {"VERIFICATION_SKIPPED", "VERIFICATION_REPEATED", "DAILY_LIMIT_REACHED"}


class BatchState(msgspec.Struct, kw_only=True):
    """The batch as its checkpoint keeps it: what to download, how, and the papers finished so far."""

    refs: list[str]
    request: DownloadRequest
    interval: int
    search_id: str = ""
    items: dict[str, BatchItem] = {}
    rights_streak: int = 0


async def plan(store: Store, refs: list[str], request: DownloadRequest, interval: int, search_id: str) -> BatchState:
    """The batch of ``refs`` (each once, in the order given) into the checked folder, its clicks ``interval`` apart."""
    await asyncio.to_thread(check_names, store.downloads_dir, request)  # a bad folder is refused before any work
    return BatchState(refs=list(dict.fromkeys(refs)), request=request, interval=interval, search_id=search_id)


def budget(state: BatchState, on_verification: str) -> Budget:
    """Requests and active seconds enough for every paper at the slowest jitter and the full transfer wait."""
    count = len(state.refs)
    per_paper = state.interval * (1 + tool_args.INTERVAL_JITTER) + state.request.wait_seconds + SECONDS_PER_PAPER
    return Budget(
        max_requests=REQUESTS_PER_PAPER * count + 20,
        timeout_seconds=int(per_paper * count) + 60,
        on_verification=on_verification,
    )


async def run(
    op: OperationContext,
    *,
    engine: Enrichment,
    site: SiteBackend,
    downloads: Downloads,
    fresh: BatchState | None,
    daily_limit: int,
) -> BatchResult:
    """The operation's body: ``fresh`` for a new batch, None to go on from the checkpoint (continue)."""
    store = engine.store
    if fresh is None:
        state = msgspec.convert(op.restored_checkpoint, BatchState)
        state.rights_streak = 0  # continued after a stop: the person has had the chance to log in
    else:
        state = fresh
    op.checkpoint(state)
    stop: CnkiError | None = None
    total = len(state.refs)
    try:
        for k, ref in enumerate(state.refs, 1):
            done = state.items.get(ref)
            if done is not None and done.status != "uncertain":  # an uncertain one is looked for again
                continue
            paper = store.data.papers.get(ref)
            op.frame({"done": k - 1, "total": total, "title": paper.title if paper else ""})
            op.stage("paper")
            if op.cancelled:
                stop = _cancelled()
                break
            item, stop = await _one(op, engine, site, downloads, state, ref, paper, daily_limit)
            if item is not None:
                state.items[ref] = item
                stop = stop or _count_refusal(state, item)
            op.frame({"done": k, "total": total, "title": paper.title if paper else ""})
            op.checkpoint(state)
            if stop is not None:
                break
    finally:
        await asyncio.to_thread(remove_empty_folders, store.downloads_dir, state.request.subdirectory)
    result = _result(store, state, daily_limit)
    if stop is not None:
        op.add_error(for_its_tool(_with_remaining(stop, result.remaining), a_list=False, resumable="批量下载"))
    return result


async def _one(
    op: OperationContext,
    engine: Enrichment,
    site: SiteBackend,
    downloads: Downloads,
    state: BatchState,
    ref: str,
    paper: Paper | None,
    daily_limit: int,
) -> tuple[BatchItem | None, CnkiError | None]:
    """One paper at its turn: the item it ends as (None: not reached) and what stops the batch (None: go on)."""
    store = engine.store
    if paper is None:
        missing = CnkiError("RECORD_NOT_FOUND", f"本地没有记录 {ref}；请先用检索取得。", details={"record_ref": ref})
        return _item(ref, "", "failed", missing), None
    try:
        earlier = await prior(store, ref, state.request)
    except CnkiError as exc:  # clicked before and nothing arrived: never clicked again by a batch
        return _item(ref, paper.title, "uncertain", exc), None
    if earlier is not None:
        status = "already_downloaded" if earlier.source == "cache" else "downloaded"  # local: a late arrival
        return _file(ref, paper.title, status, earlier.result), None
    # A first look before the page is opened; Downloads checks again where it counts (under its lock).
    full = over_daily_limit(store, daily_limit, batch=True)
    if full is not None:
        return None, full
    spacing = state.interval * random.uniform(1 - tool_args.INTERVAL_JITTER, 1 + tool_args.INTERVAL_JITTER)
    task = asyncio.ensure_future(_attempt(downloads.download(op, engine, site, paper, state.request, spacing, daily_limit=daily_limit)))
    try:
        outcome = await asyncio.shield(task)
    except asyncio.CancelledError:
        # cancel: a paper whose click was sent is seen through; one not yet clicked stops here, unordered.
        if not _clicked(store, ref, op.operation_id):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await within(task, CANCEL_GRACE)
            return None, _cancelled()
        try:
            outcome = await within(asyncio.shield(task), state.request.wait_seconds + CANCEL_GRACE)
        except TimeoutError:
            outcome = CnkiError("SIDE_EFFECT_UNCERTAIN", "取消时这篇论文已点击下载，文件还没有到达；再次调用会先检查文件。")
        item, _ = _classified(store, op, ref, paper.title, outcome)
        return item, _cancelled()
    if isinstance(outcome, CnkiError) and outcome.code == "DAILY_LIMIT_REACHED":
        return None, over_daily_limit(store, daily_limit, batch=True) or outcome  # in the batch's words
    return _classified(store, op, ref, paper.title, outcome)


async def _attempt(download: Any) -> DownloadResult | CnkiError:
    """The download's result, or its failure as the CnkiError it is reported as."""
    try:
        result: DownloadResult = await download
    except CnkiError as exc:
        return exc
    except Exception as exc:  # noqa: BLE001 - one paper's failure is that paper's item
        return as_cnki_error(exc)
    return result


def _classified(
    store: Store, op: OperationContext, ref: str, title: str, outcome: DownloadResult | CnkiError
) -> tuple[BatchItem | None, CnkiError | None]:
    if isinstance(outcome, DownloadResult):
        return _file(ref, title, "downloaded", outcome), None
    stops = outcome if outcome.code in STOPPING else None
    if outcome.code == "SIDE_EFFECT_UNCERTAIN" or _clicked(store, ref, op.operation_id):
        return _item(ref, title, "uncertain", outcome), stops  # the click was sent: this paper is done with
    if stops is not None:
        return None, stops
    return _item(ref, title, "refused" if outcome.code == "DOWNLOAD_REFUSED" else "failed", outcome), None


def _clicked(store: Store, ref: str, operation_id: str) -> bool:
    """Whether this operation's click on the paper is in the ledger with its outcome still open."""
    for fmt in FILE_FORMATS:
        artifact = store.data.artifacts.get(artifact_key(ref, fmt))
        if artifact is not None and artifact.state == "clicked" and artifact.operation_id == operation_id:
            return True
    return False


def _count_refusal(state: BatchState, item: BatchItem) -> CnkiError | None:
    """Refusals for want of rights in a row; the third stops the batch (any other outcome of a try resets)."""
    if item.status == "already_downloaded":
        return None  # not tried
    if item.status != "refused" or not is_rights_refusal(item.message):
        state.rights_streak = 0
        return None
    state.rights_streak += 1
    if state.rights_streak < RIGHTS_STREAK:
        return None
    return CnkiError(
        "DOWNLOAD_RIGHTS_MISSING",
        f"连续 {RIGHTS_STREAK} 篇论文都因没有全文权限被知网拒绝（最后一篇：{item.message}），批量下载已停止，其余论文没有尝试。"
        "请先登录个人或机构账号（login），在校外时用机构的远程访问地址登录（login 的 remote_access_url），"
        "然后用 operation_control 的 continue 继续。",
        details={"refused_in_a_row": RIGHTS_STREAK},
    )


def _cancelled() -> CnkiError:
    return CnkiError("CANCELLED", "批量下载已按要求取消；没有开始的论文见 remaining，可以用 operation_control 的 continue 继续。")


def _with_remaining(stop: CnkiError, remaining: list[str]) -> CnkiError:
    details = dict(stop.details) if isinstance(stop.details, dict) else {}
    details["remaining"] = len(remaining)
    return CnkiError(stop.code, stop.message, details=details, retryable=stop.retryable)


def _item(ref: str, title: str, status: str, error: CnkiError) -> BatchItem:
    return BatchItem(record_ref=ref, title=title, status=status, code=error.code, message=error.message)


def _file(ref: str, title: str, status: str, result: DownloadResult) -> BatchItem:
    return BatchItem(
        record_ref=ref, title=title, status=status, path=result.path, format=result.format, sha256=result.sha256, bytes=result.bytes
    )


def _result(store: Store, state: BatchState, daily_limit: int) -> BatchResult:
    items = [
        state.items.get(ref) or BatchItem(record_ref=ref, title=_title(store, ref), status="not_reached") for ref in state.refs
    ]
    summary = {status: sum(1 for item in items if item.status == status) for status in STATUSES}
    return BatchResult(
        items=items,
        summary=summary,
        remaining=[item.record_ref for item in items if item.status == "not_reached"],
        downloads_today=store.downloads_on(),
        daily_limit=daily_limit,
        search_id=state.search_id,
    )


def _title(store: Store, ref: str) -> str:
    paper = store.data.papers.get(ref)
    return paper.title if paper is not None else ""
