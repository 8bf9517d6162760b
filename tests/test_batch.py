"""download_papers without a browser: its argument rules, the daily count and its settings, the rights
refusals that stop a batch, and cancel (after the paper whose click was sent; before any other click).
The batch runs under real Jobs and a real Store; the per-paper download is a stand-in that records its
click in the ledger as Downloads does."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cnki_mcp.core import settings
from cnki_mcp.core.clock import china_day, next_china_midnight, within
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import Artifact, BatchItem, Budget, DownloadResult, Paper
from cnki_mcp.documents import batch
from cnki_mcp.documents.download_files import DownloadRequest, artifact_key
from cnki_mcp.ops.jobs import Jobs, OperationContext
from cnki_mcp.pages.page_state import is_rights_refusal
from cnki_mcp.store.library import Store
from cnki_mcp.tools import REGISTRY, download_papers, parse_arguments
from cnki_mcp.tools.download_papers import INTERVAL_DEFAULT, PAPERS_LIMIT_DEFAULT


def args(**given: Any) -> download_papers.Args:
    parsed = parse_arguments(REGISTRY["download_papers"], given)
    assert isinstance(parsed, download_papers.Args)
    return parsed


def code_of(**given: Any) -> str:
    with pytest.raises(CnkiError) as refused:
        args(**given)
    return refused.value.code


# --- arguments ----------------------------------------------------------------------------------------


def test_arguments_fill_their_defaults() -> None:
    parsed = args(search_id="s1", limit=0, interval_seconds=0, wait_seconds=0)

    assert (parsed.scope, parsed.offset, parsed.limit, parsed.format) == ("selected", 0, PAPERS_LIMIT_DEFAULT, "auto")
    assert (parsed.interval_seconds, parsed.wait_seconds, parsed.on_verification) == (INTERVAL_DEFAULT, 120, "ask")


def test_arguments_refuse_what_is_out_of_range() -> None:
    assert code_of() == "NO_DOCUMENTS"
    assert code_of(record_refs=["a"], search_id="s1") == "NO_DOCUMENTS"
    assert code_of(record_refs=["  "]) == "NO_DOCUMENTS"
    assert code_of(record_refs=[f"r{i}" for i in range(201)]) == "BATCH_TOO_LARGE"
    assert code_of(search_id="s1", limit=201) == "INVALID_LIMIT"
    assert code_of(search_id="s1", offset=-1) == "INVALID_OFFSET"
    assert code_of(search_id="s1", scope="all") == "INVALID_SCOPE"
    assert code_of(record_refs=["a"], interval_seconds=4) == "INVALID_INTERVAL"
    assert code_of(record_refs=["a"], interval_seconds=601) == "INVALID_INTERVAL"
    assert code_of(record_refs=["a"], format="epub") == "INVALID_FORMAT"
    assert code_of(record_refs=["a"], on_verification="never") == "INVALID_POLICY"
    assert args(record_refs=[f"r{i}" for i in range(200)], interval_seconds=5).interval_seconds == 5


# --- the daily count ------------------------------------------------------------------------------------


def test_the_daily_limit_setting_takes_the_environment_first_and_zero_as_no_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CNKI_DAILY_DOWNLOAD_LIMIT", raising=False)
    assert settings.daily_download_limit(100) == 100
    monkeypatch.setenv("CNKI_DAILY_DOWNLOAD_LIMIT", "0")
    assert settings.daily_download_limit(100) == 0
    monkeypatch.setenv("CNKI_DAILY_DOWNLOAD_LIMIT", "25")
    assert settings.daily_download_limit(100) == 25


def test_a_bad_daily_limit_is_an_error_naming_the_setting_not_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CNKI_DAILY_DOWNLOAD_LIMIT", raising=False)
    with pytest.raises(CnkiError) as caught:
        settings.daily_download_limit(-3)
    assert caught.value.code == "INVALID_SETTING" and "config.json 的 daily_download_limit" in caught.value.message
    for raw in ("lots", "-1", "2.5", "３"):
        monkeypatch.setenv("CNKI_DAILY_DOWNLOAD_LIMIT", raw)
        with pytest.raises(CnkiError) as caught:
            settings.daily_download_limit(40)
        assert caught.value.code == "INVALID_SETTING" and "CNKI_DAILY_DOWNLOAD_LIMIT" in caught.value.message, raw


def test_the_store_counts_downloads_per_day_in_china_and_keeps_a_week(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    try:
        for day in range(1, 10):
            store.count_download(f"2026-11-0{day}")
        store.count_download()
        store.count_download()
        assert store.downloads_on() == 2
        assert store.downloads_on("2026-11-09") == 1
        assert sorted(store.data.downloads_by_day) == [f"2026-11-0{d}" for d in range(4, 10)] + [china_day()]
        store.flush()
    finally:
        store.close_sync()
    reopened = Store.open(tmp_path)
    try:
        assert reopened.downloads_on() == 2
    finally:
        reopened.close_sync()


def test_the_day_is_chinas_whatever_the_machines_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    # 2026-11-30 20:00 UTC is already 12-01 in Beijing; a machine in Los Angeles says 11-30, one in Auckland 12-01.
    moment = datetime(2026, 11, 30, 20, 0, tzinfo=UTC)
    for zone in ("America/Los_Angeles", "Pacific/Auckland", "UTC"):
        monkeypatch.setenv("TZ", zone)
        time.tzset()
        assert china_day(moment) == "2026-12-01", zone
        midnight = next_china_midnight(moment)
        assert midnight.astimezone(UTC) == datetime(2026, 12, 1, 16, 0, tzinfo=UTC), zone
    monkeypatch.delenv("TZ")
    time.tzset()


# --- rights refusals ------------------------------------------------------------------------------------


def test_rights_refusals_are_told_from_other_refusals() -> None:
    for words in ("您的账户余额不足", "您所在的机构未订购该产品", "对不起，您暂无权限下载", "请先登录后下载", "产品不在有效期范围之内！"):
        assert is_rights_refusal(words), words
    for words in ("对不起，本刊只收录题录信息，暂不提供原文下载", "下载失败", "对不起，您的操作太过频繁！请退出后重新登录。", "会话已经结束"):
        assert not is_rights_refusal(words), words


def refused(words: str) -> BatchItem:
    return BatchItem(record_ref="r", status="refused", code="DOWNLOAD_REFUSED", message=f"知网未提供文件：{words}")


def test_three_rights_refusals_in_a_row_stop_and_any_other_try_resets() -> None:
    state = batch.BatchState(refs=[], request=DownloadRequest(), interval=5)
    rights = refused("余额不足")
    assert batch._count_refusal(state, rights) is None
    assert batch._count_refusal(state, rights) is None
    assert batch._count_refusal(state, refused("只收录题录")) is None  # not a question of rights: starts again
    assert state.rights_streak == 0
    assert batch._count_refusal(state, rights) is None
    assert batch._count_refusal(state, BatchItem(record_ref="c", status="already_downloaded")) is None  # not tried
    assert batch._count_refusal(state, rights) is None
    stop = batch._count_refusal(state, rights)
    assert stop is not None and stop.code == "DOWNLOAD_RIGHTS_MISSING"
    assert "余额不足" in stop.message


# --- cancel ----------------------------------------------------------------------------------------------


class StandIn:
    """Downloads' stand-in: the click goes into the ledger, then the file comes when ``arrive`` is set."""

    def __init__(self, store: Store, click: bool) -> None:
        self.store, self.click = store, click
        self.arrive = asyncio.Event()
        self.started: list[str] = []

    async def download(
        self, op: OperationContext, engine: Any, site: Any, paper: Paper, request: DownloadRequest, spacing: float = 0.0, *, daily_limit: int = 0
    ) -> DownloadResult:
        self.started.append(paper.record_ref)
        key = artifact_key(paper.record_ref, "pdf")
        if self.click:
            self.store.put_artifact(key, Artifact(state="clicked", record_ref=paper.record_ref, operation_id=op.operation_id))
        await within(self.arrive.wait(), 10)
        self.store.put_artifact(key, Artifact(state="completed", record_ref=paper.record_ref, format="pdf", path="/x.pdf"))
        return DownloadResult(state="completed", record_ref=paper.record_ref, format="pdf", path="/x.pdf", sha256="ab", bytes=2)


