"""The tools that answer from this process and its store."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from cnki_mcp import __version__
from cnki_mcp.app.core import AppCore, Reply, progress_of, scoped, stored_refs, stored_search
from cnki_mcp.core import settings, tool_args
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.model import LocalReply, Paper, SessionState, TitleRow, public_paper
from cnki_mcp.ops.jobs import OperationContext, kind_budget

# For types only: a handler imports what it works with when first called (see core.py).
if TYPE_CHECKING:
    pass


GO_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
COMPACT_FIELDS = ("record_ref", "title", "authors", "year", "source", "abstract")


class LocalTools(AppCore):
    """The tools that answer from this process and its store: diagnostics, operations, the session, login, stored searches and records."""

    async def diagnostics(self, args: Any, ctx: ToolCall | None) -> Reply:
        if args is not None and args.site_check:
            jobs = await self.jobs()
            return await jobs.inline(await self.start_site_check(), ctx)
        report = _runtime_report(self.root, os.environ.get("CNKI_BROWSER_PATH") or self.config.browser_path, self.owner_pid)
        report["route"] = self.config.route.view()
        if self._sessions is not None and self._sessions.gateway_session:
            report["gateway_session"] = self._sessions.gateway_session
        if self.config_error is not None:
            report["config_error"] = self.config_error.problem()
        if self._store is None and self._store_error is not None:
            report["store_error"] = self._store_error.problem()
        if self._store is not None and self._jobs is not None:
            report["store"] = self._store.stats()
            report["downloads_today"] = self._store.downloads_on()
            report["daily_download_limit"] = settings.daily_download_limit(self.config.daily_download_limit)
            browser = self._browser
            report["browser"] = {"running": False} if browser is None else {
                "running": browser.running,
                "process_id": browser.process_id,
                "profile_directory": str(browser.profile_directory),
                "connection_generation": browser.connection_generation,
            }
            active = self._jobs.live_jobs()
            if active:
                report["active_operations"] = [self._jobs.view(job) for job in active]
        return report

    async def operation_status(self, args: tool_args.OperationStatusArgs, ctx: ToolCall | None) -> Reply:
        jobs = await self.jobs()
        return await jobs.status(args.operation_id, args.wait_seconds, progress_of(ctx))

    async def session_status(self, args: tool_args.SessionStatusArgs, ctx: ToolCall | None) -> Reply:
        if not args.refresh:
            from cnki_mcp.site.session import session_view

            return self._sessions.cached() if self._sessions is not None else session_view(
                SessionState(), cached=True, route=self.config.route)
        jobs = await self.jobs()
        job = jobs.start("session", kind_budget("session"), self.sessions().refresh)
        return await jobs.inline(job, ctx)

    async def login(self, args: tool_args.LoginArgs, ctx: ToolCall | None) -> Reply:
        jobs = await self.jobs()
        sessions = self.sessions()

        async def work(op: OperationContext) -> dict[str, Any]:
            return await sessions.login(op, args.remote_access_url, args.force)

        job = jobs.start("login", kind_budget("login"), work)
        return await jobs.inline(job, ctx)

    async def search_results(self, args: tool_args.SearchResultsArgs, ctx: ToolCall | None) -> Reply:
        store = await self.store()
        record = stored_search(store, args.search_id)
        entries = scoped(record, args.scope)
        page = entries[args.offset : args.offset + args.limit]
        end = args.offset + len(page)
        return {
            "search_id": record.search_id,
            "status": record.status,
            "scope": args.scope,
            "total": len(entries),
            "offset": args.offset,
            "next_offset": end if end < len(entries) else None,
            "results": [_result_row(store.data.papers.get(e.record_ref), e, args.view) for e in page],
        }

    async def get_metadata(self, args: tool_args.GetMetadataArgs, ctx: ToolCall | None) -> Reply:
        store = await self.store()
        if not args.local_only:
            refs = list(args.record_refs)
            if args.search_id:
                refs += stored_refs(store, args.search_id, args.scope, args.offset, args.limit)
            quality = args.quality or "quality" in args.fields

            async def work(op: OperationContext) -> dict[str, Any]:
                engine = await self.enrichment()
                return await engine.metadata(op, refs, args.titles, quality=quality, refresh=args.refresh, fields=args.fields)

            jobs = await self.jobs()
            return await jobs.inline(jobs.start("metadata", kind_budget("metadata"), work), ctx)
        from cnki_mcp.research.enrich import select_fields

        refs, problems = (await self.catalog()).resolve_local(args.record_refs or [], args.titles or [])
        if args.search_id:
            refs += stored_refs(store, args.search_id, args.scope, args.offset, args.limit)
        records = []
        seen: set[str] = set()
        for ref in refs:
            paper = store.data.papers.get(ref)
            if paper is None or ref in seen:
                continue
            seen.add(ref)
            records.append(select_fields(public_paper(paper), args.fields))
        found: dict[str, Any] = {"records": records}
        if problems:
            found["errors"] = problems
        return LocalReply(source="local", result=found)


def _platform() -> str:
    system = {"darwin": "darwin", "win32": "windows"}.get(sys.platform, sys.platform)
    machine = platform.machine().lower()
    return f"{system}/{GO_ARCH.get(machine, machine)}"


def _runtime_report(root: Path, browser_path: str, owner_pid: int | None) -> dict[str, Any]:
    """diagnostics' account of this process: version, platform, data directory, memory and pacing settings."""
    return {
        "status": "completed",
        "version": __version__,
        "runtime": f"Python {platform.python_version()}",
        "platform": _platform(),
        "browser_configured": bool(browser_path),
        "data_dir": str(root),
        "process_id": os.getpid(),
        "owner_pid": owner_pid,
        "heap_bytes": _rss(),
        "request_interval_ms": settings.request_interval_ms(),
        "max_inflight": settings.max_inflight(),
        "workers": settings.workers(),
        "inline_wait_seconds": settings.inline_wait_seconds(),
    }


def _rss() -> int:
    import psutil  # a few dozen ms to load: only diagnostics needs it

    return int(psutil.Process().memory_info().rss)


def _result_row(paper: Paper | None, entry: Any, view: str) -> dict[str, Any] | TitleRow:
    if view == "titles":
        return TitleRow.of(paper) if paper is not None else TitleRow(record_ref=entry.record_ref)
    data = public_paper(paper) if paper is not None else {"record_ref": entry.record_ref}
    if view == "compact":
        row = {k: data[k] for k in COMPACT_FIELDS if k in data}
        row.update(score=round(entry.score, 4), eligible=entry.eligible)
        return row
    return {"record": data, "score": round(entry.score, 4), "eligible": entry.eligible, "evidence": msgspec.to_builtins(entry.evidence)}


