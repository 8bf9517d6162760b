"""A paper's text and files."""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING

from cnki_mcp.app.core import AppCore, Reply, stored_refs
from cnki_mcp.core import settings, tool_args
from cnki_mcp.core.call import ToolCall
from cnki_mcp.core.files import remove_empty_folders
from cnki_mcp.core.model import Budget, DownloadResult, Operation, ReadResult
from cnki_mcp.ops.jobs import OperationContext, kind_budget

# For types only: a handler imports what it works with when first called (see core.py).
if TYPE_CHECKING:
    from cnki_mcp.documents.batch import BatchState


class PaperTools(AppCore):
    """A paper's text and files: read_online_html, download_paper, download_papers."""

    async def read_online_html(self, args: tool_args.ReadOnlineHtmlArgs, ctx: ToolCall | None) -> Reply:
        from cnki_mcp.documents.online_reader import TextWindow
        from cnki_mcp.research.detail_tab import local_ref, resolve_paper

        ref = local_ref(await self.catalog(), args.record_ref, args.title)
        window = TextWindow(args.section, args.offset, args.max_characters)
        local = await self._files.read(await self.store(), ref, args.source, window) if args.source != "online" else None
        hit = local or (self._reader.cached(ref, window) if ref else None)
        if hit is not None:
            return hit

        async def work(op: OperationContext) -> ReadResult:
            engine = await self.enrichment()
            paper = await resolve_paper(op, engine, ref, args.title)
            return await self._reader.read(op, engine, self.site(), paper, window)

        jobs = await self.jobs()
        job = jobs.start("read", kind_budget("read", args.on_verification), work)
        return await jobs.inline(job, ctx)

    async def download_paper(self, args: tool_args.DownloadPaperArgs, ctx: ToolCall | None) -> Reply:
        from cnki_mcp.documents.download import prior
        from cnki_mcp.documents.download_files import DownloadRequest, check_names, check_target
        from cnki_mcp.research.detail_tab import local_ref, resolve_paper

        store = await self.store()
        ref = local_ref(await self.catalog(), args.record_ref, args.title)
        request = DownloadRequest(
            format=args.format, filename=args.filename, subdirectory=args.subdirectory,
            wait_seconds=args.wait_seconds, retry=args.retry,
        )
        title = store.data.papers[ref].title if ref else ""
        # The name and folder first: a bad one is refused even for a paper downloaded before.
        await asyncio.to_thread(check_names, store.downloads_dir, request)
        if ref:
            earlier = await prior(store, ref, request)
            if earlier is not None:
                return earlier
        await asyncio.to_thread(check_target, store.downloads_dir, request, title, ref)

        async def work(op: OperationContext) -> DownloadResult:
            try:
                engine = await self.enrichment()
                paper = await resolve_paper(op, engine, ref, args.title)
                return await self._downloads.download(op, engine, self.site(), paper, request)
            except BaseException:
                # The caller's folder was made before the attempt; an empty one must not stay behind.
                await asyncio.to_thread(remove_empty_folders, store.downloads_dir, request.subdirectory)
                raise

        jobs = await self.jobs()
        job = jobs.start("download", kind_budget("download", args.on_verification), work)
        return await jobs.inline(job, ctx)

    async def download_papers(self, args: tool_args.DownloadPapersArgs, ctx: ToolCall | None) -> Reply:
        from cnki_mcp.documents import batch

        store = await self.store()
        refs = list(args.record_refs)
        if args.search_id:
            refs += stored_refs(store, args.search_id, args.scope, args.offset, args.limit)
        state = await batch.plan(store, refs, args)
        return await self._start_batch(state, batch.budget(state, args.on_verification), ctx)

    async def _start_batch(self, fresh: BatchState | None, budget: Budget, ctx: ToolCall | None, prior: Operation | None = None) -> Reply:
        """A batch download: ``fresh`` for a new one, None to go on from ``prior``'s checkpoint."""
        from cnki_mcp.documents import batch

        jobs, engine = await self.jobs(), await self.enrichment()
        limit = settings.daily_download_limit(self.config.daily_download_limit)
        work = functools.partial(batch.run, engine=engine, site=self.site(), downloads=self._downloads, fresh=fresh, daily_limit=limit)
        return await jobs.inline(jobs.start(batch.KIND, budget, work, resume_from=prior), ctx)