async def cancelled_batch(tmp_path: Path, *, click: bool) -> tuple[Any, StandIn]:
    store = Store.open(tmp_path)
    await store.start()
    refs = ["rec_a", "rec_b", "rec_c"]
    for ref in refs:
        store.put_paper(Paper(record_ref=ref, title=f"题名{ref}"))
    jobs = Jobs(store)
    stand_in = StandIn(store, click)
    state = batch.BatchState(refs=refs, request=DownloadRequest(), interval=5)
    work = batch.run
    job = jobs.start(batch.KIND, Budget(max_requests=50, timeout_seconds=60), lambda op: work(
        op, engine=SimpleNamespace(store=store), site=None, downloads=stand_in, fresh=state, daily_limit=0  # type: ignore[arg-type]
    ))
    while not stand_in.started:
        await asyncio.sleep(0.01)
    cancel = asyncio.create_task(jobs.cancel(job.record.operation_id))
    await asyncio.sleep(0.2)
    stand_in.arrive.set()
    await cancel
    await job.done.wait()
    view = jobs.view(job)
    await store.close()
    return view, stand_in


async def test_cancel_sees_the_clicked_paper_through_and_leaves_the_rest(tmp_path: Path) -> None:
    view, stand_in = await cancelled_batch(tmp_path, click=True)

    assert view.status == "partial"
    assert [e.code for e in view.errors] == ["CANCELLED"]
    assert [item["status"] for item in view.result["items"]] == ["downloaded", "not_reached", "not_reached"]
    assert view.result["remaining"] == ["rec_b", "rec_c"]
    assert stand_in.started == ["rec_a"]


async def test_cancel_before_the_click_orders_nothing(tmp_path: Path) -> None:
    view, stand_in = await cancelled_batch(tmp_path, click=False)

    assert view.status == "partial"
    assert [e.code for e in view.errors] == ["CANCELLED"]
    assert view.result["remaining"] == ["rec_a", "rec_b", "rec_c"]
    assert stand_in.started == ["rec_a"]
