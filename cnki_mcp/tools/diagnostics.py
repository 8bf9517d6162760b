"""diagnostics: this process, its data and settings; or, with site_check, the field check of CNKI's pages."""

from __future__ import annotations

import contextlib
import os
import platform
import sys
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, Meta, UnsetType

from cnki_mcp import __version__
from cnki_mcp.app.core import AppCore
from cnki_mcp.core import settings
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.errors import CnkiError
from cnki_mcp.core.model import OperationView, Problem
from cnki_mcp.core.tool_args import ToolArgs
from cnki_mcp.tools import Budget

GO_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


# The field check's operation (also `doctor --site`): a fixed tour of at most this many requests.
BUDGET = Budget(requests=12, seconds=600)


class Args(ToolArgs):
    site_check: Annotated[bool, Meta(description=f"改为现场检查知网页面（至多 {BUDGET.requests} 次请求）")] = False


TITLE = "本地自检"
DESCRIPTION = (
    "本地自检：版本、环境、数据目录、浏览器与任务，不访问知网；安装后或出问题时先调用。"
)
READ_ONLY = True
OPEN_WORLD = False
NEEDS_CONFIG = False  # it reports a config.json that cannot be read instead of failing on it


class Browser(msgspec.Struct, kw_only=True):
    """The browser this process drives: whether it runs, and (once started) its process and profile."""

    running: bool
    process_id: int | None | UnsetType = UNSET
    profile_directory: str | UnsetType = UNSET
    connection_generation: int | UnsetType = UNSET


class Report(msgspec.Struct, kw_only=True):
    """diagnostics' account of this process: version, platform, data directory, memory and pacing settings,
    then what is loaded (store, browser, operations), each only once it is."""

    status: str = "completed"
    version: str
    runtime: str
    platform: str
    browser_configured: bool
    data_dir: str
    process_id: int
    owner_pid: int | None
    heap_bytes: int
    request_interval_ms: int
    max_inflight: int
    workers: int
    inline_wait_seconds: int
    route: dict[str, Any]
    site: dict[str, str] | UnsetType = UNSET
    gateway_session: str | UnsetType = UNSET
    config_error: Problem | UnsetType = UNSET
    store_error: Problem | UnsetType = UNSET
    store: dict[str, Any] | UnsetType = UNSET
    downloads_today: int | UnsetType = UNSET
    daily_download_limit: int | UnsetType = UNSET
    browser: Browser | UnsetType = UNSET
    active_operations: list[OperationView] | UnsetType = UNSET


Result = OperationView | Report


async def run(deps: AppCore, args: Args, call: ToolCall | None) -> Result:
    if args.site_check:
        jobs = await deps.jobs()
        return await jobs.inline(await deps.start_site_check(BUDGET.of()), call)
    browser_path = os.environ.get("CNKI_BROWSER_PATH") or deps.config.browser_path
    report = Report(
        version=__version__,
        runtime=f"Python {platform.python_version()}",
        platform=_platform(),
        browser_configured=bool(browser_path),
        data_dir=str(deps.root),
        process_id=os.getpid(),
        owner_pid=deps.owner_pid,
        heap_bytes=_rss(),
        request_interval_ms=settings.request_interval_ms(),
        max_inflight=settings.max_inflight(),
        workers=settings.workers(),
        inline_wait_seconds=settings.inline_wait_seconds(),
        route=deps.config.route.view(),
    )
    # What is loaded is reported as it is, never loaded to be reported: AppCore's slots are read directly.
    # The site: config.json's choice and, once the browser runs, the one the session is on.
    site = deps._browser.routing.site_view() if deps._browser is not None else {}
    if site.get("kind") == "oversea" or deps.config.site != "auto":  # the usual case answers as it always did
        report.site = {"setting": deps.config.site, **site}
    if deps._sessions is not None and deps._sessions.gateway_session:
        report.gateway_session = deps._sessions.gateway_session
    if deps.config_error is not None:
        report.config_error = deps.config_error.problem()
    if deps._store is None and deps._store_error is not None:
        report.store_error = deps._store_error.problem()
    if deps._store is not None and deps._jobs is not None:
        report.store = deps._store.stats()
        report.downloads_today = deps._store.downloads_on()
        with contextlib.suppress(CnkiError):  # a bad cap is said by the download tools, which refuse to run
            report.daily_download_limit = settings.daily_download_limit(deps.config.daily_download_limit)
        browser = deps._browser
        report.browser = Browser(running=False) if browser is None else Browser(
            running=browser.running,
            process_id=browser.process_id,
            profile_directory=str(browser.profile_directory),
            connection_generation=browser.connection_generation,
        )
        active = deps._jobs.live_jobs()
        if active:
            report.active_operations = [deps._jobs.view(job) for job in active]
    return report


def _platform() -> str:
    system = {"darwin": "darwin", "win32": "windows"}.get(sys.platform, sys.platform)
    machine = platform.machine().lower()
    return f"{system}/{GO_ARCH.get(machine, machine)}"


def _rss() -> int:
    import psutil  # a few dozen ms to load: only diagnostics needs it

    return int(psutil.Process().memory_info().rss)
